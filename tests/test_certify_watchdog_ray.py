"""The watchdog against Ray's own output: a real local Ray (the verl CPU venv's Ray 2.60, as certify starts it for
verl) asked for a task no node of it can hold, through rocmkit's real runner and watchdog. Ray's autoscaler monitor
says so every 35 s; the run is stopped as an engine error a grace after the first time, not left for the hour of
--timeout under the default stall timeout."""

from __future__ import annotations

import io
import shutil
import subprocess
import tempfile
import time

from provisioned import provisioned
from rayhost import ray_processes

from rocmkit.certify import watchdog
from rocmkit.certify.flow import OFFLINE_ENV
from rocmkit.certify.follow import Follow
from rocmkit.progress import Display
from rocmkit.runtime import proc

GRACE_S = 5.0  # certify waits ERROR_GRACE_S (60 s) after a fatal line for progress; this test need not

# A 2-CPU task on a Ray of 1 CPU: no node can ever hold it (the form a user's GPU request takes when Ray sees
# fewer GPUs than the job asks for). The task is never run; get() would wait for its 300 s.
INFEASIBLE = """
import ray
ray.init(address="local", num_cpus=1, include_dashboard=False, _temp_dir={temp!r})
@ray.remote(num_cpus=2)
def task():
    return 1
print("asked", flush=True)
ray.get(task.remote(), timeout=300)
"""


def test_a_task_rays_cluster_can_never_hold_stops_the_run_as_an_engine_error(tmp_path, ray_host):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    home = tmp_path / "home"  # Ray's token must not land in this user's home
    home.mkdir()
    before = set(ray_processes())
    watch = watchdog.Watch(1, grace_s=GRACE_S)  # the default stall timeout: the silence rule never fires here
    follow = Follow(Display("test", mode="plain", stream=io.StringIO()), watch)
    started = time.monotonic()
    temp = tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp")  # Ray's socket paths must fit 107 bytes, as certify's
    try:
        result = proc.run([python, "-c", INFEASIBLE.format(temp=temp)], timeout=240,
                          # certify's engine environment: unbuffered, so Ray's driver prints each line as it comes
                          env={"HOME": str(home), "PATH": "/usr/bin:/bin", **OFFLINE_ENV},
                          on_line=follow.line, stop_when=follow.tick, on_stop=follow.before_stop, grace_s=5)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    took = time.monotonic() - started
    assert result.stopped == "engine error", "\n".join(result.tail[-20:])
    stop = watch.stopped
    assert stop.pattern == "ray.infeasible" and "fulfill resource request {'CPU': 2.0}" in stop.fatal
    assert stop.phase == "start-up" and took < 120, took  # Ray's first word comes about 11 s after its start
    assert any("asked" in line for line in result.tail)
    # and nothing of that Ray is left
    deadline = time.monotonic() + 30
    while set(ray_processes()) - before and time.monotonic() < deadline:
        time.sleep(0.5)
    assert set(ray_processes()) - before == set(), subprocess.run(["ps", "-ef"], capture_output=True, text=True,
                                                                  check=False).stdout[-2000:]
