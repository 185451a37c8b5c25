"""Why a run did not finish well, named in one place for every engine (verl, TRL, Miles), on the host and in images:
which process (role, rank, pid), how it ended (an exit code, or a signal by name), the first real error across its
processes, the kernel's word where readable, and what to do. The certificate's `cause`, the first line of
certificate.md, the terminal's `error:`/`hint:` and the picture's mark all come from here.

How the cause is chosen, the way torch elastic picks its "Root Cause (first observed failure)":
1. a process of the run that the kernel's OOM killer killed (`Out of memory: Killed process <pid>`): the host ran
   out of memory, whatever the engines said after;
2. else the earliest line that matches a known signature (signatures.py, plus the engine's own) and is not a wrapper:
   Ray's RayTaskError and ActorDiedError, Hydra's "Error executing job", vLLM's "Engine core initialization failed"
   only carry the cause, printed earlier by the process that failed;
3. else the exception each process ended with (the last line of its last traceback), the earliest first;
4. else the process that ended seconds before every other (vLLM's EngineDeadError names no pid: the engine core that
   died does, by ending first), named from what the watchdog noted of it;
5. else what ended the command itself: its signal, or its exit code and last lines.
The GPU faults the kernel logged during the run (the doctor's patterns) are kept beside the cause, and name it where
1-3 found nothing. A stalled run and a run past --timeout are named by the watchdog's stop and the stall report
(flow.py passes them in), with the log's last exception beside it. Pure: the caller reads the logs, the processes
seen and the kernel log; this module decides.
"""

from __future__ import annotations

import re
import signal as signals

from . import signatures
from .judge import RunStatus
from .loglines import ANSI_RE, SOURCE_RE, short
from .logscan import NESTED_RE, TRACEBACK, TRACEBACK_SPAN, Event, scan, source_pid
from .processes import UNNAMED

EVIDENCE_LINES = 8  # the most lines of evidence a cause keeps
EVIDENCE_CHARS = 1000  # of each: Ray's death message runs to 900
_RAY_PID_RE = re.compile(r"\bWorker PID: (\d+)|^\s*pid: (\d+)\s*$")
_CLASS_RE = re.compile(r"class_name: (?:\S*\.)?(\w+)\s")  # ActorDiedError's "class_name: create_...<locals>.WorkerDict"
_KILLED_BY_RE = re.compile(r"\bwas killed by (SIG[A-Z0-9]+)\b")
# Ray's words for a worker that ended without telling it why: the connection dropped (a signal or a native crash)
ABRUPT_RE = re.compile(r"connection error code 2\. End of file|exits unexpectedly\. Worker exits with an exit code None")


def signal_name(number: int) -> str:
    try:
        return signals.Signals(number).name
    except ValueError:
        return f"signal {number}"


def who(proc: dict | None, pid: int | None, fallback: str = "a process of the run") -> str:
    """'rank 1 (pid 4321, Ray actor WorkerDict)', 'vLLM EngineCore (pid 77)', or the fallback with its pid."""
    if proc is None:
        return f"{fallback} (pid {pid})" if pid else fallback
    if proc.get("rank") is not None:
        return f"rank {proc['rank']} (pid {proc['pid']}, {proc['role']})"
    return f"{proc['role']} (pid {proc['pid']}" + (f", under {proc['parent']})" if proc.get("parent") else ")")


def _process(processes, pid: int | None, lines: list[str] = ()) -> dict | None:
    """What was noted of the process while it lived; else what the log says of it: the Ray actor its lines are
    prefixed with ("(WorkerDict pid=28237)"), or the class Ray's ActorDiedError names for that pid."""
    found = processes.find(pid) if processes is not None and pid else None
    if found and not found["role"].startswith(UNNAMED) or not pid:
        return found
    actor = None
    for text in lines:
        m = SOURCE_RE.match(text)
        if m and m.group(1) and int(m.group(2)) == pid:
            actor = m.group(1)
            break
    if actor is None:  # vLLM's own processes, inside a Ray actor's lines: "(vLLMHttpServer pid=1) (EngineCore pid=2)"
        for text in lines:
            m = NESTED_RE.search(text[:200])
            if m and int(m.group(4)) == pid:
                return {**(found or {"pid": pid, "rank": None}), "role": f"vLLM {m.group(3)}",
                        "parent": f"Ray actor {m.group(1)} pid {m.group(2)}"}
    if actor is None:
        for i, text in enumerate(lines):
            if _RAY_PID_RE.search(text) and str(pid) in text:
                near = " ".join(lines[max(0, i - 3): i + 1])
                m = _CLASS_RE.search(near)
                if m:
                    actor = m.group(1)
                    break
    if actor is None:
        return found
    return {**(found or {"pid": pid, "rank": None}), "role": f"Ray actor {actor}"}


def _ray_pid(lines: list[str], event: Event) -> int | None:
    """The pid Ray names in the message around a worker's death ("Worker PID: N", or "pid: N" under ActorDiedError)."""
    for text in lines[max(0, event.line - 12): event.line + 2]:
        m = _RAY_PID_RE.search(text)
        if m:
            return int(m.group(1) or m.group(2))
    return event.pid


def _oom_kill(kernel: list[str], processes) -> tuple[int, str] | None:
    """The first kernel OOM kill of a process of the run: (pid, the kernel's line)."""
    for text in kernel:
        sig = signatures.match(text)
        if sig and sig.signal and sig.id.startswith("host.oom"):
            pid = signatures.field(text, sig).get("pid")
            if pid and pid.isdigit() and _process(processes, int(pid)):
                return int(pid), text
    return None


def _faulthandler_signal(events: list[Event], pid: int | None) -> str | None:
    """The signal Python's faulthandler (or the shell) reported for this process before it died ("Fatal Python
    error: Aborted"), from the lines scan() matched."""
    for e in events:
        if e.sig.signal and not e.sig.id.startswith("host.oom") and (pid is None or source_pid(e.text) == pid):
            return e.sig.signal
    return None


def name(*, kernel_faults: list[dict] = (), **kw) -> dict | None:
    """The cause (see _name), with the GPU faults the kernel logged during the run (the doctor's patterns: a page
    fault, a ring timeout, a reset) as its `kernel` evidence; where nothing else names the failure, the first fault
    the GPU's fault is the cause (one that fails a node first)."""
    why = _name(**kw)
    if why is None or not kernel_faults:
        return why
    why["kernel"] = list(kernel_faults)
    fatal = next((f for f in kernel_faults if f.get("status") == "fail"), kernel_faults[0])
    if fatal and why["kind"] in ("exit", "signal", "process.killed", "process.gone", "engine error"):
        why.update(kind=fatal["id"], summary=f"the kernel reported {fatal['title']} during the run ("
                   f"{why['summary']})", hint=fatal.get("fix") or why.get("hint"),
                   evidence=[{"file": "kernel log", "text": x} for x in fatal["lines"][:4]] + why["evidence"][:4])
    return why


def _name(*, status: RunStatus, returncode: int | None, logs: dict[str, list[str]], processes=None,
         kernel: list[str] = (), extra: tuple = (), where: str = "", command: str = "the training command",
         stop: dict | None = None, stop_message: str | None = None, stop_hint: str | None = None,
         timeout_s: float | None = None) -> dict | None:
    """The cause of a run that did not finish well, or None for a finished run. `logs`: each log's name and lines,
    the main log first; `where`: the phase or step the watchdog was in at the end ("step 2")."""
    status = RunStatus(status)
    at = f" in {where}" if where else ""
    if status is RunStatus.FINISHED:
        return None
    if status is RunStatus.TIMED_OUT:
        return _last_error(_doc("timed out", f"the certification ran past --timeout {timeout_s:g} s{at} and was "
                                "stopped", "give it more time (--timeout), or look in the log for what it was waiting "
                                "on"), logs, processes, extra)
    if status is RunStatus.STALLED:
        return _last_error(_doc("stalled", stop_message or f"the run stalled{at}", stop_hint, evidence=[
            {"file": "run.log", "text": x} for x in (stop or {}).get("lines", [])[-4:]]), logs, processes, extra)
    main = next(iter(logs), "run.log")
    lines = logs.get(main, [])
    oom = _oom_kill(list(kernel), processes)
    if oom:
        pid, text = oom
        proc = _process(processes, pid)
        return _doc("host.oom", f"{who(proc, pid)} was killed by the kernel's OOM killer (SIGKILL){at}: the host "
                    "ran out of memory", signatures.match(text).hint, process=proc or {"pid": pid},
                    ended={"signal": "SIGKILL", "by": "the kernel's OOM killer"},
                    evidence=[{"file": "kernel log", "text": text[:EVIDENCE_CHARS]}])
    events, exceptions = [], []
    for file, file_lines in logs.items():
        found, ended = scan(file_lines, file, extra)
        events += found
        exceptions += ended
    root = next((e for e in events if not e.sig.wrapper), None)
    if root is not None and root.sig.id == "ray.worker_died":
        # the dead process's own word that a child of its went first ("Subprocess scheduler_0 (pid=N) crashed with
        # exit code -9": SGLang's server), printed after Ray's report of its death: Ray's log monitor tails each
        # worker's file on its own, so their order in the driver's log is not the order they happened in
        dead = _ray_pid(lines, root)
        root = next((e for e in events if e.file == root.file and e.line > root.line and not e.sig.wrapper
                     and source_pid(e.text) == dead and e.pid not in (None, dead)), root)
    if root is None:  # the exception a process ended with, unless it only wraps another's death (EngineDeadError)
        root = next((e for e in exceptions if e.sig is None or not e.sig.wrapper), None)
    first = _first_gone(processes, lines)
    lost = min((e for e in events + exceptions if e.sig is not None and e.sig.id == "dist.peer_lost"),
               key=lambda e: e.line, default=None)
    # a rank that lost its peer in a collective, before anything else was said or in the process whose death Ray
    # reports (SGLang's server, which stops itself once a scheduler is gone): the peer died first
    first_word = lost is not None and (root is None or lost.line <= root.line or (
        root.sig.id == "ray.worker_died" and lost.pid is not None and _ray_pid(lines, root) == lost.pid))
    peer = _silent_peer(lost, lines, processes) if first_word else None
    if peer is not None:
        return _silent_death(peer, lines, events, at, witness=lost)
    if root is not None:
        doc = _from_event(root, logs.get(root.file, []), processes, events, at)
        return _silent_death(first, lines, events, at) if _went_first(first, doc, processes) else doc
    if returncode is not None and returncode < 0:  # the command itself was killed: its exit status says by what
        name_ = signal_name(-returncode)
        root = processes.root() if processes is not None else None
        pid = f" (pid {root['pid']})" if root and "docker" not in root["role"] else ""
        return _doc("signal", f"{command}{pid} was killed by {name_}{at}", _SIGNAL_HINTS.get(name_, _SIGNAL_HINT),
                    process=root if pid else None, ended={"signal": name_, "by": f"the exit status of {command}"},
                    evidence=_tail(lines, main))
    if first is not None:  # a process that ended long before the rest, taking the run with it, saying nothing
        return _silent_death(first, lines, events, at)
    if status is RunStatus.ENGINE_ERROR and stop_message:  # the watchdog's fatal line, matching no signature
        return _doc("engine error", stop_message, _EXCEPTION_HINT,
                    evidence=[{"file": main, "text": x} for x in (stop or {}).get("lines", [])[-EVIDENCE_LINES:]])
    if events:  # only wrappers: the earliest says at least which part of the job saw the death
        return _from_event(events[0], logs.get(events[0].file, []), processes, events, at)
    return _doc("exit", f"{command} exited with code {returncode}{at} without an error the log names",
                "read the end of the log (below, and the certificate's files.log)", ended={"exit_code": returncode},
                evidence=_tail(lines, main))


# Processes that end with the run by design, or come and go during it: their end says nothing. vLLM inspects a
# model's class in a one-shot `python -m vllm.model_executor.models.registry`; it lived 24-26 s in kept H200 runs and
# long enough on a loaded 2-core CI machine to be taken for the process that died first when rank 0 was killed
_TRANSIENT = ("Ray idle", "Ray worker (starting)", "Ray daemon", "Ray raylet", "Ray GCS", "resource tracker",
              "python -c", "rocmkit", "vllm.model_executor.models.registry")
LATE_S = 120.0  # a process that ended this long before the run did is not what ended it: the run went on
# how long before every other process a process must have ended to be the one that died first: a killed vLLM engine
# on two H200s ended 3.1 s before the next process (verl's shutdown after EngineDeadError), read every second
FIRST_BY_S = 2.0
LIVED_S = 10.0  # processes that lived shorter are helpers (a CPU-info probe, a compiler): their end is their work


def _first_gone(processes, lines: list[str]) -> dict | None:
    """The process that ended first, at least FIRST_BY_S before any other of the run's processes (a run's
    processes go within a second or two of each other once its driver exits), named from the log if it was
    noted before its role was known."""
    if processes is None:
        return None
    gone = [r for r in processes.gone_early(float("inf"))
            if not r["role"].startswith(_TRANSIENT) and r["gone_s"] - r["first_s"] >= LIVED_S]
    if not gone:
        return None
    end = gone[-1]["gone_s"]
    gone = [r for r in gone if end - r["gone_s"] <= LATE_S]  # not a helper process that ended its work long before
    first, rest = gone[0], gone[1:]
    if rest and rest[0]["gone_s"] - first["gone_s"] < FIRST_BY_S:
        return None
    return _process(processes, first["pid"], lines) or first


# SGLang's scheduler lines carry their tensor-parallel rank ("[2026-11-28 20:20:33 TP0] Scheduler hit an exception")
_TP_TAG_RE = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: [A-Z_]+\d+)* TP(\d+)(?: [A-Z_]+\d+)*\]")
_TP_ROLE_RE = re.compile(r"^SGLang scheduler\S*_TP(\d+)\b")


def _silent_peer(lost: Event, lines: list[str], processes) -> dict | None:
    """The tensor-parallel peer of the rank whose collective lost its connection: the other scheduler of the same
    server, when there is exactly one (TP 2). SGLang's schedulers share their server's Ray prefix, so the rank that
    reported is read from SGLang's own "[time TPn]" tag on the lines before the error."""
    if processes is None:
        return None
    rank = next((m.group(1) for t in reversed(lines[max(0, lost.line - 60): lost.line])
                 if (m := _TP_TAG_RE.search(t))), None)
    if rank is None:
        return None
    peers = [r for r in processes.table.values() if (m := _TP_ROLE_RE.match(r["role"])) and m.group(1) != rank]
    return peers[0] if len(peers) == 1 else None


def _went_first(first: dict | None, doc: dict, processes) -> bool:
    """Whether a process that ended without a word, before every other, is what killed the one a Ray death line
    names: SGLang's server kills itself once one of its schedulers has died, and Ray reports only the server."""
    if first is None or doc["kind"] != "ray.worker_died" or not doc["ended"].get("by", "").startswith("inferred"):
        return False
    pid = (doc.get("process") or {}).get("pid")
    named = (processes.find(pid) if pid else None) or {}
    return pid != first["pid"] and (named.get("gone_s") or float("inf")) - first["gone_s"] >= FIRST_BY_S


def _said(lines: list[str], pid: int) -> list[tuple[int, str]]:
    """The lines a process printed (its Ray prefix, or vLLM's "(EngineCore pid=N)" inside one)."""
    mark = f" pid={pid})"
    return [(n, t) for n, t in enumerate(lines, 1) if mark in t[:160]]


def _silent_death(proc: dict, lines: list[str], events: list[Event], at: str, witness: Event | None = None) -> dict:
    """A process that ended without a word: found as the first to go, or as the peer a `witness` line (a collective
    that lost its connection) says went away."""
    pid = proc["pid"]
    own = _said(lines, pid)
    caught = _faulthandler_signal([e for e in events if f" pid={pid})" in e.text[:160]], None)
    seen = (f"while its peer lost the connection to it: {short(witness.text)[:160]}" if witness else
            f"it ended {proc['gone_s']:g} s into the run, before every other process")
    ended = ({"signal": caught, "by": "Python's faulthandler report"} if caught else
             {"signal": "SIGKILL", "by": f"inferred: {seen}, without an error or a crash report of its own"})
    after = [{"file": e.file, "line": e.line, "text": short(e.text, EVIDENCE_CHARS)}
             for e in events if e.sig.wrapper][:3]  # what the rest of the job said of it: vLLM's EngineDeadError
    last = [{"file": "run.log", "line": n, "text": short(t, EVIDENCE_CHARS)} for n, t in own[-2:]]
    said = [{"file": witness.file, "line": witness.line, "text": short(witness.text, EVIDENCE_CHARS)}] if witness else []
    return _doc("process.killed", f"{who(proc, pid)} was killed by {ended['signal']}{at}",
                _SIGNAL_HINTS.get(ended["signal"], _SIGNAL_HINT), process=proc, ended=ended,
                evidence=said + last + after, source=witness.sig.source if witness else None)


def refused(message: str, hint: str | None) -> dict:
    """The cause of a certification that never started its engine (the setup refused the target: a busy GPU,
    too few GPUs, a missing package), in the same shape as a run's."""
    return _doc("not started", message, hint)


_SIGNAL_HINT = ("a process that ends without a word was killed with SIGKILL: by the kernel's OOM killer (`dmesg | "
                "grep -i 'killed process'` names it; free host memory or lower the batch sizes) or by someone or "
                "something outside the job (an operator's kill -9, a cluster's job manager)")
_SIGNAL_HINTS = {"SIGSEGV": "a native crash (a segmentation fault) in an extension: check that vLLM, flash-attn and "
                            "the other compiled packages were built for this torch and GPU (`rocmkit doctor`)",
                 "SIGBUS": "a bus error: most often /dev/shm is too small for the job (give the container "
                           "`--shm-size`, e.g. `rocmkit run` does), or a file it mapped was cut short",
                 "SIGABRT": "the process aborted (a C++ assertion or an uncaught C++ exception): the lines before "
                            "it say which"}


def _from_event(root: Event, lines: list[str], processes, events: list[Event], at: str) -> dict:
    sig = root.sig
    ended: dict = {}
    pid = root.pid
    if sig is not None and sig.id == "ray.worker_died":
        pid = _ray_pid(lines, root)
        proc = _process(processes, pid, lines)
        text = ANSI_RE.sub("", root.text)
        if ABRUPT_RE.search(text):
            caught = _faulthandler_signal(events, pid)
            ended = ({"signal": caught, "by": "Python's faulthandler report"} if caught else
                     {"signal": "SIGKILL", "by": "inferred: it ended without a word (no Python error, no crash "
                      "report); Ray: " + ABRUPT_RE.search(text).group(0)})
            summary = f"{who(proc, pid, 'a Ray worker')} was killed by {ended['signal']}{at}"
            hint = _SIGNAL_HINTS.get(ended["signal"], _SIGNAL_HINT)
        else:
            summary = f"{who(proc, pid, 'a Ray worker')} died{at}: {short(text)[:200]}"
            hint = sig.hint
        return _doc(sig.id, summary, hint, process=proc or ({"pid": pid} if pid else None), ended=ended,
                    evidence=_around(root, lines, events), source=sig.source)
    said_by = signatures.field(root.text, sig) if sig else {}
    if said_by.get("pid"):  # the line names the process it is about (SGLang's "Subprocess scheduler_1 (pid=N)")
        pid = int(said_by["pid"])
    proc = _process(processes, pid, lines)
    if said_by.get("code", "").startswith("-"):  # an exit code minus a signal's number: that signal ended it
        ended = {"signal": signal_name(-int(said_by["code"])), "by": "its parent's word: " + short(root.text)[:120]}
        return _doc(sig.id, f"{who(proc, pid)} was killed by {ended['signal']}{at}",
                    _SIGNAL_HINTS.get(ended["signal"], _SIGNAL_HINT), process=proc or {"pid": pid}, ended=ended,
                    evidence=_around(root, lines, events), source=sig.source)
    if sig is not None and sig.signal:
        ended = {"signal": sig.signal, "by": short(root.text)[:120]}
    elif (killed := _KILLED_BY_RE.search(root.text)) is not None:  # a launcher that saw its child's exit status
        ended = {"signal": killed.group(1), "by": "its parent's word: " + short(root.text)[:120]}
    task = ""
    if pid is None and sig is None and (raised := _raised_by(root, events)) is not None:
        pid, task = raised
        proc = _process(processes, pid, lines)
    where_ = f" in {who(proc, pid)}{task}" if pid else ""
    title = sig.title if sig else "an error"
    said = (signatures.field(root.text, sig).get("what") if sig else None) or short(root.text)
    summary = f"{title}{where_}{at}: {said[:240]}"
    doc = _doc(sig.id if sig else "exception", summary, sig.hint if sig else _EXCEPTION_HINT,
               process=proc or ({"pid": pid} if pid else None), ended=ended, evidence=_around(root, lines, events),
               source=sig.source if sig else None)
    doc["error"] = short(root.text)
    return doc


def _last_error(doc: dict, logs: dict[str, list[str]], processes, extra: tuple) -> dict:
    """A run stopped while waiting, with the last exception its log shows: what it may have waited on (an error in
    a process that went on living, as vLLM's engine core after a failed weight load), named beside the stop."""
    last = max((e for file, lines in logs.items() for e in scan(lines, file, extra)[1]), key=lambda e: e.line,
               default=None)
    if last is None:
        return doc
    said = _from_event(last, logs[last.file], processes, [], "")
    return {**doc, "summary": f"{doc['summary']}; the log's last error before that: {said['summary']}",
            "hint": "the run may have waited on that error (the evidence has its traceback)" + (
                f"; otherwise {doc['hint']}" if doc["hint"] else ""),
            "evidence": said["evidence"] + doc["evidence"][-2:], "error": said["error"]}


def _raised_by(root: Event, events: list[Event]) -> tuple[int, str] | None:
    """The Ray task an exception in the driver's log was raised in: the innermost "RayTaskError(X): ray::Actor.method()
    (pid=N" line of its traceback (each remote call adds one, outermost first), as its pid and " running method"."""
    near = [signatures.field(e.text, e.sig) for e in events if e.file == root.file
            and e.sig.id == "ray.task_error" and 0 < root.line - e.line <= TRACEBACK_SPAN]
    if not near or not near[-1].get("pid"):
        return None
    method = (near[-1].get("task") or "").rpartition(".")[2]
    return int(near[-1]["pid"]), f" running {method}" if method else ""


_EXCEPTION_HINT = "the traceback above it in the log says where it came from; the certificate's evidence has its end"


def _around(event: Event, lines: list[str], events: list[Event] = ()) -> list[dict]:
    """The line, what led to it in the same process (its traceback's end), and the wrappers that carried it on
    (Ray's ActorDiedError, Hydra's "Error executing job"), at most EVIDENCE_LINES."""
    who_ = source_pid(event.text)
    before = []
    for n in range(event.line - 1, max(0, event.line - 40), -1):
        text = lines[n - 1]
        if source_pid(text) != who_ or not text.strip():
            continue
        before.insert(0, (n, text))
        if TRACEBACK in text or len(before) >= EVIDENCE_LINES // 2:
            break
    if event.sig is not None:
        before = []  # a known signature says it in one line; what came before is the process's own chatter
    after = [(e.line, e.text) for e in events if e.file == event.file and e.line > event.line and e.sig.wrapper][:2]
    keep = [*before, (event.line, event.text), *after][-EVIDENCE_LINES:]
    return [{"file": event.file, "line": n, "text": short(t, EVIDENCE_CHARS)} for n, t in keep]


def _tail(lines: list[str], file: str) -> list[dict]:
    keep = [(n, t) for n, t in enumerate(lines, 1) if t.strip()][-EVIDENCE_LINES:]
    return [{"file": file, "line": n, "text": short(t)} for n, t in keep]


def _doc(kind: str, summary: str, hint: str | None, *, process: dict | None = None, ended: dict | None = None,
         evidence: list[dict] = (), source: str | None = None) -> dict:
    proc = {k: process.get(k) for k in ("pid", "role", "rank", "parent", "nspid", "cmdline") if process.get(k) is not None} \
        if process else None
    return {"kind": kind, "summary": summary, "process": proc, "ended": ended or {}, "hint": hint,
            "evidence": list(evidence), **({"source": source} if source else {})}
