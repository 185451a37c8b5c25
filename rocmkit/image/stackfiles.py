"""The stack's own files in the build context: its patches (for a git clone, copied for the stage to check
and apply; for a local source, checked with `git apply --check` and applied on the host to the copy, before
the engine is asked for anything, so the stage needs no git) and its assets and prebuilt-wheel components
(downloaded on the host and verified against their sha256).

Why on the host: docker 20.10's built-in BuildKit frontend has no `ADD --checksum` (Dockerfile syntax 1.6+,
which needs a `# syntax=` image pulled from a registry), and builds here and in many clusters run without a
network. A file fetched and verified on the host fails fast naming its URL; the Dockerfile checks the hash
again, so a context assembled by other means cannot slip a different file in."""

from __future__ import annotations

import hashlib
import os
import shutil
import urllib.error
import urllib.request
from pathlib import Path

from ..runtime import proc
from ..errors import EnvironmentMissing, Failed
from ..stacks import Asset
from .plan import BuildPlan
from .render import ASSETS_DIR, PATCHES_DIR

DOWNLOAD_TIMEOUT_S = 120


def write_patches(plan: BuildPlan, ctx: Path) -> None:
    """patches/<component>/<file> for every patched component cloned in its stage: the bytes the stack was
    validated with."""
    for stage in plan.stages:
        for p in () if stage.local else stage.component.patches:
            dest = ctx / PATCHES_DIR / stage.component.name / p.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(p.content)


def patch_local_sources(plan: BuildPlan, ctx: Path, sources_dir: str) -> None:
    """For components built from a local source: `git apply --check` every patch against the copy in the
    context, then apply them; a patch that no longer applies fails before the build starts, naming its file."""
    for stage in plan.stages:
        if not stage.local or not stage.component.patches:
            continue
        src = ctx / sources_dir / stage.component.name
        # GIT_CEILING_DIRECTORIES: never let git find an enclosing repository and apply relative to its root.
        env = dict(os.environ, GIT_CEILING_DIRECTORIES=str(src.parent))
        held = ctx / f".patches-{stage.component.name}"  # outside sources/, so not part of the copied tree
        held.mkdir(parents=True, exist_ok=True)
        files = []
        for p in stage.component.patches:
            (held / p.name).write_bytes(p.content)
            files.append((p, held / p.name))
        try:
            _apply_all(plan, stage, files, src, env)
        finally:
            shutil.rmtree(held, ignore_errors=True)


def _apply_all(plan: BuildPlan, stage, files: list, src: Path, env: dict[str, str]) -> None:
    """Every patch checked first, then every patch applied: nothing is half-patched when one does not apply."""
    for check_only in (True, False):
        for p, patch_file in files:
            out: list[str] = []
            argv = ["git", "apply"] + (["--check"] if check_only else []) + [str(patch_file)]
            r = proc.run(argv, cwd=src, env=env, timeout=60, on_line=out.append, what=" ".join(argv[:3]))
            if not r.ok:
                detail = [line for line in out if line.strip()][:3]
                raise Failed(f"patch {p.file} no longer applies to {stage.component.name} "
                             f"(--source {stage.local.path}): {'; '.join(detail)}",
                             hint=f"update {p.file} in {plan.stack.path or 'the stack'} against this source")


def fetch_assets(plan: BuildPlan, ctx: Path) -> None:
    """assets/<file> for every asset and prebuilt-wheel component URL: downloaded (file:// URLs copied), its
    sha256 compared with the stack's."""
    dest_dir = ctx / ASSETS_DIR
    dest_dir.mkdir(parents=True, exist_ok=True)
    for a in plan.stack.downloads:
        got = _download(a, dest_dir / a.file)
        if a.sha256 is not None and got != a.sha256:
            (dest_dir / a.file).unlink()
            asset = a in plan.stack.assets
            what = f"asset {a.url}" if asset else f"component {a.name}: wheel {a.url}"
            field = f"asset {a.name}" if asset else f"the wheel's sha256 of component {a.name}"
            raise Failed(f"{what}: sha256 {got} differs from the stack's {a.sha256}",
                         hint=f"the file behind the URL changed; review it and update {field} in "
                              f"{plan.stack.path or 'the stack'}")


def _download(a: Asset, dest: Path) -> str:
    h = hashlib.sha256()
    try:
        with urllib.request.urlopen(a.url, timeout=DOWNLOAD_TIMEOUT_S) as resp, open(dest, "wb") as out:
            for chunk in iter(lambda: resp.read(1 << 20), b""):
                h.update(chunk)
                out.write(chunk)
    except (urllib.error.URLError, OSError) as exc:
        dest.unlink(missing_ok=True)
        reason = (f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError)
                  else getattr(exc, "reason", None) or exc)
        raise EnvironmentMissing(f"asset {a.url}: cannot download: {reason}",
                                 hint="the build needs this file; check the network or the URL") from None
    return h.hexdigest()
