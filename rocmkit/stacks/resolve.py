"""Resolve a stack before building it: pip's own resolver, as a dry run, over what the image would install.

What is resolved: the base pins and every pip component's pins together (a component's pin of a package the
base also pins replaces the base one, as the final stage's `pip install` upgrades it), plus the requirement
files and pyproject dependencies of git components whose source is given (`--source NAME=DIR`). Pins of
`no_deps` components are checked apart, with `--no-deps`, as the image installs them.

A pin served only by an index or find-links page that cannot be reached from here (a local version such as
`+rocm7.0.2` or `+cpu`) is stood in by an empty wheel of the same name and version, so that everything else
is still checked against it; the result then says plainly which pins were not checked and is partial.
A git component whose source is not given has requirements that are not read: the result says which, how to
have them read, and is "unread" (what was read resolves; not a plain "resolves").
"""

from __future__ import annotations

import http.client
import json
import re
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..runtime import proc
from . import git_requirements, resolve_cache
from .model import Stack
from .pip_tool import find_interpreter, pip_too_old, pip_version

PYPI = "https://pypi.org/simple/"
# Ubuntu 22.04's glibc (2.35) is the oldest among the built-in stacks' bases; pip does not widen a
# manylinux tag to older ones by itself, so every older tag is listed.
PLATFORMS = [f"manylinux_2_{m}_x86_64" for m in range(35, 4, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
PROBE_TIMEOUT_S = 6.0
RESOLVE_TIMEOUT_S = 600.0


@dataclass
class Pin:
    requirement: str
    where: str  # "file:line" of the pin in the stack file, or the requirement file it came from
    no_deps: bool = False


@dataclass
class Result:
    stack: str
    python: str
    # ok: everything read resolves; unread: what was read resolves, but some git components' requirements were not
    # read (no source given); partial: pins stood in (their page unreachable); conflict; offline
    status: str = "ok"
    mode: str = ""  # how pip ran: under a local Python X.Y (sdists allowed), or by tags (wheels only)
    seconds: float = 0.0
    conflicts: list[dict] = field(default_factory=list)  # {"message", "sides": [{"requirement", "where"}]}
    not_checked: list[dict] = field(default_factory=list)  # {"requirement", "where", "why"}
    git_requirements: list[dict] = field(default_factory=list)  # {"component", "read": bool, "detail", "how"}
    resolved: dict[str, str] = field(default_factory=dict)  # name -> version pip chose
    pip_tail: list[str] = field(default_factory=list)
    built_from_sdist: list[str] = field(default_factory=list)  # pure-Python sdists built here (wheels-only mode)

    def as_json(self) -> dict:
        return {"stack": self.stack, "python": self.python, "status": self.status, "mode": self.mode, "seconds": round(self.seconds, 1),
                "conflicts": self.conflicts, "not_checked": self.not_checked,
                "git_requirements": self.git_requirements, "built_from_sdist": self.built_from_sdist,
                "resolved": self.resolved}

    def lines(self) -> list[str]:
        """The text form: what `rocmkit stacks --resolve` prints, and `rocmkit build` on stderr before building."""
        unread = self.unread()
        # "resolves" only when everything was read: a part left unread is named in the verdict itself
        left = (f"; the requirements of {len(unread)} git component(s) NOT READ ({', '.join(unread)})"
                if unread and self.status in ("unread", "partial") else "")
        partly = f"RESOLVES ONLY WHAT IT COULD CHECK ({len(self.not_checked)} pin(s) NOT CHECKED)"
        head = {"ok": "resolves", "unread": "RESOLVES ONLY WHAT IT READ", "partial": partly,
                "conflict": "DOES NOT RESOLVE", "offline": "NOT RESOLVED (index unreachable)"}[self.status] + left
        out = [f"{self.stack} (Python {self.python}): {head} [{self.seconds:.1f}s, {len(self.resolved)} distributions]"]
        if self.mode:
            out.append(f"  pip ran {self.mode}")
        out += [f"  built here from its sdist (pure Python, so valid for Python {self.python}): {b}"
                for b in self.built_from_sdist]
        for c in self.conflicts:
            out.append(f"  CONFLICT {c['message']}")
            for side in c["sides"]:
                where = f"  [{side['where']}]" if side.get("where") else ""
                out.append(f"    {side['by']} requires {side['requirement']}{where}")
        out += [f"  NOT CHECKED {n['requirement']}  [{n['where']}]: {n['why']}" for n in self.not_checked]
        for g in self.git_requirements:
            out.append(f"  git {g['component']}: {g['detail']}" + ("" if g["read"] else f"; to read them: {g['how']}"))
        return out

    def unread(self) -> list[str]:
        """The git components some of whose requirements were not read, in the stack's order."""
        return list(dict.fromkeys(g["component"] for g in self.git_requirements if not g["read"]))


def stack_text(stack: Stack) -> str:
    """The stack file's raw text, for line numbers. A built-in stack is read from the package: its path is a
    label ("rocmkit/resources/stacks/NAME.toml"), which from another folder names nothing or another file."""
    from . import builtin_names, source

    if stack.name in builtin_names() and stack.path == source(stack.name).origin:
        return source(stack.name).text
    path = Path(stack.path)
    return path.read_text(encoding="utf-8") if path.is_file() else ""


def pin_line(stack: Stack, text: str, requirement: str) -> str:
    """`file:line` of the quoted requirement in the stack file (the first line that has it)."""
    for i, line in enumerate(text.splitlines(), 1):
        if f'"{requirement}"' in line or f"'{requirement}'" in line:
            return f"{stack.path}:{i}"
    return stack.path


def reachable(url: str) -> bool:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=PROBE_TIMEOUT_S) as r:
            return r.status < 400
    except (OSError, ValueError, http.client.HTTPException):  # DNS, refused, TLS, timeout, HTTP error
        return False


def _is_url(s: str) -> bool:
    return s.startswith(("http://", "https://"))


def stack_pins(stack: Stack) -> tuple[list[Pin], list[Pin]]:
    """(pins resolved with their dependencies, no_deps pins), each with its stack line."""
    text = stack_text(stack)
    comp_reqs = [(r, c.no_deps) for c in stack.pip_components + stack.wheel_components for r in c.pip]
    repinned = {canonicalize_name(Requirement(r).name) for r, _ in comp_reqs}
    pins = [Pin(r, pin_line(stack, text, r)) for r in stack.base.pip if canonicalize_name(Requirement(r).name) not in repinned]
    pins += [Pin(r, pin_line(stack, text, r), no_deps) for r, no_deps in comp_reqs]
    pins += [Pin(r, pin_line(stack, text, r)) for r in rocm_wheel_pins(stack)]
    return [p for p in pins if not p.no_deps], [p for p in pins if p.no_deps]


def _stub_wheel(directory: Path, requirement: str) -> None:
    """An empty wheel of the pinned name and version: stands in for a pin whose source is unreachable."""
    req = Requirement(requirement)
    version = next(iter(req.specifier)).version
    dist = re.sub(r"[-_.]+", "_", req.name).lower()
    info = f"{dist}-{version}.dist-info"
    with zipfile.ZipFile(directory / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {req.name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: rocmkit\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


_USER = re.compile(r"^The user requested (\S+?)(?: \(from (.+)\))?$")
_DEPENDS = re.compile(r"^(\S+) (\S+) depends on (.+)$")
_NOT_FOUND = re.compile(r"^ERROR: Could not find a version that satisfies the requirement (.+?)(?: \(from versions: (.*)\))?$")


def parse_pip_failure(lines: list[str]) -> list[dict]:
    """pip's ResolutionImpossible / no-matching-distribution output -> conflicts, each naming its sides."""
    conflicts: list[dict] = []
    sides: list[dict] = []
    in_cause = False
    for raw in lines:
        line = raw.strip()
        if line.startswith("The conflict is caused by"):
            in_cause, sides = True, []
            continue
        if in_cause:
            m = _USER.match(line)
            d = _DEPENDS.match(line)
            if m:
                sides.append({"requirement": m.group(1), "by": "the stack" if not m.group(2) else m.group(2)})
            elif d:
                sides.append({"requirement": d.group(3), "by": f"{d.group(1)}=={d.group(2)}"})
            elif not line or line.startswith(("Additionally", "To fix")):
                if sides:
                    conflicts.append({"message": "; ".join(
                        f"{s['by']} requires {s['requirement']}" for s in sides), "sides": sides})
                in_cause, sides = False, []
            continue
        nf = _NOT_FOUND.match(line)
        if nf:
            req_text = nf.group(1)
            wanted = re.sub(r" \(from .*\)$", "", req_text)
            by = re.search(r" \(from (.+)\)$", req_text)
            try:
                r = Requirement(wanted.split(";")[0])
                spec = str(r.specifier)
                name = r.name
            except InvalidRequirement:
                spec, name = "", wanted
            version = spec.removeprefix("==")
            available = (nf.group(2) or "none").strip()
            msg = (f"{name}: no version {version} on the index (available: {available})" if spec
                   else f"{name}: no distribution for this Python and platform (available: {available})")
            conflicts.append({"message": msg, "sides": [
                {"requirement": wanted, "by": by.group(1) if by else "the stack"}]})
    return conflicts


def _pip_base(stack: Stack, report: Path, interpreter: str | None) -> list[str]:
    """pip under the stack's Python when this machine has one (sdists allowed: pip builds their metadata);
    else for its version and Linux x86_64 by tags, which pip allows for wheels only."""
    argv = [sys.executable, "-m", "pip"] + (["--python", interpreter] if interpreter else []) + [
        "install", "--isolated", "--dry-run", "--ignore-installed", "--disable-pip-version-check",
        "--progress-bar", "off", "--report", str(report),
        # An index without PEP 658 metadata files (many mirrors and proxies) makes a dry run download every
        # wheel whole: 14 GB at once for the built-in stacks, which filled CI's disk. fast-deps reads only
        # a wheel's METADATA by HTTP range requests (and downloads whole where ranges are refused).
        "--use-feature=fast-deps"]
    if interpreter:
        return argv
    # pip before 24 refuses --platform outside an install into --target, even in a dry run ("Can not use any
    # platform or abi specific options unless installing via '--target'"): a target beside the report, which a dry
    # run never writes, satisfies every pip that has --report (22.2 and later)
    argv += ["--python-version", stack.python, "--only-binary=:all:", "--target", str(report.parent / "target")]
    for p in PLATFORMS:
        argv += ["--platform", p]
    return argv


def _cert_args() -> list[str]:
    import os
    # --isolated drops pip's environment; a CA bundle is trust, not a package source, so it is kept.
    cert = os.environ.get("PIP_CERT") or os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("SSL_CERT_FILE")
    return ["--cert", cert] if cert else []


def rocm_wheel_pins(stack: Stack) -> tuple[str, ...]:
    """`[base.rocm_wheels]` for every target: the SDK, torch and each arch's device payload resolve with the rest."""
    rw = stack.base.rocm_wheels
    return rw.requirements(stack.targets) if rw else ()


def resolve(stack: Stack, sources: dict[str, str] | None = None, find_links: list[str] | None = None,
            index_url: str = PYPI) -> Result:
    """Dry-run pip over the stack; see the module doc. Never raises for a conflict: the Result says it. A stack
    that resolved, asked again with the same file, pip and index within a day, answers from the cache."""
    started = time.monotonic()
    too_old = pip_too_old(sys.executable)
    if too_old:
        from ..errors import EnvironmentMissing

        raise EnvironmentMissing(too_old, hint=f"upgrade it: {sys.executable} -m pip install -U pip")
    key = resolve_cache.key(stack_text(stack) or repr(stack), sources or {}, find_links or [], index_url,
                            pip_version(sys.executable)[0], bool(find_interpreter(stack.python)))
    hit = resolve_cache.cached(key, Result)
    if hit is not None:
        hit.seconds = time.monotonic() - started
        return hit
    result = _resolve(stack, sources, find_links, index_url, started)
    if result.status in resolve_cache.KEPT:
        resolve_cache.keep(key, result.as_json())
    return result


def _resolve(stack: Stack, sources: dict[str, str] | None, find_links: list[str] | None, index_url: str,
             started: float) -> Result:
    result = Result(stack=stack.name, python=stack.python)
    pins, no_deps_pins = stack_pins(stack)
    git_pins, result.git_requirements = git_requirements.git_requirement_pins(stack, sources or {}, Pin)
    if _is_url(index_url) and not reachable(index_url):
        result.status = "offline"
        result.seconds = time.monotonic() - started
        return result
    urls = [u for u in (stack.base.pip_extra_index_url, stack.base.pip_find_links) if u]
    urls += [c.extra_index_url for c in stack.pip_components if c.extra_index_url]
    rw = stack.base.rocm_wheels
    rw_urls = [u for u in (rw.index_url, rw.find_links) if u] if rw else []
    urls += rw_urls
    unreachable = [u for u in urls if _is_url(u) and not reachable(u)]
    interpreter = find_interpreter(stack.python)
    result.mode = (f"under {interpreter} (sdists allowed)" if interpreter else
                   f"by tags, Python {stack.python} manylinux x86_64 (wheels only: no local Python {stack.python})")
    with tempfile.TemporaryDirectory(prefix="rocmkit-resolve-") as tmp:
        stubs = Path(tmp) / "stubs"
        stubs.mkdir()
        source_args = ["--index-url", index_url]
        if stack.base.pip_extra_index_url and stack.base.pip_extra_index_url not in unreachable:
            source_args += ["--extra-index-url", stack.base.pip_extra_index_url]
        for c in stack.pip_components:
            if c.extra_index_url and c.extra_index_url not in unreachable:
                source_args += ["--extra-index-url", c.extra_index_url]
        if stack.base.pip_find_links and stack.base.pip_find_links not in unreachable:
            source_args += ["--find-links", stack.base.pip_find_links]
        if rw and rw.index_url and rw.index_url not in unreachable:
            source_args += ["--extra-index-url", rw.index_url]
        if rw and rw.find_links and rw.find_links not in unreachable:
            source_args += ["--find-links", rw.find_links]
        # TheRock's packages exist only on their own index: where it is unreachable every one of them is stood in.
        rw_unreachable = set(rocm_wheel_pins(stack)) if set(rw_urls) & set(unreachable) else set()
        for f in find_links or []:
            source_args += ["--find-links", f]
        if unreachable:
            # A local version label is served only by the stack's own sources, never by the index.
            for p in pins + no_deps_pins:
                spec = list(Requirement(p.requirement).specifier)
                if len(spec) == 1 and spec[0].operator == "==" and ("+" in spec[0].version
                                                                     or p.requirement in rw_unreachable) \
                        and not _served_locally(p.requirement, find_links or []):
                    _stub_wheel(stubs, p.requirement)
                    result.not_checked.append({
                        "requirement": p.requirement, "where": p.where,
                        "why": f"served only by {' / '.join(unreachable)}, unreachable from here; stood in by an "
                               "empty wheel of that name and version, so its own dependencies are not checked"})
            source_args += ["--find-links", str(stubs)]
        runs = [(pins + git_pins, False), (no_deps_pins, True)]
        for i, (run_pins, no_deps) in enumerate(runs):
            if not run_pins:
                continue
            report = Path(tmp) / f"report{i}.json"
            argv = _pip_base(stack, report, interpreter) + _cert_args() + source_args + (["--no-deps"] if no_deps else [])
            argv += [p.requirement for p in run_pins]
            r = proc.capture(argv, timeout=RESOLVE_TIMEOUT_S)
            built: set[str] = set()
            while not r.ok and not interpreter:
                # By tags pip sees wheels only; a requirement served as an sdist alone (hydra-core's antlr4 4.9.3)
                # is built here once, and kept only when the wheel is pure Python, valid for any Python.
                wanted = [c["sides"][0]["requirement"] for c in parse_pip_failure(r.tail)
                          if len(c["sides"]) == 1 and ": no " in c["message"]
                          and c["sides"][0]["requirement"] not in built]
                if not wanted or not _pure_wheel(wanted[0], stubs, source_args):
                    break
                built.add(wanted[0])
                result.built_from_sdist.append(wanted[0])
                r = proc.capture(argv + ["--find-links", str(stubs)], timeout=RESOLVE_TIMEOUT_S)
            if not r.ok:
                result.pip_tail = [ln for ln in r.tail if not ln.lstrip().startswith(("Collecting", "Using", "Downloading"))]
                conflicts = parse_pip_failure(r.tail) or [{"message": "pip could not resolve the stack: "
                                                           + " | ".join(result.pip_tail[-3:]), "sides": []}]
                for c in conflicts:
                    if not interpreter and (": no version " in c["message"] or ": no distribution " in c["message"]):
                        c["message"] += (f"; pip looked at wheels only (no local Python {stack.python}), so an "
                                         "sdist-only release is not seen: a local Python of that version lets pip use it")
                    for s in c["sides"]:
                        s["where"] = _where(s, run_pins)
                result.conflicts += conflicts
                continue
            result.resolved.update(_report_versions(report))
    if result.conflicts:
        result.status = "conflict"
    elif result.not_checked:
        result.status = "partial"
    elif result.unread():
        result.status = "unread"
    result.seconds = time.monotonic() - started
    return result


def _pure_wheel(requirement: str, directory: Path, source_args: list[str]) -> bool:
    """Build a wheel of an sdist-only requirement with this Python; True when it is pure (py3-none-any)."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-sdist-") as tmp:
        r = proc.capture([sys.executable, "-m", "pip", "wheel", "--isolated", "--no-deps", "--disable-pip-version-check",
                          "--progress-bar", "off", "--wheel-dir", tmp, *_cert_args(), *source_args, requirement],
                         timeout=RESOLVE_TIMEOUT_S)
        wheels = list(Path(tmp).glob("*-none-any.whl"))
        if not r.ok or len(wheels) != 1:
            return False
        wheels[0].replace(directory / wheels[0].name)
        return True


def _served_locally(requirement: str, find_links: list[str]) -> bool:
    """Whether a --find-links folder given by the user holds a wheel of this exact pin."""
    req = Requirement(requirement)
    version = next(iter(req.specifier)).version
    dist = re.sub(r"[-_.]+", "_", req.name).lower()
    return any(Path(f).is_dir() and any(Path(f).glob(f"{dist}-{version}-*.whl")) for f in find_links)


def _where(side: dict, pins: list[Pin]) -> str:
    """The stack line of a conflict side: the pin itself, or the pin of the package that asked for it."""
    if side["by"] == "the stack":  # a requirement as given: the pin's own line (stack or requirements file)
        exact = next((p.where for p in pins if p.requirement == side["requirement"]), None)
        if exact:
            return exact
    asked_by = side["by"].split("==")[0]
    candidates = [side["requirement"]] if side["by"] == "the stack" else [asked_by, side["requirement"]]
    for text in candidates:
        try:
            name = canonicalize_name(Requirement(text.split(";")[0].strip()).name)
        except InvalidRequirement:
            continue
        for p in pins:
            if canonicalize_name(Requirement(p.requirement).name) == name:
                return p.where
    return ""


def _report_versions(report: Path) -> dict[str, str]:
    try:
        doc = json.loads(report.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {i["metadata"]["name"]: i["metadata"]["version"] for i in doc.get("install", []) if "metadata" in i}
