"""The doctor on every node at once: one `srun` step, one task per node, each task with its own deadline.

No task waits for another (no rendezvous, no barrier): a node whose doctor hangs is stopped by `timeout` on that
node at its deadline and reported as such; a node that never answers at all (slurmd stuck, node down) is
reported when this side's own deadline (the node's, plus a grace for srun) passes, and srun is stopped then.
Results come back on srun's stdout, not through a shared folder (many clusters have none): each task prints its
doctor's JSON as a frame of short lines (gzip + base64, 76 columns, so no line is long enough for srun to split),
between markers that name the node, and `--label` keeps every task's lines apart.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from ..errors import EnvironmentMissing

MARK = "@@rocmkit-fleet"
# What each task runs: the doctor under coreutils' timeout (SIGKILL 5 s after SIGTERM), then its output framed.
# $1 is the deadline in seconds; the rest is the doctor's command line.
TASK = r"""node=${SLURMD_NODENAME:-$(hostname -s)}
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

STATES = ("answered", "deadline", "no answer", "error")
_LABEL_RE = re.compile(r"^\s*(\d+): ?(.*)$")
# timeout(1)'s exit status when it stopped the command (124 after SIGTERM; 137 = 128 + SIGKILL after -k)
TIMEOUT_CODES = (124, 137)


class NodeResult(NamedTuple):
    """What one node gave back. state: answered (its doctor's document came back), deadline (its doctor ran past
    the deadline and was stopped there), no answer (nothing came back from the node by this side's deadline),
    error (the doctor did not run or printed no document: `error` and `stderr` say why)."""

    node: str
    state: str
    exit_code: int | None = None
    doc: dict | None = None
    seconds: float | None = None
    error: str | None = None
    stderr: str = ""

    def to_json(self) -> dict:
        return {"node": self.node, "state": self.state, "exit_code": self.exit_code, "seconds": self.seconds,
                "error": self.error, "stderr": self.stderr or None}


def srun_argv(nodes: list[str], command: list[str], deadline_s: int, *, in_allocation: bool,
              srun: str = "srun", extra: tuple[str, ...] = ()) -> list[str]:
    """One step over `nodes`, one task each. --kill-on-bad-exit=0: a node whose doctor fails must not stop the
    others; --overlap: inside a job whose other steps hold the CPUs, the step still starts; --time: Slurm's own
    backstop. Outside an allocation srun asks for one: --immediate turns nodes busy with other jobs into an
    error within the grace instead of a wait in the queue."""
    minutes = max(1, math.ceil((deadline_s + grace_s(deadline_s)) / 60))
    argv = [srun, f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", "--label", "--kill-on-bad-exit=0", "--overlap", f"--time={minutes}",
            "--job-name=rocmkit-fleet"]
    if not in_allocation:
        argv.append(f"--immediate={grace_s(deadline_s)}")
    return argv + list(extra) + ["bash", "-c", TASK, "rocmkit-fleet", str(deadline_s), *command]


def parse_frames(lines_by_task: dict[int, list[str]]) -> dict[str, NodeResult]:
    """The nodes whose frame came back whole, from each task's lines (srun's --label removed). Pure."""
    out: dict[str, NodeResult] = {}
    for lines in lines_by_task.values():
        node, part, chunks = None, None, {"out": [], "err": []}
        rc = seconds = None
        for line in lines:
            if line.startswith(MARK + " "):
                words = line.split()
                if words[1] == "begin" and len(words) >= 5 and words[3].isdigit():
                    node, rc, part = words[2], int(words[3]), "out"
                    seconds = float(words[4]) if words[4].isdigit() else None
                    chunks = {"out": [], "err": []}
                elif words[1] == "stderr" and node:
                    part = "err"
                elif words[1] == "end" and node:
                    out[node] = _result(node, rc, seconds, "".join(chunks["out"]), "".join(chunks["err"]))
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


def _result(node: str, rc: int, seconds: float | None, out_b64: str, err_b64: str) -> NodeResult:
    stdout, stderr = _decode(out_b64, True), _decode(err_b64, False).strip()
    if rc in TIMEOUT_CODES:
        return NodeResult(node, "deadline", rc, None, seconds, "its doctor ran past the deadline and was stopped",
                          stderr)
    try:
        doc = json.loads(stdout)
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("rocmkit.doctor/"):
        last = stderr.splitlines()[-1] if stderr else "no output"
        return NodeResult(node, "error", rc, None, seconds, f"the doctor printed no report (exit {rc}): {last}",
                          stderr)
    return NodeResult(node, "answered", rc, doc, seconds, None, stderr)


def fan_out(nodes: list[str], command: list[str], deadline_s: int, *, in_allocation: bool,
            srun_extra: tuple[str, ...] = (), say: Callable[[str], None] = lambda m: None) -> list[NodeResult]:
    """Run `command` on every node through srun; one NodeResult per node, in the order of `nodes`, by
    deadline_s + grace_s(deadline_s) at the latest."""
    srun = shutil.which("srun")
    if not srun:
        raise EnvironmentMissing("srun is not on PATH: the fleet doctor runs through Slurm",
                                 hint="run it on a Slurm login node, or inside salloc/sbatch")
    argv = srun_argv(nodes, command, deadline_s, in_allocation=in_allocation, srun=srun, extra=srun_extra)
    limit = deadline_s + grace_s(deadline_s)
    by_task: dict[int, list[str]] = {}
    srun_errors: list[str] = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            text=True, errors="replace", start_new_session=True)

    def read_out():
        for line in proc.stdout:
            m = _LABEL_RE.match(line.rstrip("\n"))
            if m:
                by_task.setdefault(int(m.group(1)), []).append(m.group(2))
                if m.group(2).startswith(MARK + " end "):
                    say(f"{m.group(2).split()[-1]} reported after {time.monotonic() - start:.0f} s")

    def read_err():
        for line in proc.stderr:
            srun_errors.append(line.rstrip("\n"))

    readers = [threading.Thread(target=f, daemon=True) for f in (read_out, read_err)]
    for t in readers:
        t.start()
    stopped = False
    try:
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            stopped = True
            say(f"{limit} s passed: stopping srun; the nodes that did not answer are reported as such")
    finally:
        _stop(proc)
    for t in readers:
        t.join(timeout=5)
    got = parse_frames({k: list(v) for k, v in by_task.items()})
    # srun's own errors say why a node never answered (no allocation, a node down), unless they are the
    # echo of this side stopping it
    why = "" if stopped else "; ".join(e for e in srun_errors if "error" in e.lower())[-600:]
    results = []
    for node in nodes:
        if node in got:
            results.append(got[node])
        else:
            results.append(NodeResult(node, "no answer", None, None, None,
                                      f"nothing came back within {limit} s"
                                      + (f" (srun: {why})" if why else "")))
    return results


def _stop(proc: subprocess.Popen) -> None:
    """srun and what it started here: SIGTERM (srun cancels the step on the nodes), then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
