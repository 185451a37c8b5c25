"""This year's traps (rocmkit/host/checks/rocm_sdk.py, runtime_fixes.py, ray_amd.py) on generated host trees:
two libamd_smi copies or two amdsmi packages in a pip ROCm SDK (the facts read from a real fake SDK tree),
expandable_segments under AITER's custom all-reduce, ROCm 10.0's AOTriton on gfx950, and Ray with both
HIP_VISIBLE_DEVICES and ROCR_VISIBLE_DEVICES."""

from __future__ import annotations

from pathlib import Path

from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.process import verl_car_off
from rocmkit.host.facts.rocm_sdk import read
from rocmkit.host.model import Status
from treegen import HostSpec, healthy_process, write_tree

LIB = "libamd_smi.so.26.0.0"


def found(tmp_path: Path, ctx: Context = Context(), **spec) -> dict:
    root = write_tree(tmp_path / "host", HostSpec(**spec))
    return {f.id: f for f in run_checks(collect(str(root)), ctx)}


def sdk_site(root: Path, linked: bool) -> Path:
    """A site-packages as TheRock's wheels leave it after `rocm-sdk init`: core's libamd_smi (with its soname
    links) and devel's copy, or devel's linked to core's as rocmkit's fix-up leaves it."""
    core, devel = root / "_rocm_sdk_core" / "lib", root / "_rocm_sdk_devel" / "lib"
    core.mkdir(parents=True)
    devel.mkdir(parents=True)
    (core / LIB).write_bytes(b"\x7fELF libamd_smi")
    (core / "libamd_smi.so").symlink_to(LIB)
    if linked:
        (devel / "libamd_smi.so").symlink_to(core / LIB)
    else:
        (devel / "libamd_smi.so").write_bytes(b"\x7fELF libamd_smi")
    return root


def test_the_facts_count_real_files_not_names(tmp_path):
    two = read([str(sdk_site(tmp_path / "a", linked=False))])
    assert two["core"].endswith("_rocm_sdk_core") and len(two["amd_smi_libs"]) == 3
    assert len({x["real"] for x in two["amd_smi_libs"]}) == 2
    one = read([str(sdk_site(tmp_path / "b", linked=True))])
    assert len({x["real"] for x in one["amd_smi_libs"]}) == 1
    assert read([str(tmp_path / "nothing")]) is None  # no pip SDK: no fact, no finding


def test_two_libamd_smi_copies_fail_naming_the_link_that_fixes_them(tmp_path):
    sdk = read([str(sdk_site(tmp_path / "site", linked=False))])
    f = found(tmp_path, process=healthy_process(rocm_sdk=sdk))["software.amd_smi_copies"]
    assert f.status is Status.FAIL and "2 copies of libamd_smi" in f.title and "0 GPUs" in f.title
    assert f.fix.startswith("link the others to _rocm_sdk_core's: ln -sf ") and "_rocm_sdk_devel/lib/libamd_smi.so" in f.fix
    assert "186516" in f.reference


def test_one_copy_passes_and_two_amdsmi_packages_fail(tmp_path):
    site = sdk_site(tmp_path / "site", linked=True)
    f = found(tmp_path / "one", process=healthy_process(rocm_sdk=read([str(site)])))["software.amd_smi_copies"]
    assert f.status is Status.PASS
    for d in (site / "amdsmi", tmp_path / "other" / "amdsmi"):
        d.mkdir(parents=True)
        (d / "__init__.py").write_text("")
    sdk = read([str(site), str(tmp_path / "other")])
    f = found(tmp_path / "two", process=healthy_process(rocm_sdk=sdk))["software.amd_smi_copies"]
    assert f.status is Status.FAIL and "2 amdsmi packages" in f.title and "_rocm_sdk_core/share/amd_smi" in f.fix


def rocm10(hip: str = "10.0.26340"):
    p = healthy_process(torch_hip=hip)
    p["packages"]["torch"] = "2.11.0+rocm10.0.0"
    return p


def test_rocm_100_torch_on_gfx950_warns_of_aotriton_and_not_on_gfx942_or_101(tmp_path):
    f = found(tmp_path / "a", product="MI355X", process=rocm10())["software.aotriton_gfx950"]
    assert f.status is Status.WARN and "0.13b" in f.title and "0.11.2b" in f.fix and "7696" in f.reference
    assert "software.aotriton_gfx950" not in found(tmp_path / "b", product="MI300X", process=rocm10())
    p = rocm10("10.1.26400")
    assert "software.aotriton_gfx950" not in found(tmp_path / "c", product="MI355X", process=p)
    # an image judged for gfx950 on a machine without that GPU (doctor --image reads the manifest's targets)
    assert "software.aotriton_gfx950" in found(tmp_path / "d", Context(arch="gfx950"), gpus=0, process=rocm10())


def aiter_process(conf: str, **env):
    p = healthy_process(env={"PYTORCH_ALLOC_CONF": conf, **env})
    p["packages"]["amd-aiter"] = "0.1.19"
    return p


def test_expandable_segments_with_vllm_on_aiter_warns(tmp_path):
    p = aiter_process("expandable_segments:True", VLLM_ROCM_USE_AITER="1")
    f = found(tmp_path, process=p)["env.expandable_segments"]
    assert f.status is Status.WARN and f.evidence["engines"] == ["vllm"] and "4621" in f.fix and "4174" in f.reference


def test_verl_turning_custom_all_reduce_off_passes_and_other_settings_are_not_judged(tmp_path):
    yaml = "engine_kwargs:\n\n  # vllm engine config\n  vllm:\n    disable_custom_all_reduce: True\n\n  sglang: {}\n"
    assert verl_car_off(yaml) == ["vllm"]
    p = aiter_process("expandable_segments:True", VLLM_ROCM_USE_AITER="1")
    p["verl_car_off"] = verl_car_off(yaml)
    assert found(tmp_path / "a", process=p)["env.expandable_segments"].status is Status.PASS
    # PYTORCH_CUDA_ALLOC_CONF wins over PYTORCH_ALLOC_CONF, as in PyTorch and aiter#4560
    p = aiter_process("expandable_segments:True", VLLM_ROCM_USE_AITER="1", PYTORCH_CUDA_ALLOC_CONF="max_split_size_mb:512")
    assert "env.expandable_segments" not in found(tmp_path / "b", process=p)
    assert "env.expandable_segments" not in found(tmp_path / "c", process=aiter_process("expandable_segments:True"))


def test_both_visible_device_variables_under_ray_warn(tmp_path):
    env = dict(healthy_process()["env"], HIP_VISIBLE_DEVICES="0,1", ROCR_VISIBLE_DEVICES="2,3")
    f = found(tmp_path / "a", process=healthy_process(env=env))["env.ray_visible_both"]
    assert f.status is Status.WARN and "unset ROCR_VISIBLE_DEVICES" in f.fix and "53737" in f.reference
    env.pop("ROCR_VISIBLE_DEVICES")
    assert "env.ray_visible_both" not in found(tmp_path / "b", process=healthy_process(env=env))
