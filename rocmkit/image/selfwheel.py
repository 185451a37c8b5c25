"""A wheel of the rocmkit that is running, for the build context's rocmkit-dist/.

Made here rather than with `pip wheel`: that needs build tools and, with build isolation, a network,
and its zip timestamps change on every run. This wheel is byte-identical for identical rocmkit files,
so an unchanged rocmkit never invalidates the image's cached final stage, and it works offline and
from an editable install (where the templates live outside the package folder)."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import zipfile
from importlib import resources
from pathlib import Path

from ..errors import EnvironmentMissing

# What rocmkit needs inside an image, where it runs `rocmkit doctor` and the SBOM step: the wheel made here
# declares these (with the same specifiers as pyproject.toml) instead of the installed rocmkit's own
# dependencies, which also serve the CLI on the host. The host's `rocmkit build` writes every image's SBOM
# with cyclonedx-python-lib, so `pip install rocmkit` must bring it (a core dependency), but the image must
# not gain it: its SBOM step mounts a copy for that one step (sbomlib.py), and an image's Python environment
# holds only what its stack and rocmkit's in-image code need. Installing this wheel with its declared
# requirements (not --no-deps) keeps `pip check` in the image clean. `rocmkit wheelhouse` downloads the same
# list. tests/test_packaging.py checks that the two lists below cover pyproject.toml's dependencies exactly.
IMAGE_REQUIREMENTS = (
    "click>=8.1",
    "jinja2>=3.1",
    "packaging>=23",
    "psutil>=5.9",
    "rich>=12",
    "docker>=5.0.3",
    "tomli>=2.0; python_version < '3.11'",
)
# Core dependencies only the host's CLI needs, never installed in an image.
HOST_ONLY_REQUIREMENTS = (
    "cyclonedx-python-lib==11.12.0",  # `rocmkit build` writes the SBOM with it (mounted, not installed)
    # `rocmkit certify` draws the certificate's picture with it on the host; a certify run by an image's own
    # rocmkit writes the certificate without the picture and says why (certify/picture.py)
    "matplotlib>=3.6",
)

_SKIP_DIRS = {"__pycache__"}
_SKIP_SUFFIXES = (".pyc", ".pyo")
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip can hold; fixed, so the bytes are reproducible


def _package_files() -> dict[str, Path]:
    """archive name → file, for the rocmkit package and its templates."""
    import rocmkit

    root = Path(rocmkit.__file__).resolve().parent
    files: dict[str, Path] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (path.is_dir() or any(p in _SKIP_DIRS or p.endswith(".egg-info") for p in rel.parts)
                or path.suffix in _SKIP_SUFFIXES):
            continue
        files[f"rocmkit/{rel.as_posix()}"] = path
    templates = Path(str(resources.files("rocmkit.templates")))
    for path in sorted(templates.rglob("*")):
        rel = path.relative_to(templates)
        if path.is_file() and not any(p in _SKIP_DIRS for p in rel.parts) and path.suffix not in _SKIP_SUFFIXES:
            files[f"rocmkit/templates/{rel.as_posix()}"] = path
    return files


def _metadata(dist: importlib.metadata.Distribution) -> str:
    """METADATA from the installed distribution's fields that pip needs, in a fixed order, with the image's
    requirements (IMAGE_REQUIREMENTS) in place of the distribution's own. The long
    description (the README) is left out: the image does not need it, and a README edit should not
    rebuild the image's final stage. Reading parsed fields also makes the result the same whether
    Python found a .dist-info or a checkout's .egg-info."""
    meta = dist.metadata
    lines = ["Metadata-Version: 2.1", f"Name: {meta['Name']}", f"Version: {meta['Version']}"]
    for key in ("Summary", "License", "Requires-Python"):
        if meta.get(key):
            lines.append(f"{key}: {meta[key]}")
    # The image's requirements, not the host's (IMAGE_REQUIREMENTS says why); extras stay as declared.
    lines += [f"Requires-Dist: {r}" for r in IMAGE_REQUIREMENTS]
    lines += [f"Requires-Dist: {r}" for r in (meta.get_all("Requires-Dist") or []) if "extra ==" in r]
    lines += [f"Provides-Extra: {e}" for e in (meta.get_all("Provides-Extra") or [])]
    return "\n".join(lines) + "\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_self_wheel(dest_dir: Path) -> Path:
    """Write rocmkit-<version>-py3-none-any.whl into dest_dir and return its path."""
    try:
        dist = importlib.metadata.distribution("rocmkit")
    except importlib.metadata.PackageNotFoundError:
        raise EnvironmentMissing("rocmkit is not installed as a package, so its wheel for the image cannot be made",
                                 hint="install it: pip install -e . (from a checkout) or pip install rocmkit") from None
    version = dist.version
    info = f"rocmkit-{version}.dist-info"
    entries: list[tuple[str, bytes, bool]] = []
    for name, path in _package_files().items():
        entries.append((name, path.read_bytes(), bool(path.stat().st_mode & 0o111)))
    entries.append((f"{info}/METADATA", _metadata(dist).encode(), False))
    entries.append((f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: rocmkit\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
                    False))
    entry_points = dist.read_text("entry_points.txt")
    if entry_points:
        entries.append((f"{info}/entry_points.txt", entry_points.encode(), False))
    entries.append((f"{info}/top_level.txt", b"rocmkit\n", False))
    record = "\n".join(_record_line(n, d) for n, d, _ in entries) + f"\n{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode(), False))

    dest_dir.mkdir(parents=True, exist_ok=True)
    target = dest_dir / f"rocmkit-{version}-py3-none-any.whl"
    with zipfile.ZipFile(target, "w") as zf:
        for name, data, executable in entries:
            zi = zipfile.ZipInfo(name, date_time=_EPOCH)
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o755 if executable else 0o644) << 16
            zf.writestr(zi, data)
    return target
