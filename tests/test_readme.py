"""The README is the front page: what rocmkit is, install, the two quick-start commands, the command table,
exit codes, the test command and links to the manual in docs/ (tests/test_docs.py checks the manual)."""

from __future__ import annotations

import re
import subprocess

import click
import pytest

import doc_tables

from rocmkit.cli import cli

README = doc_tables.REPO / "README.md"


def test_readme_is_a_front_page():
    assert len(README.read_bytes()) <= 40 * 1024


def test_readme_quick_start_is_two_commands():
    text = README.read_text()
    block = text.split("## Quick start", 1)[1].split("```", 2)[1]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert commands == ["python3 -m venv .venv && (.venv/bin/pip install --retries 0 --timeout 10 torch --index-url "
                        "https://download.pytorch.org/whl/cpu || true) && .venv/bin/pip install '.[certify]' && "
                        ".venv/bin/rocmkit certify --host --gpus 0", "bash .ci/run"]


def test_readme_quick_start_says_what_it_downloads_and_how_long_it_takes():
    # It said "~2 minutes"; from PyPI alone it took 5 min 44 s, 4 min 40 s of it pip downloading CUDA torch and
    # about 3 GB of NVIDIA libraries onto a CPU machine. The CPU index's torch is tried first, PyPI's is the fallback.
    block = README.read_text().split("## Quick start", 1)[1].split("```", 2)[1]
    assert "~2 minutes" not in block
    for said in ("PyTorch's CPU index first", "about 3 GB of NVIDIA libraries", "5 min 44 s", "4 min 40 s"):
        assert said in block, said


def test_readme_gives_the_test_command_ci_runs():
    text = README.read_text()
    assert "The test command is `python -m pytest`" in text
    assert 'timed pytest "" python -m pytest "$@"' in (doc_tables.REPO / ".ci" / "run").read_text()


def test_readme_command_table_lists_every_command():
    text = README.read_text()
    table = set(re.findall(r"^\| `rocmkit ([a-z-]+)` \|", text, re.M))
    assert table == set(cli.list_commands(click.Context(cli)))


def test_readme_links_resolve_to_doc_pages():
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert links
    missing = [link for link in links if not (doc_tables.REPO / link).is_file()]
    assert not missing, missing


def test_readme_verl_recipe_is_the_words_certify_hints():
    """certify --engine verl, in a Python without verl, hints a recipe; the README's install lines give the same
    one (rocmkit's folder written `.`, as a clone's README reads), so a user who follows either gets one venv."""
    from rocmkit.certify import engines
    from rocmkit.certify.settings import Rollout, Settings

    hint = engines.get("verl").install_hint(Settings(engine="verl", gpus=1, rollout=Rollout("vllm")), "python3")
    recipe = hint.split("): ", 1)[1].split(", then run certify with ")[0]
    recipe = recipe.replace(f"'{doc_tables.REPO}[verl]'", "'.[verl]'")
    install = README.read_text().split("## Install", 1)[1].split("```", 2)[1]
    assert recipe == "python3 -m venv .venv-verl && .venv-verl/bin/pip install '.[verl]' 'vllm==0.24.0'", hint
    assert any(line.split("  #")[0].strip() == recipe for line in install.splitlines()), install
    assert ", then run certify with .venv-verl/bin/rocmkit; on AMD GPUs PyPI's vllm is a CUDA build" in hint
    sglang = engines.get("verl").install_hint(Settings(engine="verl", gpus=1, rollout=Rollout("sglang")), "python3")
    assert "do not resolve together" in sglang and "pip install" not in sglang  # no line that cannot work
    assert "On AMD GPUs PyPI's `vllm` and `sglang` are CUDA builds" in README.read_text()
    assert "`.venv-verl/bin/rocmkit certify --host --engine verl`" in README.read_text()


def test_the_readme_cpu_verl_line_is_the_command_ci_makes_its_verl_venv_with():
    """The README's CPU verl line (issue 70: "a fresh venv made exactly as the README says certifies with verl on the
    CPU in CI"): `rocmkit venv --stack verl-cpu .venv-verl-cpu`, then certify in it. CI's provisioning
    (.ci/provision/50-cpu-stacks.sh) makes the venv that ROCMKIT_VERL_CPU_PYTHON names with the same command, only
    offline (--wheelhouse, the same pins), with rocmkit from this checkout (--rocmkit editable) and replacing an older
    venv (--force); tests/test_certify_runs.py::test_real_verl_grpo_on_the_host_cpu_certifies_the_builtin_default
    then certifies verl in it with the README's certify words. certify's refusal of PyPI's vllm names the same line."""
    import shlex

    from rocmkit.certify.engines.verl.vllm_build import VENV_LINE

    install = README.read_text().split("## Install", 1)[1].split("```", 2)[1]
    line = next(x for x in install.splitlines() if ".venv-verl-cpu" in x).split("  #")[0].strip()
    assert line == VENV_LINE
    make, run = line.split(" && ")
    assert shlex.split(run) == [".venv-verl-cpu/bin/rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0"]
    words = shlex.split(make)
    assert words[:2] == ["rocmkit", "venv"]

    script = (doc_tables.REPO / ".ci" / "provision" / "50-cpu-stacks.sh").read_text()
    assert re.search(r"^for stack in verl-cpu trl-cpu; do$", script, re.M)
    assert 'echo "export ROCMKIT_${var}_PYTHON=$venv/bin/python"' in script
    ci = next(x for x in script.replace("\\\n", " ").splitlines() if "-m rocmkit venv" in x)
    argv = shlex.split(ci.split(">", 1)[0])
    assert argv[:3] == ["$py", "-m", "rocmkit"]
    argv = [{"$stack": "verl-cpu", "$venv": ".venv-verl-cpu"}.get(w, w) for w in argv[3:]]
    assert argv[:len(words) - 1] == words[1:], (argv, words)
    extra = argv[len(words) - 1:]
    assert extra == ["--wheelhouse", "$wh", "--rocmkit", "editable", "--force"], extra
    # the only venv-making command there: no hand-made pip steps beside it
    assert "pip install" not in script and "python3 -m venv" not in script


@pytest.mark.slow
def test_the_readme_verl_venv_resolves_with_a_fresh_venvs_own_pip_to_verls_own_rollout_pin(tmp_path):
    """The README's verl line, word for word (rocmkit's `.` is this checkout), in a venv made by `python3 -m venv`
    with the pip it brings (23.x on Debian 12), as pip's dry run: it resolves, to verl 0.9.1 beside the vLLM that
    verl's own `[vllm]` extra pins (read from verl's metadata in the resolution), without TRL."""
    import json
    import shlex

    line = next(x for x in README.read_text().split("## Install", 1)[1].splitlines() if ".venv-verl/bin/pip" in x)
    make, install = line.split("  #")[0].split(" && ")
    assert make == "python3 -m venv .venv-verl"
    venv = tmp_path / ".venv-verl"
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True, timeout=300)
    argv = shlex.split(install)
    assert argv[:2] == [".venv-verl/bin/pip", "install"]
    report = tmp_path / "report.json"
    run = subprocess.run([str(venv / "bin/pip"), "install", "--dry-run", "-q", "--report", str(report),
                          *argv[2:]], cwd=doc_tables.REPO, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    got = {i["metadata"]["name"].lower(): i["metadata"] for i in json.loads(report.read_text())["install"]}
    assert got["verl"]["version"] == "0.9.1" and "trl" not in got
    pins = [r.split(";")[0].strip() for r in got["verl"].get("requires_dist", [])
            if r.startswith("vllm") and 'extra == "vllm"' in r]
    assert pins == [f"vllm=={got['vllm']['version']}"], pins


# In the verl-cpu stack's Python, which has everything verl runs with: the distribution of each module, and the
# distributions a set of requirements installs (their own requirements, followed through extras).
INSTALLS = r"""
import json, sys
from importlib import metadata
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
modules, roots = json.loads(sys.argv[1])
owners = metadata.packages_distributions()
found, todo = set(), [Requirement(r) for r in roots]
while todo:
    req = todo.pop()
    name = canon(req.name)
    if (name, tuple(sorted(req.extras))) in found:
        continue
    found.add((name, tuple(sorted(req.extras))))
    try:
        requires = metadata.requires(req.name) or []
    except metadata.PackageNotFoundError:
        continue
    for text in requires:
        r = Requirement(text)
        if r.marker is None or any(r.marker.evaluate({"extra": e}) for e in ("", *req.extras)):
            todo.append(r)
print(json.dumps({"owners": {m: [canon(d) for d in owners.get(m, [])] for m in modules},
                  "installed": sorted({n for n, _ in found})}))
"""


def test_the_verl_extra_installs_every_module_verls_main_ppo_imports():
    """The README's verl venv failed in its Ray actor with "No module named 'transfer_queue'": verl 0.9.1's main_ppo
    imports it unconditionally and declares it only in its own [verl-core] extra. verl's own source is the oracle:
    every module main_ppo's path imports is installed by rocmkit's [verl] extra (its requirements and theirs)."""
    import importlib.util
    import json
    import os
    from pathlib import Path

    from packaging.requirements import Requirement
    from provisioned import provisioned

    from rocmkit.tomlread import load_toml_file

    spec = importlib.util.find_spec("verl")
    if spec is None:
        provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/40-certify.sh installs verl for the checks", "VERL_CPU")
        pytest.skip("verl is not installed in this Python")
    from rocmkit.certify.engines.verl import runtime_imports

    imported = runtime_imports.imported(Path(spec.origin).parent)  # read from verl's source: what main_ppo imports
    assert {"ray", "hydra", "transfer_queue"} <= imported, imported  # main_ppo's own, in and outside TaskRunner.run
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    extra = load_toml_file(doc_tables.REPO / "pyproject.toml")["project"]["optional-dependencies"]["verl"]
    roots = [r for r in extra if Requirement(r).name != "rocmkit"]
    r = subprocess.run([python, "-c", INSTALLS, json.dumps([sorted(imported), roots])], capture_output=True,
                       text=True, timeout=300, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout)
    unowned = [m for m, dists in got["owners"].items() if not dists]
    assert not unowned, f"modules no distribution in the verl-cpu venv provides: {unowned}"
    missing = {m: d for m, d in got["owners"].items() if not set(d) & set(got["installed"])}
    assert not missing, f"verl's main_ppo imports these, which the [verl] extra does not install: {missing}"
    assert "transferqueue" in got["installed"]
