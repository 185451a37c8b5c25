"""What an image's Python environment holds that breaks at run time: two distributions providing one import
name, and JIT caches (aiter's, torch extensions') built for another torch or GPU arch.

Both read the running process's environment (live only; a capture carries them in rocmkit-process.json).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

SKIP_TOP = re.compile(r".*\.(dist-info|egg-info|data|pth)$|__pycache__|\.\.|_virtualenv|__editable__.*")


def _record_paths(text: str) -> list[str]:
    """RECORD's first column, by regex (csv is slow on torch's 40k lines); csv only for a quoted path."""
    import csv

    paths = re.findall(r"^([^\n,\"][^\n,]*)", text, re.M)
    for line in re.findall(r'^".*$', text, re.M):
        paths += [row[0] for row in csv.reader([line]) if row]
    return paths


def _top(path: str) -> str | None:
    first = path.split("/", 1)[0]
    if path.endswith("/"):
        path = path + "x"
    if SKIP_TOP.fullmatch(first) or first in ("", "."):
        return None
    if "/" not in path.rstrip("/"):  # a module file: foo.py, foo.cpython-311-x86_64-linux-gnu.so
        m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)\.(py|pyc|so|pyd)$|([A-Za-z_][A-Za-z0-9_]*)\..*\.(so|pyd)$", first)
        return (m.group(1) or m.group(3)) if m else None
    return first


def _name_version(d) -> tuple[str, str]:
    """From the dist-info folder's name (`torch-2.6.0+rocm6.3.dist-info`): parsing METADATA with the email
    parser costs ~2 ms a distribution, too slow for level 1."""
    folder = getattr(getattr(d, "_path", None), "name", "")
    m = re.fullmatch(r"(.+?)-([^-]+)\.(dist-info|egg-info)", folder)
    if m:
        return m.group(1).replace("_", "-"), m.group(2)
    return d.metadata["Name"] or "?", d.version


def _record_hashes(text: str | None, paths: set[str]) -> dict[str, str]:
    """RECORD's hash column for the given paths (the shared files of an overlap only)."""
    out = {}
    for line in (text or "").splitlines():
        path, _, rest = line.partition(",")
        if path in paths:
            out[path] = rest.split(",", 1)[0]
    return out


def _installer(d) -> str | None:
    """INSTALLER of a dist-info: pip writes "pip" (uv "uv", conda "conda"); Debian's python3-* packages ship
    none (or "debian"), and an egg-info has no such file."""
    try:
        text = d.read_text("INSTALLER")
    except Exception:  # noqa: BLE001 - unreadable: unknown, not a crash
        return None
    return (text.strip() or None) if text else None


def dpkg_owners(paths: list[str], info_dir: str = "/var/lib/dpkg/info") -> dict[str, str]:
    """The Debian package whose file list names each metadata folder (what `dpkg -S PATH` answers, read
    from dpkg's own lists so no dpkg binary is needed). Only called for duplicates: a few hundred small files."""
    want = set(paths)
    found: dict[str, str] = {}
    try:
        lists = sorted(Path(info_dir).glob("*.list"))
    except OSError:
        return found
    for lst in lists:
        try:
            lines = lst.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            if line in want and line not in found:
                found[line] = lst.name[:-len(".list")].split(":", 1)[0]  # python3-certifi (:amd64 on multiarch)
        if len(found) == len(want):
            break
    return found


def _order(location: str, path: list[str]) -> int | None:
    """Where a site dir sits on sys.path: the lower one is what `import` and pip see."""
    real = os.path.realpath(location)
    for i, p in enumerate(path):
        if p and os.path.realpath(p) == real:
            return i
    return None


def duplicate_distributions(dists=None, path: list[str] | None = None,
                            dpkg_info: str = "/var/lib/dpkg/info") -> list[dict]:
    """Import names that two installed distributions provide, when they overwrite each other's files (one
    location) or one shadows the other (two sys.path entries). Namespace packages (`nvidia`, `google`) share
    only a top `__init__.py` or nothing, and are not reported. Each copy carries who installed it (INSTALLER,
    and the dpkg package listing its metadata folder) and its place on sys.path, so the check can tell
    Debian's layout (pip's copy shadowing a python3-* one) from a real conflict; an overlap says whether the
    shared files are byte-identical by their RECORD hashes."""
    from importlib import metadata

    by_import: dict[str, list[dict]] = {}
    for d in (metadata.distributions() if dists is None else dists):
        try:
            name, version = _name_version(d)
            base = str(d.locate_file(""))
            top_level = d.read_text("top_level.txt")
            record = None if top_level else d.read_text("RECORD")  # RECORD (large for torch) only when needed
        except Exception:  # noqa: BLE001 - a broken dist-info is skipped, not a crash
            continue
        # Only the distinct first components are classified here; the files are read only for an import name
        # that two distributions provide (rare), which keeps this a few ms per environment.
        firsts = set(re.findall(r'^"?([^\n,/"]+)(/?)', record or "", re.M))
        tops = {t for t in (_top(a + b) for a, b in firsts) if t}
        tops |= {t.split("/")[0] for t in (top_level or "").split()}
        for t in tops:
            by_import.setdefault(t, []).append({"name": name, "version": version, "location": base, "record": record,
                                                "dist": d, "meta": str(getattr(d, "_path", "") or "")})
    for provs in by_import.values():
        if len(provs) < 2:
            continue
        t = next(k for k, v in by_import.items() if v is provs)
        for x in provs:
            if x["record"] is None:
                try:
                    x["record"] = x["dist"].read_text("RECORD")
                except Exception:  # noqa: BLE001
                    x["record"] = None
            files = None if x["record"] is None else {p for p in _record_paths(x["record"]) if p.split("/", 1)[0] == t or
                                                     (("/" not in p) and _top(p) == t)}
            x["files"] = files
            x["regular"] = files is None or any(f in (f"{t}/__init__.py", f"{t}.py") or
                                                (f.startswith(t + ".") and "/" not in f) for f in files)
    out = []
    for imp, provs in sorted(by_import.items()):
        if len(provs) < 2:
            continue
        for i, a in enumerate(provs):
            for b in provs[i + 1:]:
                if a["location"] == b["location"]:
                    if a["files"] is None or b["files"] is None:
                        shared, kind = None, "unrecorded" if a["regular"] and b["regular"] else None
                    else:
                        shared = sorted(f for f in a["files"] & b["files"]
                                        if f != f"{imp}/__init__.py" and "__pycache__" not in f)
                        kind = "overlap" if shared else None
                else:
                    shared, kind = None, "shadow" if a["regular"] and b["regular"] else None
                if kind:
                    row = {"import": imp, "kind": kind, "shared_count": len(shared) if shared else 0,
                           "shared_files": (shared or [])[:5], "distributions": [a, b]}
                    if shared:
                        ha, hb = (_record_hashes(x["record"], set(shared)) for x in (a, b))
                        row["identical"] = all(ha.get(f) and ha.get(f) == hb.get(f) for f in shared)
                    out.append(row)
    _owners(out, sys.path if path is None else path, dpkg_info)
    return out


def _owners(rows: list[dict], path: list[str], dpkg_info: str) -> None:
    """Replace each duplicate's distributions by their record: name, version, location, installer, the dpkg
    package that lists the metadata folder, and the location's place on sys.path."""
    copies = {id(x): x for r in rows for x in r["distributions"]}
    if not copies:
        return
    installers = {k: _installer(x["dist"]) for k, x in copies.items()}
    # Only a copy no installer claims (or Debian's) is looked up in dpkg's lists: the scan then stops early.
    metas = [x["meta"] for k, x in copies.items() if x["meta"] and installers[k] in (None, "debian")]
    owners = dpkg_owners(metas, dpkg_info) if metas and os.path.isdir(dpkg_info) else {}
    for r in rows:
        r["distributions"] = [{"name": x["name"], "version": x["version"], "location": x["location"],
                               "installer": installers[id(x)], "dpkg": owners.get(x["meta"]),
                               "sys_path_index": _order(x["location"], path)} for x in r["distributions"]]


def _mtime(path: Path) -> float | None:
    try:
        return path.stat().st_mtime
    except OSError:
        return None


def _package_file(name: str, rel: str) -> Path | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    locs = list(spec.submodule_search_locations or []) if spec else []
    return Path(locs[0], rel) if locs else None


def _module(so: Path, ninja: Path | None) -> dict:
    from .codeobjects import audit_file, targets_of

    r = audit_file(str(so))
    flags: list[str] = []
    if ninja is not None:
        try:
            flags = sorted(set(re.findall(r"--offload-arch=([\w:+-]+)", ninja.read_text(errors="replace"))))
        except OSError:
            pass
    return {"path": str(so), "mtime": _mtime(so), "targets": targets_of(r), "offload_arch": flags,
            "error": r["error"] if r["error"] != "not an ELF file" else None}


def jit_caches(env: dict[str, str] | None = None, home: str | None = None) -> dict:
    """The JIT caches this process would load from, with each built module's code-object targets and time,
    and when torch and aiter were installed (their version file's mtime: pip writes files at install)."""
    env = dict(os.environ if env is None else env)
    home = home or os.path.expanduser("~")
    caches = []
    # aiter (aiter/jit/core.py get_user_jit_dir): AITER_JIT_DIR (JIT_WORKSPACE_DIR before), else the package's
    # jit/ when writable, else ~/.aiter/jit — a copy made once, kept across aiter and torch upgrades.
    aiter_pkg = _package_file("aiter", "jit")
    aiter_dirs = [env.get("AITER_JIT_DIR"), env.get("JIT_WORKSPACE_DIR"), str(aiter_pkg) if aiter_pkg else None,
                  os.path.join(home, ".aiter", "jit")]
    seen = set()
    for d in filter(None, aiter_dirs):
        p = Path(d)
        if str(p) in seen or not p.is_dir():
            continue
        seen.add(str(p))
        mods = [_module(so, p / "build" / so.name[:-3] / "build" / "build.ninja")
                for so in sorted(p.glob("*.so"))]
        caches.append({"kind": "aiter", "dir": str(p), "modules": mods})
    # torch.utils.cpp_extension: TORCH_EXTENSIONS_DIR/<ext>/, else ~/.cache/torch_extensions/py<ver>_<accel>/<ext>/
    py = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    if env.get("TORCH_EXTENSIONS_DIR"):
        roots = [Path(env["TORCH_EXTENSIONS_DIR"])]
    else:
        base = Path(env.get("XDG_CACHE_HOME") or os.path.join(home, ".cache"), "torch_extensions")
        try:
            roots = sorted(x for x in base.iterdir() if x.is_dir() and x.name.startswith(py + "_"))
        except OSError:
            roots = []
    for root in roots:
        mods = []
        try:
            exts = sorted(x for x in root.iterdir() if x.is_dir())
        except OSError:
            continue
        for ext in exts:
            mods += [_module(so, ext / "build.ninja") for so in sorted(ext.glob("*.so"))]
        caches.append({"kind": "torch_extensions", "dir": str(root), "modules": mods})
    torch_v, aiter_v = _package_file("torch", "version.py"), _package_file("aiter", "__init__.py")
    return {"caches": caches, "torch_installed": _mtime(torch_v) if torch_v else None,
            "aiter_installed": _mtime(aiter_v) if aiter_v else None}
