"""`certify --script`: a user's verl launch script certified as a job (rocmkit/certify/job.py). The pure parts here;
the CPU run on the verl-cpu stack at the end (a verl example-style GRPO script, a random-weight Qwen2 model built
from a config.json, the built-in task in place of the script's data files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.certify import job as job_mod
from rocmkit.certify.settings import Backend, Settings
from rocmkit.certify.validate import validate
from rocmkit.errors import InputFileError, UsageError

DATA = Path(__file__).parent / "data" / "certify_job"
SCRIPT = DATA / "run_qwen2_tiny_grpo.sh"
CONFIG = DATA / "qwen2-tiny-config.json"


def _job(**kw) -> job_mod.Job:
    base = dict(script="/s/run.sh", line=3, overrides=("data.train_batch_size=16", "+foo.bar=1",
                                                       "trainer.logger=['console','wandb']"),
                model_path="/nowhere/Qwen2.5-0.5B-Instruct", model_config=(("model_type", "qwen2"),),
                model_source="table", data_files=("/nowhere/train.parquet",), builtin_data=True)
    return job_mod.Job(**{**base, **kw})


def test_certifys_overrides_replace_the_users_keys_and_keep_the_rest():
    merged = job_mod.merged(("a.b=1", "+foo.bar=1", "trainer.logger=['wandb']", "c=2"),
                            ["+foo.bar=2", "trainer.logger=['console','file']"])
    assert merged == ["a.b=1", "c=2", "+foo.bar=2", "trainer.logger=['console','file']"]


def test_a_hydra_value_names_files_as_a_list_or_one_path():
    assert job_mod.files_of("['/a/t.parquet', \"/b/u.parquet\"]") == ["/a/t.parquet", "/b/u.parquet"]
    assert job_mod.files_of("/a/t.parquet") == ["/a/t.parquet"]
    assert job_mod.value_of(("x=1", "+x=2", "y=3"), "x") == "2"


def test_the_smoke_budget_turns_off_validation_saves_and_external_loggers():
    ours = job_mod.smoke(_job(), steps=3, gpus=0, run_dir="/r/run", ray_temp_dir="/tmp/ray", model_dir="/r/model",
                         train_file="/r/data/train.parquet", val_file="/r/data/test.parquet",
                         reward_file="/r/reward.py")
    for o in ("trainer.total_training_steps=3", "trainer.test_freq=-1", "trainer.val_before_train=False",
              "trainer.save_freq=-1", "trainer.default_local_dir=/r/run/checkpoints",
              "trainer.logger=['console','file']", "trainer.n_gpus_per_node=1",
              "actor_rollout_ref.model.path=/r/model", "data.train_files=/r/data/train.parquet",
              "reward.custom_reward_function.path=/r/reward.py"):
        assert o in ours
    assert job_mod.train_rows(_job(), 3) == 64 and job_mod.train_rows(_job(overrides=("data.train_batch_size=512",)),
                                                                        3) == 2048
    said = job_mod.stand_ins(_job())
    assert said[0].startswith("model weights: random") and said[1].startswith("data: the built-in digits task")


def test_a_model_not_on_the_host_takes_its_shape_from_the_table_or_a_config_file(tmp_path):
    config, source = job_mod.stand_in_config("run.sh", "/nowhere/Qwen2.5-0.5B-Instruct", None)
    assert config["hidden_size"] == 896 and config["architectures"] == ["Qwen2ForCausalLM"]
    assert "Qwen/Qwen2.5-0.5B-Instruct" in source and "params_b" not in config
    config, source = job_mod.stand_in_config("run.sh", "/nowhere/x", str(CONFIG))
    assert config["hidden_size"] == 256 and source == str(CONFIG)
    with pytest.raises(InputFileError) as exc:
        job_mod.stand_in_config("run.sh", "/nowhere/my-own-model", None)
    assert "run.sh: actor_rollout_ref.model.path: /nowhere/my-own-model: no such model folder" in exc.value.message
    assert "--model-config" in exc.value.hint
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"model_type": "qwen2", "hidden_size": 8}))
    with pytest.raises(UsageError) as exc:
        job_mod.stand_in_config("run.sh", None, str(bad))
    assert str(bad) in exc.value.message and "num_hidden_layers" in exc.value.message
    bad.write_text("{")
    with pytest.raises(InputFileError) as exc:
        job_mod.stand_in_config("run.sh", None, str(bad))
    assert exc.value.message.startswith(f"{bad}: not JSON")


def test_a_job_is_the_verl_engines_option():
    with pytest.raises(UsageError) as exc:
        validate(Settings(engine="trl", job=_job()))
    assert "--script certifies a verl launch script" in exc.value.message
    assert validate(Settings(engine="verl", gpus=0, steps=1, job=_job())).steps == 1  # learning is not judged
    with pytest.raises(UsageError):
        validate(Settings(engine="verl", gpus=0, steps=1))


def test_the_scripts_exports_reach_the_run_under_certifys_own(tmp_path):
    """The run's environment has the script's exports; certify's own variables (offline, the sleep pool's allocator
    setting, the flight recorder) win, verl's module list keeps the script's modules, and the certificate's job
    record says what was passed and what certify changed, and why."""
    from rocmkit.certify import engines, flow, workspace
    from rocmkit.certify.target import Target

    exports = (("VLLM_USE_V1", "1"), ("NCCL_DEBUG", "WARN"), ("HF_HUB_OFFLINE", "0"),
               ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:False"), ("TORCH_NCCL_TRACE_BUFFER_SIZE", "0"),
               ("VERL_USE_EXTERNAL_MODULES", "my_plugin"), ("RAY_DEDUP_LOGS", "0"))
    s = Settings(engine="verl", gpus=1, steps=3, out=tmp_path / "c", job=_job(env=exports, model_config=None))
    ws = workspace.layout(s.out, s)
    argv, env = flow.command(s, ws, Target(image=None, image_id=None, record={}), {"verl_overrides": ["a.b=1"]})
    assert argv[-1] == "a.b=1"
    assert (env["VLLM_USE_V1"], env["NCCL_DEBUG"], env["RAY_DEDUP_LOGS"]) == ("1", "WARN", "0")  # the script's
    assert (env["HF_HUB_OFFLINE"], env["PYTORCH_CUDA_ALLOC_CONF"], env["TORCH_NCCL_TRACE_BUFFER_SIZE"]) == (
        "1", "expandable_segments:True", "2000")  # certify's own win
    assert env["VERL_USE_EXTERNAL_MODULES"] == ("my_plugin,rocmkit.certify.intarget.verl_sync_witness,"
                                                "rocmkit.stall.frdump")
    job = engines.get("verl").settings_fields(s)["job"]
    assert job["env"] == {"VLLM_USE_V1": "1", "NCCL_DEBUG": "WARN", "RAY_DEDUP_LOGS": "0"}  # as the script set them
    changed = {c["name"]: (c["script"], c["run"]) for c in job["env_overridden"]}
    assert changed == {"HF_HUB_OFFLINE": ("0", "1"),
                       "PYTORCH_CUDA_ALLOC_CONF": ("expandable_segments:False", "expandable_segments:True"),
                       "TORCH_NCCL_TRACE_BUFFER_SIZE": ("0", "2000"),
                       "VERL_USE_EXTERNAL_MODULES": ("my_plugin", "my_plugin,rocmkit.certify.intarget.verl_sync_witness,"
                                                                   "rocmkit.stall.frdump")}
    assert all(c["why"] for c in job["env_overridden"]) and "offline" in job["env_overridden"][0]["why"]
    assert engines.get("verl").run_record(s, {}, None, ws)["job"] == job  # the certificate's engine_run says the same
    said = job_mod.lines(job)
    assert "- the script's exports: VLLM_USE_V1=1, NCCL_DEBUG=WARN, RAY_DEDUP_LOGS=0" in said
    assert any(line.startswith("- the script's HF_HUB_OFFLINE=0: the run has 1 (") for line in said)
    _, plain = flow.command(replace(s, job=_job(model_config=None)), ws, Target(image=None, image_id=None, record={}),
                            {"verl_overrides": []})
    assert "VLLM_USE_V1" not in plain and plain["HF_HUB_OFFLINE"] == "1"


# ---- on the verl-cpu stack ----

def test_a_megatron_script_runs_with_its_config_and_the_megatron_backend(tmp_path):
    """verl's Megatron examples run main_ppo --config-name=ppo_megatron_trainer (or model_engine=megatron): the job
    runs with that config, as the Megatron backend (its start-up cuts, modules and memory model), and the backend is
    the script's word, not an option."""
    from rocmkit.certify import flow
    from rocmkit.certify.target import Target
    from rocmkit.certify.workspace import layout

    megatron = _job(config_name="ppo_megatron_trainer", config_path=None)
    assert job_mod.backend(megatron) == "megatron"
    assert job_mod.config_args(megatron) == ["--config-name=ppo_megatron_trainer"]
    engine_only = _job(overrides=("model_engine=megatron", "data.train_batch_size=16"))
    assert job_mod.backend(engine_only) == "megatron" and job_mod.config_args(engine_only) == []
    assert job_mod.backend(_job()) == "fsdp" and job_mod.config_args(_job(config_path="conf")) == ["--config-path=conf"]
    s = validate(Settings(engine="verl", gpus=1, job=megatron, backend=Backend.MEGATRON, out=tmp_path / "c"))
    ws = layout(s.out, s)
    cfg = flow.config(s, ws, Target(image=None, image_id=None, record={}))
    argv, _ = flow.command(s, ws, Target(image=None, image_id=None, record={}), cfg)
    assert argv[1:4] == ["-m", "verl.trainer.main_ppo", "--config-name=ppo_megatron_trainer"]
    assert cfg["config_name"] == "ppo_megatron_trainer"
    assert not any("fsdp_config.use_torch_compile" in o for o in argv)  # FSDP's start-up cut is not a Megatron one
    r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--host", "--script", str(SCRIPT), "--backend",
                        "megatron", "--gpus", "0", "--out", str(tmp_path / "d")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2 and "--backend: with --script the script sets it" in r.stderr


def verl_cpu_python() -> str:
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


def _certify(python: str, *args, timeout=1200):
    return subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--script", str(SCRIPT), "--gpus", "0",
                           *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, "CI": "true"})


def test_a_script_verl_rejects_is_refused_with_verl_checks_findings(tmp_path):
    """Eight GPUs asked of the script: verl's own batch rule fails, before anything starts (exit 2)."""
    python, out = verl_cpu_python(), tmp_path / "c"
    r = _certify(python, "--arg", "trainer.n_gpus_per_node=8", "--model-config", str(CONFIG), "--out", str(out))
    assert r.returncode == 2, r.stderr[-3000:]
    check = subprocess.run([python, "-m", "rocmkit", "verl-check", str(SCRIPT), "--arg", "trainer.n_gpus_per_node=8",
                            "--gpus", "1"], capture_output=True, text=True, timeout=600)
    findings = [line for line in check.stdout.splitlines() if ": error: " in line]
    assert check.returncode == 1 and findings and all(f in r.stderr for f in findings), check.stdout
    assert "rejects the job" in r.stderr and "Traceback" not in r.stderr and not out.exists()


def test_a_scripts_exports_reach_the_command_but_not_what_env_gave_it(tmp_path):
    """Real bash in the sandbox, then the dry run's plan: what the script exports before main_ppo is in the command's
    environment, under certify's own (HF_HUB_OFFLINE); `--env NCCL_DEBUG=WARN`, which the script re-exports
    unchanged, is not the script's; what it exports after main_ppo is not either."""
    script = tmp_path / "run.sh"
    body = SCRIPT.read_text()
    at = body.index("python3 -m verl.trainer.main_ppo")
    script.write_text(body[:at] + "export VLLM_USE_V1=1 NCCL_DEBUG=${NCCL_DEBUG:-INFO}\n"
                      "export HF_HUB_OFFLINE=0\n" + body[at:] + "\nexport LATE=1\n")
    r = subprocess.run([verl_cpu_python(), "-m", "rocmkit", "certify", "--host", "--script", str(script), "--gpus", "0",
                        "--env", "NCCL_DEBUG=WARN", "--model-config", str(CONFIG), "--dry-run", "--json", "--out",
                        str(tmp_path / "c")], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "CI": "true", "PYTHONPATH": str(Path(__file__).parents[1])})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "    the script exports: VLLM_USE_V1=1, HF_HUB_OFFLINE=0\n" in r.stderr  # verl-check's line
    env = json.loads(r.stdout)["env"]
    assert env["VLLM_USE_V1"] == "1" and env["HF_HUB_OFFLINE"] == "1"  # certify's own wins
    assert "NCCL_DEBUG" not in env and "LATE" not in env


@pytest.mark.engine  # verl and Ray on this host's CPU: one engine at a time (tests/xdistgroups.py)
def test_a_verl_example_script_certifies_as_a_job_on_the_cpu(tmp_path):
    """The script's model and data are not on this host: a random-weight Qwen2 from the config.json and the
    built-in task stand in, three steps run, and the certificate says so."""
    out = tmp_path / "c"
    r = _certify(verl_cpu_python(), "--model-config", str(CONFIG), "--out", str(out), "--json")
    assert r.returncode == 0, r.stderr[-4000:]
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "pass" and cert["metrics"]["steps"] == 3
    job = cert["settings"]["job"]
    assert job["script"] == str(SCRIPT) and job["budget"]["steps"] == 3 and job["budget"]["validation"] == "off"
    assert [s.split(":")[0] for s in job["stand_ins"]] == ["model weights", "data"]
    assert cert["settings"]["learning_required"] is False and cert["engine_run"]["job"] == job
    command = cert["settings"]["command"]
    assert "trainer.logger=['console','file']" in command and "trainer.save_freq=-1" in command
    assert "trainer.logger=[\"console\",\"wandb\"]" not in command and "trainer.test_freq=-1" in command
    assert "data.max_prompt_length=64" in command  # the script's own shape stays
    model = json.loads((out / "model" / "config.json").read_text())
    assert (model["hidden_size"], model["vocab_size"], model["num_hidden_layers"]) == (256, 1024, 2)
    md = (out / "certificate.md").read_text()
    assert "stand-in: model weights: random" in md
    # random weights prove nothing by the reward: the weight syncs and the log-probs are the job's evidence that the
    # stack trains its model (the stand-in's tokenizer fills its 1024 rows, so verl's rollout masks none of them)
    num = cert["numerics"]
    assert num["sync"]["observed"] and not num["sync"]["problems"] and num["status"] == "in band", num
    assert "- for this job (random weights: its reward means nothing): the rollout generated with the weights" in md


def test_a_job_that_ran_out_of_gpu_memory_is_told_tunes_plan_for_it():
    """The cause of a job's CUDA/HIP out-of-memory gets rocmkit tune's plan for the script's model, GPUs and batch as
    its fix; where nothing fits, tune's own word on what does not and what would."""
    from rocmkit.certify import engines
    from rocmkit.certify.job import Job
    from rocmkit.certify.settings import Settings
    from rocmkit.tune import models

    def job(model: str, *extra: str) -> Job:
        config = {k: v for k, v in models.table()[model].items() if k not in ("source", "params_b", "architecture",
                                                                               "attention_bias")}
        return Job(script="run.sh", line=3, overrides=("trainer.n_gpus_per_node=1", "trainer.nnodes=1",
                                                       "data.max_prompt_length=1024", "data.max_response_length=2048",
                                                       "actor_rollout_ref.rollout.n=5", "data.train_batch_size=64",
                                                       "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=32",
                                                       *extra),
                   model_path=f"/models/{model.split('/')[-1]}", model_config=tuple(config.items()),
                   model_source="rocmkit's model table", data_files=(), builtin_data=True)

    verl = engines.get("verl")
    report = {"gpu_memory": [{"index": 0, "name": "NVIDIA H200", "free": 149557477376, "total": 150109880320}]}
    oom = {"kind": "gpu.oom", "summary": "the GPU ran out of memory in rank 0", "hint": "lower the micro batch"}
    fits = verl.advise(Settings(engine="verl", gpus=1, job=job("Qwen/Qwen2.5-7B-Instruct")), report, dict(oom))
    assert fits["hint"].startswith("lower the micro batch; for this job, `rocmkit tune --model /models/Qwen2.5-7B-"
                                   "Instruct --gpu H200 --gpus-per-node 1 --nodes 1 --prompt-len 1024 --response-len "
                                   "2048 --n 5 --train-batch 64 --rollout vllm --backend fsdp` plans this job with ")
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2" in fits["tune"]
    # the job's own algorithm and shape are not advice (tune plans GRPO; this job's estimator is left as it is)
    assert "algorithm.adv_estimator" not in fits["tune"] and "trainer.nnodes" not in fits["tune"]
    rloo = verl.advise(Settings(engine="verl", gpus=1, job=job("Qwen/Qwen2.5-7B-Instruct",
                                                                "algorithm.adv_estimator=rloo")), report, dict(oom))
    assert "algorithm.adv_estimator=grpo" not in rloo["tune"] and "actor_rollout_ref.rollout.n=" not in rloo["tune"]
    too_big = verl.advise(Settings(engine="verl", gpus=1, job=job("Qwen/Qwen2.5-72B-Instruct")), report, dict(oom))
    assert "says it cannot fit: " in too_big["tune"] and "GiB more than" in too_big["tune"]
    # not a job, or not memory: the cause stays as it was
    assert verl.advise(Settings(engine="verl", gpus=1), report, dict(oom)) == oom
    crash = {"kind": "process.killed", "summary": "x", "hint": "y"}
    assert verl.advise(Settings(engine="verl", gpus=1, job=job("Qwen/Qwen2.5-7B-Instruct")), report, crash) == crash


def test_a_jobs_data_files_are_checked_for_the_columns_its_own_keys_name(tmp_path):
    """A job's own parquet files: the prompt column its data.prompt_key names, the data source its
    data.reward_fn_key names and reward_model (verl's naive reward manager reads reward_model.ground_truth and
    non_tensor_batch[reward_fn_key]), checked in the setup before anything starts; each train file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocmkit.certify import inputs

    good, bad = tmp_path / "gsm8k.parquet", tmp_path / "other.parquet"
    pq.write_table(pa.table({"question": ["1+1?"], "data_source": ["gsm8k"],
                             "reward_model": [{"ground_truth": "2"}]}), good)
    pq.write_table(pa.table({"question": ["1+1?"], "source": ["x"]}), bad)

    def problems(*overrides: str, files=(good,)) -> list[str]:
        job = _job(overrides=overrides, data_files=tuple(map(str, files)), builtin_data=False)
        return inputs.problems({"builtin_model": True, "builtin_data": False, "train_file": str(files[0]),
                                "data_files": list(map(str, files)), "data_columns": job_mod.data_columns(job)})

    assert problems("data.prompt_key=question") == []
    (said,) = problems()  # verl's default prompt key
    assert "has no column 'prompt'" in said and "the run reads prompt, data_source, reward_model" in said
    (said,) = problems("data.prompt_key=question", "data.reward_fn_key=ability")
    assert "has no column 'ability'" in said
    (said,) = problems("data.prompt_key=question", files=(good, bad))  # the second train file
    assert said.startswith(f"{bad} has no column 'data_source', 'reward_model'")


def test_a_start_up_cut_never_replaces_what_the_script_sets(tmp_path):
    """verl's examples/grpo_trainer/run_qwen3_4b_fsdp.sh sets rollout.enforce_eager=False: the H200 certificate of
    that job (tests/data/certify/verl-h200-job-qwen3-4b.json) ran it eager all the same, a smoke run's cut. A job's
    own settings are the job: the cuts apply only to keys its script leaves to verl."""
    from rocmkit.certify import engines
    from rocmkit.certify.engines.verl import smoke_cuts

    kept = json.loads((Path(__file__).parent / "data" / "certify" / "verl-h200-job-qwen3-4b.json").read_text())
    own = tuple(kept["settings"]["job"]["overrides"])
    assert "actor_rollout_ref.rollout.enforce_eager=False" in own
    assert any(c["name"].startswith("eager rollout") for c in kept["settings"]["smoke_cuts"])  # what it did then
    s = Settings(engine="verl", gpus=1, out=tmp_path / "run", job=_job(overrides=own))
    cuts = engines.get("verl").settings_fields(s)["smoke_cuts"]
    said = [o for c in cuts for o in c["overrides"]]
    assert not any(o.startswith("actor_rollout_ref.rollout.enforce_eager=") for o in said), said
    assert "transfer_queue.backend.SimpleStorage.num_data_storage_units=1" in said  # a key the script leaves to verl
    # a + prefix sets the same key; a cut left with no override of its own is not applied (nor listed)
    only = smoke_cuts.cuts(backend="fsdp", rollout="vllm", tensor_parallel=1, on_cpu=False, rollout_graphs=False,
                           engine_defaults=False,
                           job_keys=frozenset({"actor_rollout_ref.rollout.engine_kwargs.vllm."
                                               "distributed_executor_backend"}))
    assert not any("uni executor" in c.name for c in only) and len(only) == 3
