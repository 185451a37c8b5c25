"""Facts of the running process, read live (never from a tree): the environment, limits, installed packages,
what Ray's own code says, the GPU libraries and the Docker engine. `--capture` records them in
rocmkit-process.json so `--root` can judge them later."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from ...pkgdirs import package_dir


# Environment variables the checks look at (and the only ones a capture records).
ENV_PREFIXES = ("HIP_", "HSA_", "ROCR_", "ROCM_", "CUDA_VISIBLE", "NCCL_", "RCCL_", "RAY_", "PYTORCH_",
                "GPU_ARCHS", "AMDGPU_TARGET", "NVTE_", "TORCH_", "VLLM_", "SGLANG_", "MIOPEN_",
                # the loader's own path: where a job's ROCm libraries come from when it names several ROCm trees
                "LD_LIBRARY_PATH")
PACKAGES = ("torch", "vllm", "sglang", "ray", "verl", "transformers", "triton", "pytorch-triton-rocm",
            "amdsmi", "pyamdgpuinfo", "rocmkit", "amd-aiter")

def valid_process(d) -> bool:
    """The shape the checks rely on (a hand-edited or foreign file is reported, not trusted)."""
    if not isinstance(d, dict):
        return False
    env, packages = d.get("env", {}), d.get("packages", {})
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return False
    if not (isinstance(packages, dict) and all(v is None or isinstance(v, str) for v in packages.values())):
        return False
    shm, memlock = d.get("shm_bytes"), d.get("memlock", {})
    if shm is not None and not isinstance(shm, int) or not isinstance(memlock, dict):
        return False
    if any(not (v is None or isinstance(v, int)) for v in memlock.values()):
        return False
    lists = ("ray_noset_vars", "sglang_vf_missing", "groups", "duplicate_distributions", "verl_car_off")
    if any(d.get(k) is not None and not isinstance(d.get(k), list) for k in lists):
        return False
    dicts = ("gpu_libraries", "docker", "ray_amd", "code_objects", "jit_caches", "rocm_sdk")
    if any(d.get(k) is not None and not isinstance(d.get(k), dict) for k in dicts):
        return False
    return all(d.get(k) is None or isinstance(d.get(k), str) for k in ("torch_hip", "sglang_dir"))


def collect_process(vf_host: bool = False) -> dict:
    """Facts of the running process; everything JSON-serialisable so a capture can carry them."""
    import resource
    import shutil

    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    try:
        shm = shutil.disk_usage("/dev/shm").total
    except OSError:
        shm = None
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = resource.RLIM_INFINITY
    return {
        "env": env,
        "shm_bytes": shm,
        "memlock": {"soft": None if soft == unlimited else soft, "hard": None if hard == unlimited else hard},
        "uid": os.getuid(),
        "groups": sorted(set(os.getgroups()) | {os.getgid()}),
        "packages": _packages(),
        "torch_hip": _torch_hip(),
        "ray_noset_vars": _ray_noset_vars(),
        "ray_amd": _ray_amd(),
        "sglang_dir": package_dir("sglang"),
        "sglang_vf_missing": _sglang_vf_missing() if vf_host else None,
        "gpu_libraries": _gpu_libraries(),
        "docker": _docker(),
        "duplicate_distributions": _duplicates(),
        "rocm_sdk": _rocm_sdk(),
        "verl_car_off": _verl_car_off(),
    }


def _rocm_sdk() -> dict | None:
    import sys

    from .rocm_sdk import read

    return read(sys.path)


def _verl_car_off() -> list[str] | None:
    """The rollout engines whose custom all-reduce verl's own rollout defaults turn off (the ROCm recipes' edit
    of verl/trainer/config/rollout/rollout.yaml); None without verl."""
    d = package_dir("verl")
    if not d:
        return None
    try:
        text = Path(d, "trainer", "config", "rollout", "rollout.yaml").read_text(errors="replace")
    except OSError:
        return None
    return verl_car_off(text)


def verl_car_off(rollout_yaml: str) -> list[str]:
    """`engine_kwargs:` → `  vllm:` → `    disable_custom_all_reduce: True`, read line by line (no YAML
    parser in the doctor's start-up)."""
    off, engine = [], None
    for line in rollout_yaml.splitlines():
        m = re.match(r"^  ([a-z_]+):", line)
        if m:
            engine = m.group(1)
        elif not line.startswith("    ") and line.strip() and not line.lstrip().startswith("#"):
            engine = None
        if engine and re.match(r"^    disable_custom_all_reduce:\s*(True|true)\s*$", line):
            off.append(engine)
    return off


def _duplicates() -> list[dict] | None:
    from .envaudit import duplicate_distributions

    try:
        return duplicate_distributions()
    except Exception:  # noqa: BLE001 - an odd environment is a missing fact, not a crash
        return None


def _docker() -> dict:
    from ...runtime.docker_engine import ping  # only a live run asks the engine; --root runs never import it

    return ping()


def _packages() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
        except Exception as exc:  # a broken install is a fact, not a crash
            out[name] = f"unreadable: {type(exc).__name__}"
    return out


def _sglang_vf_missing() -> list[str] | None:
    """VF-named SGLang configs that `rocmkit vf-configs` would create (dry run); None without SGLang."""
    from .. import vfconfigs

    d = package_dir("sglang")
    if not d:
        return None
    result = vfconfigs.replicate([(vfconfigs.FRAMEWORKS["sglang"], Path(d))], vfconfigs.pairs_for("sglang"),
                                 dry_run=True)
    return result.created


def _torch_hip() -> str | None:
    """torch.version.hip, read from torch/version.py without importing torch (which takes seconds)."""
    d = package_dir("torch")
    if not d:
        return None
    try:
        text = Path(d, "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"^hip\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else ""  # "" = torch present, built without HIP


def _ray_noset_vars() -> list[str] | None:
    """The RAY_EXPERIMENTAL_NOSET_* names the installed Ray's AMD accelerator module actually reads
    (Ray changed which one it reads without a clean version boundary — ray-project/ray#51104, #53757,
    radixark/miles#1233 — so the code is read rather than the version trusted)."""
    d = package_dir("ray")
    if not d:
        return None
    try:
        text = Path(d, "_private", "accelerators", "amd_gpu.py").read_text()
    except OSError:
        return None
    return sorted(set(re.findall(r"RAY_EXPERIMENTAL_NOSET_[A-Z_]+", text)))


def _ray_amd() -> dict | None:
    """How the installed Ray treats AMD GPUs, read from its code (it changed between releases without a
    clean version boundary): which library counts the GPUs — the `amdsmi` package (Ray 2.60's
    thirdparty/pyamdsmi shim) or $ROCM_PATH/lib/librocm_smi64.so (older ctypes bindings) — which exception
    guards its `import amdsmi`, and whether it refuses ROCR_VISIBLE_DEVICES: always (2.45, ray#51104) or
    only without HIP_VISIBLE_DEVICES (after ray#53757)."""
    d = package_dir("ray")
    return ray_amd_facts(Path(d)) if d else None


def ray_amd_facts(ray_dir: Path) -> dict:
    """_ray_amd() for the Ray package at ray_dir."""
    d = ray_dir
    out: dict = {"gpu_backend": None, "amdsmi_guard": None, "rocr_rule": None}
    try:
        smi = Path(d, "_private", "thirdparty", "pyamdsmi", "pyamdsmi.py").read_text(errors="replace")
    except OSError:
        smi = ""
    m = re.search(r"^[ \t]*(?:import amdsmi\b|from amdsmi import)", smi, re.M)
    if m:
        out["gpu_backend"] = "amdsmi"
        guard = re.search(r"^[ \t]*except\b[ \t]*([^:\n]*):", smi[m.end():m.end() + 1500], re.M)
        out["amdsmi_guard"] = guard.group(1).strip() if guard else None
    elif "librocm_smi64" in smi:
        out["gpu_backend"] = "rocm_smi"
    try:
        acc = Path(d, "_private", "accelerators", "amd_gpu.py").read_text(errors="replace")
    except OSError:
        acc = ""
    m = re.search(r"instead of ROCR_VISIBLE_DEVICES", acc)
    if m:
        before = acc[max(0, m.start() - 600):m.start()]
        out["rocr_rule"] = "without_hip" if re.search(r"HIP_VISIBLE_DEVICES\w*\s+not in os\.environ", before) \
            else "always"
    return out


def _gpu_libraries() -> dict[str, dict]:
    """pyamdgpuinfo and amdsmi when they import and work; any failure of theirs is recorded."""
    out: dict[str, dict] = {}
    for name, probe in (("pyamdgpuinfo", _probe_pyamdgpuinfo), ("amdsmi", _probe_amdsmi)):
        if package_dir(name) is None:
            out[name] = {"status": "absent"}
            continue
        printed: list[str] = []
        stage = {"stage": "import"}  # the probe moves it on; where it failed matters to Ray and vLLM
        try:
            with _silenced(printed):
                out[name] = {"status": "ok", **probe(stage)}
        except ModuleNotFoundError:
            out[name] = {"status": "absent"}
        except BaseException as exc:  # noqa: BLE001 - these libraries raise anything (KeyError, FileNotFoundError)
            if isinstance(exc, KeyboardInterrupt):
                raise
            # import_error: whether `except ImportError` (Ray's and vLLM's guard around `import amdsmi`)
            # would catch it; amdsmi 7.0.2 without libamd_smi.so raises KeyError instead.
            out[name] = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "stage": stage["stage"],
                         "import_error": isinstance(exc, ImportError)}
        if printed and printed[0].strip():
            out[name]["printed"] = printed[0].strip()[-500:]
    return out


@contextlib.contextmanager
def _silenced(printed: list[str]):
    """Run a GPU library with its prints caught: `import amdsmi` without ROCm prints to stdout, which would
    corrupt `--json`. Python-level output and C-level output (fd 1 and 2) are both caught, kept as evidence."""
    import sys
    import tempfile

    py = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        saved = []
        try:
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                    os.dup2(tmp.fileno(), fd)
                except OSError:  # no such fd (a daemonised caller): Python-level capture still applies
                    pass
            with contextlib.redirect_stdout(py), contextlib.redirect_stderr(py):
                yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            tmp.seek(0)
            printed.append(py.getvalue() + tmp.read(1 << 16).decode("utf-8", errors="replace"))


def _probe_pyamdgpuinfo(stage: dict) -> dict:
    import pyamdgpuinfo

    stage["stage"] = "use"
    return {"gpus": pyamdgpuinfo.detect_gpus()}


def _probe_amdsmi(stage: dict) -> dict:
    import amdsmi

    stage["stage"] = "use"
    amdsmi.amdsmi_init()
    try:
        return {"gpus": len(amdsmi.amdsmi_get_processor_handles())}
    finally:
        amdsmi.amdsmi_shut_down()


