"""vLLM on ROCm imports amdsmi at the top of vllm/platforms/rocm.py behind `except ImportError` only, so an
amdsmi whose import raises anything else (the PyPI amdsmi 7.0.2 without libamd_smi.so raises KeyError)
crashes vLLM as soon as it picks the ROCm platform. Ray's own use of amdsmi is in ray_amd.py."""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

VLLM_ROCM = "https://github.com/vllm-project/vllm/blob/main/vllm/platforms/rocm.py"


@documents("software.vllm_amdsmi",
           what="vLLM's `vllm/platforms/rocm.py` imports amdsmi behind `except ImportError` only: on an AMD host an amdsmi whose import raises `KeyError` fails vLLM (fail)")
def check_vllm_amdsmi(f: Facts, ctx: Context):
    vllm = f.package("vllm")
    lib = ((f.process or {}).get("gpu_libraries") or {}).get("amdsmi")
    if not vllm or not f.devices or not isinstance(lib, dict):
        return
    if lib.get("status") == "error" and lib.get("stage") == "import" and not lib.get("import_error"):
        yield finding("software.vllm_amdsmi", "software", Status.FAIL,
                      f"vLLM {vllm} imports amdsmi on ROCm and catches only ImportError, but importing amdsmi "
                      f"raises {lib.get('error')}: vLLM fails as soon as it selects the ROCm platform",
                      fix="install the amdsmi of this ROCm (`pip install /opt/rocm/share/amd_smi`, with "
                          "/opt/rocm/lib/libamd_smi.so present) in place of the PyPI one",
                      ref=VLLM_ROCM, vllm=vllm, amdsmi=lib)


CHECKS = [check_vllm_amdsmi]
