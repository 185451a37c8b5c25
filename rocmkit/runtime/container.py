"""How a ROCm container is started: device nodes, groups, IPC, ulimits. One place, used by
`rocmkit run`, `doctor --image`, `certify --image` and the Slurm scripts.

Least privilege: /dev/kfd plus only the render nodes asked for, the numeric groups that own those
nodes on this host (the image may lack a group named `render`), host IPC for RCCL's shared memory,
unlimited memlock for RDMA, and SYS_NICE so NUMA binding (set_mempolicy/mbind, which Docker's default
seccomp profile allows only with that capability) works. `--privileged` only when asked.
Reference: ROCm docs "Running ROCm Docker containers"; vLLM/ROCm published run line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import EnvironmentMissing
from . import host_rocmkit, proc

DEFAULT_SHM = "16g"
RUN_LABEL = "io.rocmkit.run"  # every container rocmkit starts carries one: io.rocmkit.run=<the run's id>
# ... and the rocmkit process that started it, "<boot id> <pid> <start time>": a container whose
# process is gone (certify killed by SIGKILL cannot remove its own) is found and removed by the next certify
OWNER_LABEL = "io.rocmkit.owner"


@dataclass(frozen=True)
class DeviceNodes:
    """The GPU device nodes of this host (or a tree): which exist, and the groups that own them. (Here, not among
    the doctor's facts: only the commands that start containers read them.)"""

    present: frozenset[str]
    gids: dict[str, int]
    render: tuple[str, ...]  # every /dev/dri/renderD*, sorted


def read_device_nodes(root: str = "/") -> DeviceNodes:
    base = Path(root)
    paths = ["/dev/kfd", "/dev/dri"] + sorted("/dev/dri/" + p.name for p in (base / "dev/dri").glob("renderD*"))
    present, gids = set(), {}
    for p in paths:
        try:
            st = os.stat(base / p.lstrip("/"))
        except OSError:
            continue
        present.add(p)
        gids[p] = st.st_gid
    return DeviceNodes(present=frozenset(present), gids=gids, render=tuple(p for p in paths if "renderD" in p))


def device_gids(nodes: DeviceNodes | None, paths: list[str]) -> list[str]:
    """The numeric groups owning the device nodes on this host, so the container user can open them (the
    image may lack a group named `render`); without the host's nodes, the conventional `video`."""
    gids: list[str] = []
    for p in paths:
        gid = (nodes.gids if nodes else {}).get(p)
        if gid and str(gid) not in gids:
            gids.append(str(gid))
    return gids or ["video"]


def rocm_device_args(render_nodes: list[str] | None = None, *, nodes: DeviceNodes | None = None,
                     privileged: bool = False, ipc_host: bool = True, shm_size: str = DEFAULT_SHM,
                     skip_missing: bool = False, ulimits: bool = True, gpus: bool = True) -> list[str]:
    """`docker run` flags giving a container the GPUs. render_nodes None means all of /dev/dri. `nodes` are this
    host's device nodes (read_device_nodes): their groups are added, and with skip_missing the
    ones it lacks are left out (diagnosing a host without GPUs); gpus False gives no GPU at all (a CPU
    image). Pure."""
    if privileged:
        return ["--privileged", "--ipc=host" if ipc_host else f"--shm-size={shm_size}"]
    wanted = [] if not gpus else ["/dev/dri"] if render_nodes is None else list(render_nodes)
    devices = [d for d in ["/dev/kfd", *wanted] if not (skip_missing and nodes) or d in nodes.present] if gpus else []
    args = [f"--device={d}" for d in devices]
    probe = ["/dev/kfd"] + ((list(nodes.render) if nodes else []) if render_nodes is None else wanted)
    for gid in device_gids(nodes, probe) if gpus else []:
        args.append(f"--group-add={gid}")
    args.append("--ipc=host" if ipc_host else f"--shm-size={shm_size}")
    if ulimits:  # rootless engines may not raise them (runc: "error setting rlimit ... not permitted")
        args += ["--ulimit=memlock=-1:-1", "--ulimit=stack=67108864:67108864"]
    args.append("--cap-add=SYS_NICE")
    return args


def docker_run_argv(image: str, command: list[str], *, render_nodes: list[str] | None = None,
                    privileged: bool = False, env: dict[str, str] | None = None,
                    mounts: list[tuple[str, str, str]] = (), name: str | None = None, remove: bool = True,
                    workdir: str | None = None, docker: str = "docker", extra: list[str] = (),
                    nodes: DeviceNodes | None = None, skip_missing: bool = False, ulimits: bool = True,
                    shm_size: str | None = None, labels: dict[str, str] | None = None, user: str | None = None,
                    gpus: bool = True, host_code: bool = False) -> list[str]:
    """The full `docker run` argv. mounts are (host_path, container_path, "ro"|"rw"); shm_size gives the
    container a private /dev/shm of that size instead of the host's IPC namespace; labels mark what rocmkit
    started (the runner removes containers by label); user is "uid:gid"; host_code runs this host's rocmkit
    in the container instead of the image's (runtime/host_rocmkit.py)."""
    if host_code:
        command, mounts = host_rocmkit.in_container(list(command), mounts)
    argv = [docker, "run"]
    if remove:
        argv.append("--rm")
    if name:
        argv.append(f"--name={name}")
    for key, value in (labels or {}).items():
        argv.append(f"--label={key}={value}")
    if user:
        argv.append(f"--user={user}")
    argv += rocm_device_args(render_nodes, nodes=nodes, privileged=privileged, skip_missing=skip_missing, ulimits=ulimits,
                             gpus=gpus,
                             ipc_host=shm_size is None, shm_size=shm_size or DEFAULT_SHM)
    for key, value in (env or {}).items():
        argv += ["-e", f"{key}={value}"]
    for host, inside, mode in mounts:
        argv += ["-v", f"{host}:{inside}:{mode}"]
    if workdir:
        argv.append(f"--workdir={workdir}")
    argv += list(extra)
    argv.append(image)
    argv += list(command)
    return argv


REFUSED_ULIMIT = ("rlimit", "ulimit")  # what runc/crun say when the engine may not raise a limit
DOCKER_ERROR = 125  # `docker run` itself failed: the engine refused the container
ULIMIT_NOTE = "the engine refused --ulimit memlock/stack (rootless or restricted); ran without them"


def run_container(image: str, command: list[str], *, what: str, timeout: float | None, docker: str = "docker",
                  ulimits: bool = True, on_line=None, log_path=None, keep_stdout: bool = False,
                  passthrough: bool = False, stop_when=None, on_stop=None, host_code: bool = True, **flags):
    """Run a labelled container through the runner (runtime.proc): the deadline and signals stop it and it is
    removed on every exit path (the runner's cleanup is remove_containers of its label). With host_code (the
    default: certify, `doctor --image`) the rocmkit code it runs is this host's (runtime/host_rocmkit.py); a
    user's own container (`rocmkit run`) passes False. An engine that refuses the memlock/stack ulimits (rootless, restricted) gets
    a second try without them (with passthrough the refusal is not readable: exit 125 is taken for it).
    `on_stop` (see proc.run) gets the container's processes too, by their pids on this host.
    Returns (Result, whether ulimits were applied)."""
    if host_code:
        host_rocmkit.check_engine_local()
    label = proc.new_run_label()
    labels = {RUN_LABEL: label, "io.rocmkit.what": what, OWNER_LABEL: owner()}
    firsts: list[int] = []

    def inside() -> list[int]:
        """The container's processes, by their pids on this host: its first process asked of the engine once,
        its descendants read each time (a watchdog reads them every few seconds)."""
        if not firsts:
            firsts.extend(labelled_pids(label))
        return descendants(firsts)
    result = proc.run(docker_run_argv(image, command, docker=docker, ulimits=ulimits, labels=labels,
                                      host_code=host_code, **flags),
                      timeout=timeout, on_line=on_line, log_path=log_path, cleanup=lambda: remove_containers(label),
                      what=what,
                      keep_stdout=keep_stdout, passthrough=passthrough,
                      stop_when=stop_when and (lambda pids: stop_when(lambda: pids() + inside())),
                      on_stop=on_stop and (lambda pids: on_stop(pids + labelled_pids(label))))
    refused = passthrough or any(w in result.output.lower() for w in REFUSED_ULIMIT)
    if ulimits and result.returncode == DOCKER_ERROR and refused:
        return run_container(image, command, what=what, timeout=timeout, docker=docker, ulimits=False,
                             on_line=on_line, log_path=log_path, keep_stdout=keep_stdout, passthrough=passthrough,
                             stop_when=stop_when, on_stop=on_stop, host_code=host_code, **flags)
    return result, ulimits


def descendants(pids: list[int]) -> list[int]:
    """The processes and their descendants that are still there."""
    import psutil

    out = []
    for pid in pids:
        try:
            p = psutil.Process(pid)
            out += [pid] + [c.pid for c in p.children(recursive=True)]
        except psutil.Error:
            continue
    return out


def labelled_pids(label: str) -> list[int]:
    """The host pids of the first process of each running container labelled io.rocmkit.run=<label> (their
    descendants are found from them); none when the engine cannot say."""
    from .docker_engine import Engine

    try:
        return Engine.connect(timeout=10).labelled_pids(f"{RUN_LABEL}={label}")
    except EnvironmentMissing:
        return []


def remove_containers(label: str) -> list[str]:
    """Force-remove every container labelled io.rocmkit.run=<label>, through the engine. Returns their ids."""
    from .docker_engine import Engine

    try:
        engine = Engine.connect(timeout=30)
    except EnvironmentMissing:
        return []
    return engine.remove_labelled(f"{RUN_LABEL}={label}")


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _started(pid: int) -> str | None:
    """When a process started, as psutil reads it (the runner's own way to tell a process from a later one with its
    pid, runtime/proc.py); None when it is gone (a zombie is)."""
    import psutil

    try:
        p = psutil.Process(pid)
        return None if p.status() == psutil.STATUS_ZOMBIE else f"{p.create_time():.2f}"
    except psutil.Error:
        return None


def owner(pid: int | None = None) -> str:
    """This process's (or pid's) OWNER_LABEL value."""
    pid = os.getpid() if pid is None else pid
    return f"{_boot_id()} {pid} {_started(pid) or 0}"


def orphaned(value: str) -> int | None:
    """The pid of the rocmkit process named by an OWNER_LABEL value when it is gone from this host (its boot, its
    pid with that start time); None when it lives, or was another host's (an engine shared between hosts)."""
    try:
        boot, pid, started = value.split()
    except ValueError:
        return None
    if boot != _boot_id() or not pid.isdigit():
        return None
    return None if _started(int(pid)) == started else int(pid)


def reap_orphans(engine) -> list[str]:
    """Remove the containers rocmkit started whose rocmkit process is gone (killed by SIGKILL, it could not remove
    them, and they may hold GPU memory): one sentence for each, for the certificate's notes."""
    said = []
    for c in engine.labelled(OWNER_LABEL):
        pid = orphaned(c["labels"].get(OWNER_LABEL, ""))
        if pid is None or not engine.remove(c["id"]):
            continue
        said.append(f"removed container {c['name']} ({c['labels'].get('io.rocmkit.what', 'rocmkit')}, "
                    f"{c['status']}, created {c['created']}): rocmkit process {pid}, which started it, is gone")
    return said
