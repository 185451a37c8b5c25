"""The doctor imports only what the checks that apply need (issue 27): a behaviour test of the module set a
`doctor --root` run leaves in a fresh interpreter, not a timing assert (benchmarks/doctor_speed.py times it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from treegen import HostSpec, healthy_process, write_tree

REPO = Path(__file__).resolve().parent.parent

# Never on the level-1 path: the build, image, certify and runtime layers and their libraries, the SBOM and
# package-index readers, and the doctor's own parts that only some options use (--multi-node's RDMA facts,
# the VF config copier, the ELF code-object reader, the GPU probes, --image's container runner).
NEVER = ["docker", "jinja2", "rich", "jsonschema", "psutil", "yaml", "requests", "importlib.metadata",
         "importlib.resources", "rocmkit.image", "rocmkit.runtime", "rocmkit.stacks", "rocmkit.certify",
         "rocmkit.refs", "rocmkit.tune", "rocmkit.cluster", "rocmkit.host.facts.rdma", "rocmkit.host.vfconfigs",
         "rocmkit.host.facts.codeobjects", "rocmkit.host.probes", "rocmkit.host.capture",
         # the arch table is read from archs.json (archs.py), the checks listed with os.listdir, and shutil (with
         # zlib, bz2 and lzma) imported only where the live journal read looks for journalctl
         "tomllib", "tomli", "rocmkit.tomlread", "pkgutil", "shutil", "bz2", "lzma"]

SCRIPT = """
import dataclasses, json, sys
if sys.argv[1:]:
    from rocmkit.cli import cli
    try:
        cli.main(sys.argv[1:], prog_name="rocmkit")
    except SystemExit:
        pass
undocumented = sorted(f"{m.__name__}.{k}" for m in list(sys.modules.values()) if m.__name__.startswith("rocmkit")
                      for k, v in vars(m).items() if isinstance(v, type) and dataclasses.is_dataclass(v)
                      and v.__module__ == m.__name__ and (v.__doc__ or "").startswith(k + "("))  # @dataclass's own
print(json.dumps({"modules": sorted(sys.modules), "undocumented": undocumented}), file=sys.stderr)
"""


def run_doctor(*args: str) -> dict:
    """What a fresh interpreter holds after `rocmkit ARGS`: its modules, less those the bare interpreter loaded
    (site and its .pth files, an editable install's finder: not the doctor's doing), and the rocmkit dataclasses
    without a docstring of their own."""
    def run(*argv: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, cwd=REPO,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=120)
        return json.loads(proc.stderr.strip().splitlines()[-1])

    out = run(*args)
    out["modules"] = set(out["modules"]) - set(run()["modules"])
    return out


def modules_after(*args: str) -> set[str]:
    return run_doctor(*args)["modules"]


def loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_doctor_root_imports_only_what_its_checks_need(tmp_path, json_out):
    root = write_tree(tmp_path / "host", HostSpec(mode="CPX", process=healthy_process()))
    modules = modules_after("doctor", *(["--json"] if json_out else []), "--root", str(root))
    assert "rocmkit.host.checks.gpu" in modules  # the run happened
    assert [n for n in NEVER if loaded(modules, n)] == []


def test_doctor_root_dataclasses_have_docstrings(tmp_path):
    # Without a docstring of its own, @dataclass computes one from inspect.signature(cls): ~0.1 ms a class,
    # 1.5 ms of a doctor run when 15 of its 23 had none (benchmarks/doctor_speed.py times the whole run).
    root = write_tree(tmp_path / "host", HostSpec(mode="CPX", process=healthy_process()))
    out = run_doctor("doctor", "--root", str(root))
    assert "rocmkit.host.facts.kfd" in out["modules"]  # the run happened
    assert out["undocumented"] == []

