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
         "tomllib", "tomli", "rocmkit.tomlread", "pkgutil", "shutil", "bz2", "lzma",
         # the records are NamedTuples and the fact bags plain classes (host/model.py says why): creating the 21
         # dataclasses the path once had cost 12.7 ms, a sixth of the run
         "dataclasses"]

SCRIPT = """
import json, sys
if sys.argv[1:]:
    from rocmkit.cli import cli
    try:
        cli.main(sys.argv[1:], prog_name="rocmkit")
    except SystemExit:
        pass
print(json.dumps({"modules": sorted(sys.modules)}), file=sys.stderr)
"""


def modules_after(*args: str) -> set[str]:
    """What a fresh interpreter holds after `rocmkit ARGS`: its modules, less those the bare interpreter loaded
    (site and its .pth files, an editable install's finder: not the doctor's doing)."""
    def run(*argv: str) -> set[str]:
        proc = subprocess.run([sys.executable, "-c", SCRIPT, *argv], capture_output=True, text=True, cwd=REPO,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=120)
        return set(json.loads(proc.stderr.strip().splitlines()[-1])["modules"])

    return run(*args) - run()


def loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_doctor_root_imports_only_what_its_checks_need(tmp_path, json_out):
    root = write_tree(tmp_path / "host", HostSpec(mode="CPX", process=healthy_process()))
    modules = modules_after("doctor", *(["--json"] if json_out else []), "--root", str(root))
    assert "rocmkit.host.checks.gpu" in modules  # the run happened
    assert [n for n in NEVER if loaded(modules, n)] == []


def test_doctor_on_a_capture_without_a_process_record_does_not_import_packaging(tmp_path):
    # ROCm versions compare as dotted releases (archs.rocm_release): only a Ray version, from a process record,
    # needs PEP 440's rules (packaging.version, about 2 ms of the run)
    root = write_tree(tmp_path / "host", HostSpec(mode="CPX", process=None, rocm="7.0.2"))
    modules = modules_after("doctor", "--root", str(root))
    assert "rocmkit.host.checks.env" in modules and "rocmkit.archs" in modules  # the run happened, ROCm judged
    assert not loaded(modules, "packaging")
