"""Fleets for the fleet doctor's tests and the clusters guide's screenshots: each node's doctor document made by
the real doctor from a generated host tree (treegen), its level-2 figures judged from the probe documents
recorded on lent GPUs (tests/data/probes), a node's figures scaled down the way a slow GPU shows.

Test support, not part of rocmkit (tests import it as `fleetgen`)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from rocmkit.fleet.run import NodeResult
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect, kernlog
from rocmkit.host.probes import run as probes
from rocmkit.host.report import doctor_document
from treegen import HEALTHY_KMSG, HostSpec, format_records, healthy_ports, healthy_process, write_tree

PROBES = Path(__file__).parent / "data" / "probes"
GPUS = 2  # two GPUs a node: what the comparisons need, a quarter of the tree to write
FAULT = "amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed"


def node_spec(*, torch: str | None = None, fault: bool = False, fw: tuple[int, ...] = (), env: dict | None = None,
              ports: int = 2) -> HostSpec:
    """A healthy MI300X node with two ACTIVE RoCE ports; torch another version, a GPU reset failure in its kernel
    log, GPU firmware per GPU, more environment, or fewer ports, as asked."""
    process = healthy_process()
    process["env"] = {**process["env"], **(env or {})}
    if torch:
        process["packages"] = {**process["packages"], "torch": torch}
    healthy = [(r.level, r.message) for r in kernlog.parse(HEALTHY_KMSG)]
    kmsg = format_records([*healthy, (3, FAULT)]) if fault else HEALTHY_KMSG
    return HostSpec(gpus=GPUS, rdma=healthy_ports(ports), kmsg=kmsg, process=process, fw_versions=fw)


def probe_findings(scale: float = 1.0, gpu: int = 1) -> list[dict]:
    """The level-2 findings of the two H200s recorded in h200-x2.json, GPU `gpu`'s figures times `scale`."""
    doc = copy.deepcopy(json.loads((PROBES / "h200-x2.json").read_text()))
    for fig in doc["gpus"][gpu]["figures"].values():
        for field in ("value", "min", "max"):
            fig[field] *= scale
        fig["samples"] = [s * scale for s in fig["samples"]]
    return [f.to_json() for f in probes.findings_for(doc)]


def node_doc(tree: Path) -> dict:
    """The doctor's document of a tree (level 1, --multi-node), as `rocmkit doctor --json --multi-node` makes it."""
    facts = collect(str(tree), rdma=True)
    return doctor_document(run_checks(facts, Context(multi_node=True)), facts, level=1, strict=False)


_LEVEL1: dict[str, dict] = {}  # repr(spec) → its level-1 document: a tree takes a second to write on a busy CI


def fleet(tmp: Path, specs: dict[str, HostSpec], figures: dict[str, list[dict]] | None = None) -> list[NodeResult]:
    """NodeResults as srun would bring them back, one per node of `specs` (nodes of one spec share its tree)."""
    out = []
    for node, spec in specs.items():
        key = repr(spec)
        if key not in _LEVEL1:
            _LEVEL1[key] = node_doc(write_tree(tmp / f"tree{len(_LEVEL1)}", spec))
        doc = copy.deepcopy(_LEVEL1[key])
        extra = (figures or {}).get(node)
        if extra:
            found = doc["findings"] + extra
            doc.update(level=2, findings=found, summary={s: sum(f["status"] == s for f in found)
                                                          for s in ("pass", "warn", "fail", "skip")},
                       exit_code=int(any(f["status"] == "fail" for f in found)))
        out.append(NodeResult(node, "answered", doc["exit_code"], doc, 0.4))
    return out


def demo_fleet(tmp: Path) -> list[NodeResult]:
    """The clusters guide's fleet: four nodes at level 2; gpu-03 with a failed GPU reset in its kernel log,
    gpu-04 with another torch and its GPU 1 at 88 % of the others' figures."""
    specs = {"gpu-01": node_spec(), "gpu-02": node_spec(), "gpu-03": node_spec(fault=True),
             "gpu-04": node_spec(torch="2.8.0+rocm6.4")}
    figures = {n: probe_findings(0.88 if n == "gpu-04" else 1.0) for n in specs}
    return fleet(tmp, specs, figures)


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Debian's chromium, headless, with nothing fetched or kept (a throwaway profile)."""
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([shutil.which("chromium") or "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                               "--disable-background-networking", "--disable-component-update", "--disable-sync",
                               "--no-first-run", f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


def mismatch_fleet(tmp: Path) -> list[NodeResult]:
    """Two nodes that disagree on RCCL's variables: n2 sets NCCL_IB_HCA and NCCL_SOCKET_IFNAME, n1 neither. With
    no majority the fleet fails as a whole."""
    return fleet(tmp, {"n1": node_spec(), "n2": node_spec(env={"NCCL_IB_HCA": "mlx5_9", "NCCL_SOCKET_IFNAME": "eth1"})})


# The guide's rocmkit builds, fixed so that its examples do not change with every commit
GUIDE_ROCMKIT = {"version": "0.1.0", "build": "py-sha256:3f9c2a71b0de", "source": None}
OLDER_ROCMKIT = {"version": "0.0.9", "build": "py-sha256:5e1d0c7a9b42", "source": None}


def slurm_fleet(tmp: Path) -> list[NodeResult]:
    """Four nodes: gpu-03 runs an older rocmkit (0.0.9), gpu-04 is drained in Slurm (so it is not asked)."""
    out = fleet(tmp, {f"gpu-0{i}": node_spec() for i in range(1, 4)})
    for r in out:
        r.doc["rocmkit"] = dict(OLDER_ROCMKIT if r.node == "gpu-03" else GUIDE_ROCMKIT)
    return out + [NodeResult("gpu-04", "unavailable", error="gpu-04 is drained in Slurm (Slurm's reason: GPU 3 ECC "
                             "errors, set by root at 2026-12-06T22:14:05): Slurm's state IDLE+DRAIN",
                             slurm=("drained", True))]


def pages(tmp: Path) -> dict[str, tuple[dict, Path]]:
    """The guide's pages, each its document and its fleet.html: the level-2 example, the two-node mismatch, and
    Slurm's drained node beside a node with another rocmkit."""
    from rocmkit.fleet.report import assess, write_outputs

    demo, mismatch = demo_fleet(tmp), mismatch_fleet(tmp)
    for r in demo + mismatch:
        r.doc["rocmkit"] = dict(GUIDE_ROCMKIT)
    own = {"rocmkit": GUIDE_ROCMKIT}
    docs = {"fleet-report": assess(demo, level=2, strict=False, tolerance=0.05, deadline_s=900, extra=own),
            "fleet-mismatch": assess(mismatch, level=1, strict=False, tolerance=0.05, deadline_s=120, extra=own),
            "fleet-slurm": assess(slurm_fleet(tmp), level=1, strict=False, tolerance=0.05, deadline_s=120,
                                  extra=own)}
    out = {}
    for name, doc in docs.items():
        doc["created"] = "2026-11-28T01:30:00Z"
        write_outputs(doc, tmp / name)
        out[name] = (doc, tmp / name / "fleet.html")
    return out


WIDTHS = (800, 1300)  # a laptop's half screen and a full one: the page must read at both
SHOT_HEIGHT = 1000


if __name__ == "__main__":  # python tests/fleetgen.py docs/guides/img: the guide's screenshots, each page at each width
    import sys

    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        for name, (_, page) in pages(Path(tmp)).items():
            for width in WIDTHS:
                shot = Path(tmp) / f"{name}-{width}.png"
                r = chromium(f"--screenshot={shot}", f"--window-size={width},{SHOT_HEIGHT}",
                             "--force-device-scale-factor=1", page.as_uri())
                if r.returncode:
                    sys.exit(r.stderr)
                # 64 colours: a fifth of the bytes, the same page to a reader
                Image.open(shot).convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(
                    Path(sys.argv[1]) / shot.name, optimize=True)
