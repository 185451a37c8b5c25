"""The doctor's checks of upstream's runtime fixes (rocmkit/host/checks/runtime_fixes.py), on generated trees:
legacy HIP IPC on ROCm >= 7.2, a ROCm PyTorch replaced by a CUDA build, GPUs libdrm's amdgpu.ids does not name."""

from __future__ import annotations

from pathlib import Path

from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.model import Status
from treegen import HostSpec, healthy_process, write_tree


def found(tmp_path: Path, **spec):
    root = write_tree(tmp_path / "host", HostSpec(**spec))
    return {f.id: f for f in run_checks(collect(str(root)), Context())}


def rocm72(**env):
    p = healthy_process(torch_hip="7.2.26015")
    p["packages"]["torch"] = "2.9.1+rocm7.2.0"
    p["env"].update(env)
    return p


def test_rocm_72_without_legacy_ipc_warns_naming_the_leak(tmp_path):
    f = found(tmp_path, rocm="7.2.0", process=rocm72())["env.ipc_legacy"]
    assert f.status is Status.WARN and "dma-buf" in f.title and "7.2" in f.title
    assert "HSA_ENABLE_IPC_MODE_LEGACY=1" in f.fix and "miles#1707" in f.reference


def test_rocm_72_with_legacy_ipc_passes_and_70_is_not_judged(tmp_path):
    assert found(tmp_path / "a", process=rocm72(HSA_ENABLE_IPC_MODE_LEGACY="1"))["env.ipc_legacy"].status is Status.PASS
    assert "env.ipc_legacy" not in found(tmp_path / "b")  # the healthy tree: torch for ROCm 7.0


def test_rocm_714_torch_counts_even_with_an_older_opt_rocm(tmp_path):
    p = healthy_process(torch_hip="7.14.26200")
    assert found(tmp_path, rocm="7.0.2", process=p)["env.ipc_legacy"].status is Status.WARN


def test_cuda_torch_in_a_rocm_image_fails(tmp_path):
    p = healthy_process(torch_hip=None)
    p["packages"]["torch"] = "2.9.1+cu128"
    f = found(tmp_path, process=p, manifest={"rocm": "7.0.2", "targets": ["gfx942"]})["software.torch_cuda_swap"]
    assert f.status is Status.FAIL and "+cu128" in f.title and "ROCm 7.0.2" in f.title and "PIP_CONSTRAINT" in f.fix


def test_plain_pypi_torch_without_hip_under_a_rocm_manifest_fails(tmp_path):
    p = healthy_process(torch_hip=None)
    p["packages"]["torch"] = "2.9.1"
    f = found(tmp_path, process=p, manifest={"rocm": "7.14.0"})["software.torch_cuda_swap"]
    assert f.status is Status.FAIL and "torch.version.hip is empty" in f.title


def test_rocm_torch_in_a_rocm_image_passes_and_cpu_image_is_silent(tmp_path):
    assert found(tmp_path / "a", manifest={"rocm": "7.0.2"})["software.torch_cuda_swap"].status is Status.PASS
    p = healthy_process(torch_hip=None)
    p["packages"]["torch"] = "2.9.1+cpu"
    assert "software.torch_cuda_swap" not in found(tmp_path / "b", process=p, manifest={"rocm": "none"})


def test_gpu_missing_from_amdgpu_ids_warns_with_its_id(tmp_path):
    f = found(tmp_path, product="MI355X", amdgpu_ids=("74A1",))["gpu.amdgpu_ids"]
    assert f.status is Status.WARN and "0x75a3 (MI355X)" in f.title and "AMD Radeon Graphics" in f.title
    assert f.evidence["path"] == "/usr/share/libdrm/amdgpu.ids" and "5992" in f.reference


def test_amdgpu_ids_absent_warns_and_complete_passes(tmp_path):
    assert found(tmp_path / "a", amdgpu_ids=None)["gpu.amdgpu_ids"].status is Status.WARN
    assert found(tmp_path / "b", product="MI355X")["gpu.amdgpu_ids"].status is Status.PASS


def test_amdgpu_ids_from_the_amdgpu_install_is_read_too(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(product="MI300X", amdgpu_ids=None))
    ids = root / "opt/amdgpu/share/libdrm/amdgpu.ids"
    ids.parent.mkdir(parents=True)
    ids.write_text("1.0.0\n74A1,\t00,\tAMD Instinct MI300X\n")
    f = {f.id: f for f in run_checks(collect(str(root)), Context())}["gpu.amdgpu_ids"]
    assert f.status is Status.PASS and f.evidence["path"] == "/opt/amdgpu/share/libdrm/amdgpu.ids"
