"""The run's process table (rocmkit/certify/processes.py), on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from rocmkit.certify.processes import Processes


def test_a_killed_child_its_parent_has_not_reaped_is_noted_gone():
    """A process killed while its parent is busy stays a zombie until the parent reaps it (SGLang's server reaps a
    killed scheduler only as it shuts down): it has ended, and the table says so at once."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    clock = iter(range(100)).__next__
    seen = Processes(clock=clock)
    try:
        seen.note(lambda: [child.pid])
        assert seen.find(child.pid)["gone_s"] is None
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the kernel makes it a zombie as the signal lands
            with open(f"/proc/{child.pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            time.sleep(0.05)
        seen.note(lambda: [child.pid])  # still listed: psutil's children() include zombies
        assert seen.find(child.pid)["gone_s"] == 2  # the clock: 0 at the start, 1 and 2 at the notes
    finally:
        child.kill()
        child.wait()


def test_a_live_process_stays_alive_in_the_table():
    seen = Processes(clock=iter(range(100)).__next__)
    seen.note(lambda: [os.getpid()])
    seen.note(lambda: [os.getpid()])
    assert seen.find(os.getpid())["gone_s"] is None


def test_a_named_ray_actor_is_its_class_whatever_its_title_says_first():
    """Ray titles a named actor's process with its name until the first method runs: verl's colocated workers
    ("PXtJRXWorkerDict_0:0", two H200s and the CPU CI) and its SGLang server ("sglang_server_0_0"). A process noted
    then keeps its role, so the role is the class either way."""
    from rocmkit.stall.waits import role

    titles = {"ray::PXtJRXWorkerDict_0:0:WorkerDict.__init__": "Ray actor WorkerDict",
              "ray::WorkerDict.actor_rollout_ref_update_weights": "Ray actor WorkerDict",
              "ray::sglang_server_0_0:SGLangHttpServer.__init__": "Ray actor SGLangHttpServer",
              "ray::IDLE": "Ray idle worker", "sglang::scheduler_TP1": "SGLang scheduler_TP1",
              "VLLM::EngineCore": "vLLM EngineCore"}
    assert {t: role([t + " " * 40], "python3") for t in titles} == titles
