"""Ray on AMD GPUs: the facts read from Ray's code (shapes of the releases that differ) and the checks on them.
The real Ray 2.60 with the real amdsmi is in test_doctor_libraries.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.model import Status
from rocmkit.host.facts.process import ray_amd_facts
from treegen import HostSpec, healthy_process, write_tree

# The parts of Ray's files the facts depend on, as the releases wrote them (ray-project/ray: 2.45's
# amd_gpu.py after #51104; 2.60's after #53757; the pyamdsmi ctypes bindings before the amdsmi shim).
AMD_GPU_245 = '''
NOSET_HIP_VISIBLE_DEVICES_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"
    def get_visible_accelerator_ids_env_var() -> str:
        if "ROCR_VISIBLE_DEVICES" in os.environ:
            raise RuntimeError(
                f"Please use {HIP_VISIBLE_DEVICES_ENV_VAR} instead of ROCR_VISIBLE_DEVICES"
            )
'''
AMD_GPU_260 = '''
NOSET_HIP_VISIBLE_DEVICES_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"
    def get_visible_accelerator_ids_env_var() -> str:
        if (
            HIP_VISIBLE_DEVICES_ENV_VAR not in os.environ
            and "ROCR_VISIBLE_DEVICES" in os.environ
        ):
            raise RuntimeError(
                f"Please use {HIP_VISIBLE_DEVICES_ENV_VAR} instead of ROCR_VISIBLE_DEVICES"
            )
'''
AMD_GPU_244 = '''
NOSET_ROCR_VISIBLE_DEVICES_ENV_VAR = "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"
'''
PYAMDSMI_CTYPES = '''
LIBROCM_NAME = 'librocm_smi64.so'
def _find_lib_rocm():
    rocm_path = os.environ.get('ROCM_PATH', '/opt/rocm')
'''
PYAMDSMI_SHIM = '''
try:
    import amdsmi
    from amdsmi import (
        AmdSmiInitFlags,
    )
    _AMDSMI_AVAILABLE = True
except ImportError:
    amdsmi = None
'''


def fake_ray(tmp_path: Path, amd_gpu: str, pyamdsmi: str) -> Path:
    d = tmp_path / "ray"
    (d / "_private/accelerators").mkdir(parents=True)
    (d / "_private/thirdparty/pyamdsmi").mkdir(parents=True)
    (d / "_private/accelerators/amd_gpu.py").write_text(amd_gpu)
    (d / "_private/thirdparty/pyamdsmi/pyamdsmi.py").write_text(pyamdsmi)
    return d


@pytest.mark.parametrize("amd_gpu,pyamdsmi,expected", [
    (AMD_GPU_260, PYAMDSMI_SHIM, {"gpu_backend": "amdsmi", "amdsmi_guard": "ImportError", "rocr_rule": "without_hip"}),
    (AMD_GPU_245, PYAMDSMI_CTYPES, {"gpu_backend": "rocm_smi", "amdsmi_guard": None, "rocr_rule": "always"}),
    (AMD_GPU_244, PYAMDSMI_CTYPES, {"gpu_backend": "rocm_smi", "amdsmi_guard": None, "rocr_rule": None}),
    ("", "", {"gpu_backend": None, "amdsmi_guard": None, "rocr_rule": None}),
])
def test_facts_read_from_each_ray_shape(tmp_path, amd_gpu, pyamdsmi, expected):
    assert ray_amd_facts(fake_ray(tmp_path, amd_gpu, pyamdsmi)) == expected


def test_installed_ray_is_read_when_present():
    spec = importlib.util.find_spec("ray")
    if spec is None:
        pytest.skip("Ray not installed here (CI installs it with the slurm extra)")
    facts = ray_amd_facts(Path(list(spec.submodule_search_locations)[0]))
    assert facts["gpu_backend"] in ("amdsmi", "rocm_smi")


def found(tmp_path, *, gpus=8, rocm_path_lib=True, **process):
    spec = HostSpec(gpus=gpus, process=healthy_process(**process))
    root = write_tree(tmp_path / "h", spec)
    if rocm_path_lib:
        (root / "opt/rocm/lib").mkdir(parents=True, exist_ok=True)
        (root / "opt/rocm/lib/librocm_smi64.so").touch()
    return {f.id: f for f in run_checks(collect(str(root)), Context())}


BROKEN_AMDSMI = {"status": "error", "error": "KeyError: 'libamd_smi.so'", "stage": "import", "import_error": False}


def test_amdsmi_import_error_ray_does_not_catch_fails_even_without_gpus(tmp_path):
    f = found(tmp_path, gpus=0, gpu_libraries={"amdsmi": BROKEN_AMDSMI})
    assert f["software.ray_gpus"].status == Status.FAIL
    assert "cannot even be imported" in f["software.ray_gpus"].title and "pip uninstall" in f["software.ray_gpus"].fix


def test_a_guard_that_catches_it_turns_the_crash_into_zero_gpus(tmp_path):
    ray_amd = {"gpu_backend": "amdsmi", "amdsmi_guard": "(ImportError, KeyError)", "rocr_rule": None}
    f = found(tmp_path, ray_amd=ray_amd, gpu_libraries={"amdsmi": BROKEN_AMDSMI})
    assert f["software.ray_gpus"].status == Status.WARN and "0 GPUs" in f["software.ray_gpus"].title
    none = found(tmp_path / "n", gpus=0, ray_amd=ray_amd, gpu_libraries={"amdsmi": BROKEN_AMDSMI})
    assert "software.ray_gpus" not in none  # no AMD GPU: nothing to count, nothing crashes


@pytest.mark.parametrize("amdsmi,status", [
    ({"status": "ok", "gpus": 8}, Status.PASS),
    ({"status": "absent"}, Status.WARN),
    ({"status": "ok", "gpus": 0}, Status.WARN),
    ({"status": "error", "error": "AmdSmiLibraryException: init", "stage": "use", "import_error": False}, Status.WARN),
])
def test_ray_counting_through_amdsmi(tmp_path, amdsmi, status):
    f = found(tmp_path, gpu_libraries={"amdsmi": amdsmi})
    assert f["software.ray_gpus"].status == status


def test_ray_counting_through_librocm_smi64(tmp_path):
    old = {"gpu_backend": "rocm_smi", "amdsmi_guard": None, "rocr_rule": "always"}
    assert found(tmp_path, ray_amd=old)["software.ray_gpus"].status == Status.PASS
    missing = found(tmp_path / "m", ray_amd=old, rocm_path_lib=False)["software.ray_gpus"]
    assert missing.status == Status.WARN and "/opt/rocm/lib/librocm_smi64.so is missing" in missing.title
    # ROCM_PATH moves where Ray looks
    moved = found(tmp_path / "p", ray_amd=old, env={"ROCM_PATH": "/opt/rocm-6.4.1"})["software.ray_gpus"]
    assert moved.status == Status.WARN and "/opt/rocm-6.4.1/lib/librocm_smi64.so" in moved.title


@pytest.mark.parametrize("rule,env,fails", [
    ("without_hip", {"ROCR_VISIBLE_DEVICES": "0,1"}, True),
    ("without_hip", {"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}, False),
    ("always", {"ROCR_VISIBLE_DEVICES": "0,1", "HIP_VISIBLE_DEVICES": "0,1"}, True),
    (None, {"ROCR_VISIBLE_DEVICES": "0,1"}, False),
    ("always", {"HIP_VISIBLE_DEVICES": "0,1"}, False),
])
def test_ray_refusing_rocr_visible_devices(tmp_path, rule, env, fails):
    ray_amd = {"gpu_backend": "amdsmi", "amdsmi_guard": "ImportError", "rocr_rule": rule}
    f = found(tmp_path, ray_amd=ray_amd, env=env)
    assert ("env.ray_rocr" in f) == fails
    if fails:
        assert f["env.ray_rocr"].status == Status.FAIL and "HIP_VISIBLE_DEVICES" in f["env.ray_rocr"].fix


def test_vllm_with_an_amdsmi_that_raises_keyerror_on_import(tmp_path):
    f = found(tmp_path, gpu_libraries={"amdsmi": BROKEN_AMDSMI})
    assert f["software.vllm_amdsmi"].status == Status.FAIL and "KeyError" in f["software.vllm_amdsmi"].title
    ok = found(tmp_path / "ok")
    assert "software.vllm_amdsmi" not in ok
    caught = found(tmp_path / "c", gpu_libraries={"amdsmi": {**BROKEN_AMDSMI, "import_error": True}})
    assert "software.vllm_amdsmi" not in caught
