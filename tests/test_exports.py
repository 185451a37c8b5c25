"""No package hands out, under a submodule's name, anything but that submodule.

A package that exports a function through a module `__getattr__` (or a `from .x import name` in its __init__)
under the name of one of its own submodules gets that name overwritten by the submodule the moment anything
imports it: `rocmkit.host.probes.measure` was run.py's function until run.py imported measure.py, and then
`from rocmkit.host.probes import findings_for, measure` gave the module, and every GPU certification with
probes on died with "'module' object is not callable" (issue 33). Each package is checked in a fresh
interpreter, since what else is imported decides which object the name holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = sorted(".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "rocmkit").rglob("__init__.py"))

# In a fresh interpreter: import the package, then ask it for each submodule's name the way `from PKG import NAME`
# does before the submodule is imported (the module __getattr__, if any) and after (the attribute). Whatever comes
# back must be the submodule itself.
PROBE = r"""
import importlib, json, pkgutil, sys, types
pkg = importlib.import_module(sys.argv[1])
wrong = []
for info in pkgutil.iter_modules(pkg.__path__):
    full = f"{pkg.__name__}.{info.name}"
    if info.name in vars(pkg):
        value = vars(pkg)[info.name]
    elif "__getattr__" in vars(pkg):
        try:
            value = vars(pkg)["__getattr__"](info.name)
        except AttributeError:
            continue
    else:
        continue
    if not (isinstance(value, types.ModuleType) and value.__name__ == full):
        wrong.append(f"{full}: {type(value).__name__} {getattr(value, '__qualname__', value)!r}")
print(json.dumps(wrong))
"""


def test_every_package_is_found():
    assert "rocmkit.host.probes" in PACKAGES and "rocmkit" in PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_no_export_shadows_a_submodule(package):
    r = subprocess.run([sys.executable, "-c", PROBE, package], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout) == []


def test_the_probe_sees_the_trap(tmp_path):
    """The check above on a package built to fall into the trap, so a change to it cannot make it vacuous."""
    pkg = tmp_path / "trap"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("def __getattr__(name):\n    if name == 'measure':\n"
                                     "        from .run import measure\n        return measure\n"
                                     "    raise AttributeError(name)\n")
    (pkg / "run.py").write_text("import importlib\nimportlib.import_module('trap.measure')\n\n"
                                "def measure():\n    return 1\n")
    (pkg / "measure.py").write_text("")
    r = subprocess.run([sys.executable, "-c", PROBE, "trap"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert json.loads(r.stdout) == ["trap.measure: function 'measure'"]


def test_a_host_certification_with_probes_reaches_the_probes():
    """certify's own call of the probes on a host, as `certify --host --gpus 1` makes it (probes on): on a machine
    without a GPU (or torch) the probes say they are unavailable; before the fix this raised TypeError."""
    from rocmkit.certify import flow
    from rocmkit.certify.settings import Settings
    from rocmkit.certify.target import Target

    target = Target(image=None, image_id=None, record={})
    out = flow.probe_figures(Settings(gpus=1), target, deadline=float("inf"))
    assert set(out) == {"figures", "findings"} and "available" in out["figures"]
    assert all(f["id"].startswith("probe") for f in out["findings"])


# A module named in a string runs later, by name, often inside a target (`python -m rocmkit.certify.intarget.trl_run`,
# verl's VERL_USE_EXTERNAL_MODULES, the CLI's lazy command table, vLLM's worker extension): a moved module breaks
# it with no import error here. Every such name in the package and its resources must be a module of this tree,
# or a module's attribute ("module:attr", "module.Class").
NAMED = r"rocmkit(?:\.[a-z_][a-z0-9_]*)+(?:[.:][A-Z_][A-Za-z0-9_]*|:[a-z_][a-z0-9_]*)?"


def _named_modules() -> dict[str, set[str]]:
    import ast
    import re

    pattern = re.compile(rf"^{NAMED}$")
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "rocmkit").rglob("*")):
        rel = str(path.relative_to(REPO))
        if path.suffix == ".py":
            texts = [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
                     and isinstance(n.value, str)]
        elif path.suffix == ".toml":
            texts = re.findall(r'"([^"\n]*)"', path.read_text())
        else:
            continue
        for text in texts:
            for word in text.split():
                if pattern.match(word) and not word.startswith(("rocmkit.certificate", "rocmkit.manifest")):
                    found.setdefault(word, set()).add(rel)
    return found


def _resolves(name: str) -> bool:
    """Read from the tree, importing nothing: the longest prefix that is a module file, the rest one attribute."""
    module, _, attr = name.partition(":")
    parts = module.split(".")
    for cut in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:cut])
        source = next((f for f in (base.with_suffix(".py"), base / "__init__.py") if f.is_file()), None)
        if source is None:
            continue
        rest = parts[cut:] + ([attr] if attr else [])
        if len(rest) > 1:
            return False
        return not rest or any(f"{kind}{rest[0]}" in source.read_text() for kind in ("def ", "class ", "\n" ))
    return False


def test_every_module_named_in_a_string_exists():
    named = _named_modules()
    assert any(n.startswith("rocmkit.certify.") for n in named), "the scan found nothing: it is broken"
    # rocmkit.templates is the top-level templates/ folder, shipped as that package (pyproject's package-dir)
    missing = {name: sorted(where) for name, where in named.items()
               if not (_resolves(name) or name == "rocmkit.templates" and (REPO / "templates").is_dir())}
    assert missing == {}


def test_the_name_check_refuses_what_is_not_there():
    assert _resolves("rocmkit.cli.tune:tune") and _resolves("rocmkit.host.probes.vram")
    assert not _resolves("rocmkit.certify.no_such_module") and not _resolves("rocmkit.cli.tune:no_such_command")
