"""Pure checks: Facts (+ context) → Findings. One module per area; each lists its checks in CHECKS.

A check never raises for odd facts: if one does (a bug), run_checks turns it into a failing finding naming
the check, so one broken rule cannot hide the rest of the report.
"""

from __future__ import annotations

from typing import Callable, Iterable, NamedTuple

from ...archs import CPU
from ..facts import PROCESS_FILE, Facts
from ..model import Finding, Status


# The area of run_checks' own finding when a check crashes (doctor.internal.<check>); every check declares its
# ids with @documents.
INTERNAL_AREA = "doctor"


class Context(NamedTuple):
    """What the user or the image says the environment should be."""

    arch: str | None = None  # --arch, or the targets of the image's manifest
    multi_node: bool = False  # --multi-node: the RDMA preflight runs
    pod_gpus: int | None = None  # --pod-gpus: in a Kubernetes pod that requested this many GPUs (checks/pod.py)

    @property
    def cpu(self) -> bool:
        """A CPU target (a CPU stack's image, or --arch cpu): nothing that only a GPU host needs is judged."""
        return self.arch == CPU


# Findings that matter only where GPUs are meant to be used; on a CPU target a warning or failure of one
# becomes a skip that says so.
GPU_ONLY = ("gpu", "rocm", "numa", "kernel.iommu", "kernel.pci_realloc", "kernel.pci_bfsort", "env.ray_noset",
            "env.ray_rocr", "env.ipc_legacy", "env.arch", "env.hsa_override_gfx_version", "env.hip_force_dev_kernarg",
            "env.hsa_no_scratch_reclaim", "env.nccl_min_nchannels", "software.vllm_amdsmi", "software.amdsmi",
            "software.pyamdgpuinfo", "software.ray_gpus", "software.vf_configs", "probe", "pcie.acs",
            "software.amd_smi_copies", "software.aotriton_gfx950", "env.expandable_segments", "env.ray_visible_both")


def for_cpu_target(f: Finding) -> Finding:
    if f.status in (Status.FAIL, Status.WARN) and selected(f, set(GPU_ONLY)):
        return Finding(id=f.id, area=f.area, status=Status.SKIP, title=f"not judged for a CPU target: {f.title}",
                       evidence=f.evidence)
    return f


Check = Callable[[Facts, Context], Iterable[Finding]]


def documents(*ids: str, what: str) -> Callable[[Check], Check]:
    """Declare the finding ids a check produces (`env.arch.*` for a family) and, in one line, what it checks:
    the README's table of checks is made from these, and a test holds every produced id to them."""

    def attach(check: Check) -> Check:
        check.ids, check.what = ids, what  # type: ignore[attr-defined]
        return check

    return attach


def declared(check: Check, finding_id: str) -> bool:
    return any(finding_id == i or (i.endswith(".*") and finding_id.startswith(i[:-1]))
               for i in getattr(check, "ids", ()))


# Modules whose findings lead the report, in this order; any other module of this package that defines
# CHECKS (another issue's check, e.g. vfconfigs) joins after them, by name, without an edit here.
FIRST = ("gpu", "system", "env", "software")


def all_checks() -> list[Check]:
    import importlib
    import os

    # The package's modules, from its folder's .py files (it holds nothing else): pkgutil.iter_modules lists the
    # same, at the cost of importing pkgutil on every doctor run.
    names = sorted((n[:-3] for n in os.listdir(__path__[0]) if n.endswith(".py") and n != "__init__.py"),
                   key=lambda n: (FIRST.index(n) if n in FIRST else len(FIRST), n))
    checks: list[Check] = []
    for name in names:
        checks += getattr(importlib.import_module(f"{__name__}.{name}"), "CHECKS", [])
    return checks


# The checks of GPUs themselves, by the first part of their ids: on a host where no GPU is seen they find nothing to
# judge, and the report lists each as skipped with why, rather than leave it out (a short report reads as a clean one)
PER_GPU = ("gpu", "numa", "pcie")


def no_gpu_reason(facts: Facts) -> str | None:
    """Why no AMD GPU is seen here, or None where one is."""
    if facts.devices:
        return None
    if not facts.topology_found:
        return "no AMD GPU seen (no KFD topology: amdgpu not loaded, or no GPU here)"
    return "no AMD GPU in the KFD topology"


def run_checks(facts: Facts, ctx: Context, only: set[str] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    no_gpu = no_gpu_reason(facts)
    for check in all_checks():
        try:
            produced = list(check(facts, ctx))
        except Exception as exc:  # noqa: BLE001 - a bug in one rule must not hide the others
            produced = [Finding(id=f"{INTERNAL_AREA}.internal.{check.__name__}", area=INTERNAL_AREA,
                                status=Status.FAIL,
                                title=f"check {check.__name__} crashed: {type(exc).__name__}: {exc}",
                                fix="report this as a rocmkit bug with `rocmkit doctor --capture DIR`")]
        ids = getattr(check, "ids", ())
        if not produced and no_gpu and ids and ids[0].split(".")[0] in PER_GPU:
            what = getattr(check, "what", check.__name__)
            produced = [finding(ids[0], ids[0].split(".")[0], Status.SKIP, f"not run: {no_gpu}; it checks "
                                f"{what.split(' (')[0].split(': ')[0]}", checks=list(ids), what=what, not_run=True)]
        findings.extend(for_cpu_target(f) if ctx.cpu else f for f in produced if selected(f, only))
    return findings


def selected(f: Finding, only: set[str] | None) -> bool:
    """--only: an id matches itself and its dotted children ("env" → "env.ray_noset", not "envx")."""
    return only is None or any(f.id == o or f.id.startswith(o + ".") for o in only)


def not_captured(id: str, area: str, what: str) -> Finding:
    """The skip of a check whose facts belong to a running process, on a tree captured without them."""
    return finding(id, area, Status.SKIP, f"{what}: not in the captured tree (it has no {PROCESS_FILE})")


def finding(id: str, area: str, status: Status, title: str, *, fix: str | None = None, ref: str | None = None,
            **evidence) -> Finding:
    return Finding(id=id, area=area, status=status, title=title, evidence=evidence, fix=fix, reference=ref)
