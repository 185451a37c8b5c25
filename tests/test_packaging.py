"""The wheel ships every package of the source tree (an unlisted package installs nowhere), the
templates and the data files; the core dependencies are split between the image and the host, and the
plain install builds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def test_every_python_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "rocmkit").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert "rocmkit.templates" in listed


# ---- what the host's rocmkit needs vs what an image's rocmkit needs ----

def _normalized(requirements) -> set[str]:
    from packaging.requirements import Requirement

    return {str(Requirement(r)) for r in requirements}


def test_core_dependencies_are_the_images_and_the_hosts_exactly():
    """pyproject.toml's dependencies are selfwheel's IMAGE_REQUIREMENTS (what the wheel installed in an image
    declares) plus HOST_ONLY_REQUIREMENTS, nothing missing and nothing in both: a new dependency must be
    placed on one side."""
    from rocmkit.image.selfwheel import HOST_ONLY_REQUIREMENTS, IMAGE_REQUIREMENTS

    core = _normalized(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    image, host = _normalized(IMAGE_REQUIREMENTS), _normalized(HOST_ONLY_REQUIREMENTS)
    assert image & host == set()
    assert image | host == core
    assert any(r.startswith("cyclonedx-python-lib") for r in host)  # `rocmkit build` writes the SBOM with it
    assert not any("cyclonedx" in r for r in image)


def test_sbom_extra_stays_installable_and_empty():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["sbom"] == []


@pytest.mark.slow
def test_plain_install_reaches_the_engine_check(tmp_path):
    """`pip install rocmkit` (no extras) into a fresh venv, then `rocmkit build --arch gfx942` with no engine:
    it gets as far as looking for the engine (exit 3 naming DOCKER_HOST / dockerd), not stopped for a missing
    library. Needs the package index; pip's cache is shared between runs."""
    venv = tmp_path / "plainvenv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    cache = Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DOCKER_HOST", "PIP_CONSTRAINT")}
    env["PIP_CACHE_DIR"] = str(cache)
    install = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(REPO)], env=env,
                             capture_output=True, text=True, timeout=1200)
    assert install.returncode == 0, install.stderr[-3000:]
    env.update(PATH=f"{venv / 'bin'}:/usr/bin:/bin", DOCKER_HOST="unix:///nonexistent.sock", HOME=str(tmp_path))
    env.pop("ROCMKIT_DOCKER", None)
    r = subprocess.run([str(venv / "bin" / "rocmkit"), "build", "--arch", "gfx942"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 3, r.stderr
    assert "DOCKER_HOST" in r.stderr and "dockerd" in r.stderr, r.stderr
    assert "CycloneDX" not in r.stderr and "Traceback" not in r.stderr
