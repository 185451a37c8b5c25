"""What the doctor reads of the world, into a plain Facts object (gather.collect).

Two kinds of facts:
- tree facts (sysfs, procfs, /dev, /opt/rocm) are read under a root prefix, so a captured tree (`--root`)
  is checked exactly like a live host (reader.py, and kfd, health, rdma, kernlog for their parts);
- process facts (environment, resource limits, /dev/shm size, installed Python packages, Docker engine,
  GPU libraries) belong to the running process (process.py, envaudit.py; codeobjects.py and
  image_audit_facts.py for --code-objects). Live, they are read directly; under `--root` they come
  from the `rocmkit-process.json` that `--capture` writes, or are absent (the checks then skip).
"""

from .gather import PROCESS_FILE, Facts, collect

__all__ = ["PROCESS_FILE", "Facts", "collect"]
