"""`rocmkit slurm --engine miles`: the verl script's Ray bring-up (join wait with a deadline, teardown on every
exit), then Miles' own launch, `ray job submit` with the runtime env Miles' execute_train builds
(tests/data/miles-e2e-short-test.json lists its variables, copied from command_utils.py at the pinned
commit). The driver array and the runtime env JSON are checked by running the script's own lines in bash."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.cluster import slurm
from rocmkit.errors import UsageError

EXPECT = json.loads((Path(__file__).parent / "data" / "miles-e2e-short-test.json").read_text())


def spec(**kw):
    base = dict(nodes=2, gpus_per_node=8, image="rocmkit/miles:x", runtime="docker", ray_version="2.55.1",
                engine="miles", overrides=("--hf-checkpoint", "/models/Qwen2.5-0.5B-Instruct/", "--colocate",
                                           "--prompt-data", "/data/it's here.parquet"))
    return slurm.SlurmSpec(**{**base, **kw})


def driver_of(text: str, head_ip: str = "10.1.2.3") -> tuple[list[str], dict]:
    """Run the script's RUNTIME_ENV and DRIVER lines in bash; return the driver's argv and the parsed env."""
    lines = [line for line in text.splitlines() if line.startswith(("RUNTIME_ENV=", "DRIVER="))]
    assert len(lines) == 2, lines
    script = f"HEAD_IP={head_ip}\n" + "\n".join(lines) + '\nprintf "%s\\0" "${DRIVER[@]}"\n'
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True, timeout=30).stdout
    argv = out.split("\0")[:-1]
    env_arg = next(a for a in argv if a.startswith("--runtime-env-json="))
    return argv, json.loads(env_arg.split("=", 1)[1])


def test_driver_is_miles_ray_job_submit_with_its_runtime_env():
    argv, runtime_env = driver_of(slurm.render(spec()))
    assert argv[:4] == ["ray", "job", "submit", "--address=http://127.0.0.1:8265"]
    sep = argv.index("--")
    assert argv[sep + 1:] == ["python3", "/root/miles/train.py", "--actor-num-nodes", "2",
                              "--actor-num-gpus-per-node", "8", "--hf-checkpoint", "/models/Qwen2.5-0.5B-Instruct/",
                              "--colocate", "--prompt-data", "/data/it's here.parquet"]
    env = runtime_env["env_vars"]
    assert set(env) == set(EXPECT["runtime_env_vars"])
    assert env["MASTER_ADDR"] == "10.1.2.3" and env["no_proxy"] == "127.0.0.1,10.1.2.3"
    assert env["PYTHONPATH"].split(":") == [EXPECT["megatron_path"], "/root/miles"]
    assert EXPECT["train_script"] == Path(argv[sep + 2]).name


def test_ray_cluster_is_brought_up_as_for_verl():
    text = slurm.render(spec())
    assert "trap teardown EXIT" in text and 'docker rm -f "$CONTAINER"' in text
    assert "did not join the Ray cluster within" in text  # the join wait with its deadline
    assert text.index("ray start --head") < text.index("wait_port \"$1\" \"$2\" \"$5\"") < text.index("DRIVER=(")
    assert "verl.trainer.main_ppo" not in text and "trainer.nnodes" not in text


@pytest.mark.parametrize("runtime", slurm.RUNTIMES, ids=lambda r: f"runtime-{r}")
def test_miles_scripts_pass_shellcheck(find_tool, tmp_path, runtime):
    path = tmp_path / "miles.sbatch"
    path.write_text(slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1")))
    r = subprocess.run([find_tool("shellcheck"), "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert subprocess.run(["bash", "-n", str(path)], timeout=30).returncode == 0


@pytest.mark.parametrize("arg", ["--actor-num-nodes", "--actor-num-gpus-per-node=4"])
def test_node_and_gpu_counts_come_from_the_options(arg):
    with pytest.raises(UsageError) as e:
        slurm.render(spec(overrides=(arg,)))
    assert "--nodes and --gpus-per-node" in e.value.message


def test_cli_renders_miles_and_keeps_verl_the_default(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["slurm", "--engine", "miles", "--nodes", "3", "--gpus-per-node", "4", "--image", "img:1",
                            "--ray-version", "2.55.1", "-o", str(tmp_path / "m.sbatch"), "--", "--colocate"])
    assert r.exit_code == 0, r.output
    argv, _ = driver_of((tmp_path / "m.sbatch").read_text())
    assert argv[argv.index("--") + 1:] == ["python3", "/root/miles/train.py", "--actor-num-nodes", "3",
                                           "--actor-num-gpus-per-node", "4", "--colocate"]
    r = runner.invoke(cli, ["slurm", "--nodes", "1", "--image", "img:1", "--ray-version", "2.55.1", "--no-verl-check",
                            "--", "data.train_batch_size=8"])
    assert r.exit_code == 0 and re.search(r"^DRIVER=\(python3 -m verl\.trainer\.main_ppo", r.output, re.M)
