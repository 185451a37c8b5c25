"""VF-named copies of tuned kernel configs (SR-IOV virtual functions, e.g. MI300X VF).

On a VF host torch reports "AMD Instinct MI300X VF"; SGLang looks its tuned Triton/quantization configs up
by that name (`device_name=AMD_Instinct_MI300X_VF`), finds none and falls back to untuned kernels — slow, or
`OutOfResources: shared memory` (sgl-project/sglang#3219). Upstream images run
`find ... -name '*MI300X*' | xargs ... sed s/MI300X/MI300X_VF/`, which rewrites whole paths, matches
`_MI300X_HF` and existing `_MI300X_VF` names (a second run makes `_VF_VF`), misses config folders added
later, and overwrites silently. Here only the file name's `device_name=` token is compared and changed,
exactly, so the step is idempotent and touches nothing else.
"""

from __future__ import annotations

import importlib.util
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .. import archs
from ..errors import Failed, UsageError
from ..fileio import write_atomic

TOKEN_KEY = "device_name="


@dataclass(frozen=True)
class Framework:
    """A framework that keys tuned configs by torch's device name."""

    name: str
    package: str  # importable top-level package
    # Folders (relative to the package) that hold tuned configs; the groups say what must exist:
    # every group needs at least one of its folders, or --strict fails (a layout change upstream).
    expected: tuple[tuple[str, ...], ...]


FRAMEWORKS = {
    "sglang": Framework(
        name="sglang",
        package="sglang",
        expected=(
            ("srt/layers/quantization/configs",),
            # before v0.4.3 (no moe/), v0.4.3+, and where v0.5.17 moved them
            ("srt/layers/fused_moe_triton/configs", "srt/layers/moe/fused_moe_triton/configs",
             "srt/layers/moe/moe_runner/triton_utils/configs"),
        ),
    ),
}


@dataclass(frozen=True)
class Pair:
    base: str  # device_name token of the base product, e.g. AMD_Instinct_MI300X
    vf: str  # the VF's token, e.g. AMD_Instinct_MI300X_VF
    product: str  # the VF product name, e.g. "MI300X VF"


@dataclass
class Result:
    roots: list[dict] = field(default_factory=list)  # {framework, path, config_dirs}
    created: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)  # e.g. _VF_VF names left by the upstream one-liner
    problems: list[str] = field(default_factory=list)  # what --strict fails on
    dry_run: bool = False

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in ("roots", "created", "present", "conflicts", "overwritten", "stray",
                                              "problems", "dry_run")}


def token(name: str) -> str:
    """torch device name → the device_name token frameworks put in file names."""
    return name.replace(" ", "_")


def pairs_for(framework: str, product: str | None = None) -> list[Pair]:
    """(base, VF) name pairs from the arch table, for every VF product whose configs `framework` needs
    copied — or only the one `product` names (base or VF name)."""
    out = []
    for vf in archs.vf_products():
        if framework not in vf.config_copies:
            continue
        base = archs.product_named(vf.vf_of)
        if product and product.strip().lower() not in (vf.name.lower(), vf.vf_of.lower()):
            continue
        out.append(Pair(base=token(base.torch_name), vf=token(vf.torch_name), product=vf.name))
    if product and not out:
        known = sorted({p.vf_of for p in archs.vf_products() if framework in p.config_copies})
        raise UsageError(f"--product {product!r}: no VF of that product needs {framework} configs",
                         hint=f"products with VFs: {', '.join(known)}")
    return out


def vf_name(filename: str, pair: Pair) -> str | None:
    """The VF-named file name for `filename`, or None when its device_name token is not exactly the base.

    Names look like `E=128,N=384,device_name=AMD_Instinct_MI300X,dtype=fp8_w8a8,block_shape=[128, 128].json`;
    the token may also be the last field before `.json`.
    """
    fields = _fields(filename)
    for i, f in enumerate(fields):
        if f == TOKEN_KEY + pair.base:
            fields[i] = TOKEN_KEY + pair.vf
            return ",".join(fields) + ".json"
    return None


def device_token(filename: str) -> str | None:
    """The device_name token of a config file name (`AMD_Instinct_MI300X_VF`), or None."""
    for f in _fields(filename):
        if f.startswith(TOKEN_KEY):
            return f[len(TOKEN_KEY):]
    return None


def _fields(filename: str) -> list[str]:
    stem, dot, ext = filename.rpartition(".")
    return stem.split(",") if dot and ext == "json" else []


def find_installed() -> list[tuple[Framework, Path]]:
    """Installed frameworks that need copies, located without importing them (no torch needed)."""
    found = []
    for fw in FRAMEWORKS.values():
        try:
            spec = importlib.util.find_spec(fw.package)
        except (ImportError, ValueError):
            spec = None
        if spec and spec.submodule_search_locations:
            found.append((fw, Path(next(iter(spec.submodule_search_locations)))))
    return found


def _config_dirs(root: Path) -> list[Path]:
    """Every folder under root holding a config file with a device_name token (so folders added in
    later releases are covered too)."""
    dirs = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        if any(TOKEN_KEY in f and f.endswith(".json") for f in filenames):
            dirs.add(Path(dirpath))
    return sorted(dirs)


def replicate(roots: list[tuple[Framework | None, Path]], pairs: list[Pair], *, dry_run: bool = False,
              force: bool = False, strict: bool = False) -> Result:
    """Create the missing VF-named copies under each root. Never overwrites a different file unless force."""
    result = Result(dry_run=dry_run)
    if strict and not roots:
        result.problems.append("no framework that keys tuned configs by device name is installed "
                               f"(looked for: {', '.join(fw.package for fw in FRAMEWORKS.values())})")
    vf_tokens = {TOKEN_KEY + p.vf for p in pairs}
    for fw, root in roots:
        if not root.is_dir():
            raise UsageError(f"{root}: no such folder")
        dirs = _config_dirs(root)
        result.roots.append({"framework": fw.name if fw else None, "path": str(root),
                             "config_dirs": [str(d.relative_to(root)) for d in dirs]})
        if fw:
            for group in fw.expected:
                if not any((root / g).is_dir() for g in group):
                    result.problems.append(f"{fw.name} at {root}: none of the expected config folders exists: "
                                           f"{' or '.join(group)}")
        # Base-product configs of every product with a VF, whatever --product says: none at all means
        # names changed upstream and the image would silently miss its VF configs.
        bases = {p.base for p in pairs_for(fw.name)} if fw else set()
        sources = 0
        for d in dirs:
            for name in sorted(os.listdir(d)):
                path = d / name
                if any(t + "_VF" in name for t in vf_tokens):
                    result.stray.append(str(path))
                sources += device_token(name) in bases
                for pair in pairs:
                    target_name = vf_name(name, pair)
                    if target_name is None or not path.is_file():
                        continue
                    _copy(path, d / target_name, result, dry_run=dry_run, force=force)
        if fw and not sources:
            result.problems.append(f"{fw.name} at {root}: no config file names device_name="
                                   f"{' or '.join(sorted(bases))}")
    return result


def _copy(src: Path, dst: Path, result: Result, *, dry_run: bool, force: bool) -> None:
    data = src.read_bytes()
    # Same permissions as the original: a temporary file is 0600, which a non-root user in the image
    # could not read (SGLang would then crash opening a config it found).
    mode = stat.S_IMODE(src.stat().st_mode)
    if dst.exists():
        if dst.read_bytes() == data:
            result.present.append(str(dst))
            return
        if not force:
            result.conflicts.append(str(dst))
            return
        result.overwritten.append(str(dst))
    else:
        result.created.append(str(dst))
    if not dry_run:
        write_atomic(dst, data, mode=mode)


def run(dirs: list[str], product: str | None = None, *, dry_run: bool = False, force: bool = False,
        strict: bool = False) -> Result:
    """Explicit folders, or every installed framework that needs copies. With strict, a missing framework
    or config folder is a failure (the image build runs this with --strict)."""
    if dirs:
        roots: list[tuple[Framework | None, Path]] = [(None, Path(d)) for d in dirs]
        pairs = pairs_for("sglang", product)
    else:
        roots = list(find_installed())
        pairs = [p for fw, _ in roots for p in pairs_for(fw.name, product)] or pairs_for("sglang", product)
    result = replicate(roots, pairs, dry_run=dry_run, force=force, strict=strict)
    if strict and result.problems:
        raise Failed("; ".join(result.problems),
                     hint="the framework is not installed, or its config layout or file naming changed; the "
                          "FRAMEWORKS table in rocmkit/host/vfconfigs.py says which folders are expected")
    return result
