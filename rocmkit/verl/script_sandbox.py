"""A launch script run by real bash inside a bubblewrap sandbox, to learn the exact argv it hands to
`verl.trainer.main_ppo` (launch_script.py turns what this returns into Invocations).

Bash itself reads the script, so arrays, nested and positional defaults, word splitting, `$(( ))`, `set -u`
and `set -e` behave as they do on the node. What would touch the world is a recording stand-in
(standin.sh, linked under each name in STANDINS, first on PATH and bound over the real programs of the same
name): python, torchrun and ray record their arguments; GPU tools answer `gpus` GPUs; downloads, installs
and file changes do nothing and succeed; sleep returns at once. Pure tools (awk, sed, seq, date, nproc...)
run for real, describing this machine. The sandbox: the root read-only, a private empty $HOME and /tmp
(the script's folder and the working directory bound back read-only), no network, no GPU device, its own
process tree, killed with rocmkit and at a deadline.

The line each command ran from is kept two ways: a DEBUG trap exports $LINENO to the commands bash starts
(a stand-in records it), and xtrace, with $LINENO in PS4, writes every expanded command to a FIFO that a
thread here reads (bounded, so a looping script cannot fill memory).

A runner's stand-in (python, torchrun) also records the variables exported to it (bash's `compgen -e`): what
the script exported before main_ppo, read against the environment the sandbox was given (`exported`).
"""

from __future__ import annotations

import os
import re
import select
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvironmentMissing
from ..runtime import proc

STANDIN = Path(__file__).with_name("standin.sh")
STANDINS = ("python", "python3", "torchrun", "ray", "srun", "nvidia-smi", "rocm-smi", "amd-smi", "sleep", "tee",
            "wget", "curl", "git", "git-lfs", "huggingface-cli", "hf", "modelscope", "pip", "pip3", "uv", "conda",
            "mamba", "micromamba", "docker", "apt-get", "ssh", "scp", "rsync", "pkill", "killall",
            "mkdir", "rm", "rmdir", "cp", "mv", "ln", "touch", "chmod", "chown", "install")
PYTHON_RE = re.compile(r"^python\d(\.\d+)?$")
GPU_QUERY = ("nvidia-smi", "rocm-smi", "amd-smi")
INSIDE = "/run/rocmkit-sandbox"  # our files, inside (under a private tmpfs on /run)
TRACE_KEEP = 8 << 20  # bytes of xtrace kept; past it only the last command is remembered
RECORDS_KEEP = 2000
PACKAGE = "bubblewrap"
MARK = "\x01"
TRACE_RE = re.compile(r"^(\++)\x01(\d+)\x01([^\x01]*)\x01 ?(.*)$", re.S)
# The DEBUG trap's own commands, traced one level deeper than the command they precede.
TRAP_RE = re.compile(r"^(ROCMKIT_LINE=\d+|ROCMKIT_SOURCE=[^\n]*|\[\[ \w* = \*x\* \]\])$")
# Variables the sandbox, the prelude or bash itself set (ROCMKIT_* too): never the script's exports.
OWN_VARIABLES = ("HOME", "PATH", "BASH_ENV", "BASH_XTRACEFD", "PS4", "PWD", "OLDPWD", "SHLVL", "_", "SHELLOPTS",
                 "BASHOPTS")

PRELUDE = r"""# rocmkit verl-check: read by bash (BASH_ENV) before the launch script; see script_sandbox.py
unset BASH_ENV
exec {rocmkit_trace}>"$ROCMKIT_SANDBOX_TRACE"
BASH_XTRACEFD=$rocmkit_trace
PS4=$'+\x01${LINENO}\x01${BASH_SOURCE[0]-}\x01 '
export ROCMKIT_LINE=0 ROCMKIT_SOURCE=
set -o functrace
trap 'ROCMKIT_LINE=$LINENO ROCMKIT_SOURCE=${BASH_SOURCE[0]-}; [[ $- = *x* ]] || set -x' DEBUG
ulimit() { builtin ulimit "$@" 2>/dev/null || true; }  # a node's limits, not this sandbox's
"""


@dataclass
class Record:
    """One call of a stand-in: its name, the script line (and file) it ran from, bash's $PWD, its arguments, and
    for a runner (python, torchrun) the variables exported to it."""
    name: str
    line: int
    source: str
    cwd: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Traced:
    depth: int
    line: int
    source: str
    text: str


@dataclass
class Run:
    records: list[Record]
    trace: list[Traced]
    exit_status: int | None  # None: stopped at the deadline
    timed_out: bool
    seconds: float
    stderr: list[str] = field(default_factory=list)  # bash's own messages and the script's stderr (the last lines)
    last: Traced | None = None  # the last command traced (what ran when the deadline came)
    given: dict[str, str] = field(default_factory=dict)  # the environment bash was started with


def _bwrap(path: str | None) -> str:
    found = shutil.which("bwrap", path=path)
    if not found:
        raise EnvironmentMissing("verl-check runs launch scripts in a bubblewrap sandbox, and bwrap is not installed",
                                 hint=f"install Debian's {PACKAGE} package (apt-get install -y {PACKAGE}); "
                                      "a plain overrides file (one key=value a line) needs no sandbox")
    return found


class _TraceReader:
    """Reads the xtrace FIFO while the script runs: the first TRACE_KEEP bytes kept, then only the last line."""

    def __init__(self, fifo: Path):
        self.fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # RDWR: bash's open never blocks, EOF never comes
        self.kept = bytearray()
        self.tail = b""
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._pump, daemon=True)
        self.thread.start()

    def _pump(self) -> None:
        while True:
            ready, _, _ = select.select([self.fd], [], [], 0.1)
            if not ready:
                if self.done.is_set():
                    return
                continue
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                continue
            if len(self.kept) < TRACE_KEEP:
                self.kept += chunk
            else:
                self.tail = (self.tail + chunk)[-(1 << 14):]

    def close(self) -> bytes:
        self.done.set()
        self.thread.join(timeout=5)
        os.close(self.fd)
        return bytes(self.kept), self.tail


def parse_trace(data: bytes) -> list[Traced]:
    """xtrace records (`+<MARK>LINE<MARK>FILE<MARK> command`), a command's own newlines kept in its text; the
    DEBUG trap's commands dropped."""
    out: list[Traced] = []
    for raw in data.decode("utf-8", "replace").split("\n"):
        m = TRACE_RE.match(raw) if raw.startswith("+") else None
        if m:
            out.append(Traced(len(m.group(1)), int(m.group(2)), m.group(3), m.group(4)))
        elif out:
            out[-1].text += "\n" + raw
    for t in out:
        t.text = t.text.rstrip("\n")
    return [t for t in out if not TRAP_RE.match(t.text)]


def _last_of(tail: bytes) -> list[Traced]:
    """The complete commands in the last bytes of a trace that outgrew TRACE_KEEP."""
    at = tail.find(b"\n+")
    return parse_trace(tail[at + 1:]) if at >= 0 else []


def _read_records(folder: Path) -> list[Record]:
    out = []
    calls = [f for f in folder.iterdir() if not f.name.endswith(".env")]
    for f in sorted(calls, key=lambda p: float(p.name.split(".", 2)[0] + "." + p.name.split(".")[1]))[:RECORDS_KEEP]:
        parts = f.read_bytes().decode("utf-8", "replace").split("\0")
        if len(parts) < 5 or parts[-1] != "":  # a record cut short at the deadline
            continue
        name, line, source, cwd, *argv = parts[:-1]
        env = f.with_name(f.name + ".env")  # written before the record: whole when the record is
        pairs = env.read_bytes().decode("utf-8", "replace").split("\0")[:-1] if env.exists() else []
        out.append(Record(name, int(line) if line.isdigit() else 0, source, cwd, argv,
                          dict(p.split("=", 1) for p in pairs if "=" in p)))
    return out


def exported(env: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """What a call's environment has that the one bash was given lacks or holds otherwise: the script's exports,
    without the sandbox's and bash's own variables."""
    return {k: v for k, v in env.items()
            if k not in OWN_VARIABLES and not k.startswith("ROCMKIT_") and given.get(k) != v}


def _binds_over_real(bin_dir: Path, path_dirs: list[str]) -> list[str]:
    """`--ro-bind STANDIN REAL` for every program of a stand-in's name in PATH's folders and the usual ones, so
    `/usr/bin/python3` and `$VENV/bin/python` are stand-ins too."""
    args: list[str] = []
    seen: set[str] = set()
    for d in dict.fromkeys([*path_dirs, "/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"]):
        if not d or not os.path.isabs(d) or not os.path.isdir(d):
            continue
        try:
            names = os.listdir(d)
        except OSError:
            continue
        for n in names:
            if n in STANDINS or PYTHON_RE.match(n):
                real = os.path.realpath(os.path.join(d, n))
                if real in seen or not os.path.isfile(real):
                    continue
                seen.add(real)
                args += ["--ro-bind", str(bin_dir / "standin"), real]  # it dispatches on the name it was run by
    return args


def _home(env: dict[str, str]) -> str:
    home = env.get("HOME", "")
    return home if os.path.isabs(home) and home.rstrip("/") not in ("", "/usr", "/etc", "/run", "/proc", "/dev") \
        else "/home/rocmkit-sandbox"


def _sandbox(bwrap: str, tmp: str, script: str, cwd: str, home: str, path: str) -> list[str]:
    """bwrap's arguments: what the script sees of this machine, and its private and bound-back places."""
    script_file = os.path.abspath(os.path.join(cwd, script))
    script_dir = os.path.dirname(script_file)  # $0's folder: `source $(dirname $0)/common.sh`
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--tmpfs", "/run", "--unshare-all", "--cap-drop", "ALL", "--die-with-parent", "--new-session"]
    if os.path.isdir(home):  # (a $HOME this machine lacks stays absent: nothing to hide, nowhere to mount)
        argv += ["--tmpfs", home]
    for keep in dict.fromkeys([script_dir, cwd]):  # hidden by the private /tmp or $HOME: bound back read-only
        if keep != "/":
            argv += ["--ro-bind", keep, keep]
            if os.path.isdir(home) and (home + "/").startswith(keep.rstrip("/") + "/"):
                argv += ["--tmpfs", home]  # a $HOME inside the folder bound back stays private
    argv += ["--ro-bind", script_file, script_file]  # the script itself, even from a $HOME kept private
    argv += ["--bind", tmp, INSIDE]
    argv += _binds_over_real(Path(tmp) / "bin", path.split(":"))
    return argv + ["--chdir", cwd, "--", "/bin/bash", script]


def _prepare(tmp_path: Path) -> None:
    """The stand-ins (one file, linked under each name), the prelude, the record folder and the trace FIFO."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "records").mkdir()
    shutil.copyfile(STANDIN, bin_dir / "standin")
    (bin_dir / "standin").chmod(0o755)
    for name in (*STANDINS, *(f"python3.{minor}" for minor in range(6, 20))):
        (bin_dir / name).symlink_to("standin")
    (tmp_path / "prelude.sh").write_text(PRELUDE)
    os.mkfifo(tmp_path / "trace")


def run(script: str, args: list[str], env: dict[str, str], cwd: str, gpus: int, timeout: float) -> Run:
    """Run `bash SCRIPT ARGS` in the sandbox with `env` (the caller's, HOME made private) from `cwd`."""
    bwrap = _bwrap(env.get("PATH"))
    home = _home(env)
    inner = {**env, "HOME": home, "BASH_ENV": f"{INSIDE}/prelude.sh", "ROCMKIT_SANDBOX_GPUS": str(gpus),
             "ROCMKIT_SANDBOX_RECORDS": f"{INSIDE}/records", "ROCMKIT_SANDBOX_TRACE": f"{INSIDE}/trace",
             "PATH": f"{INSIDE}/bin:" + env.get("PATH", "/usr/local/bin:/usr/bin:/bin")}
    inner.pop("BASH_XTRACEFD", None)
    with tempfile.TemporaryDirectory(prefix="rocmkit-sandbox-") as tmp:
        _prepare(Path(tmp))
        argv = _sandbox(bwrap, tmp, script, cwd, home, env.get("PATH", "")) + list(args)
        reader = _TraceReader(Path(tmp) / "trace")
        said: list[str] = []  # the script's output, with bwrap's and bash's own messages
        started = time.monotonic()
        try:
            result = proc.run(argv, env=inner, timeout=timeout, grace_s=1.0, what="the launch script's sandbox",
                              on_line=lambda line: len(said) < 2000 and said.append(line))
        finally:
            kept, tail = reader.close()
        if result.returncode not in (None, 0) and said and said[0].startswith("bwrap:"):
            raise EnvironmentMissing(f"the bubblewrap sandbox could not start: {said[0]}",
                                     hint=f"bwrap (Debian's {PACKAGE}) needs user namespaces: run as root, or enable "
                                          "unprivileged ones (sysctl kernel.unprivileged_userns_clone=1)")
        trace = parse_trace(kept)
        return Run(records=_read_records(Path(tmp) / "records"), trace=trace, exit_status=result.returncode,
                   timed_out=result.timed_out, seconds=time.monotonic() - started,
                   stderr=said + (result.tail[-20:] if len(said) >= 2000 else []),
                   last=(_last_of(tail) or trace or [None])[-1], given=inner)


def gpu_queries(records: list[Record]) -> list[Record]:
    """The calls that asked how many GPUs there are (answered with the sandbox's count)."""
    return [r for r in records if r.name in GPU_QUERY or (PYTHON_RE.match(r.name) or r.name == "python")
            and any("device_count" in a for a in r.argv)]

