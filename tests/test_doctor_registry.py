"""The check registry: every check declares the ids it produces and what it checks (the doctor's table in
docs/guides/hosts.md is made from it), and no check produces an id it did not declare, on healthy and broken
generated hosts alike."""

from __future__ import annotations

import pytest

from rocmkit.host.checks import Context, all_checks, declared
from rocmkit.host.facts import collect
from treegen import HostSpec, healthy_process, write_tree

SPECS = {
    "healthy": HostSpec(),
    "cpx-container": HostSpec(mode="CPX", gpus=2, container=True, not_granted=(1,)),
    "vf": HostSpec(product="MI300X VF", gpus=1, cmdline="BOOT_IMAGE=/boot/vmlinuz ro"),
    "broken": HostSpec(gpus=2, kfd=False, amdgpu=None, numa_balancing="1", missing_render=(1,), rocm="5.7.0",
                       fw_versions=(177, 150), hive_ids=(1, 2), cmdline="ro quiet"),
    "no-gpu": HostSpec(gpus=0, rocm=None),
    "bad-env": HostSpec(process={**healthy_process(), "env": {"ROCR_VISIBLE_DEVICES": "", "HIP_VISIBLE_DEVICES": "0",
                                                               "CUDA_VISIBLE_DEVICES": "1", "PYTORCH_ROCM_ARCH": "gfx90a",
                                                               "HSA_OVERRIDE_GFX_VERSION": "11.0.0"}}),
    "no-process": HostSpec(process=None),
}


def test_every_check_is_documented():
    for check in all_checks():
        assert getattr(check, "ids", None) and getattr(check, "what", "").strip(), check.__name__
        assert "|" not in check.what and "\n" not in check.what  # one table cell


@pytest.mark.parametrize("name", sorted(SPECS))
@pytest.mark.parametrize("arch", [None, "gfx950"])
def test_checks_produce_only_the_ids_they_declare(tmp_path, name, arch):
    facts = collect(str(write_tree(tmp_path / name, SPECS[name])))
    for check in all_checks():
        for f in [*check(facts, Context(arch=arch)), *check(facts, Context(arch=arch, pod_gpus=4))]:
            assert declared(check, f.id), f"{check.__name__} produced {f.id}, declares {check.ids}"


def test_id_prefixes_come_from_the_declarations():
    """--only refuses an id outside every area: the areas are the checks' declared ids, run_checks' own, the
    probes' and the baseline's (the list the doctor once kept by hand)."""
    from rocmkit.host.doctor import id_prefixes

    assert id_prefixes() == {"gpu", "rocm", "kernel", "numa", "container", "env", "software", "probe", "doctor",
                             "baseline", "image", "rdma", "nic", "pcie", "pod"}
