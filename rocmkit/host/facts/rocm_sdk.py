"""Facts of ROCm from pip (TheRock) in this Python: where `_rocm_sdk_core` and `_rocm_sdk_devel` are, every
`libamd_smi.so*` file they hold (with what it resolves to), and every `amdsmi` package on the path. Two
distinct libamd_smi files, or two amdsmi packages, in one process is the trap the check names
(rocmkit/host/checks/rocm_sdk.py). Read from the path entries given, never by importing anything."""

from __future__ import annotations

import os

SDK_TREES = ("_rocm_sdk_core", "_rocm_sdk_devel")


def read(path: list[str]) -> dict | None:
    """For the entries of a sys.path: None where no TheRock SDK is installed, else the trees, the libamd_smi
    files ({path, real}) and the amdsmi package folders (each once, by real path)."""
    trees: dict[str, str] = {}
    amdsmi: list[str] = []
    for entry in path:
        for name in SDK_TREES:
            d = os.path.join(entry or ".", name)
            if name not in trees and os.path.isdir(d):
                trees[name] = d
        pkg = os.path.join(entry or ".", "amdsmi")
        if os.path.isfile(os.path.join(pkg, "__init__.py")):
            real = os.path.realpath(pkg)
            if real not in amdsmi:
                amdsmi.append(real)
    if "_rocm_sdk_core" not in trees:
        return None
    libs = []
    for name in SDK_TREES:
        lib = os.path.join(trees.get(name, ""), "lib")
        try:
            names = sorted(n for n in os.listdir(lib) if n.startswith("libamd_smi.so"))
        except OSError:
            continue
        libs += [{"path": os.path.join(lib, n), "real": os.path.realpath(os.path.join(lib, n))} for n in names]
    return {"core": trees["_rocm_sdk_core"], "devel": trees.get("_rocm_sdk_devel"), "amd_smi_libs": libs,
            "amdsmi_packages": amdsmi}


def copies(sdk: dict) -> list[str]:
    """The distinct real files behind the libamd_smi names (one is right; links to it do not count)."""
    return sorted({lib["real"] for lib in sdk.get("amd_smi_libs") or [] if isinstance(lib, dict) and lib.get("real")})
