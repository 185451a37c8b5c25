"""Every level-1 check, driven by generated host trees (treegen)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.reader import KFD_TOPOLOGY
from rocmkit.host.model import Status
from treegen import HostSpec, healthy_process, write_tree


def check(tmp_path: Path, arch: str | None = None, **spec) -> dict[str, object]:
    root = write_tree(tmp_path / "host", HostSpec(**spec))
    findings = run_checks(collect(str(root)), Context(arch=arch))
    return {f.id: f for f in findings}


def status(found, fid):
    return found[fid].status


def proc(**kw):
    kw.setdefault("docker", {"status": "ok", "host": "unix:///var/run/docker.sock"})
    return healthy_process(**kw)


def test_healthy_host_passes_everything(tmp_path):
    found = check(tmp_path, process=proc())
    bad = {k: (f.status, f.title) for k, f in found.items() if f.status in (Status.FAIL, Status.WARN)}
    assert bad == {}
    assert found["gpu.count"].evidence["physical"] == 8
    assert not any(k.startswith("doctor.internal") for k in found)


@pytest.mark.parametrize("product,mode,partitions_per_gpu", [
    ("MI300X", "SPX", 1), ("MI300X", "DPX", 2), ("MI300X", "QPX", 4), ("MI300X", "CPX", 8),
    ("MI308X", "CPX", 4), ("MI355X", "CPX", 8), ("MI325X", "SPX", 1),
])
def test_partition_modes_count_physical_gpus(tmp_path, product, mode, partitions_per_gpu):
    found = check(tmp_path, product=product, mode=mode, process=proc())
    ev = found["gpu.count"].evidence
    assert ev["physical"] == 8 and ev["partitions"] == 8 * partitions_per_gpu
    assert ev["modes"] == {mode: 8}
    assert found["gpu.render"].evidence["accessible"] == 8 * partitions_per_gpu


def test_container_with_gpus_not_granted_is_not_broken(tmp_path):
    found = check(tmp_path, mode="CPX", container=True, not_granted=(2, 3, 4, 5, 6, 7), process=proc())
    assert found["gpu.count"].evidence["physical"] == 2
    assert found["gpu.count"].evidence["not_granted_nodes"] == 48
    assert "not granted to this container (not broken)" in found["gpu.count"].title
    assert status(found, "gpu.render") == Status.PASS
    assert status(found, "container.detect") == Status.PASS
    assert "gpu.topology.read" not in found  # EPERM is not corruption


def test_all_gpus_not_granted(tmp_path):
    found = check(tmp_path, gpus=2, container=True, not_granted=(0, 1), process=proc())
    assert status(found, "gpu.count") == Status.FAIL
    assert "not granted" in found["gpu.count"].title and "--device" in found["gpu.count"].fix


def test_missing_render_node_and_kfd_and_driver(tmp_path):
    found = check(tmp_path, missing_render=(3,), kfd=False, amdgpu=None, cmdline="ro modprobe.blacklist=amdgpu",
                  process=proc())
    assert status(found, "gpu.render") == Status.WARN and "/dev/dri/renderD152" in found["gpu.render"].title
    assert status(found, "gpu.kfd") == Status.FAIL
    # a populated topology shows the driver is up even when /sys/module is not visible
    assert status(found, "gpu.driver") == Status.PASS


def test_driver_not_loaded_and_blacklisted(tmp_path):
    found = check(tmp_path, amdgpu="coming", cmdline="ro modprobe.blacklist=amdgpu", process=proc())
    assert status(found, "gpu.driver") == Status.FAIL and "after boot" in found["gpu.driver"].fix


def test_no_topology(tmp_path):
    root = tmp_path / "bare"
    (root / "proc").mkdir(parents=True)
    found = {f.id: f for f in run_checks(collect(str(root)), Context())}
    assert status(found, "gpu.topology") == Status.FAIL
    # the checks of GPUs themselves, which find nothing to judge, are listed as skipped with why, not left out
    for gpu_check in ("gpu.arch", "gpu.render", "gpu.ras", "gpu.busy", "gpu.power_cap", "numa.affinity"):
        assert status(found, gpu_check) == Status.SKIP, gpu_check
        assert found[gpu_check].title.startswith("not run: no AMD GPU seen (no KFD topology"), found[gpu_check]
    assert "it checks arch of every GPU" in found["gpu.arch"].title
    skipped_ids = {i for f in found.values() if f.evidence.get("not_run") for i in f.evidence["checks"]}
    assert {"gpu.arch.mixed", "gpu.product", "gpu.vf", "gpu.xgmi"} <= skipped_ids
    assert not any(f.evidence.get("not_run") for f in found.values() if f.area in ("env", "software", "kernel"))


def test_arch_mismatch_with_flag_and_with_image_manifest(tmp_path):
    found = check(tmp_path, arch="gfx950", process=proc())
    assert status(found, "gpu.arch") == Status.FAIL and "invalid device function" in found["gpu.arch"].title
    root = write_tree(tmp_path / "img", HostSpec(product="MI355X", manifest={"targets": ["gfx942"]}, process=proc()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--json"])
    doc = json.loads(r.output)
    arch = next(f for f in doc["findings"] if f["id"] == "gpu.arch")
    assert arch["status"] == "fail" and r.exit_code == 1


def test_mixed_archs_and_unknown_product(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(gpus=2, process=proc()))
    node = root / KFD_TOPOLOGY / "nodes" / "3" / "properties"  # the second GPU
    text = node.read_text().replace("gfx_target_version 90402", "gfx_target_version 90500")
    node.write_text(text.replace("device_id 29857", "device_id 12345"))
    found = {f.id: f for f in run_checks(collect(str(root)), Context())}
    assert status(found, "gpu.arch.mixed") == Status.WARN
    assert status(found, "gpu.product") == Status.WARN and "0x3039" in found["gpu.product"].title


def test_vf_host_needs_vf_configs(tmp_path):
    found = check(tmp_path, product="MI300X VF", gpus=1,
                  process=proc(sglang_dir="/opt/sglang", sglang_vf_missing=["a.json", "b.json"]))
    assert status(found, "gpu.vf") == Status.PASS
    assert status(found, "software.vf_configs") == Status.WARN and found["software.vf_configs"].fix == "rocmkit vf-configs"
    ok = check(tmp_path / "2", product="MI300X VF", gpus=1, process=proc(sglang_dir="/opt/sglang", sglang_vf_missing=[]))
    assert status(ok, "software.vf_configs") == Status.PASS
    bare = check(tmp_path / "3", gpus=1, process=proc(sglang_dir="/opt/sglang", sglang_vf_missing=["x"]))
    assert "software.vf_configs" not in bare  # not a VF host: nothing to say


def test_rocm_too_old_for_the_arch(tmp_path):
    found = check(tmp_path, product="MI355X", rocm="6.3.4", process=proc())
    assert status(found, "rocm.version") == Status.FAIL and "7.0.0" in found["rocm.version"].title


def test_kernel_settings(tmp_path):
    found = check(tmp_path, numa_balancing="1", cmdline="ro quiet", cpu_vendor="GenuineIntel", process=proc())
    assert status(found, "kernel.numa_balancing") == Status.WARN
    assert status(found, "kernel.iommu") == Status.WARN and "intel_iommu=on" in found["kernel.iommu"].fix
    assert status(found, "kernel.pci_realloc") == Status.WARN


def test_numa_affinity_unknown(tmp_path):
    found = check(tmp_path, gpu_numa=(-1,) * 8, process=proc())
    assert status(found, "numa.affinity") == Status.WARN


def test_shm_and_memlock(tmp_path):
    found = check(tmp_path, process=proc(shm_bytes=64 << 20, memlock={"soft": 65536, "hard": 65536}))
    assert status(found, "container.shm") == Status.FAIL and "--ipc=host" in found["container.shm"].fix
    assert status(found, "container.memlock") == Status.WARN
    found = check(tmp_path / "b", process=proc(shm_bytes=4 << 30))
    assert status(found, "container.shm") == Status.WARN


@pytest.mark.parametrize("env,fid,expected,text", [
    ({"HIP_VISIBLE_DEVICES": ""}, "env.visible_devices", Status.FAIL, "set but empty"),
    ({"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "1,0"}, "env.visible_devices", Status.FAIL, "disagree"),
    ({"ROCR_VISIBLE_DEVICES": "0", "HIP_VISIBLE_DEVICES": "0"}, "env.visible_devices", Status.WARN, "ROCr masking"),
    ({"HIP_VISIBLE_DEVICES": "0,9"}, "env.visible_devices", Status.FAIL, "only 8 are visible"),
    ({"HIP_VISIBLE_DEVICES": "0,1,2,3"}, "env.visible_devices", Status.PASS, "consistent"),
    ({"PYTORCH_ROCM_ARCH": "gfx90a;gfx950"}, "env.arch.pytorch_rocm_arch", Status.FAIL, "gfx942"),
    ({"GPU_ARCHS": "gfx942;gfx950"}, "env.arch.gpu_archs", Status.PASS, "covers"),
    ({"HSA_OVERRIDE_GFX_VERSION": "9.4.2"}, "env.hsa_override_gfx_version", Status.FAIL, "consumer-GPU"),
    ({"RAY_EXPERIMENTAL_NOSET_CUDA_ENV_VAR": "1"}, "env.ray_noset.typo", Status.WARN, "Ray ignores"),
    ({"RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES": "1"}, "env.ray_noset", Status.WARN, "has no effect"),
    ({}, "env.nccl_min_nchannels", Status.WARN, "not set"),
])
def test_environment_rules(tmp_path, env, fid, expected, text):
    found = check(tmp_path, process=proc(env=env))
    assert status(found, fid) == expected, found[fid].title
    assert text in found[fid].title


def test_ray_rule_follows_version_and_installed_code(tmp_path):
    old = check(tmp_path, process=proc(packages={"ray": "2.44.1"}, ray_noset_vars=None,
                                       env={"RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES": "1"}))
    assert status(old, "env.ray_noset") == Status.PASS
    # the installed Ray's code reads only ROCR: trust the code over the version
    patched = check(tmp_path / "p", process=proc(packages={"ray": "2.50.0"},
                                                 ray_noset_vars=["RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"],
                                                 env={"RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES": "1"}))
    assert status(patched, "env.ray_noset") == Status.PASS
    none = check(tmp_path / "n", process=proc(packages={"ray": None}))
    assert status(none, "env.ray_noset") == Status.SKIP


def test_scratch_reclaim_rules(tmp_path):
    rocm71 = check(tmp_path, rocm="7.1.0", process=proc(env={"NCCL_MIN_NCHANNELS": "112"}))
    assert status(rocm71, "env.hsa_no_scratch_reclaim") == Status.WARN
    old_fw = check(tmp_path / "f", rocm="6.3.4", fw_versions=(166,) * 8, process=proc(env={}))
    assert "177" in old_fw["env.hsa_no_scratch_reclaim"].title
    fine = check(tmp_path / "g", rocm="6.4.0", process=proc(env={}))
    assert "env.hsa_no_scratch_reclaim" not in fine
    old = check(tmp_path / "o", rocm="6.1.0", product="MI300X", process=proc(env={}))
    assert status(old, "env.hip_force_dev_kernarg") == Status.WARN


def test_software_rules(tmp_path):
    cuda = check(tmp_path, process=proc(torch_hip="", packages={"torch": "2.9.1+cu128"}))
    assert status(cuda, "software.torch") == Status.FAIL and "not a ROCm build" in cuda["software.torch"].title
    broken = check(tmp_path / "b", process=proc(gpu_libraries={"amdsmi": {"status": "error", "error": "KeyError: 'ROCM'"}}))
    assert status(broken, "software.amdsmi") == Status.WARN
    denied = check(tmp_path / "d", process=proc(docker={"status": "denied"}))
    assert status(denied, "software.docker") == Status.WARN and "usermod -aG docker" in denied["software.docker"].fix


def test_firmware_and_xgmi_consistency(tmp_path):
    found = check(tmp_path, fw_versions=(177,) * 7 + (166,), hive_ids=(5,) * 7 + (0,), process=proc())
    assert status(found, "gpu.firmware") == Status.WARN
    title = found["gpu.firmware"].title  # the versions as words, not a Python dict of tuples
    assert "MEC 177 SDMA" in title and "on 7 GPUs" in title and "on 1 GPU" in title, title
    assert "{" not in title and "(" not in title, title
    assert status(found, "gpu.xgmi") == Status.WARN


def test_without_process_facts_checks_skip_not_guess(tmp_path):
    found = check(tmp_path, process=None)
    process_checks = ["env.visible_devices", "env.ray_noset", "env.arch",
                      "env.tuning", "software.torch", "software.versions", "software.amdsmi",
                      "software.pyamdgpuinfo", "software.docker"]
    for fid in process_checks:
        assert status(found, fid) == Status.SKIP and "not in the captured tree" in found[fid].title, fid
    # tree facts are still judged: /dev/shm and memlock from proc/self/mounts and proc/self/limits
    assert status(found, "gpu.count") == Status.PASS and status(found, "kernel.numa_balancing") == Status.PASS
    assert status(found, "container.shm") == Status.PASS and status(found, "container.memlock") == Status.PASS
    assert "access not judged" in found["gpu.kfd"].title
    bare = check(tmp_path / "bare", process=None, proc_self=False)
    for fid in ("container.shm", "container.memlock"):
        assert status(bare, fid) == Status.SKIP and "not in the captured tree" in bare[fid].title, fid


def test_docker_host_not_probed_is_said(tmp_path):
    tcp = check(tmp_path, process=proc(docker={"host": "tcp://10.0.0.1:2375", "status": "unchecked",
                                               "reason": "non-unix DOCKER_HOST is not probed at level 1"}))
    assert status(tcp, "software.docker") == Status.SKIP and "not probed" in tcp["software.docker"].title


def test_corrupt_process_record_is_reported(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(process={"env": {"A": 1}}))
    facts = collect(str(root))
    assert facts.process is None and any("not a rocmkit process record" in e for _, e in facts.read_errors)


@pytest.mark.parametrize("container", [False, True])
def test_kfd_missing_where_the_driver_is_up_does_not_say_load_the_driver(tmp_path, container):
    # gpu.driver passed ("amdgpu driver is up") while gpu.kfd's fix said "load the amdgpu driver"
    found = check(tmp_path, kfd=False, amdgpu="live", container=container, process=proc())
    assert status(found, "gpu.driver") == Status.PASS and status(found, "gpu.kfd") == Status.FAIL
    kfd = found["gpu.kfd"]
    assert "modprobe" not in kfd.fix and "load the amdgpu driver" not in kfd.fix
    if container:
        assert "--device=/dev/kfd" in kfd.fix
    else:
        assert "not in the captured tree" in kfd.title and "rocmkit doctor --capture" in kfd.fix
    # the render nodes' advice agrees: a host's tree is not a container's
    render = check(tmp_path / "r", missing_render=(3,), container=container, process=proc())["gpu.render"]
    assert ("--device=/dev/dri" in render.fix) == container and ("rocmkit doctor --capture" in render.fix) != container


def test_kfd_missing_where_the_driver_is_down_says_load_it(tmp_path):
    found = check(tmp_path, kfd=False, amdgpu="unloading", process=proc())
    assert status(found, "gpu.driver") == Status.FAIL
    assert "sudo modprobe amdgpu" in found["gpu.kfd"].fix
