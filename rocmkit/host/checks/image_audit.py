"""Images that cannot run on the host's GPU: shared objects without a code object for the target arch,
two distributions providing one import name, JIT caches built for another torch or arch."""

from __future__ import annotations

import re
import time

from ... import archs
from ..facts import Facts
from ..model import Status
from . import Context, documents, finding, not_captured

REF_ARCH = "ROCm/aiter#3846; ROCm/ATOM#69; https://llvm.org/docs/AMDGPUUsage.html#amdgpu-generic-processor-table"


def _archs(f: Facts, ctx: Context) -> list[str]:
    """The archs code must run on: --arch or the image's manifest targets, else the GPUs found here."""
    if ctx.arch and not ctx.cpu:
        return archs.split_targets(ctx.arch)
    return sorted({d.gfx for d in f.devices if d.gfx})


@documents("image.code_objects", "image.code_objects.unreadable",
           what="with `--code-objects` (always in `doctor --image`): every `.so` in site-packages carrying GPU code (clang offload bundles in `.hip_fatbin` or elsewhere) has a code object for each target arch (a generic target such as gfx9-4-generic counts for its processors)")
def check_code_objects(f: Facts, ctx: Context):
    if f.process is None:
        return
    audit = f.process.get("code_objects")
    if audit is None:
        return  # not asked for (level 1 stays fast)
    # here, not at the top: the ELF reader's import is paid only by a run that audited code objects
    from ..facts.codeobjects import lacking, targets_of

    files = [r for r in audit.get("files", []) if isinstance(r, dict)]
    with_code = [r for r in files if r.get("bundles")]
    broken = [r for r in files if r.get("error")]
    if broken:
        yield finding("image.code_objects.unreadable", "software", Status.WARN,
                      f"{len(broken)} shared object(s) could not be fully read for GPU code objects",
                      fix="reinstall the package that owns each file (pip install --force-reinstall NAME)",
                      files=[{"path": r.get("path"), "error": r.get("error")} for r in broken[:20]])
    want = _archs(f, ctx)
    if ctx.cpu:
        return
    if not want:
        yield finding("image.code_objects", "software", Status.SKIP,
                      f"{len(with_code)} shared object(s) carry GPU code; no target arch to judge them against "
                      "(give --arch, or run in a rocmkit image or on an AMD GPU host)",
                      files=[{"path": r.get("path"), "targets": targets_of(r)} for r in with_code[:50]])
        return
    bad, unread = [], []
    for r in with_code:
        miss = {a: lacking(r, a) for a in want}
        if all(v is None for v in miss.values()):
            unread.append(r.get("path"))
            continue
        missing = {a: n for a, n in miss.items() if n}
        if missing:
            total = sum(int(b.get("count", 1)) for b in r["bundles"] if b.get("targets"))
            bad.append({"path": r.get("path"), "has": targets_of(r),
                        "missing": {a: f"{n} of {total} bundles" for a, n in missing.items()}})
    scanned = f"{audit.get('files_scanned')} shared objects scanned in {audit.get('seconds')} s"
    if bad:
        names = ", ".join(b["path"].rsplit("/", 1)[-1] for b in bad[:5]) + (" …" if len(bad) > 5 else "")
        yield finding("image.code_objects", "software", Status.FAIL,
                      f"{len(bad)} shared object(s) have no code object for {'/'.join(want)}: {names} — their "
                      "kernels fail with 'invalid device function' (hipErrorNoBinaryForGpu)",
                      fix=f"rebuild them with PYTORCH_ROCM_ARCH / GPU_ARCHS including {';'.join(want)} (rocmkit build "
                          "--arch sets every arch variable), or install wheels built for it",
                      ref=REF_ARCH, archs=want, files=bad[:50], compressed_unread=unread[:50], scanned=scanned)
    elif with_code:
        yield finding("image.code_objects", "software", Status.PASS if not unread else Status.WARN,
                      f"{len(with_code) - len(unread)} shared object(s) with GPU code all carry {'/'.join(want)}"
                      + (f"; {len(unread)} compressed, targets not read (no zstd decoder)" if unread else ""),
                      fix="pip install zstandard (or install the zstd program), then run again" if unread else None,
                      archs=want, compressed_unread=unread[:50], scanned=scanned)
    else:
        yield finding("image.code_objects", "software", Status.PASS,
                      f"no shared object in site-packages carries GPU code ({scanned})", archs=want)


def _norm(name) -> str:
    return re.sub(r"[-_.]+", "-", str(name or "")).lower()


def _owner(x: dict) -> str:
    """Who installed one copy: dpkg (a python3-* package lists its metadata folder), else its INSTALLER."""
    if x.get("dpkg"):
        return f"dpkg: {x['dpkg']}"
    return x.get("installer") or "unknown installer"


def _remove(x: dict) -> str:
    if x.get("dpkg"):
        return f"apt-get purge {x['dpkg']} (if no other Debian package depends on it)"
    return f"pip uninstall -y {x.get('name')} (with the Python whose site dir that is)"


def _by_design(d: dict) -> str | None:
    """Why a duplicate is harmless, or None. Two cases only:
    - Debian's layout: one distribution twice, the copy that sys.path reaches first installed by pip (a venv
      made with --system-site-packages, or /usr/local/lib/python3.X/dist-packages) and the shadowed one owned
      by dpkg in /usr/lib/python3/dist-packages. Import and pip both see only the first copy, and Debian's pip
      refuses to remove dpkg's files, so every pip install over a python3-* package leaves this pair.
    - An overlap whose shared files are byte-identical by their RECORD hashes (opencensus and
      opencensus-context both ship one opencensus/common/__init__.py): no install replaced another's content.
    Two pip copies, two names for one import, or a dpkg copy winning over pip's stay warnings."""
    a, b = d["distributions"]
    if d.get("kind") == "overlap":
        return "identical files" if d.get("identical") else None
    if d.get("kind") != "shadow" or _norm(a.get("name")) != _norm(b.get("name")):
        return None
    ia, ib = a.get("sys_path_index"), b.get("sys_path_index")
    if not isinstance(ia, int) or not isinstance(ib, int) or ia == ib:
        return None
    first, second = (a, b) if ia < ib else (b, a)
    return "debian shadowed" if second.get("dpkg") and not first.get("dpkg") else None


@documents("image.duplicate_dists",
           what="no two installed distributions provide one import name (opencv-python and opencv-python-headless, pynvml and nvidia-ml-py, triton and pytorch-triton-rocm): read from each dist-info's top_level.txt and RECORD; each copy is named with the tool that owns it (dpkg's file lists, else the dist-info's INSTALLER). Not counted: a Debian python3-* copy shadowed by pip's copy of the same distribution earlier on sys.path (Debian's normal layout), and files two distributions share byte for byte")
def check_duplicate_dists(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("image.duplicate_dists", "software", "installed distributions")
        return
    dups = f.process.get("duplicate_distributions")
    if dups is None:
        yield finding("image.duplicate_dists", "software", Status.SKIP,
                      "installed distributions were not read (older capture, or the metadata could not be read)")
        return
    dups = [d for d in dups if isinstance(d, dict) and len(d.get("distributions") or []) == 2
            and all(isinstance(x, dict) for x in d["distributions"])]
    benign = [(d, why) for d in dups for why in [_by_design(d)] if why]
    for d in dups:
        if any(d is b for b, _ in benign):
            continue
        a, b = (f"{x.get('name')} {x.get('version')}" for x in d["distributions"])
        how = {"overlap": f"both installed {d.get('shared_count')} same file(s), e.g. "
                          f"{', '.join(d.get('shared_files') or [])}: the last install won file by file",
               "shadow": "from two locations on sys.path: the first one shadows the other",
               }.get(d.get("kind"), "their files are not recorded")
        copies = "; ".join(f"{x.get('name')} {x.get('version')} in {x.get('location')} ({_owner(x)}): "
                           f"{_remove(x)}" for x in d["distributions"])
        yield finding(f"image.duplicate_dists.{d.get('import')}", "software", Status.WARN,
                      f"import {d.get('import')!r} is provided by {a} and {b}; {how}",
                      fix=f"keep one copy, remove the other: {copies}; then reinstall the one kept "
                          "(pip install --force-reinstall NAME) if they shared files",
                      duplicate=d)
    if len(benign) == len(dups):
        # counted by Debian package: python3-setuptools alone provides setuptools, pkg_resources, _distutils_hack
        shadowed = sorted({x["dpkg"] for d, why in benign if why == "debian shadowed"
                           for x in d["distributions"] if x.get("dpkg")})
        same = sorted({d["import"] for d, why in benign if why == "identical files"})
        notes = ([f"{len(shadowed)} Debian package(s) shadowed by pip's copies earlier on sys.path "
                  f"({', '.join(shadowed[:6])}{' …' if len(shadowed) > 6 else ''}; Debian's normal layout)"]
                 if shadowed else []) + \
                ([f"{', '.join(same)} shared by distributions installing identical files"] if same else [])
        yield finding("image.duplicate_dists", "software", Status.PASS,
                      "no two installed distributions conflict over one import name"
                      + (f" ({'; '.join(notes)})" if notes else ""),
                      by_design=[{"import": d.get("import"), "why": why, "duplicate": d} for d, why in benign][:50])


def _stale(module: dict, caches: dict, want: list[str]) -> list[str]:
    why = []
    built = module.get("mtime")
    for pkg in ("torch", "aiter"):
        installed = caches.get(f"{pkg}_installed")
        if isinstance(built, (int, float)) and isinstance(installed, (int, float)) and built < installed:
            why.append(f"built {time.strftime('%Y-%m-%d', time.gmtime(built))}, before the {pkg} installed now "
                       f"({time.strftime('%Y-%m-%d', time.gmtime(installed))})")
    has = module.get("targets") or module.get("offload_arch") or []
    from ..facts.codeobjects import runs_on  # as in check_code_objects: only where there are JIT modules

    missing = [a for a in want if has and not any(runs_on(t, a) for t in has)]
    if missing:
        why.append(f"built for {', '.join(has)}, not {', '.join(missing)}")
    return why


@documents("image.jit_cache",
           what="with `--code-objects`: aiter's JIT modules (AITER_JIT_DIR, aiter/jit, ~/.aiter/jit) and torch extensions (~/.cache/torch_extensions/py<ver>_<accel>, TORCH_EXTENSIONS_DIR) were built after the torch (and aiter) installed now and for the target arch: neither tool rebuilds a module when torch or the arch changes")
def check_jit_caches(f: Facts, ctx: Context):
    if f.process is None:
        return
    caches = f.process.get("jit_caches")
    if not isinstance(caches, dict):
        return
    want = [] if ctx.cpu else _archs(f, ctx)
    found = False
    for cache in caches.get("caches") or []:
        if not isinstance(cache, dict):
            continue
        stale = [(m.get("path"), why) for m in cache.get("modules") or [] if isinstance(m, dict)
                 for why in [_stale(m, caches, want)] if why]
        found = found or bool(cache.get("modules"))
        if stale:
            clear = "rm -rf " + cache.get("dir", "") + ("/*.so " + cache.get("dir", "") + "/build"
                                                       if cache.get("kind") == "aiter" else "")
            yield finding(f"image.jit_cache.{cache.get('kind')}", "software", Status.WARN,
                          f"{len(stale)} {cache.get('kind')} JIT module(s) in {cache.get('dir')} are stale: "
                          f"{stale[0][0].rsplit('/', 1)[-1]} {stale[0][1][0]}",
                          fix=f"{clear} (they are rebuilt on first use)", ref="ROCm/aiter#4437",
                          modules=[{"path": p, "why": w} for p, w in stale[:30]])
    if caches.get("caches") is not None and not any(
            isinstance(c, dict) and any(_stale(m, caches, want) for m in c.get("modules") or [] if isinstance(m, dict))
            for c in caches.get("caches") or []):
        yield finding("image.jit_cache", "software", Status.PASS,
                      "JIT caches match the torch installed and the target arch" if found
                      else "no aiter or torch-extension JIT modules cached")


CHECKS = [check_code_objects, check_duplicate_dists, check_jit_caches]
