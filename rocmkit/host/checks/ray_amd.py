"""Ray on AMD GPUs: whether the installed Ray can start and count this host's GPUs, and whether it accepts
the visible-devices variable that is set. Decided from the installed Ray's own code (process.ray_amd_facts),
since its behaviour changed between releases."""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

RAY_AMD = "https://github.com/ray-project/ray/blob/master/python/ray/_private/accelerators/amd_gpu.py"
RAY_SMI = "https://github.com/ray-project/ray/blob/master/python/ray/_private/thirdparty/pyamdsmi/pyamdsmi.py"
NUM_GPUS = "give Ray the count yourself (`ray start --num-gpus=N`, `ray.init(num_gpus=N)`)"
# What `except X:` around `import amdsmi` catches besides ImportError.
CATCH_ALL = {"", "Exception", "BaseException"}


def _info(f: Facts) -> tuple[str, dict] | None:
    ray = f.package("ray")
    info = (f.process or {}).get("ray_amd")
    return (ray, info) if ray and isinstance(info, dict) else None


@documents("software.ray_gpus",
           what="whether Ray can be imported and count the GPUs, read from its code — Ray 2.60 counts them through the `amdsmi` package behind `except ImportError`, so an amdsmi whose import raises `KeyError` (PyPI 7.0.2 without `libamd_smi.so`) makes `import ray`, `ray start` and `ray stop` fail on any machine (fail), and an absent or failing amdsmi makes Ray see 0 GPUs (warn); older Ray needs `$ROCM_PATH/lib/librocm_smi64.so`")
def check_ray_gpu_detection(f: Facts, ctx: Context):
    found = _info(f)
    if found is None:
        return
    ray, info = found
    backend = info.get("gpu_backend")
    lib = (f.process.get("gpu_libraries") or {}).get("amdsmi")
    lib = lib if isinstance(lib, dict) else {}
    if backend == "amdsmi":
        guard = str(info.get("amdsmi_guard") or "")
        caught_names = {g.strip("() ") for g in guard.split(",")}
        error_type = str(lib.get("error") or "").split(":")[0]
        caught = bool(lib.get("import_error")) or bool(caught_names & (CATCH_ALL | {error_type}))
        if lib.get("status") == "error" and lib.get("stage") == "import" and not caught:
            # Verified with Ray 2.60 and the PyPI amdsmi 7.0.2 without ROCm: `import ray` (its global worker
            # asks for visible accelerators at import), `ray start --num-gpus=0` and `ray stop` all exit with
            # amdsmi's KeyError, on any machine, GPU or not.
            yield finding("software.ray_gpus", "software", Status.FAIL,
                          f"Ray {ray} cannot even be imported: its AMD GPU detection imports amdsmi, whose import "
                          f"raises {lib.get('error')} (Ray catches only {guard or 'nothing'}), so `import ray`, "
                          "`ray start` and `ray stop` exit with that error",
                          fix="make amdsmi importable: install the one of this ROCm (`pip install "
                              "/opt/rocm/share/amd_smi`, with /opt/rocm/lib/libamd_smi.so present), or remove "
                              "it (`pip uninstall -y amdsmi`; then " + NUM_GPUS + ")",
                          ref=RAY_SMI, ray=ray, amdsmi=lib, guard=guard)
            return
        if not f.devices:
            return  # no AMD GPU here: nothing for Ray to count
        if lib.get("status") == "ok" and lib.get("gpus"):
            yield finding("software.ray_gpus", "software", Status.PASS,
                          f"Ray {ray} counts AMD GPUs through amdsmi, which sees {lib['gpus']}", ray=ray)
            return
        why = {"absent": "is not installed", "error": f"fails ({lib.get('error')})"}.get(
            lib.get("status"), "sees no GPU")
        yield finding("software.ray_gpus", "software", Status.WARN,
                      f"Ray {ray} counts AMD GPUs through the amdsmi package, which {why}: Ray will see 0 GPUs "
                      "and GPU tasks will wait forever",
                      fix="install the amdsmi of this ROCm (`pip install /opt/rocm/share/amd_smi`), or " + NUM_GPUS,
                      ref=RAY_SMI, ray=ray, amdsmi=lib)
    elif backend == "rocm_smi" and f.devices:
        path, exists = f.rocm_smi_lib or ("/opt/rocm/lib/librocm_smi64.so", False)
        problems = [] if exists else [f"{path} is missing"]
        if f.amdgpu_initstate != "live":
            problems.append("/sys/module/amdgpu/initstate does not say live here")
        if problems:
            yield finding("software.ray_gpus", "software", Status.WARN,
                          f"Ray {ray} counts AMD GPUs through librocm_smi64 and needs it at $ROCM_PATH/lib "
                          f"(default /opt/rocm) with the amdgpu module live: {'; '.join(problems)}, so Ray "
                          "will see 0 GPUs", fix="install rocm-smi-lib, or set ROCM_PATH to the ROCm that has "
                                                 "lib/librocm_smi64.so, or " + NUM_GPUS,
                          ref=RAY_SMI, ray=ray, library=path)
        else:
            yield finding("software.ray_gpus", "software", Status.PASS,
                          f"Ray {ray} counts AMD GPUs through {path}", ray=ray)


@documents("env.ray_rocr",
           what="read from the installed Ray's code, not its version: `ROCR_VISIBLE_DEVICES` that this Ray refuses (always in 2.45; without `HIP_VISIBLE_DEVICES` since ray#53757)")
def check_ray_rocr(f: Facts, ctx: Context):
    """Ray 2.45 (ray#51104) raises whenever ROCR_VISIBLE_DEVICES is set; after ray#53757 only when
    HIP_VISIBLE_DEVICES is not set too. Ray asks only on a host where it found AMD GPUs."""
    found = _info(f)
    if found is None or not f.devices:
        return
    ray, info = found
    rule, env = info.get("rocr_rule"), f.env
    if "ROCR_VISIBLE_DEVICES" not in env or rule is None:
        return
    if rule == "always" or "HIP_VISIBLE_DEVICES" not in env:
        yield finding("env.ray_rocr", "env", Status.FAIL,
                      f"ROCR_VISIBLE_DEVICES is set{'' if rule == 'always' else ' without HIP_VISIBLE_DEVICES'}: "
                      f"Ray {ray} raises RuntimeError('Please use HIP_VISIBLE_DEVICES instead of "
                      "ROCR_VISIBLE_DEVICES') when it starts",
                      fix="unset ROCR_VISIBLE_DEVICES and list the same GPUs in HIP_VISIBLE_DEVICES",
                      ref=f"{RAY_AMD}; ray-project/ray#53737", ray=ray, rule=rule,
                      ROCR_VISIBLE_DEVICES=env["ROCR_VISIBLE_DEVICES"])


@documents("env.ray_visible_both",
           what="`HIP_VISIBLE_DEVICES` and `ROCR_VISIBLE_DEVICES` both set where Ray is installed: HIP indexes the GPUs ROCR leaves, while Ray and verl set HIP_VISIBLE_DEVICES per worker by the host's index, so workers land on other GPUs or see none (warn)")
def check_ray_visible_both(f: Facts, ctx: Context):
    ray = f.package("ray")
    env = f.env
    if not ray or "HIP_VISIBLE_DEVICES" not in env or "ROCR_VISIBLE_DEVICES" not in env:
        return
    yield finding("env.ray_visible_both", "env", Status.WARN,
                  f"HIP_VISIBLE_DEVICES={env['HIP_VISIBLE_DEVICES']} and ROCR_VISIBLE_DEVICES="
                  f"{env['ROCR_VISIBLE_DEVICES']} are both set with Ray {ray}: HIP numbers only the GPUs ROCR leaves "
                  "visible, but Ray (or verl, under RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES) sets "
                  "HIP_VISIBLE_DEVICES per worker by the host's GPU index, so workers get other GPUs or none",
                  fix="set one of them only: unset ROCR_VISIBLE_DEVICES and list the GPUs in HIP_VISIBLE_DEVICES",
                  ref="ray-project/ray#53737, #53757; verl-project/verl#1465", ray=ray,
                  HIP_VISIBLE_DEVICES=env["HIP_VISIBLE_DEVICES"], ROCR_VISIBLE_DEVICES=env["ROCR_VISIBLE_DEVICES"])


CHECKS = [check_ray_gpu_detection, check_ray_rocr, check_ray_visible_both]
