"""certify on a host whose torch cannot see the GPUs asked for: the hint names the torch found and the command
that installs the right one (rocmkit/host/torch_advice.py, called from refusal.setup_problem).

The `devices` shapes are what setup.devices() reports: from a real certificate (CUDA torch on an H100), from
this machine's own torch (a CPU build), and from setup.devices() run on a stand-in for ROCm's torch, which
cannot run here. The hosts are trees written by the project's generator (tests/treegen.py)."""

from __future__ import annotations

import copy
import json
import types
from pathlib import Path

import pytest

import treegen
from rocmkit.certify import refusal
from rocmkit.host import torch_advice
from rocmkit.certify.intarget import setup
from rocmkit.certify.settings import Settings
from rocmkit.certify.target import Target

DATA = Path(__file__).parent / "data" / "certify"


def cuda_devices(visible: int = 0) -> dict:
    """The setup report of a real run (torch 2.11.0+cu130 on an H100), as it reads where no CUDA GPU is."""
    dev = copy.deepcopy(json.loads((DATA / "verl-h100-tiny.json").read_text())["setup"]["devices"])
    assert dev["cuda"] == "13.0" and dev["hip"] is None
    dev["visible"], dev["names"] = visible, dev["names"][:visible]
    return dev


def rocm_devices(visible: int = 0, env: dict | None = None, monkeypatch=None) -> dict:
    """setup.devices() over ROCm's torch 2.6.0+rocm6.2.4 (what verl-rocm6 installs): torch.version.hip set."""
    fake = types.SimpleNamespace(
        __version__="2.6.0+rocm6.2.4",
        version=types.SimpleNamespace(hip="6.2.41133-dd7f95766", cuda=None),
        cuda=types.SimpleNamespace(is_available=lambda: visible > 0, device_count=lambda: visible,
                                   get_device_name=lambda i: "AMD Instinct MI300X"))
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    return setup.devices(fake)


@pytest.fixture
def mi300x(tmp_path):
    return torch_advice.host(treegen.write_tree(tmp_path / "mi300x", treegen.HostSpec()))


def test_host_reads_kfd_and_rocm(tmp_path):
    assert torch_advice.host(treegen.write_tree(tmp_path / "a", treegen.HostSpec())) == \
        {"amd_gpus": True, "archs": ["gfx942"], "rocm": "7.0.2-1"}
    mi355 = torch_advice.host(treegen.write_tree(tmp_path / "b", treegen.HostSpec(product="MI355X", rocm="7.2.0")))
    assert mi355 == {"amd_gpus": True, "archs": ["gfx950"], "rocm": "7.2.0-1"}
    # a container given the topology but not /dev/kfd, and no ROCm installed: still an AMD host
    bare = torch_advice.host(treegen.write_tree(tmp_path / "c", treegen.HostSpec(kfd=False, rocm=None)))
    assert bare == {"amd_gpus": True, "archs": ["gfx942"], "rocm": None}
    assert torch_advice.host(tmp_path / "empty") == {"amd_gpus": False, "archs": [], "rocm": None}


@pytest.mark.parametrize("rocm, index", [
    ("7.0.2-1", "7.0"), ("7.2.0", "7.2"), ("6.3.4-120", "6.3"), ("6.4.1", "6.4"), ("7.14.0", "7.2"),
    ("6.2.4", "6.2.4"), ("6.1.0", "6.2.4"), (None, "7.2"), ("garbage", "7.2")])
def test_rocm_index_is_the_newest_not_newer_than_the_host(rocm, index):
    assert torch_advice.rocm_index(rocm) == index


def test_cuda_torch_on_an_amd_host_says_how_to_install_rocms_torch(mi300x):
    hint = torch_advice.hint(cuda_devices(), mi300x, python="/home/u/.venv/bin/python")
    assert hint.startswith("torch 2.11.0+cu130 is built for CUDA 13.0, which cannot drive this host's AMD GPUs")
    assert ("/home/u/.venv/bin/python -m pip uninstall -y torch triton && /home/u/.venv/bin/python -m pip install "
            "torch --index-url https://download.pytorch.org/whl/rocm7.0") in hint
    assert "this host's ROCm 7.0.2)" in hint
    assert "print(torch.version.hip)" in hint
    assert "rocmkit build --arch gfx942" in hint


def test_cpu_only_torch_gets_the_same_advice(tmp_path):
    torch = pytest.importorskip("torch")
    dev = setup.devices(torch)  # this machine's real torch
    if dev["hip"] or dev["cuda"]:
        pytest.skip(f"this machine's torch {dev['torch']} is not a CPU-only build")
    machine = torch_advice.host(treegen.write_tree(tmp_path / "h", treegen.HostSpec(product="MI355X", rocm="7.2.0")))
    hint = torch_advice.hint(dict(dev, visible=0), machine)
    assert hint.startswith(f"torch {dev['torch']} is built for the CPU only, which cannot drive this host's AMD GPUs")
    assert "python3 -m pip install torch --index-url https://download.pytorch.org/whl/rocm7.2" in hint
    assert "rocmkit build --arch gfx950" in hint


def test_rocm_torch_that_sees_nothing_points_at_the_doctor(mi300x, monkeypatch):
    hint = torch_advice.hint(rocm_devices(), mi300x)
    assert "ROCm's build but sees no GPU" in hint and "`rocmkit doctor` says why" in hint
    assert "video and render groups" in hint and "pip install" not in hint
    hidden = torch_advice.hint(rocm_devices(env={"HIP_VISIBLE_DEVICES": ""}, monkeypatch=monkeypatch), mi300x)
    assert "HIP_VISIBLE_DEVICES='' hides them" in hidden
    fewer = torch_advice.hint(rocm_devices(visible=2), mi300x)
    assert "sees 2 GPU(s)" in fewer and "ask for --gpus 2" in fewer


def test_a_cuda_host_with_fewer_gpus_is_told_how_many_torch_sees(tmp_path):
    # `certify --gpus 4` on a host with two NVIDIA H200s: the count torch sees, not advice about AMD GPUs
    dev = dict(cuda_devices(), visible=2, names=["NVIDIA H200", "NVIDIA H200"])
    hint = torch_advice.hint(dev, torch_advice.host(tmp_path))
    assert hint == ("torch 2.11.0+cu130 (built for CUDA 13.0) sees 2 GPU(s) (NVIDIA H200): ask for --gpus 2 or fewer")


def test_in_an_image_the_advice_is_about_the_image(mi300x):
    cuda = torch_advice.hint(cuda_devices(), mi300x, image="my/cuda:latest")
    assert cuda.startswith("the image's torch 2.11.0+cu130 is built for CUDA 13.0")
    assert "rocmkit build --stack verl-vllm --arch gfx942" in cuda and "pip install" not in cuda
    rocm = torch_advice.hint(rocm_devices(), mi300x, image="rocmkit/verl-vllm:gfx942-abc")
    assert "`rocmkit doctor --image rocmkit/verl-vllm:gfx942-abc` says why" in rocm


def test_a_host_without_amd_gpus_is_told_to_use_the_cpu(tmp_path):
    none = torch_advice.host(tmp_path)
    hint = torch_advice.hint(cuda_devices(), none, cpu_note=" (the verl engine needs the verl-cpu stack for that)")
    assert "this host shows no AMD GPU" in hint and "pip install" not in hint
    assert "--gpus 0 runs on the CPU (the verl engine needs the verl-cpu stack for that)" in hint


def test_certify_setup_problem_gives_the_advice():
    """The branch of refusal.setup_problem that stops a run asking for more GPUs than torch sees, on this host."""
    s = Settings(engine="verl", gpus=1)
    target = Target(image=None, image_id=None, record={})
    message, hint = refusal.setup_problem(s, target, 0, {"devices": cuda_devices()}, [])
    assert message.startswith("asked for 1 GPU(s), but torch 2.11.0+cu130 (built for CUDA 13.0)")
    assert hint.startswith("nothing was trained; ") and "verl-cpu stack" in hint
    if torch_advice.host()["amd_gpus"]:
        assert f"{target.python} -m pip install torch --index-url https://download.pytorch.org/whl/rocm" in hint
    else:
        assert "this host shows no AMD GPU" in hint
