"""Which RAY_EXPERIMENTAL_NOSET_* variable a Ray version honours on AMD GPUs.

Ray 2.10-2.44 set ROCR_VISIBLE_DEVICES for AMD GPUs (opt-out RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES);
ray-project/ray#51104, released in 2.45.0, switched to HIP_VISIBLE_DEVICES with opt-out
RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES. verl's AMD docs give the same split. Setting the wrong one is
silently ignored, and Ray then narrows each actor's GPUs under verl, which assigns GPUs itself.
"""

from __future__ import annotations

HIP_VAR = "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"
ROCR_VAR = "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"
ALL_NOSET_VARS = (HIP_VAR, ROCR_VAR, "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES")
HIP_SINCE = "2.45.0"


def noset_variable(ray_version: str) -> str:
    """The variable that stops `ray_version` from setting the AMD visible-devices variable."""
    from packaging.version import InvalidVersion, Version  # here: the doctor imports this module on every run

    try:
        v = Version(ray_version)
    except InvalidVersion:
        raise ValueError(f"not a Ray version: {ray_version!r}") from None
    return HIP_VAR if v >= Version(HIP_SINCE) else ROCR_VAR
