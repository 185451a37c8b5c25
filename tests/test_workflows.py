"""Every GitHub workflow validates against the GitHub workflow schema; the image pipeline is driven by
`rocmkit matrix`, and CI runs the README's test command through .ci/run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from rocmkit.cli import cli

REPO = Path(__file__).resolve().parent.parent


def test_workflows_validate_against_the_github_schema(find_tool):
    files = sorted(str(p) for p in (REPO / ".github" / "workflows").glob("*.yml"))
    assert files
    r = subprocess.run([find_tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *files],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def test_image_pipeline_uses_rocmkits_own_matrix():
    text = (REPO / ".github" / "workflows" / "images.yml").read_text()
    assert "rocmkit matrix --json" in text and "rocmkit build" in text
    assert "rocmkit doctor" in text and "rocmkit certify" in text and "self-hosted" in text


def test_matrix_lists_every_stack_arch():
    doc = json.loads(CliRunner().invoke(cli, ["matrix", "--json"]).output)
    assert doc["schema"] == "rocmkit.matrix/v1"
    pairs = {(r["stack"], r["arch"]) for r in doc["include"]}
    assert ("verl-vllm", "gfx942") in pairs and ("verl-sglang", "gfx950") in pairs
    for r in doc["include"]:
        assert (REPO / r["dockerfile"]).exists()


def test_ci_runs_the_readme_test_command():
    assert "bash .ci/run" in (REPO / ".github" / "workflows" / "ci.yml").read_text()
    assert "python -m pytest" in (REPO / ".ci" / "run").read_text()
    assert "python -m pytest" in (REPO / "README.md").read_text()


def test_workflows_call_rocmkit_with_options_it_has():
    """A renamed or removed option would otherwise only show up when the GPU runner runs the workflow."""
    import re

    import click
    from ruamel.yaml import YAML

    checked = 0
    for path in sorted((REPO / ".github" / "workflows").glob("*.yml")):
        workflow = YAML(typ="safe").load(path.read_text())
        for job_name, job in workflow["jobs"].items():
            for step in job.get("steps", []):
                script = step.get("run", "")
                commands = set(re.findall(r"\brocmkit ([a-z][a-z-]*)", script))
                if not commands:
                    continue
                known = set()
                for name in commands:
                    cmd = cli.get_command(click.Context(cli), name)
                    assert cmd is not None, f"{path.name} job {job_name}: no command `rocmkit {name}`"
                    known |= {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
                used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", script))
                assert used <= known, f"{path.name} job {job_name}: {sorted(used - known)} not options of {commands}"
                checked += 1
    assert checked >= 4
