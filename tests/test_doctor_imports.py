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
         "rocmkit.host.facts.codeobjects", "rocmkit.host.probes", "rocmkit.host.capture"]

SCRIPT = """
import json, sys
from rocmkit.cli import cli
try:
    cli.main(sys.argv[1:], prog_name="rocmkit")
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_after(*args: str) -> set[str]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, cwd=REPO,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}, timeout=120)
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.mark.parametrize("json_out", [False, True], ids=["table", "json"])
def test_doctor_root_imports_only_what_its_checks_need(tmp_path, json_out):
    root = write_tree(tmp_path / "host", HostSpec(mode="CPX", process=healthy_process()))
    modules = modules_after("doctor", *(["--json"] if json_out else []), "--root", str(root))
    assert "rocmkit.host.checks.gpu" in modules  # the run happened
    assert [n for n in NEVER if loaded(modules, n)] == []

