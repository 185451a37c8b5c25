"""Slurm script rendering (no cluster needed): correct node array, deadlines, teardown, the Ray variable,
validation of every value, shellcheck-clean output, and the committed examples."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.cluster import slurm
from rocmkit.errors import UsageError

REPO = Path(__file__).resolve().parent.parent


def spec(**kw):
    base = dict(nodes=2, gpus_per_node=8, image="rocmkit/verl-vllm:x", runtime="docker", ray_version="2.55.1")
    return slurm.SlurmSpec(**{**base, **kw})


# ids not named like the markers: conftest looks markers up among the keywords, which include parameter ids
@pytest.mark.parametrize("runtime", slurm.RUNTIMES, ids=lambda r: f"runtime-{r}")
def test_rendered_scripts_pass_shellcheck(find_tool, tmp_path, runtime):
    text = slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1",
                             ib_hcas=("mlx5_0", "mlx5_1"), overrides=("data.train_batch_size=16",
                                                                      "actor_rollout_ref.model.path=/m/it's here")))
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    r = subprocess.run([find_tool("shellcheck"), "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout


def test_script_has_the_fixes_the_copied_scripts_lack():
    text = slurm.render(spec())
    assert 'mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")' in text
    assert "\nnodes_array=" not in text and "sleep 10" not in text
    assert "trap teardown EXIT" in text and 'docker rm -f "$CONTAINER"' in text
    assert "--privileged" not in text and "--device=/dev/kfd" in text and "--init" in text
    assert "export RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES=1" in text
    assert "wait_port" in text and "did not join the Ray cluster within" in text
    assert "trainer.nnodes=2 trainer.n_gpus_per_node=8" in text
    assert "unset ROCR_VISIBLE_DEVICES" in text


@pytest.mark.parametrize("version,var", [("2.44.1", "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES"),
                                         ("2.45.0", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES")])
def test_ray_variable_follows_the_version(version, var):
    text = slurm.render(spec(ray_version=version))
    assert f"export {var}=1" in text


def test_overrides_are_quoted_not_executed():
    text = slurm.render(spec(overrides=("trainer.project_name=$(rm -rf /)",)))
    assert "'trainer.project_name=$(rm -rf /)'" in text


@pytest.mark.parametrize("kw,message", [
    (dict(nodes=0), "--nodes"),
    (dict(ray_port=15000), "worker ports"),
    (dict(runtime="docker", image=None), "needs --image"),
    (dict(image="bad image; rm"), "--image"),
    (dict(partition="a b"), "--partition"),
    (dict(time="tomorrow"), "--time"),
    (dict(ib_hcas=("mlx5_0;x",)), "--ib-hcas"),
    (dict(overrides=("trainer.nnodes=4",)), "fills trainer.nnodes"),
    (dict(overrides=("not an override",)), "key=value"),
    (dict(ray_version="latest"), "--ray-version"),
    (dict(join_timeout=1), "--join-timeout"),
    (dict(stall_report_after=0), "--stall-report-after 0: a number of minutes, more than 0"),
    (dict(stall_report_after=float("nan")), "--stall-report-after nan"),
    (dict(stall_report_after=240, time="04:00:00"), "--stall-report-after 240 is not before the job's --time"),
    (dict(stall_report_after=2, time="1:30"), r"--time 1:30 \(1.5 minutes\)"),
])
def test_bad_values_are_usage_errors(kw, message):
    with pytest.raises(UsageError, match=message):
        slurm.render(spec(**kw))


def test_cli_resolves_ray_version_from_stack_and_writes_file(tmp_path):
    runner = CliRunner()
    out = tmp_path / "job.sbatch"
    r = runner.invoke(cli, ["slurm", "--nodes", "4", "--gpus-per-node", "8", "--image", "img:1", "--stack", "verl-vllm",
                            "--no-verl-check", "-o", str(out), "--", "data.train_batch_size=256"])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "trainer.nnodes=4" in text and "data.train_batch_size=256" in text
    assert out.stat().st_mode & 0o100
    r = runner.invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--runtime", "apptainer"])
    assert r.exit_code == 2 and "Ray version is unknown" in r.output
    r = runner.invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1", "--no-verl-check",
                            "-o", str(out)])
    assert r.exit_code == 2 and "already exists" in r.output


def test_committed_examples_are_current(tmp_path):
    for name, s in slurm.example_specs().items():
        path = REPO / "slurm" / name
        assert path.exists(), f"run `rocmkit slurm --examples slurm` ({name} missing)"
        assert path.read_text() == slurm.render(s), f"slurm/{name} is stale: run `rocmkit slurm --examples slurm`"
    assert sorted(p.name for p in (REPO / "slurm").iterdir()) == sorted(slurm.example_specs())


def test_tune_plan_goes_before_the_users_overrides(tmp_path):
    runner = CliRunner()
    plan = runner.invoke(cli, ["tune", "--model", "Qwen2-7B-Instruct", "--gpu", "MI300X", "--nodes", "2", "--json"])
    assert plan.exit_code == 0, plan.output
    (tmp_path / "plan.json").write_text(plan.stdout)  # stderr may warn about this host's memory
    r = runner.invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1", "--no-verl-check",
                            "--tune", str(tmp_path / "plan.json"), "--",
                            "actor_rollout_ref.rollout.gpu_memory_utilization=0.5"])
    assert r.exit_code == 0, r.output
    script = r.output
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=1" in script
    assert "gpu_memory_utilization=0.5" in script and script.count("gpu_memory_utilization=") == 1
    assert script.count("trainer.nnodes=") == 1  # the script's own, not the plan's again
    wrong = runner.invoke(cli, ["slurm", "--nodes", "4", "--image", "img:1", "--ray-version", "2.55.1", "--tune",
                                str(tmp_path / "plan.json")])
    assert wrong.exit_code == 2 and "trainer.nnodes=2, the job for 4" in wrong.output
    (tmp_path / "bad.json").write_text("{}")
    bad = runner.invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1", "--tune",
                              str(tmp_path / "bad.json")])
    assert bad.exit_code == 2 and "rocmkit.tune/v1" in bad.output


def test_a_json_plan_runs_grpo_and_a_plan_without_an_algorithm_is_refused(tmp_path):
    """The JSON plan carries the algorithm the text shows: the rendered driver line runs GRPO, not verl's default
    gae (PPO). A plan without algorithm.adv_estimator is refused by slurm --tune and certify --tune alike."""
    import json

    runner = CliRunner()
    plan = runner.invoke(cli, ["tune", "--model", "Qwen2-7B-Instruct", "--gpu", "MI300X", "--json"])
    assert plan.exit_code == 0, plan.output
    text = runner.invoke(cli, ["tune", "--model", "Qwen2-7B-Instruct", "--gpu", "MI300X"]).output
    doc = json.loads(plan.stdout)
    assert "algorithm.adv_estimator=grpo" in doc["overrides"] and "algorithm.adv_estimator=grpo" in text
    (tmp_path / "plan.json").write_text(plan.stdout)  # stderr may warn about this host's memory
    r = runner.invoke(cli, ["slurm", "--nodes", "1", "--image", "img:1", "--ray-version", "2.55.1", "--no-verl-check",
                            "--tune", str(tmp_path / "plan.json")])
    assert r.exit_code == 0, r.output
    (driver,) = [line for line in r.output.splitlines() if line.startswith("DRIVER=(")]
    assert "verl.trainer.main_ppo" in driver and " algorithm.adv_estimator=grpo " in driver

    doc["overrides"] = [o for o in doc["overrides"] if not o.startswith("algorithm.adv_estimator=")]
    old = tmp_path / "old-plan.json"
    old.write_text(json.dumps(doc))
    for args in (["slurm", "--nodes", "1", "--image", "img:1", "--ray-version", "2.55.1", "--tune", str(old)],
                 ["certify", "--engine", "verl", "--tune", str(old), "--out", str(tmp_path / "c"), "--dry-run"]):
        r = runner.invoke(cli, args)
        assert r.exit_code == 2, (args, r.output)
        assert f"--tune {old}: overrides: no algorithm.adv_estimator" in r.output and "hint:" in r.output, r.output
        assert "Traceback" not in r.output and "DRIVER=" not in r.output
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("runtime", slurm.RUNTIMES, ids=lambda r: f"runtime-{r}")
def test_preflight_runs_the_doctor_on_every_node_before_ray(find_tool, tmp_path, runtime):
    text = slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1", preflight=True))
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    r = subprocess.run([find_tool("shellcheck"), "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    assert "PREFLIGHT=(rocmkit doctor --multi-node --only 'rdma,kernel.log')" in text
    assert text.index('for node in "${NODES[@]}"') < text.index("PREFLIGHT=(") < text.index("ray start --head")
    assert 'log "ERROR: preflight failed on node(s): ${FAILED[*]}' in text
    if runtime == "docker":  # its own throwaway container, able to read the host's kernel log
        assert "docker run --rm --init --network=host --device=/dev/kmsg:/dev/kmsg:r --cap-add=SYSLOG" in text
    assert "PREFLIGHT" not in slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1"))


def test_preflight_flag_reaches_the_script(tmp_path):
    out = tmp_path / "job.sbatch"
    r = CliRunner().invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1",
                                 "--no-verl-check", "--preflight", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "run_once" in out.read_text()


def test_a_missing_image_is_said_before_the_ray_version():
    # `slurm --nodes 2` used to answer "the image's Ray version is unknown" for a missing --image
    r = CliRunner().invoke(cli, ["slurm", "--nodes", "2"])
    assert r.exit_code == 2 and "--runtime docker needs --image" in r.output and "Ray version" not in r.output
    r = CliRunner().invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--time", "soon"])
    assert r.exit_code == 2 and "--time 'soon'" in r.output
    # with the options right, the Ray version is what is missing
    r = CliRunner().invoke(cli, ["slurm", "--nodes", "2", "--image", "img:1", "--runtime", "apptainer"])
    assert r.exit_code == 2 and "Ray version is unknown" in r.output


@pytest.mark.parametrize("value,minutes", [("90", 90), ("1:30", 1.5), ("04:00:00", 240), ("2-0", 2880),
                                           ("1-02:30", 1590), ("0-00:00:30", 0.5), ("0", 0)])
def test_slurm_time_in_minutes(value, minutes):
    assert slurm.time_minutes(value) == minutes


@pytest.mark.parametrize("runtime", slurm.RUNTIMES, ids=lambda r: f"runtime-{r}")
def test_stall_report_timer_on_every_node_on_the_host(find_tool, tmp_path, runtime):
    text = slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1", time="01:00:00",
                             stall_report_after=50.5, job_name="grpo"))
    path = tmp_path / "job.sbatch"
    path.write_text(text)
    r = subprocess.run([find_tool("shellcheck"), "-x", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout
    lines = text.splitlines()
    assert 'STALL_DIR="${PWD}/grpo-${SLURM_JOB_ID}/stall"' in lines
    assert "  sleep 3030" in lines  # 50.5 minutes
    # every node at once, bounded, its output and errors in the stall log, never the job's exit code
    (srun,) = [line for line in lines if "srun --overlap --nodes=" in line and "timeout" in line]
    assert srun.strip().startswith('timeout --foreground -k 10 120 srun --overlap --nodes="$nodes" '
                                   "--ntasks-per-node=1 bash -c '"), srun
    (call,) = [line for line in lines if "doctor --stalled" in line and not line.startswith("#")]
    # on the host: not through run_in (the container), so py-spy sees the job's processes
    assert call.strip().startswith('rocmkit doctor --stalled ray --stall-out "$1/$node" 2>&1 |'), call
    assert '_ "$dir" >>"${dir}/stall.log" 2>&1 || rc=$?' in text
    # started in the background in its own session, before Ray, and stopped with that session by the teardown
    assert "setsid bash -c 'stall_report \"$@\"' _ \"$STALL_DIR\" \"${#NODES[@]}\" &" in lines
    assert text.index("trap teardown EXIT") < text.index("STALL_PID=$!") < text.index("ray start --head")
    assert '  if [[ -n "${STALL_PID:-}" ]]; then kill -TERM -- "-${STALL_PID}" 2>/dev/null || true; fi' in lines
    assert "STALL" not in slurm.render(spec(runtime=runtime, image=None if runtime == "none" else "img:1"))


def test_stall_report_flag_reaches_the_script_and_is_checked_against_time():
    args = ["slurm", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1", "--time", "30", "--no-verl-check"]
    r = CliRunner().invoke(cli, [*args, "--stall-report-after", "0.25"])
    assert r.exit_code == 0, r.output
    assert "  sleep 15\n" in r.stdout
    for value, message in (("30", "--stall-report-after 30 is not before the job's --time 30 (30 minutes)"),
                           ("-1", "--stall-report-after -1: a number of minutes, more than 0"),
                           ("soon", "Invalid value for '--stall-report-after'")):
        r = CliRunner().invoke(cli, [*args, "--stall-report-after", value])
        assert r.exit_code == 2 and message in r.output, r.output
        assert "Traceback" not in r.output


def verl_python() -> str:
    import importlib.util
    import sys

    from provisioned import provisioned

    if importlib.util.find_spec("verl") is not None:  # CI's test venv carries verl 0.9.1
        return sys.executable
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


@pytest.mark.slow
def test_the_jobs_overrides_are_checked_by_verl_before_the_script_is_written(tmp_path):
    """The plan's overrides and those after -- go through verl-check's checker with the job's GPUs: rollout TP 3 on
    a node of 8 GPUs (which verl asserts on once its workers start) is refused, exit 2, naming the override, where it
    came from and verl's reason, and nothing is written; the plan alone is accepted and written; --no-verl-check
    writes the same TP 3 job with a warning."""
    runner = CliRunner()
    plan = runner.invoke(cli, ["tune", "--model", "Qwen2.5-7B-Instruct", "--gpu", "MI300X", "--json"])
    (tmp_path / "plan.json").write_text(plan.stdout)
    out = tmp_path / "job.sbatch"
    args = ["slurm", "--nodes", "1", "--runtime", "none", "--ray-version", "2.55.1", "--tune",
            str(tmp_path / "plan.json"), "-o", str(out)]
    tp3 = "actor_rollout_ref.rollout.tensor_model_parallel_size=3"
    r = runner.invoke(cli, [*args, "--verl-python", verl_python(), "--", tp3])
    assert r.exit_code == 2 and not out.exists(), r.output
    assert "verl 0.9.1" in r.stderr and f"the overrides after --: {tp3}: a rollout replica" in r.stderr
    assert "does not divide the job's 8 GPUs" in r.stderr and "hint:" in r.stderr and "--no-verl-check" in r.stderr
    r = runner.invoke(cli, [*args, "--verl-python", verl_python()])
    assert r.exit_code == 0 and out.exists(), r.output
    assert "verl 0.9.1" in r.stderr and "accepts the job's overrides" in r.stderr
    r = runner.invoke(cli, [*args, "--no-verl-check", "--force", "--", tp3])
    assert r.exit_code == 0 and tp3 in out.read_text(), r.output
    assert "warning: the job's verl overrides are not checked (--no-verl-check)" in r.stderr


def test_no_verl_to_check_with_is_exit_3_naming_the_ways_on(tmp_path):
    """A job whose image this host's Docker engine lacks (or no engine at all, as on a login node): exit 3, and the
    hint names --verl-python and --no-verl-check. A custom entrypoint or Miles runs no main_ppo: not checked."""
    base = ["slurm", "--nodes", "1", "--ray-version", "2.55.1", "--", "data.train_batch_size=8"]
    r = CliRunner().invoke(cli, [*base[:5], "--image", "rocmkit-test/no-such-image:never", *base[5:]])
    assert r.exit_code == 3 and "no verl to check the job's overrides with" in r.stderr, r.output
    assert "--verl-python" in r.stderr and "--no-verl-check" in r.stderr and "Traceback" not in r.output
    r = CliRunner().invoke(cli, [*base[:5], "--image", "img:1", "--entrypoint", "python3 train.py", *base[5:]])
    assert r.exit_code == 0 and "not checked" not in r.stderr, r.output
    r = CliRunner().invoke(cli, [*base[:5], "--image", "img:1", "--verl-python", "py", "--no-verl-check", *base[5:]])
    assert r.exit_code == 2 and "--verl-python and --no-verl-check" in r.stderr


def test_a_node_count_past_any_cluster_is_refused_by_the_cli():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "99999999999", "--stack", "verl-vllm"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "99999999999 is not in the range 1<=x<=65536" in r.stderr


def test_an_image_tag_rocmkit_build_wrote_names_its_stack_for_the_ray_version(tmp_path):
    """`rocmkit slurm --image rocmkit/verl-vllm:…` asked for --stack though the tag names it: the stack's Ray pin
    is taken, and said to come from the tag."""
    import subprocess
    import sys

    from rocmkit import stacks

    pin = stacks.load_builtin("verl-vllm").pinned_version("ray")
    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "2", "--image",
                        "rocmkit/verl-vllm:rocm7.14.0-gfx942-abc123", "--no-verl-check", "-o", str(tmp_path / "j")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"Ray {pin} (stack verl-vllm's pin, the stack the image's tag names;" in r.stderr
