"""`rocmkit doctor --fleet` / `--nodes LIST`: the options (added to the doctor command by one decorator, their
values kept in click's ctx.meta so the doctor's own signature stays as it is) and the run: nodes chosen, the
per-node command built, srun fanned out, the fleet assessed, the report written, the exit code returned."""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import click

from ..buildid import identity
from ..errors import RocmkitError, UsageError
from ..output import dumps

META = "rocmkit.fleet"
DEADLINE_S = {1: 120, 2: 900}  # a node's deadline by level: level 1 takes seconds, level 2's probes minutes
SAID_MAX = 20  # the nodes Slurm holds back named one a line on stderr while the fleet runs


def _keep(ctx: click.Context, param: click.Parameter, value):
    ctx.meta.setdefault(META, {})[param.name] = value
    return value


def fleet_options(f):
    """The fleet's own options on `rocmkit doctor`."""
    opts = [
        click.option("--fleet", is_flag=True, expose_value=False, callback=_keep,
                     help="Run the doctor on every node of this Slurm allocation at once (inside salloc or sbatch: "
                          "SLURM_JOB_NODELIST), through one srun step with a task per node and a deadline per node; "
                          "compare the nodes with each other (kernel, driver, firmware, ROCm, Python stack, RCCL/ROCm "
                          "variables, RDMA ports, the rocmkit each runs; --level 2 figures against the fleet median) "
                          "and write a report folder (--out): fleet.json, fleet.html, passing_nodes.txt, "
                          "failing_nodes.txt, exclude.txt (for --exclude=$(cat exclude.txt)). Nodes Slurm says cannot "
                          "run now (drained, down, reserved, busy) are named with Slurm's reason and not asked. "
                          "Takes --level, --json, --strict, --arch, --only, --image (docker, or apptainer for a "
                          ".sif), --baseline (a saved fleet.json or doctor run) and --tolerance (default 0.05 here)."),
        click.option("--nodes", "fleet_nodes", default=None, metavar="LIST", expose_value=False, callback=_keep,
                     help="With --fleet (implied): these nodes, as a Slurm host list (gpu-[01-16]); outside an "
                          "allocation srun asks for one on them."),
        click.option("--node-timeout", "node_timeout", type=click.IntRange(min=5), default=None, metavar="SECONDS",
                     expose_value=False, callback=_keep,
                     help="With --fleet: a node's deadline; its doctor is stopped there and the node reported "
                          "(default 120 s at level 1, 900 s at level 2)."),
        click.option("--out", "fleet_out", type=click.Path(file_okay=False), default=None, metavar="DIR",
                     expose_value=False, callback=_keep,
                     help="With --fleet: the report folder (default rocmkit-fleet-<job id or time>); an existing "
                          "one is replaced only if it holds a fleet report."),
        click.option("--min-nodes", "min_nodes", type=click.IntRange(min=1), default=None, metavar="N",
                     expose_value=False, callback=_keep,
                     help="With --fleet: exit 0 when at least N nodes pass (the others go to failing_nodes.txt and "
                          "the --exclude line), instead of failing when any node fails."),
        click.option("--srun-arg", "srun_args", multiple=True, metavar="ARG", expose_value=False, callback=_keep,
                     help="With --fleet: an extra srun option (repeatable), e.g. --srun-arg=--partition=mi300x."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def wanted(ctx: click.Context) -> bool:
    meta = ctx.meta.get(META, {})
    return bool(meta.get("fleet")) or meta.get("fleet_nodes") is not None  # --nodes '' is a usage error, not no fleet


def node_command(*, level: int, arch: str | None, only: str | None, image: str | None,
                 code_objects: bool = False) -> list[str]:
    """What srun runs on each node: the doctor with --json and the RDMA preflight, on the node's software or in
    IMAGE (docker run with the ROCm devices and the kernel log, as `rocmkit slurm --preflight`; apptainer exec
    --rocm for a .sif)."""
    cmd = ["rocmkit", "doctor", "--json", "--multi-node", "--level", str(level)]
    cmd += (["--arch", arch] if arch else []) + (["--only", only] if only else [])
    cmd += ["--code-objects"] if code_objects else []
    if not image:
        return cmd
    if image.endswith(".sif"):
        return ["apptainer", "exec", "--rocm", image, *cmd]
    from ..cluster.slurm import PREFLIGHT_DOCKER_FLAGS
    from ..host.facts.process import ENV_PREFIXES
    from ..runtime.container import rocm_device_args

    env = [f"--env={k}" for k in sorted(os.environ) if k.startswith(ENV_PREFIXES)]  # srun carries the values
    return ["docker", "run", "--rm", *PREFLIGHT_DOCKER_FLAGS, *rocm_device_args(), *env, image, *cmd]


def _nodes(meta: dict) -> tuple[list[str], bool]:
    from .nodes import expand

    in_allocation = bool(os.environ.get("SLURM_JOB_ID"))
    given = meta.get("fleet_nodes")
    if given is not None:
        if not given.strip():
            raise UsageError("--nodes is empty", hint="name the nodes as a Slurm host list (--nodes gpu-[01-04]), "
                                                      "or give --fleet alone inside an allocation")
        return expand(given), in_allocation
    listed = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST")
    if not listed:
        raise UsageError("--fleet runs over a Slurm allocation, and this shell is in none (no SLURM_JOB_NODELIST)",
                         hint="run it inside `salloc -N 4` or an sbatch script, or name the nodes: "
                              "--nodes gpu-[01-04]")
    return expand(listed), in_allocation


def _out_dir(meta: dict) -> Path | None:
    """--out, checked before any node is asked; None for the default, made when the report is written."""
    if not meta.get("fleet_out"):
        return None
    out = Path(meta["fleet_out"])
    if out.exists() and any(out.iterdir()) and not (out / "fleet.json").is_file():
        raise UsageError(f"--out {out}: the folder holds other files and no fleet report",
                         hint="give a new or empty folder")
    return out


def new_out_dir(where: Path = Path(".")) -> Path:
    """The default report folder, rocmkit-fleet-<job id or UTC time>, made here and now (mkdir, which only one
    run can win): a second run in the same job or the same second gets -2, -3, …"""
    stem = f"rocmkit-fleet-{os.environ.get('SLURM_JOB_ID') or time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    for i in range(1, 1000):
        out = where / (stem if i == 1 else f"{stem}-{i}")
        try:
            out.mkdir()
            return out
        except FileExistsError:
            continue
    raise UsageError(f"{where / stem}: 999 report folders of that name already exist", hint="give --out DIR")


def _baseline(path: str | None) -> dict | None:
    if not path:
        return None
    from ..host.doctor import load_run

    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as exc:
        raise UsageError(f"--baseline {path}: {exc}") from None
    if isinstance(doc, dict) and doc.get("schema") == "rocmkit.fleet/v1":
        return doc
    return load_run(path)  # a saved doctor run (one good node), or a usage error naming the file


def asked(nodes: list[str], command: list[str], deadline: int, *, in_allocation: bool, srun_extra: tuple[str, ...],
          say) -> tuple[list, str | None]:
    """Every node's result, in the order of `nodes`: those Slurm says cannot run a job now (drained, down, busy,
    …: slurm_state.py) reported with Slurm's word and not asked; the others through one srun step. srun
    refusing the step for want of resources (busy, waiting) names the nodes and the jobs that hold them.
    Also why Slurm's states could not be read (None when they were)."""
    from . import slurm_state
    from .run import NodeResult, fan_out

    states, states_error = slurm_state.read(nodes)
    if states_error:
        say(f"Slurm's node states not read ({states_error}): srun decides which nodes run")
    reservation = any(a.startswith("--reservation") for a in srun_extra)
    off = {}
    for n in nodes:
        u = slurm_state.verdict(states[n], in_allocation=in_allocation, reservation=reservation) \
            if n in states else None
        if u:
            off[n] = NodeResult(n, "unavailable", error=u.text, slurm=(u.kind, u.blames))
            if len(off) <= SAID_MAX:  # a thousand drained nodes are in the report, not a thousand lines here
                say(u.text)
    if len(off) > SAID_MAX:
        say(f"and {len(off) - SAID_MAX} more node(s) Slurm lets no job run on now: the report names each")
    runnable = [n for n in nodes if n not in off]
    got: dict[str, NodeResult] = {}
    if runnable:
        say(f"the doctor on {len(runnable)} node(s) through srun, {deadline} s a node: {shlex.join(command)}")
        try:
            got = {r.node: r for r in fan_out(runnable, command, deadline, in_allocation=in_allocation,
                                              srun_extra=srun_extra, say=say)}
        except RocmkitError as exc:
            busy = slurm_state.busy_text(runnable, slurm_state.read(runnable)[0]) \
                if exc.exit_code == 3 and any(w in exc.message for w in ("busy", "waiting")) else ""
            if busy:
                exc.message += f". The nodes held by other jobs: {busy}"
            if off:  # Slurm's word about the others is said even so
                exc.message += ". Not asked: " + "; ".join(r.error for r in off.values())
            raise
    return [off.get(n) or got[n] for n in nodes], states_error


def run(ctx: click.Context, *, level: int, as_json: bool, strict: bool, arch: str | None, only: str | None,
        image: str | None, baseline_file: str | None, tolerance: float, code_objects: bool,
        incompatible: dict[str, bool]) -> int:
    """The fleet run; returns the exit code."""
    from . import compare, report

    given = [name for name, on in incompatible.items() if on]
    if given:
        raise UsageError(f"--fleet runs the doctor on the nodes; it takes no {', '.join(given)}")
    meta = ctx.meta.get(META, {})
    if ctx.get_parameter_source("tolerance") is click.core.ParameterSource.DEFAULT:
        tolerance = compare.TOLERANCE
    if arch:
        from .. import archs

        archs.parse_targets(arch)
    if only:
        from ..host.selection import parse_only

        parse_only(only, level=level)  # a typo is refused here, before any node is asked
    nodes, in_allocation = _nodes(meta)
    min_nodes = meta.get("min_nodes")
    if min_nodes is not None and min_nodes > len(nodes):
        raise UsageError(f"--min-nodes {min_nodes}: the fleet has only {len(nodes)} node(s), so it could never pass",
                         hint=f"give --min-nodes 1 to {len(nodes)}, or more nodes")
    base = _baseline(baseline_file)
    out_dir = _out_dir(meta)
    deadline = meta.get("node_timeout") or DEADLINE_S[level]
    try:
        srun_extra = tuple(a for arg in meta.get("srun_args") or () for a in shlex.split(arg))
    except ValueError as exc:
        raise UsageError(f"--srun-arg: {exc}") from None
    command = node_command(level=level, arch=arch, only=only, image=image, code_objects=code_objects)

    def say(message: str) -> None:
        click.echo(f"fleet: {message}", err=True)

    results, states_error = asked(nodes, command, deadline, in_allocation=in_allocation, srun_extra=srun_extra,
                                  say=say)
    doc = report.assess(results, level=level, strict=strict, tolerance=tolerance, deadline_s=deadline,
                        min_nodes=min_nodes, base=base, command=command,
                        extra={"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "job_id": os.environ.get("SLURM_JOB_ID"),
                               "baseline": baseline_file, "rocmkit": identity(),
                               "slurm_states": states_error or "read"})
    out_dir = out_dir or new_out_dir()
    report.write_outputs(doc, out_dir)
    if as_json:
        click.echo(dumps(doc), nl=False)
    else:
        click.echo(report.text(doc, out_dir), nl=False)
    return doc["exit_code"]
