"""`rocmkit verl-check` and `certify --backend megatron`: launch scripts read the way bash reads them, then
composed and validated by verl 0.9.1's real config (the verl-cpu venv CI provisions; a failure under CI when
it is missing), and Megatron certification refused or accepted by verl's own rules."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.verl import launch_script
from rocmkit.verl import history as verl_history
from rocmkit.certify.engines.verl import overrides as verl_overrides
from rocmkit.certify.settings import Backend, Settings
from rocmkit.certify.validate import validate as check

DATA = Path(__file__).parent / "data" / "verl_check"
SEED = DATA / "seed000_grpo_megatron.sh"
FIXED = DATA / "seed000_fixed.sh"
EDGE = DATA / "edge_cases.sh"


def rocmkit(*args, python=sys.executable, timeout=600):
    return subprocess.run([python, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})


def verl_python() -> str:
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


def by_line(doc: dict, file: Path) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for f in doc["findings"]:
        if f["file"] == str(file):
            out.setdefault(f["line"], []).append(f)
    return out


# ---- reading scripts (no verl) ----

def needs_bwrap():
    import shutil

    if shutil.which("bwrap") is None:
        provisioned("ROCMKIT_BWRAP", ".ci/provision/12-sandbox.sh installs Debian's bubblewrap", "SANDBOX")


def test_the_seed_recipe_is_read_with_its_lines_and_variables():
    needs_bwrap()
    options = launch_script.ReadOptions(env={**os.environ, "HOME": "/u"})
    (inv,) = launch_script.read(str(SEED), SEED.read_text(), options)
    assert len(inv.overrides) == 33 and inv.line == 22
    assert (inv.config_name, inv.config_name_line, inv.config_path) == ("ppo_megatron_trainer", 22, "./config")
    lines = {o.key: o for o in inv.overrides}
    assert lines["actor_rollout_ref.actor.megatron.grad_offload"].line == 39
    assert lines["trainer.experiment_name"].text == "trainer.experiment_name=ROLLOUTTP1-TRAINTP1-TRAINPP1"
    assert lines["trainer.logger"].text == "trainer.logger=[console,wandb]"  # bash removes the quotes
    train = lines["data.train_files"]  # bash expands $HOME: the caller's, as a path
    assert train.text == "data.train_files=['/u/data/gsm8k-ROLLOUTTP1-TRAINTP1-TRAINPP1/train.parquet']"
    assert train.line == 24


def test_shell_features_and_mistakes():
    needs_bwrap()
    (inv,) = launch_script.read(str(EDGE), EDGE.read_text(), launch_script.ReadOptions(env={**os.environ, "TP": "4"}))
    got = {o.key: o for o in inv.overrides}
    assert got["actor_rollout_ref.actor.optim.lr"].text.endswith("=1e-6")  # export
    assert got["trainer.logger"].text == 'trainer.logger=["console","wandb"]'  # single quotes keep the rest
    assert got["trainer.experiment_name"].text == "trainer.experiment_name=exp run-4"  # the caller's TP=4
    assert got["trainer.n_gpus_per_node"].text.partition("=")[2].isdigit()  # $(nproc) runs, on this machine
    assert got["actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"].text.endswith("=2")  # the loop's last
    strays = [(line, msg) for sev, line, msg in inv.problems if sev == "error"]
    # the comment on line 22 cuts the command: one error there, naming it and what it cut off (checked as meant)
    assert [line for line, _ in strays] == [22] and "`# the reward` is a comment" in strays[0][1], strays
    assert "(lines 23-24: reward.num_workers=2, trainer.nnodes=1)" in strays[0][1]
    assert got["reward.num_workers"].line == 23


def test_an_overrides_file_and_a_file_that_is_neither(tmp_path):
    f = tmp_path / "ov.txt"
    f.write_text("# mine\nalgorithm.adv_estimator=grpo\n\n+trainer.x=1 \\\nnot an override\n")
    (inv,) = launch_script.read(str(f), f.read_text())
    assert [(o.line, o.key, o.prefix) for o in inv.overrides] == [(2, "algorithm.adv_estimator", ""),
                                                                   (4, "trainer.x", "+")]
    assert inv.problems == [("error", 5, "'not an override' is not a Hydra override")]
    g = tmp_path / "notes.md"
    g.write_text("hello world\n")
    out = rocmkit("verl-check", str(g))
    assert out.returncode == 2 and "notes.md" in out.stderr and "main_ppo" in out.stderr, out.stderr


def test_history_lookup_covers_the_keys_below_an_entry():
    assert verl_history.lookup("actor_rollout_ref.actor.router_replay.mode").kind == "renamed"
    assert verl_history.lookup("actor_rollout_ref.actor.megatron.grad_offload").use is None
    assert verl_history.lookup("reward_model.reward_manager").use == "reward.reward_manager.name"
    assert verl_history.lookup("actor_rollout_ref.actor.optim.lr") is None


# ---- against verl 0.9.1's own config ----

def megatron_file(tmp_path: Path, name: str, gpus: int, tp: int, pp: int) -> Path:
    """certify --backend megatron's own overrides (the verl_overrides the certification runs), one a line."""
    run = verl_overrides.VerlRun(model_dir="/m", train_file="/t.parquet", val_file="/v.parquet", reward_file="/r.py",
                                 gpus=gpus, backend="megatron", train_tp=tp, train_pp=pp)
    path = tmp_path / name
    path.write_text("\n".join(verl_overrides.overrides(run)) + "\n")
    return path


@pytest.mark.slow
def test_verl_names_what_the_seed_recipe_must_change_and_refuses_megatron_that_does_not_fit(tmp_path):
    bad = megatron_file(tmp_path, "megatron-3gpus-tp2.txt", gpus=3, tp=2, pp=1)
    out = rocmkit("verl-check", "--verl-python", verl_python(), "--json", str(SEED), str(EDGE), str(bad))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["verl"] == "0.9.1" and doc["schema"] == "rocmkit.verl-check/v1"
    seed = by_line(doc, SEED)
    (removed,) = [f for f in seed[39] if f["severity"] == "error"]
    assert removed["key"] == "actor_rollout_ref.actor.megatron.grad_offload" and "removed key" in removed["message"]
    assert "no replacement" in removed["instead"] and "/pull/7544" in removed["instead"]
    (alias,) = [f for f in seed[22] if f["severity"] == "warning"]
    assert "ppo_megatron_trainer" in alias["message"] and "Deprecated" in alias["message"]
    assert "--config-name=ppo_trainer" in alias["instead"] and "model_engine=megatron" in alias["instead"]
    assert [f["line"] for f in doc["findings"] if f["file"] == str(SEED) and f["severity"] == "error"] == [39]

    edge = by_line(doc, EDGE)
    assert "deprecated" in edge[18][0]["message"] and "ppo_micro_batch_size_per_gpu" in edge[18][0]["instead"]
    assert "renamed key" in edge[19][0]["message"] and "megatron.router_replay" in edge[19][0]["instead"]
    assert "unknown key" in edge[20][0]["message"] and edge[20][0]["instead"] == \
        "did you mean actor_rollout_ref.actor.optim.lr?"
    assert edge[21][0]["severity"] == "error" and "reward.custom_reward_function" in edge[21][0]["instead"]
    # the comment on line 22 cut the command: one error there, not one per override it cut off
    (cut,) = [f for f in edge[22] if f["severity"] == "error"]
    assert "`# the reward` is a comment" in cut["message"] and "reward.num_workers=2" in cut["message"]
    assert not [f for f in edge.get(23, []) + edge.get(24, []) if "not passed to main_ppo" in f["message"]]

    refused = [f for f in doc["findings"] if f["file"] == str(bad) and f["severity"] == "error"]
    assert len(refused) == 1 and "n_gpus (3) must be divisible by model_parallel_size (2)" in refused[0]["message"]


@pytest.mark.slow
def test_verl_accepts_the_fixed_recipe_and_certifys_megatron_overrides(tmp_path):
    good = [megatron_file(tmp_path, f"megatron-{g}-{tp}-{pp}.txt", g, tp, pp) for g, tp, pp in ((2, 2, 1), (4, 2, 2))]
    out = rocmkit("verl-check", "--verl-python", verl_python(), str(FIXED), *map(str, good))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "verl 0.9.1" in out.stdout and "accepted; 0 error(s), 0 warning(s)" in out.stdout
    assert "model_engine=megatron" in good[0].read_text()


def overrides_file(tmp_path: Path, name: str, gpus: int, run: dict | None = None, **change) -> Path:
    """certify's own overrides for `gpus` GPUs (which verl accepts), with some values changed: KEY=VALUE."""
    run = verl_overrides.VerlRun(model_dir="/m", train_file="/t.parquet", val_file="/v.parquet", reward_file="/r.py",
                                 gpus=gpus, batch_size=16, **(run or {}))
    lines = verl_overrides.overrides(run)
    for key, value in change.items():
        key = key.replace("__", ".")
        lines = [o for o in lines if o.partition("=")[0] != key] + [f"{key}={value}"]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_verl_check_applies_verls_gpu_split_rules(tmp_path):
    """verl 0.9.1 splits the job's GPUs into rollout replicas of TP GPUs and Megatron groups of TP x PP x CP,
    asserting it only when the workers start: verl-check says it before, on the override's line."""
    tp = "actor_rollout_ref__rollout__tensor_model_parallel_size"
    bad = [overrides_file(tmp_path, "rollout-tp3.txt", 8, **{tp: 3}),
           overrides_file(tmp_path, "rollout-tp16.txt", 8, **{tp: 16}),
           overrides_file(tmp_path, "megatron-tp3-dynamic.txt", 8, {"backend": "megatron", "train_tp": 3},
                          actor_rollout_ref__actor__use_dynamic_bsz=True,
                          actor_rollout_ref__actor__ppo_max_token_len_per_gpu=4096)]
    good = [overrides_file(tmp_path, "rollout-tp2.txt", 8, **{tp: 2}),
            # 16 GPUs hold 2 each of the mini batch's 8 x n 4 samples: micro batch 2 (verl asserts it at the update)
            overrides_file(tmp_path, "rollout-tp16-2-nodes.txt", 8, **{tp: 16, "trainer__nnodes": 2},
                           actor_rollout_ref__actor__ppo_micro_batch_size_per_gpu=2)]
    out = rocmkit("verl-check", "--verl-python", verl_python(), "--json", *map(str, bad + good))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    errors = {Path(f["file"]).name: f for f in doc["findings"] if f["severity"] == "error"}
    assert sorted(errors) == sorted(p.name for p in bad), errors
    for name, size in (("rollout-tp3.txt", 3), ("rollout-tp16.txt", 16)):
        f = errors[name]
        assert f["key"] == tp.replace("__", ".") and f["line"] == len((tmp_path / name).read_text().splitlines())
        assert f"replica of TP x DP x PP = {size} GPUs does not divide the job's 8 GPUs" in f["message"], f
        assert "verl/workers/engine_workers.py" in f["message"]
    assert "TP x PP x CP = 3 x 1 x 1 does not divide the job's 8 GPUs" in errors["megatron-tp3-dynamic.txt"]["message"]


@pytest.mark.slow
def test_a_home_data_path_hides_no_error(tmp_path):
    """A $HOME in the data paths (verl's examples) is expanded by bash like any value: verl's batch checks
    still find the mini batch larger than the train batch, on that key's own line."""
    home = DATA / "home_paths.sh"
    out = rocmkit("verl-check", "--verl-python", verl_python(), "--json", str(home))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    (error,) = [f for f in doc["findings"] if f["severity"] == "error"]
    assert "train_batch_size (1024) must be >= actor.ppo_mini_batch_size (2048)" in error["message"]
    assert not [f for f in doc["findings"] if "unresolved" in f["message"]]


@pytest.mark.slow
@pytest.mark.docker
def test_verl_check_in_an_image():
    image = provisioned("ROCMKIT_TEST_VERL_CPU_IMAGE", ".ci/image-gate.sh builds the verl-cpu image", "VERL_CPU")
    out = rocmkit("verl-check", "--image", image, "--json", str(SEED))
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    assert doc["target"].startswith(f"image {image}") and doc["verl"] == "0.9.1"
    assert [f["line"] for f in doc["findings"] if f["severity"] == "error"] == [39]


def test_no_verl_to_check_against():
    out = rocmkit("verl-check", "--verl-python", "/no/such/python", str(SEED))
    assert out.returncode == 2 and "--verl-python /no/such/python: no such file" in out.stderr
    if importlib.util.find_spec("verl") is None:  # rocmkit's own venv: no verl, and no guess
        out = rocmkit("verl-check", str(SEED))
        assert out.returncode == 3 and "verl is not installed in this Python" in out.stderr


# ---- certify --backend megatron: what is refused before verl is asked ----

@pytest.mark.parametrize(("kw", "says"), [
    ({"gpus": 0}, "trains on GPUs only"),
    ({"engine": "trl"}, "needs --engine verl"),
    ({"tp": 4}, "the built-in tiny model has 4 attention and 2 KV heads"),
    ({"pp": 3}, "the built-in tiny model has 2 layers"),
    ({"tp": 0}, "--tp 0"),
])
def test_megatron_settings_refused(kw, says):
    from rocmkit.errors import UsageError

    s = Settings(**{"engine": "verl", "backend": Backend.MEGATRON, "gpus": 2, **kw})
    with pytest.raises(UsageError) as err:
        check(s)
    assert says in err.value.message


def test_tp_without_megatron_is_refused_and_gpus_0_said_on_the_command_line(tmp_path):
    out = rocmkit("certify", "--engine", "verl", "--tp", "2", "--out", str(tmp_path / "a"))
    assert out.returncode == 2 and "need --backend megatron" in out.stderr
    out = rocmkit("certify", "--engine", "verl", "--backend", "megatron", "--gpus", "0", "--out", str(tmp_path / "b"))
    assert out.returncode == 2 and "trains on GPUs only" in out.stderr and "hint:" in out.stderr
    assert "Traceback" not in out.stderr and not (tmp_path / "b").exists()


@pytest.mark.slow
def test_a_target_without_megatron_is_not_certified_and_named(tmp_path):
    """verl-cpu has verl but not megatron-core or mbridge: exit 3 before any training, naming both."""
    out = rocmkit("certify", "--engine", "verl", "--backend", "megatron", "--gpus", "2", "--tp", "2", "--dry-run",
                  "--out", str(tmp_path / "run"), python=verl_python())
    assert out.returncode == 3, out.stderr
    assert "lacks megatron, mbridge" in out.stderr


@pytest.mark.slow
def test_a_config_name_verl_does_not_have(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo \\\n  -cn ppo_trainer_v2 \\\n  trainer.nnodes=1\n")
    out = rocmkit("verl-check", "--verl-python", verl_python(), "--json", str(script))
    assert out.returncode == 1, out.stderr
    (f,) = json.loads(out.stdout)["findings"]
    assert f["line"] == 2 and "has no such config" in f["message"] and "ppo_trainer" in f["instead"]
