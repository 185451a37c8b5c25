"""Which ROCm a process on this host would use, and which ROCm versions it would mix: pure decisions on what
rocmkit/host/facts/rocm_installs.py read (the installs, the links between them, the loader's paths). Kept out of
facts/ (it decides) and out of checks/ (the summary version, Facts.rocm_version, is set from it at collect time
so every check and the report name the same ROCm).

The layouts and where each comes from are in docs/guides/hosts.md ("ROCm installs"): legacy `/opt/rocm-X.Y.Z`
(its `/opt/rocm` link made by update-alternatives or by hand), the TheRock tarball (`/opt/rocm-X.Y.Z`, `/opt/rocm`
a link to it), the Core SDK's packages (`/opt/rocm/core-X.Y`, with `core`, `core-X`, `bin`, `lib`, ... links made
by update-alternatives in amdrocm-core's postinst), ROCm 7.14's `/opt/rocm/core`, `/opt/rocm/extras-N`, and ROCm
from pip (`_rocm_sdk_core`)."""

from __future__ import annotations

import re
from typing import NamedTuple


class Active(NamedTuple):
    """The install a process uses (None where none would be found) and why, in one clause."""

    install: dict | None
    why: str


def version_key(version: str | None) -> tuple[int, ...]:
    """(major, minor, patch) of "10.0.0-43"; () where it has none. Build numbers never decide."""
    m = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", version or "")
    return tuple(int(g) for g in m.groups() if g is not None) if m else ()


def release(version: str | None) -> str | None:
    """"10.0" of "10.0.0-43": the part two installs must share to be one ROCm (7.0 and 7.2 differ in ABI too:
    libamdhip64.so.7 of one beside rocBLAS of the other is what fails)."""
    key = version_key(version)
    return ".".join(map(str, key[:2])) if len(key) >= 2 else (str(key[0]) if key else None)


def owner(installs: list[dict], real: str | None) -> dict | None:
    """The install whose (resolved) tree holds this resolved path: the longest prefix wins, so
    /opt/rocm/core-10.0/lib belongs to core-10.0, not to a legacy /opt/rocm directory around it."""
    if not real:
        return None
    best = None
    for i in installs:
        root = i.get("real")
        inside = root and (real == root or real.startswith(root.rstrip("/") + "/"))
        if inside and (best is None or len(root) > len(best["real"])):
            best = i
    return best


def active(installs: list[dict], links: dict[str, str | None], env: dict[str, str]) -> Active:
    """The ROCm a process finds, in the order its tools look: ROCM_PATH (hipcc, amd-smi's Python package, Ray's
    rocm-smi lookup, CMake's find_package all read it), then /opt/rocm itself (a legacy tree, or the link the
    tarball and legacy packages make), then the Core SDK's links in /opt/rocm (`core`, then `lib`: what
    update-alternatives picked, the highest version), then the only install there is. `links` maps a path
    ("/opt/rocm", "/opt/rocm/core", "/opt/rocm/lib") to its resolved target, None where it is not a link."""
    system = [i for i in installs if i.get("kind") != "pip"]
    rocm_path = (env.get("ROCM_PATH") or "").rstrip("/")
    if rocm_path:
        real = links.get("ROCM_PATH") or rocm_path
        i = owner(system, real)
        if i is not None:
            return Active(i, f"ROCM_PATH={rocm_path}")
        i = owner(system, links.get("ROCM_PATH/lib"))
        if i is not None:
            return Active(i, f"ROCM_PATH={rocm_path}, whose lib/ links to {links['ROCM_PATH/lib']}")
        return Active(None, f"ROCM_PATH={rocm_path} names no ROCm install")
    target = links.get("/opt/rocm")
    i = owner(system, target)
    if i is not None and i.get("version"):
        return Active(i, f"/opt/rocm links to {target}")
    opt = next((i for i in system if i.get("path") == "/opt/rocm" and i.get("version")), None)
    if opt is not None:
        return Active(opt, "/opt/rocm is a ROCm tree (its own .info/version)")
    for link, name in (("/opt/rocm/core", "core"), ("/opt/rocm/lib", "rocm-lib")):
        target = links.get(link)
        i = owner(system, target)
        if i is not None:
            return Active(i, f"{link} links to {target} (update-alternatives '{name}' picks the highest version)")
    candidates = [i for i in system if i.get("kind") in ("core", "legacy") and i.get("version")]
    if len(candidates) == 1:
        return Active(candidates[0], f"the only ROCm install ({candidates[0]['path']}); nothing links it to "
                                     "/opt/rocm, so tools that look there find nothing: set ROCM_PATH")
    if candidates:
        best = max(candidates, key=lambda i: version_key(i.get("version")))
        return Active(best, f"no ROCM_PATH and no /opt/rocm link: the newest of {len(candidates)} installs, which "
                            "a process finds only where ROCM_PATH, PATH or the loader's path names it")
    return Active(None, "no ROCm install under /opt and no ROCM_PATH")


def library_releases(installs: list[dict], lib_dirs: list[tuple[str, str]],
                     chosen: dict | None) -> dict[str, list[str]]:
    """The ROCm releases a process's libraries would come from, each with where the loader is told to look: the
    active install (its lib/), and every (source, resolved dir) the loader searches (LD_LIBRARY_PATH,
    /etc/ld.so.conf.d) that lies in an install. Two releases here is a job that loads libamdhip64 from one and
    rocBLAS or RCCL from the other."""
    out: dict[str, list[str]] = {}
    if chosen is not None and release(chosen.get("version")):
        out.setdefault(release(chosen["version"]), []).append(f"the active ROCm ({chosen['path']})")
    for source, real in lib_dirs:
        i = owner([x for x in installs if x.get("kind") != "pip"], real)
        r = release(i.get("version")) if i else None
        if r:
            out.setdefault(r, []).append(f"{source}: {real}")
    return out
