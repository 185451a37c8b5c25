"""Deadlines and signals against the real engine: `rocmkit build --timeout`, `doctor --image` and `run` stopped
by their deadline or by SIGINT/SIGTERM sent to rocmkit alone leave no process, build step or container behind;
and the build's live display on a terminal (tmux) draws whole lines."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

import psutil
import pytest
import stackgen

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DOCKER = os.environ.get("ROCMKIT_DOCKER", "docker")


def rocmkit(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CI": "true"})


def containers() -> list[str]:
    return subprocess.run([DOCKER, "ps", "-aq", "--filter", "label=io.rocmkit.run"], capture_output=True,
                          text=True).stdout.split()


def processes(needle: str) -> list[str]:
    """Processes whose command line is exactly `needle` ("sleep 301.5"), or contains it for longer needles."""
    out = []
    for p in psutil.process_iter(["cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        if cmd == needle or (needle.startswith("--") and needle in cmd):
            out.append(f"{p.pid} {cmd}")
    return out


def gone(needle: str, within: float = 15.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not processes(needle):
            return True
        time.sleep(0.5)
    return False


@pytest.fixture(scope="module")
def slow_stack(tmp_path_factory, base_image):
    """A stack with one quick component and one whose build sleeps for a distinctive number of seconds."""
    tmp = tmp_path_factory.mktemp("slow")
    seconds = 300 + int(uuid.uuid4().int % 1000) / 1000  # `sleep 300.xyz`: this test's own
    specs = [stackgen.ComponentSpec("quick"), stackgen.ComponentSpec("slow", sleep_s=seconds)]
    for s in specs:
        stackgen.write_component(tmp / "src", s)
    stack = stackgen.write_stack(tmp / "stack.toml", f"slow{uuid.uuid4().hex[:6]}", base_image, specs)
    return stack, stackgen.source_options(tmp / "src", specs), f"sleep {seconds}"


def test_build_timeout_stops_the_build_and_names_the_stage(slow_stack):
    stack, sources, sleeper = slow_stack
    started = time.monotonic()
    r = rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
                "--timeout", "5", *sources)
    took = time.monotonic() - started
    assert r.returncode == 124, r.stderr[-3000:]
    assert took < 15, took
    assert "ran past --timeout 5s" in r.stderr and "build-slow" in r.stderr, r.stderr[-1500:]
    assert gone(sleeper), processes(sleeper)  # the build step inside BuildKit was cancelled
    assert not processes("--iidfile"), processes("--iidfile")  # no docker client left
    assert not containers()


@pytest.fixture(scope="module")
def sleepy_image(base_image):
    """An image whose `python3` sleeps: the doctor run inside it (`python3 -m rocmkit` from the host's mount,
    runtime/host_rocmkit.py) outlasts any short deadline."""
    tag = f"rocmkit-test/sleepy:{uuid.uuid4().hex[:8]}"
    dockerfile = (f"FROM {base_image}\n"
                  "RUN printf '#!/bin/sh\\nsleep 301.5\\n' > /usr/local/bin/python3 && chmod +x /usr/local/bin/python3\n")
    r = subprocess.run([DOCKER, "build", "-q", "--network", "none", "-t", tag, "-"], input=dockerfile, text=True,
                       capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "1"}, timeout=300)
    assert r.returncode == 0, r.stderr
    yield tag
    subprocess.run([DOCKER, "rmi", "-f", tag], capture_output=True)


def test_doctor_image_deadline_removes_the_container(sleepy_image):
    started = time.monotonic()
    r = rocmkit("doctor", "--image", sleepy_image, "--timeout", "5")
    assert r.returncode == 124, r.stderr
    assert time.monotonic() - started < 20
    assert "--timeout 5" in r.stderr
    assert not containers() and gone("sleep 301.5")


def _signalled(argv: list[str], sig: signal.Signals, ready: str) -> tuple[int, str]:
    p = subprocess.Popen([sys.executable, "-m", "rocmkit", *argv], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, start_new_session=True, env={**os.environ, "CI": "true"})
    end = time.monotonic() + 60
    while time.monotonic() < end and not processes(ready):
        time.sleep(0.2)
    assert processes(ready), "the container never started"
    os.kill(p.pid, sig)  # rocmkit alone: its own session, the docker client in another
    out, _ = p.communicate(timeout=60)
    return p.returncode, out


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_doctor_image_signal_removes_the_container(sleepy_image, sig, code):
    rc, out = _signalled(["doctor", "--image", sleepy_image], sig, "sleep 301.5")
    assert rc == code, out
    assert f"received {sig.name}" in out
    assert not containers() and gone("sleep 301.5")


def test_run_deadline_and_exit_code(base_image):
    started = time.monotonic()
    r = rocmkit("run", "--gpus", "none", "--timeout", "4", base_image, "--", "sleep", "302.5")
    assert r.returncode == 124 and time.monotonic() - started < 20, r.stderr
    assert not containers() and gone("sleep 302.5")
    r = rocmkit("run", "--gpus", "none", base_image, "--", "sh", "-c", "echo out; exit 7")
    assert r.returncode == 7 and "out" in r.stdout
    assert not containers()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_signal_removes_the_container(base_image, sig, code):
    rc, out = _signalled(["run", "--gpus", "none", base_image, "--", "sleep", "303.5"], sig, "sleep 303.5")
    assert rc == code, out
    assert not containers() and gone("sleep 303.5")


ROW = re.compile(r"^(base|build-[a-z0-9-]+|final)\s+(waiting|running|done|cached|FAILED|canceled)\b")


@pytest.mark.skipif(not shutil.which("tmux") and os.environ.get("ROCMKIT_REQUIRE_DOCKER") != "1",
                    reason="tmux is not installed (CI installs it with the engine)")
def test_build_display_on_a_terminal_draws_whole_lines(tmp_path, base_image):
    """The build's live table under tmux: every screen line, at every capture, is one whole line of the
    display (a stage row, the title, the header, rocmkit's own lines) — never two lines torn into one."""
    import dataclasses

    revision = uuid.uuid4().int % 10**6  # content of its own: the stages really build, nothing is cached
    specs = [dataclasses.replace(s, revision=revision) for s in stackgen.default_specs(functions=300, units=2)]
    for s in specs:
        stackgen.write_component(tmp_path / "src", s)
    name = f"tty{uuid.uuid4().hex[:6]}"
    stack = stackgen.write_stack(tmp_path / "stack.toml", name, base_image, specs)
    session = f"rocmkit-{uuid.uuid4().hex[:8]}"
    done = tmp_path / "done"
    env = " ".join(f"{k}={v}" for k, v in (("ROCMKIT_DOCKER", os.environ.get("ROCMKIT_DOCKER", "docker")),
                                           ("PATH", os.environ["PATH"])))
    cmd = (f"env -u CI {env} {sys.executable} -m rocmkit build --arch gfx942 --stack-file {stack} --network none "
           f"--progress tty {' '.join(stackgen.source_options(tmp_path / 'src', specs))} --log-file {tmp_path}/b.log;"
           f" echo $? > {done}; sleep 600")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", cmd], check=True)
    screens = []
    try:
        end = time.monotonic() + 400
        while time.monotonic() < end and not done.exists():
            screens.append(subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", session], capture_output=True,
                                          text=True).stdout)
            time.sleep(0.3)
        screens.append(subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", session], capture_output=True,
                                      text=True).stdout)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        # the image is this test's own (a fresh stack name): left behind, every run would add 0.5 GB to the engine
        made = subprocess.run([DOCKER, "images", "-q", f"rocmkit/{name}"], capture_output=True, text=True).stdout.split()
        if made:
            subprocess.run([DOCKER, "rmi", "-f", *made], capture_output=True)
    assert done.exists() and done.read_text().strip() == "0", screens[-1]
    allowed = [ROW, re.compile(r"^building \S+ for \S+"), re.compile(r"^pip installs only"), re.compile(r"^resolve skipped: "), re.compile(r"^\s*stage\s+state\s+time\s+now\s*$"),
               re.compile(r"^(max jobs|built|id|size|stack|inputs|steps|manifest|sbom|log)\s"), re.compile(r"^  \S+\s+"),
               re.compile(r"^\s*$")]
    bad = [(i, line) for i, screen in enumerate(screens) for line in screen.splitlines()
           if not any(a.search(line) for a in allowed)]
    assert not bad, bad[:5]
    final = screens[-1]
    assert all(re.search(rf"^{name}\s+(done|cached)", final, re.M)
               for name in ["base", "final"] + [f"build-{s.name}" for s in specs]), final
    assert len(screens) > 3
