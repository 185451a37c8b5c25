"""Every ROCm install on the host, the one a process uses and why, two ROCm releases a job would mix, the
`amd-smi`/`rocm-smi` it would run, and ROCm's packages (legacy `rocm-*` and the Core SDK's `amdrocm-*`). Pure: it
reads what rocmkit/host/facts/rocm_installs.py gathered; rocmkit/host/rocm_layout.py decides which install wins."""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from ..rocm_layout import active, library_releases, release
from . import Context, documents, finding

LAYOUT_DOC = ("https://rocm.docs.amd.com (ROCm 10.0.0, \"Transition guide from legacy ROCm release stream\"); "
              "ROCm/TheRock build_tools/packaging/linux (amdrocm-core-postinst.j2, build_package.py)")
KINDS = {"legacy": "", "core": " (Core SDK)", "extras": " (extras)", "rocm_path": " (ROCM_PATH)", "pip": " (pip)"}


def _name(i: dict) -> str:
    return f"ROCm {i.get('version') or '(version unknown)'} at {i['path']}{KINDS.get(i.get('kind'), '')}"


def _data(f: Facts) -> dict | None:
    data = f.rocm_installs
    return data if isinstance(data, dict) and data.get("installs") is not None else None


@documents("rocm.installs",
           what="every ROCm install (`/opt/rocm-X.Y`, `/opt/rocm`, the Core SDK's `/opt/rocm/core-X.Y` and `/opt/rocm/core`, `/opt/rocm/extras-N`, `ROCM_PATH`, pip's `_rocm_sdk_core`) and the one a process uses, with why (`ROCM_PATH`, the `/opt/rocm` links update-alternatives makes); warns where nothing points at the only one")
def check_installs(f: Facts, ctx: Context):
    data = _data(f)
    if data is None or not data["installs"]:
        return
    installs = data["installs"]
    chosen, why = active(installs, data["links"], f.env)
    listed = "; ".join(_name(i) for i in installs)
    evidence = {"installs": installs, "links": data["links"], "alternatives": data.get("alternatives") or {}}
    if chosen is None:
        system = [i for i in installs if i.get("kind") != "pip"]
        yield finding("rocm.installs", "software", Status.WARN if system else Status.PASS,
                      f"{listed}; a process uses none of them: {why}" if system else f"{listed}: the only ROCm is "
                      "the one PyTorch's wheels bring", fix="set ROCM_PATH to the install jobs should use"
                      if system else None, ref=LAYOUT_DOC, **evidence)
        return
    unlinked = "nothing links it" in why
    yield finding("rocm.installs", "software", Status.WARN if unlinked else Status.PASS,
                  f"a process uses {_name(chosen)}: {why}" + (f" (all: {listed})" if len(installs) > 1 else ""),
                  fix=f"export ROCM_PATH={chosen['path']} (or install the amdrocm meta package: its amdrocm-core's "
                      f"postinst links /opt/rocm/core, /opt/rocm/bin and /opt/rocm/lib to it)" if unlinked else None,
                  ref=LAYOUT_DOC, active=chosen["path"], why=why, **evidence)


@documents("rocm.mixed",
           what="one ROCm release on a job's library path: the active ROCm, `LD_LIBRARY_PATH` and `/etc/ld.so.conf.d` naming a 7.x tree beside a 10.x one loads libamdhip64 from one and rocBLAS or RCCL from the other (warn)")
def check_mixed(f: Facts, ctx: Context):
    data = _data(f)
    if data is None or not data["installs"]:
        return
    chosen = active(data["installs"], data["links"], f.env).install
    releases = library_releases(data["installs"], data.get("lib_dirs") or [], chosen)
    if len(releases) < 2:
        if releases:
            yield finding("rocm.mixed", "software", Status.PASS,
                          f"one ROCm release ({next(iter(releases))}) on the library path", releases=releases)
        return
    where = "; ".join(f"ROCm {r} from {', '.join(w)}" for r, w in sorted(releases.items()))
    keep = release((chosen or {}).get("version"))
    yield finding("rocm.mixed", "software", Status.WARN,
                  f"a job would mix {len(releases)} ROCm releases: {where}",
                  fix=(f"keep ROCm {keep}'s paths only: drop the others from LD_LIBRARY_PATH and "
                       "/etc/ld.so.conf.d (then `sudo ldconfig`)") if keep else
                      "point LD_LIBRARY_PATH and /etc/ld.so.conf.d at one ROCm (then `sudo ldconfig`)",
                  ref=LAYOUT_DOC, releases=releases)


@documents("rocm.tools",
           what="`amd-smi` and `rocm-smi`: found in the active ROCm's `bin/` (the Core SDK's `/opt/rocm/core-X.Y/bin`) or in `/usr/bin` (update-alternatives' links), and from the same ROCm")
def check_tools(f: Facts, ctx: Context):
    data = _data(f)
    if data is None:
        return
    chosen = active(data["installs"], data["links"], f.env).install
    if chosen is None or chosen.get("kind") == "pip":
        return
    own = {t: p for t, p in (chosen.get("tools") or {}).items() if t in ("amd-smi", "rocm-smi")}
    on_path = {t: p for t, p in (data.get("tools") or {}).items() if t in ("amd-smi", "rocm-smi")}
    foreign = {t: p for t, p in on_path.items() if p and not p.startswith(chosen["real"].rstrip("/") + "/")}
    if not own and not on_path:
        # a skip, not a warning: jobs never run them (Ray reads librocm_smi64 itself: software.ray_gpus)
        yield finding("rocm.tools", "software", Status.SKIP,
                      f"no amd-smi or rocm-smi in {chosen['real']}/bin or /usr/bin, to query the GPUs by hand",
                      fix="install amd-smi (amdrocm-amdsmi with the Core SDK, amd-smi-lib before it)", ref=LAYOUT_DOC)
    elif foreign:
        yield finding("rocm.tools", "software", Status.WARN,
                      "/usr/bin's " + ", ".join(f"{t} runs {p}" for t, p in sorted(foreign.items())) +
                      f", not the active ROCm's ({chosen['real']})",
                      fix="sudo update-alternatives --config amd-smi (and rocm-smi), or put "
                          f"{chosen['real']}/bin first on PATH", ref=LAYOUT_DOC, tools=own, usr_bin=on_path)
    else:
        found = {**{t: p for t, p in on_path.items() if p}, **own}
        yield finding("rocm.tools", "software", Status.PASS,
                      ", ".join(f"{t} at {p}" for t, p in sorted(found.items())), tools=own, usr_bin=on_path)


@documents("rocm.packages",
           what="ROCm's dpkg packages, legacy (`rocm-core`, `hip-runtime-amd`, ...) and the Core SDK's (`amdrocm-*`), and whether they come from more than one release")
def check_packages(f: Facts, ctx: Context):
    data = _data(f)
    packages = (data or {}).get("packages") or {}
    if not packages:
        return
    by_release: dict[str, list[str]] = {}
    for name, version in sorted(packages.items()):
        # amdrocm10.0-gfx94x names its release; the version field of the others does
        digits = name[len("amdrocm"):] if name.startswith("amdrocm") and name[7:8].isdigit() else version
        by_release.setdefault(release(digits) or "?", []).append(name)
    core = sorted(n for n in packages if n.startswith("amdrocm"))
    legacy = sorted(n for n in packages if not n.startswith("amdrocm"))
    kinds = ", ".join(x for x in (f"{len(core)} Core SDK (amdrocm-*)" if core else "",
                                  f"{len(legacy)} legacy" if legacy else "") if x)
    releases = sorted(r for r in by_release if r != "?")
    if len(releases) > 1:
        yield finding("rocm.packages", "software", Status.WARN,
                      f"ROCm packages of {len(releases)} releases installed ({', '.join(releases)}; {kinds})",
                      fix="fine while each job uses one (rocm.mixed); remove the release nothing uses",
                      ref=LAYOUT_DOC, packages=packages, releases=by_release)
    else:
        yield finding("rocm.packages", "software", Status.PASS,
                      f"{len(packages)} ROCm packages ({kinds}) of ROCm {releases[0] if releases else '?'}",
                      packages=packages)


CHECKS = [check_installs, check_mixed, check_tools, check_packages]
