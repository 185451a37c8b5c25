"""The doctor on every node at once: one `srun` step, one task per node, each task with its own deadline.

No task waits for another (no rendezvous, no barrier): a node whose doctor hangs is stopped by `timeout` on that
node at its deadline and reported as such; a node that never answers at all (slurmd stuck, node down) is
reported when this side's own deadline (the node's, plus a grace for srun) passes, and srun is stopped then,
by runtime/proc.py as rocmkit stops any process (SIGTERM, which srun passes to the step on the nodes, then
SIGKILL).
Results come back on srun's stdout, not through a shared folder (many clusters have none): each task prints its
doctor's JSON as a frame of short lines (gzip + base64, 76 columns, so no line is long enough for srun to split),
between markers that name the node, and `--label` keeps every task's lines apart.
"""

from __future__ import annotations

import base64
import gzip
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import NamedTuple

from ..errors import EnvironmentMissing, RocmkitError, UsageError
from ..runtime import proc
from . import nodedoc
from .nodes import compress

MARK = "@@rocmkit-fleet"
# What each task runs: the doctor under coreutils' timeout (SIGKILL 5 s after SIGTERM), then its output framed.
# $1 is the deadline in seconds; the rest is the doctor's command line.
TASK = r"""node=${SLURMD_NODENAME:-$(hostname -s)}
echo "@@rocmkit-fleet start $node"
deadline=$1; shift
out=$(mktemp) err=$(mktemp)
start=$SECONDS
timeout -k 5 "$deadline" "$@" >"$out" 2>"$err"; rc=$?
echo "@@rocmkit-fleet begin $node $rc $((SECONDS - start))"
gzip -c "$out" | base64 -w 76
echo "@@rocmkit-fleet stderr $node"
tail -c 4000 "$err" | base64 -w 76
echo "@@rocmkit-fleet end $node"
rm -f "$out" "$err"
"""


def grace_s(deadline_s: int) -> int:
    """How long past a node's own deadline this side waits for its answer (srun's start on a loaded cluster, the
    results' transfer): a quarter of the deadline, 10 to 30 s."""
    return min(30, max(10, deadline_s // 4))

STATES = ("answered", "deadline", "no answer", "not reached", "error", "crashed", "invalid", "unavailable")
NODELIST_ARG_MAX = 4000  # a compressed node list longer than this goes to srun in a file (--nodefile)
# srun's refusals that are the request's fault (exit 2); any other refusal is the environment's (exit 3)
_BAD_REQUEST = (re.compile(r"Invalid node name specified"), re.compile(r"Only allocated \d+ nodes? asked for \d+"),
                re.compile(r"Too many hosts in range"), re.compile(r"Hostlist is too long|Invalid --nodefile"),
                re.compile(r"Node count specification invalid"),
                re.compile(r"Requested node configuration is not available"),
                re.compile(r"Invalid partition name specified"), re.compile(r"unrecognized option|invalid option"))
_HINTS = (("Invalid node name", "check the names against `sinfo -N`; --nodes takes a Slurm host list (gpu-[01-16])"),
          ("Only allocated", "inside an allocation --nodes names only nodes of it (SLURM_JOB_NODELIST); leave "
                             "--nodes out to take the whole allocation"),
          ("Too many hosts", "name fewer nodes: Slurm reads at most 64k hosts in one range"),
          ("Hostlist is too long", "name fewer nodes, or ranges (gpu-[0001-2000]) that Slurm's host list keeps short"),
          ("nodes are busy", "the nodes run other jobs: run it inside the job's own allocation (salloc/sbatch), or "
                             "when they are free"),
          ("Invalid job id", "SLURM_JOB_ID names a job that has ended: leave that allocation's shell or unset "
                             "SLURM_JOB_ID"),
          ("waiting for resources", "the nodes run other jobs: run it inside the job's own allocation, or when they "
                                    "are free"))
_LABEL_RE = re.compile(r"^\s*(\d+): ?(.*)$")
# timeout(1)'s exit status when it stopped the command (124 after SIGTERM; 137 = 128 + SIGKILL after -k)
TIMEOUT_CODES = (124, 137)


class NodeResult(NamedTuple):
    """What one node gave back. state: answered (its doctor's document came back), deadline (its doctor ran past
    the deadline and was stopped there), no answer (its task did not answer by this side's deadline), not reached
    (srun ended without starting the node's task: `error` quotes srun), error (the doctor did not run or printed
    no document: `error` and `stderr` say why), crashed (the doctor died of a signal: `error` names it), invalid
    (its document breaks the schema the fleet reads: `error` says where), unavailable (Slurm says the node
    cannot run a job now, so it was not asked: `error` quotes Slurm's state and reason, slurm_state.py)."""

    node: str
    state: str  # one of STATES
    exit_code: int | None = None
    doc: dict | None = None
    seconds: float | None = None
    error: str | None = None
    stderr: str = ""
    around: str = ""  # what the doctor printed on stdout around its document (a banner): kept, never parsed
    slurm: tuple[str, bool] | None = None  # unavailable: Slurm's kind (drained, busy, …), whether it is to blame

    def to_json(self) -> dict:
        return {"node": self.node, "state": self.state, "exit_code": self.exit_code, "seconds": self.seconds,
                "error": self.error, "stderr": self.stderr or None, "stdout_around": self.around[-2000:] or None,
                "slurm": self.slurm[0] if self.slurm else None}


def srun_argv(nodes: list[str], command: list[str], deadline_s: int, *, in_allocation: bool,
              srun: str = "srun", extra: tuple[str, ...] = (), nodefile: str | None = None) -> list[str]:
    """One step over `nodes`, one task each. --kill-on-bad-exit=0: a node whose doctor fails must not stop the
    others; --overlap: inside a job whose other steps hold the CPUs, the step still starts; --time: Slurm's own
    backstop. Outside an allocation srun asks for one: --immediate turns nodes busy with other jobs into an
    error within the grace instead of a wait in the queue. The nodes go as Slurm's compressed host list, never
    expanded (n[1-100000] stays 12 characters); a list that stays long goes in `nodefile` (--nodefile)."""
    minutes = max(1, math.ceil((deadline_s + grace_s(deadline_s)) / 60))
    argv = [srun, f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodefile={nodefile}" if nodefile else f"--nodelist={compress(nodes)}", "--label",
            "--kill-on-bad-exit=0", "--overlap", f"--time={minutes}", "--job-name=rocmkit-fleet"]
    if not in_allocation:
        argv.append(f"--immediate={grace_s(deadline_s)}")
    return argv + list(extra) + ["bash", "-c", TASK, "rocmkit-fleet", str(deadline_s), *command]


def started(lines_by_task: dict[int, list[str]]) -> set[str]:
    """The nodes whose task began (its first line, before the doctor runs). Pure."""
    return {line.split()[2] for lines in lines_by_task.values() for line in lines
            if line.startswith(MARK + " start ") and len(line.split()) >= 3}


def refusal(messages: list[str], returncode: int | None) -> RocmkitError:
    """srun's refusal before any node's task began, quoting srun: a bad request (a node name Slurm does not know,
    more nodes than the allocation holds) is exit 2, anything else (nodes busy, no allocation, no controller)
    exit 3. Pure."""
    said = [m.strip() for m in messages if m.strip()]
    quoted = " / ".join(said[-4:])[-800:] or f"no message (exit {returncode})"
    message = f"srun refused the fleet's step before any node's task began, so no node was reached: {quoted}"
    hint = next((h for key, h in _HINTS if key in quoted), "srun's message says why; no node is blamed for it")
    if any(p.search(quoted) for p in _BAD_REQUEST):
        return UsageError(message, hint=hint)
    return EnvironmentMissing(message, hint=hint)


def parse_frames(lines_by_task: dict[int, list[str]], deadline_s: int | None = None) -> dict[str, NodeResult]:
    """The nodes whose frame came back whole, from each task's lines (srun's --label removed). Pure."""
    out: dict[str, NodeResult] = {}
    for lines in lines_by_task.values():
        node, part, chunks = None, None, {"out": [], "err": []}
        rc = seconds = None
        for line in lines:
            if line.startswith(MARK + " "):
                words = line.split()
                if len(words) >= 5 and words[1] == "begin" and words[3].isdigit():
                    node, rc, part = words[2], int(words[3]), "out"
                    seconds = float(words[4]) if words[4].isdigit() else None
                    chunks = {"out": [], "err": []}
                elif len(words) >= 2 and words[1] == "stderr" and node:
                    part = "err"
                elif len(words) >= 2 and words[1] == "end" and node:
                    out[node] = _result(node, rc, seconds, "".join(chunks["out"]), "".join(chunks["err"]),
                                        deadline_s)
                    node = part = None
            elif part:
                chunks[part].append(line.strip())
    return out


def _decode(b64: str, gz: bool) -> str:
    try:
        raw = base64.b64decode(b64)
        return (gzip.decompress(raw) if gz and raw else raw).decode("utf-8", "replace")
    except (ValueError, OSError, EOFError) as exc:
        return f"(undecodable: {exc})"


# what a doctor that cannot run the fleet's command says (click's usage error): its rocmkit predates an option
_TOO_OLD_RE = re.compile(r"No such option:? '?(--[\w-]+)|no such option:? '?(--[\w-]+)")


def _result(node: str, rc: int, seconds: float | None, out_b64: str, err_b64: str,
            deadline_s: int | None = None) -> NodeResult:
    """One node's frame read as untrusted input (nodedoc.py): a signal named, text around the document kept
    aside, the document checked against the schema the fleet reads."""
    stdout, stderr = _decode(out_b64, True), _decode(err_b64, False).strip()
    killed_early = rc == 137 and seconds is not None and deadline_s is not None and seconds < deadline_s - 1
    if rc in TIMEOUT_CODES and not killed_early:
        return NodeResult(node, "deadline", rc, None, seconds, "its doctor ran past the deadline and was stopped",
                          stderr)
    sig = nodedoc.signal_of(rc)
    if sig:
        if sig in ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP"):  # sent to it, not its own fault: say who might have
            why = (f"rocmkit was killed on {node} ({sig}) before its deadline" + (": the out-of-memory killer, or a "
                   "person" if sig == "SIGKILL" else ": by a person, the node's shutdown or another job's cleanup"))
        else:
            why = f"rocmkit crashed on {node} ({sig})"
        return NodeResult(node, "crashed", rc, None, seconds, why, stderr, stdout.strip()[-2000:])
    doc, around = nodedoc.extract(stdout)
    if doc is None:
        last = stderr.splitlines()[-1] if stderr else ("no output" if not stdout.strip() else
                                                       f"stdout: {stdout.strip().splitlines()[-1][:200]}")
        if rc == 127:
            why = f"rocmkit is not installed on {node} (exit 127, command not found): {last}"
        elif (m := _TOO_OLD_RE.search(stderr)):
            why = f"{node}'s rocmkit is too old for the fleet's command: it does not know {m.group(1) or m.group(2)}"
        else:
            why = f"the doctor printed no report (exit {rc}): {last}"
        return NodeResult(node, "error", rc, None, seconds, why, stderr, stdout.strip()[-2000:])
    problems = nodedoc.validate(doc)
    if problems:
        return NodeResult(node, "invalid", rc, None, seconds,
                          f"{node}'s doctor document is malformed: {nodedoc.problem_text(problems)}", stderr, around)
    return NodeResult(node, "answered", rc, doc, seconds, None, stderr, around)


def fan_out(nodes: list[str], command: list[str], deadline_s: int, *, in_allocation: bool,
            srun_extra: tuple[str, ...] = (), say: Callable[[str], None] = lambda m: None) -> list[NodeResult]:
    """Run `command` on every node through srun; one NodeResult per node, in the order of `nodes`, by
    deadline_s + grace_s(deadline_s) at the latest. srun refusing the step before any node's task began (a node
    name it does not know, nodes busy, no allocation) raises refusal()'s error instead: no node is blamed."""
    srun = shutil.which("srun")
    if not srun:
        raise EnvironmentMissing("srun is not on PATH: the fleet doctor runs through Slurm",
                                 hint="run it on a Slurm login node, or inside salloc/sbatch")
    with tempfile.TemporaryDirectory(prefix="rocmkit-fleet-") as tmp:
        nodefile = None
        if len(compress(nodes)) > NODELIST_ARG_MAX:
            nodefile = os.path.join(tmp, "nodes")
            with open(nodefile, "w", encoding="utf-8") as f:
                f.write("".join(f"{n}\n" for n in nodes))
        argv = srun_argv(nodes, command, deadline_s, in_allocation=in_allocation, srun=srun, extra=srun_extra,
                         nodefile=nodefile)
        return _collect(argv, nodes, deadline_s, say)


def _collect(argv: list[str], nodes: list[str], deadline_s: int, say: Callable[[str], None]) -> list[NodeResult]:
    limit = deadline_s + grace_s(deadline_s)
    by_task: dict[int, list[str]] = {}
    srun_errors: list[str] = []
    start = time.monotonic()

    def line(stream: str, text: str) -> None:
        if stream == "stderr":
            srun_errors.append(text)
            return
        m = _LABEL_RE.match(text)
        if m:
            by_task.setdefault(int(m.group(1)), []).append(m.group(2))
            if m.group(2).startswith(MARK + " end "):
                say(f"{m.group(2).split()[-1]} reported after {time.monotonic() - start:.0f} s")

    # proc stops srun at the deadline as at a signal: SIGTERM (srun cancels the step on the nodes), SIGKILL 10 s on
    ran = proc.run(argv, timeout=limit, on_stream_line=line, what="srun")
    stopped = ran.timed_out
    if stopped:
        say(f"{limit} s passed: srun was stopped; the nodes that did not answer are reported as such")
    got, began = parse_frames(by_task, deadline_s), started(by_task)
    said = [e for e in srun_errors if "error" in e.lower() or "waiting" in e.lower()]
    if not got and not began and (not stopped and ran.returncode != 0
                                  or stopped and any(w in " ".join(said) for w in ("waiting", "retrying"))):
        raise refusal(said if not stopped else said + [f"(no node's task began within {limit} s)"],
                      ran.returncode)
    # srun's own errors say why a node never answered (a node down), unless they are the echo of this side
    # stopping it
    why = "" if stopped else "; ".join(e.strip() for e in said)[-600:]
    results = []
    for node in nodes:
        if node in got:
            results.append(got[node])
        elif stopped:
            results.append(NodeResult(node, "no answer", None, None, None,
                                      ("its task began, and " if node in began else "")
                                      + f"nothing came back within {limit} s"))
        elif node in began:
            results.append(NodeResult(node, "no answer", None, None, None,
                                      f"its task began, and srun ended (exit {ran.returncode}) before its answer"
                                      + (f": {why}" if why else "")))
        else:
            results.append(NodeResult(node, "not reached", None, None, None,
                                      f"srun ended (exit {ran.returncode}) without starting its task"
                                      + (f": {why}" if why else "")))
    return results

