"""Every failure named: a run that dies says which process died, how, and why; a bad --model or --data is refused
before anything starts. Real runs of verl (the verl-cpu venv) and TRL on this host's CPU, a worker killed with
SIGKILL after the first step; the cause's decision replayed on the kept logs of real runs (tests/data/crash/)."""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest
from provisioned import provisioned
from test_certify_runs import need
from test_certify_stall import TAG, _leftovers, _trainer

from rocmkit import tinymodel
from rocmkit.certify import busy, cause, inputs
from rocmkit.certify.processes import Processes
from rocmkit.host.facts import gpu_holders
from rocmkit.certify.judge import RunStatus

DATA = Path(__file__).parent / "data" / "crash"


def _verl_python() -> str:
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


def _worker(started: float, tag: str) -> psutil.Process | None:
    """verl's training rank 0 on the CPU: the Ray actor WorkerDict this run started."""
    for p in psutil.process_iter(["cmdline", "create_time"]):
        try:
            if (p.info["create_time"] >= started - 1 and " ".join(p.info["cmdline"] or []).startswith("ray::WorkerDict")
                    and p.environ().get(TAG) == tag):
                return p
        except psutil.Error:
            continue
    return None


def kill_after_first_step(python: str, out: Path, engine: str, pick) -> tuple[dict, str, int]:
    """certify on this host's CPU; once step 1 is logged, SIGKILL to the process `pick(started, tag)` finds. The
    certificate, certify's stderr and the pid killed."""
    started, tag = time.time(), uuid.uuid4().hex
    argv = [python, "-m", "rocmkit", "certify", "--host", "--engine", engine, "--gpus", "0", "--steps", "40",
            "--out", str(out), "--json"]
    err_path = out.parent / f"{out.name}.stderr"
    with open(err_path, "w") as err:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                 env={**os.environ, "CI": "true", TAG: tag})
    log, killed = out / "run.log", None
    try:
        deadline = time.monotonic() + 900
        step_mark = "step:1 " if engine == "verl" else "'loss'"
        while not (log.exists() and step_mark in log.read_text(errors="replace")):
            assert child.poll() is None, f"certify ended before its first step: {err_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no first step within 900 s"
            time.sleep(0.5)
        while killed is None:
            assert time.monotonic() < deadline, "no process to kill"
            p = pick(started, tag)
            if p is not None:
                p.send_signal(signal.SIGKILL)
                killed = p.pid
            time.sleep(0.2)
        stdout, _ = child.communicate(timeout=180)
    finally:
        if child.poll() is None:
            child.kill()
    assert _leftovers(started, out, tag) == []
    return json.loads(stdout), err_path.read_text(), killed


def _named_everywhere(cert: dict, stderr: str, out: Path, *words: str) -> None:
    """The cause is on the certificate's first line, in its JSON, on the terminal and on the picture; never just
    "crashed"."""
    why = cert["cause"]
    for w in words:
        assert w in why["summary"], why
    first = (out / "certificate.md").read_text().splitlines()[0]
    assert first == f"# rocmkit certificate: FAIL — {why['summary']}"
    assert f"error: {why['summary']}" in stderr and "hint: " in stderr and "Traceback" not in stderr
    run_finished = next(c for c in cert["checks"] if c["name"] == "run finished")
    assert run_finished["detail"] != "run status: crashed" and why["summary"] in run_finished["detail"]
    if cert["files"].get("picture"):
        assert "ended: " in (out / "certificate.svg").read_text()


@pytest.mark.slow
@pytest.mark.engine
def test_verl_rank_killed_is_named_with_its_signal(tmp_path, ray_host):
    home = tmp_path / "home"
    home.mkdir()
    os.environ.setdefault("HOME", str(home))
    out = tmp_path / "c"
    cert, stderr, pid = kill_after_first_step(_verl_python(), out, "verl", _worker)
    assert cert["verdict"] == "fail" and cert["exit_code"] == 1
    _named_everywhere(cert, stderr, out, f"rank 0 (pid {pid}, Ray actor WorkerDict) was killed by SIGKILL")
    assert cert["cause"]["ended"]["signal"] == "SIGKILL" and cert["cause"]["process"]["rank"] == "0"
    seen = {p["pid"]: p for p in cert["run"]["processes"]}
    assert seen[pid]["role"] == "Ray actor WorkerDict" and seen[pid]["gone_s"] is not None


@pytest.mark.slow
@pytest.mark.engine
def test_trl_trainer_killed_is_named_with_its_signal(tmp_path):
    need("trl")
    out = tmp_path / "c"
    cert, stderr, pid = kill_after_first_step(sys.executable, out, "trl", lambda s, t: _trainer("trl", s, t))
    assert cert["verdict"] == "fail" and cert["run"]["status"] == "crashed"
    _named_everywhere(cert, stderr, out, f"TRL's trainer (pid {pid}) was killed by SIGKILL")
    assert cert["cause"]["ended"] == {"signal": "SIGKILL", "by": "the exit status of TRL's trainer"}


def _cut_model(folder: Path) -> Path:
    tinymodel.build(folder)
    f = next(folder.glob("*.safetensors"))
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 3])
    return folder


def _renamed_data(path: Path) -> Path:
    pq = pytest.importorskip("pyarrow.parquet")
    from rocmkit.certify import task

    train, _ = task.write_dataset(path.parent / "builtin", train_rows=16)
    table = pq.read_table(train)
    pq.write_table(table.rename_columns(["question" if c == "prompt" else c for c in table.column_names]), path)
    return path


@pytest.mark.parametrize("engine", ["verl", "trl"])
def test_a_cut_weights_file_and_wrong_columns_are_refused_before_anything_starts(tmp_path, engine):
    python = _verl_python() if engine == "verl" else sys.executable
    if engine == "trl":
        need("trl")
    model = _cut_model(tmp_path / "model")
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", engine, "--gpus", "0",
                        "--model", str(model), "--out", str(tmp_path / "a")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "CI": "true"})
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"error: {model}/model.safetensors: " in r.stderr and "the file was cut short (33 % of it is there)" in r.stderr
    assert not (tmp_path / "a" / "run.log").exists() and "Traceback" not in r.stderr
    data = _renamed_data(tmp_path / "wrong.parquet")
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", engine, "--gpus", "0",
                        "--data", str(data), "--out", str(tmp_path / "b")], capture_output=True, text=True,
                       timeout=300, env={**os.environ, "CI": "true"})
    assert r.returncode == 2, r.stderr[-2000:]
    assert f"error: {data} has no column 'prompt' (its columns: data_source, question," in r.stderr
    assert not (tmp_path / "b" / "run.log").exists() and "Traceback" not in r.stderr


def test_a_safetensors_header_longer_than_the_file_is_named(tmp_path):
    f = tmp_path / "w.safetensors"
    f.write_bytes((10_000).to_bytes(8, "little") + b'{"a": ')
    assert "its header says 10000 bytes of metadata but the file has 14 bytes" in inputs.safetensors_problem(f)
    f.write_bytes(b"\x01\x02")
    assert "shorter than a safetensors header" in inputs.safetensors_problem(f)
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors.index.json").write_text('{"weight_map": {"x": "model-00001-of-00002.safetensors"}}')
    assert inputs.model_problems(tmp_path / "m") == [
        f"{tmp_path / 'm' / 'model.safetensors.index.json'} names model-00001-of-00002.safetensors, which is not in "
        f"{tmp_path / 'm'}"]


# ---- the decision, replayed on kept logs of real runs ----

def _replay(name: str, **kw) -> dict:
    lines = (DATA / name).read_text().splitlines()
    return cause.name(status=kw.pop("status", RunStatus.CRASHED), returncode=kw.pop("returncode", 1),
                      logs={"run.log": lines}, **kw)


def test_a_ray_worker_killed_on_the_cpu_is_named_from_its_log():
    # verl 0.9.1 on this CPU (benchmarks/failure_verdicts.py --gpus 0 --rank 0 --cases rank): ray::WorkerDict
    # (rank 0, pid 28237) killed with SIGKILL once step 1 was logged
    why = _replay("verl-cpu-worker-sigkill.log", where="step 2", command="verl's driver (main_ppo)")
    assert why["summary"] == "Ray actor WorkerDict (pid 28237) was killed by SIGKILL in step 2"
    assert why["ended"]["signal"] == "SIGKILL" and "connection error code 2. End of file" in why["ended"]["by"]
    assert why["evidence"][0]["line"] == 1389 and "Worker PID: 28237" in why["evidence"][0]["text"]
    assert why["kind"] == "ray.worker_died" and why["source"].startswith("https://github.com/")


def test_the_processes_seen_name_the_rank():
    lines = (DATA / "verl-cpu-worker-sigkill.log").read_text().splitlines()

    class Seen:
        def find(self, pid):
            return {"pid": pid, "role": "Ray actor WorkerDict", "rank": "0"} if pid == 28237 else None

        def gone_early(self, until):
            return []

    why = cause.name(status="crashed", returncode=1, logs={"run.log": lines}, processes=Seen(), where="step 2")
    assert why["summary"] == "rank 0 (pid 28237, Ray actor WorkerDict) was killed by SIGKILL in step 2"


def test_a_driver_killed_by_a_signal_and_a_silent_exit_are_named():
    why = cause.name(status="crashed", returncode=-9, logs={"run.log": ["step 1 ok"]}, where="step 2",
                     command="TRL's trainer")
    assert why["summary"] == "TRL's trainer was killed by SIGKILL in step 2"
    assert why["ended"] == {"signal": "SIGKILL", "by": "the exit status of TRL's trainer"}
    why = cause.name(status="crashed", returncode=3, logs={"run.log": ["step 1 ok", "bye"]}, command="Miles' test")
    assert why["summary"] == "Miles' test exited with code 3 without an error the log names"
    assert [e["text"] for e in why["evidence"]] == ["step 1 ok", "bye"]


def test_stalls_and_timeouts_keep_the_watchdogs_words_and_a_finished_run_has_no_cause():
    assert cause.name(status="finished", returncode=0, logs={}) is None
    why = cause.name(status="stalled", returncode=None, logs={}, stop_message="the run stalled in rollout (step 3)",
                     stop_hint="the job waits for rank 0")
    assert (why["summary"], why["hint"]) == ("the run stalled in rollout (step 3)", "the job waits for rank 0")
    why = cause.name(status="timed out", returncode=None, logs={}, timeout_s=60, where="step 2")
    assert why["summary"] == "the certification ran past --timeout 60 s in step 2 and was stopped"


@pytest.mark.parametrize("status", [s for s in RunStatus if s is not RunStatus.FINISHED])
@pytest.mark.parametrize("returncode", [None, 1, -9, 0])
def test_a_run_that_did_not_finish_is_never_named_only_by_its_status(status, returncode):
    """Whatever the status and however little the log says, the cause names what ended the run and what to do."""
    why = cause.name(status=status, returncode=returncode, logs={"run.log": []}, timeout_s=60,
                     stop_message="the run stalled in start-up (starting Ray)" if status in (RunStatus.STALLED, RunStatus.ENGINE_ERROR) else None)
    assert why["summary"] and why["summary"] not in {s.value for s in RunStatus}
    assert "crashed" not in why["summary"] and why["kind"]


# ---- the GPU runs (two H200s, verl 0.9.1, vLLM 0.24.0: benchmarks/failure_verdicts.py), replayed ----

def _replay_gpu(name: str) -> tuple[dict, dict]:
    """The cause named again from a kept GPU run's log and the processes its certificate recorded, beside the cause
    that run's certificate gave."""
    kept = json.loads((DATA / f"{name}.json").read_text())
    log = DATA / f"{name}.log"
    text = gzip.decompress(log.with_suffix(".log.gz").read_bytes()).decode() if not log.exists() else log.read_text()
    why = cause.name(status=kept["run"]["status"], returncode=kept["run"]["exit_code"],
                     logs={"run.log": text.splitlines()}, processes=Processes.from_table(kept["run"]["processes"]),
                     where="step 2: log-probs and update", command="verl's driver (main_ppo)")
    return why, kept["cause"]


def test_a_training_rank_killed_on_two_gpus_is_named_with_its_rank():
    # `certify --host --engine verl --gpus 2 --stall-timeout 60 --no-probes`; ray::WorkerDict with RANK=1 killed
    # with SIGKILL once step 1 was logged: certify ended 7 s later
    why, kept = _replay_gpu("verl-h200x2-rank1-sigkill")
    assert why["summary"] == kept["summary"] == ("rank 1 (pid 3926, Ray actor WorkerDict) was killed by SIGKILL in "
                                                 "step 2: log-probs and update")
    assert why["process"]["rank"] == "1" and why["ended"]["signal"] == "SIGKILL"


def test_vllms_one_shot_model_inspection_ending_just_before_the_killed_rank_is_not_named():
    """vLLM's `python -m vllm.model_executor.models.registry` lives 24-26 s (kept H200 runs) and ends by itself; on a
    loaded 2-core CI machine it ended 2+ s before a rank killed in step 2 and was named in the rank's place."""
    kept = json.loads((DATA / "verl-h200x2-rank1-sigkill.json").read_text())
    helper = {"pid": 4600, "nspid": None, "role": "vllm.model_executor.models.registry", "rank": None,
              "cmdline": "/opt/torch/.venv/bin/python3 -m vllm.model_executor.models.registry",
              "first_s": 149.0, "gone_s": 173.0}
    text = gzip.decompress((DATA / "verl-h200x2-rank1-sigkill.log.gz").read_bytes()).decode() \
        if not (DATA / "verl-h200x2-rank1-sigkill.log").exists() else (DATA / "verl-h200x2-rank1-sigkill.log").read_text()
    why = cause.name(status=kept["run"]["status"], returncode=kept["run"]["exit_code"],
                     logs={"run.log": text.splitlines()},
                     processes=Processes.from_table(kept["run"]["processes"] + [helper]),
                     where="step 2: log-probs and update", command="verl's driver (main_ppo)")
    assert why["summary"] == kept["cause"]["summary"] and why["process"]["rank"] == "1"


@pytest.mark.parametrize("name, pid", [("verl-h200x2-enginecore-sigkill", 4604),
                                       ("verl-h200x2-enginecore-sigkill-first", 8867)])
def test_a_vllm_engine_killed_is_named_not_its_wrappers(name, pid):
    """VLLM::EngineCore killed with SIGKILL once step 1 was logged. vLLM's EngineDeadError, Ray's RayTaskError and
    Hydra only carry the death; the engine process, which ended seconds before the rest, is the cause. The first
    run's certificate (before this rule) named the wrapper; its log and processes now give the engine."""
    why, kept = _replay_gpu(name)
    assert why["kind"] == "process.killed" and why["process"]["pid"] == pid
    assert why["summary"].startswith(f"vLLM EngineCore (pid {pid}") and "was killed by SIGKILL in step 2" in why["summary"]
    assert any("EngineDeadError" in e["text"] for e in why["evidence"])
    if name.endswith("first"):
        assert kept["kind"] == "vllm.engine_dead"  # what the first run said: the wrapper
    else:
        assert why["summary"] == kept["summary"]


def test_a_busy_gpu_is_refused_naming_its_holder_from_the_kept_run():
    """`certify --host --engine verl --gpus 1` while another process held 126 GiB of the H200 (exit 3 in 6.5 s,
    before Ray): the refusal again from the setup's figures and the holder's captured /proc and nvidia-smi."""
    kept = json.loads((DATA / "verl-h200-busy-gpu.json").read_text())
    root = DATA / "h200-busy-holder"
    apps = gpu_holders.parse_nvidia_apps((root / "nvidia-smi-compute-apps.csv").read_text().splitlines())
    assert apps == {910: {"0000:00:06.0": 129360 << 20}}
    stat = (root / "proc" / "910" / "stat").read_text()
    cmd = (root / "proc" / "910" / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    holder = gpu_holders.Holder(pid=910, comm=None, cmdline=cmd, started=None, memory=apps[910], source="nvidia-smi")
    assert stat.startswith("910 (python3)")
    message, hint = busy.problem(kept["setup"]["gpu_memory"], [{
        "share": 0.4, "bytes": 2 << 30, "who": "verl's vllm rollout takes gpu_memory_utilization 0.4 of the GPU, plus "
                                              "2 GiB for the trainer (its model, optimizer and GPU context)"}], [holder])
    # what that run printed (benchmarks/failure_verdicts.py's record of it)
    said = next(r for r in json.loads((DATA / "h200x2-failure-verdicts-c.json").read_text()) if r["case"] == "busy")
    assert said["exit"] == 3 and said["wall_s"] <= 30 and kept["exit_code"] == 3
    # the holder's command line is `python3 -c` code over several lines: that run's terminal line ended at its first
    # newline; the holder's name is one line now
    assert said["terminal"][0] == f"error: {message}".split(" sys, time")[0] + " sys, time"
    assert said["terminal"][1] == f"hint: {hint}" and "\n" not in message
    assert "held by pid 910 (python3 -c import torch, sys, time" in message and "126.3 GiB" in message
    assert "13.0 GiB free of 139.8 GiB, this run needs 57.9 GiB there" in message and "`kill 910`" in hint


def test_a_run_refused_at_its_setup_names_why_on_the_certificates_first_line(tmp_path):
    """--gpus 1 where torch sees no GPU: exit 3, nothing trained, and the certificate's first line says why (as the
    busy GPU's does: the refusals of the setup are a cause like a run's)."""
    need("trl")
    out = tmp_path / "c"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--host", "--engine", "trl", "--gpus", "1",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "CI": "true"})
    assert r.returncode == 3, r.stderr[-2000:]
    cert = json.loads(r.stdout)
    assert cert["cause"]["kind"] == "not started" and "asked for 1 GPU(s), but torch" in cert["cause"]["summary"]
    first = (out / "certificate.md").read_text().splitlines()[0]
    assert first == f"# rocmkit certificate: NOT CERTIFIED: SETUP — {cert['cause']['summary']}"


@pytest.mark.parametrize("expect", ["page_fault", "ras_poison"])
def test_a_gpu_fault_the_kernel_logged_during_the_run_names_a_silent_death(expect):
    """A worker gone without a word while the kernel logged a GPU fault (real lines of the doctor's corpus, each
    with its public source): the fault is the cause, with the doctor's fix; the process stays named beside it."""
    sys.path.insert(0, str(Path(__file__).parent))
    import kernlog_corpus

    from rocmkit.host.facts.kernlog import parse
    from rocmkit.stall.report import faults_of

    item = next(i for i in kernlog_corpus.load() if expect in i["expect"])
    faults = faults_of(list(parse(kernlog_corpus.kmsg(item))))
    why = cause.name(status="crashed", returncode=-9, logs={"run.log": ["step:1 - ok"]}, kernel_faults=faults,
                     where="step 2", command="verl's driver (main_ppo)")
    assert why["kind"] == f"kernel.log.{expect}" and why["summary"].startswith("the kernel reported ")
    assert "verl's driver (main_ppo) was killed by SIGKILL in step 2" in why["summary"]
    assert why["kernel"] == faults and why["evidence"][0]["file"] == "kernel log"
    # a run whose log names its error keeps that error as the cause; the fault is evidence beside it
    why = cause.name(status="crashed", returncode=1, kernel_faults=faults,
                     logs={"run.log": ["torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB."]})
    assert why["kind"] == "gpu.oom" and why["kernel"] == faults


def test_a_second_run_into_the_same_folder_keeps_the_first_whole(tmp_path):
    """certify twice into one --out: the first run's certificate, log and picture move whole to
    previous/<its certificate's time>/, the terminal and the new certificate say where; a run that never trained
    shows no '?' or 'None' for what it never measured."""
    need("trl")
    out = tmp_path / "c"
    argv = [sys.executable, "-m", "rocmkit", "certify", "--host", "--engine", "trl", "--gpus", "1", "--out", str(out)]
    runs = [subprocess.run(argv, capture_output=True, text=True, timeout=300, env={**os.environ, "CI": "true"})
            for _ in range(3)]
    assert [r.returncode for r in runs] == [3, 3, 3], runs[-1].stderr[-2000:]
    first = json.loads((out / "certificate.json").read_text())
    kept = sorted((out / "previous").iterdir())
    assert len(kept) == 2 and all((k / "certificate.json").is_file() and (k / "setup.log").is_file() for k in kept)
    assert json.loads((kept[0] / "certificate.json").read_text())["created"] <= first["created"]
    assert f"previous run is kept whole in {kept[-1]}" in runs[-1].stderr
    assert any(n.startswith("the run folder's previous run is kept whole in ") for n in first["notes"])
    md = (out / "certificate.md").read_text()
    assert "?" not in md.split("\n| check")[0] and "None" not in md, md


def test_a_step_count_no_smoke_run_needs_is_refused_at_once(tmp_path):
    r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--steps", "999999999999", "--gpus", "0",
                        "--dry-run", "--out", str(tmp_path / "c")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--steps 999999999999: at most 100000" in r.stderr


def test_the_verl_install_hint_names_a_venv_of_its_own_and_this_rocmkit_source(tmp_path):
    """In the quick start's TRL venv, `certify --engine verl` said `pip install 'rocmkit[verl]'` into that venv:
    rocmkit is not on the package index, and verl 0.9.1 breaks beside TRL >= 1.13. The hint names a venv of its own,
    the rollout engine the [verl] extra lacks, and the folder pip can install rocmkit from."""
    r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "1",
                        "--dry-run", "--out", str(tmp_path / "c")], capture_output=True, text=True, timeout=300)
    hint = next((x for x in r.stderr.splitlines() if x.startswith("hint: ")), "")
    if "lacks" not in r.stderr:
        pytest.skip(f"this Python has verl and vllm: {r.stderr[-300:]}")
    root = Path(__file__).resolve().parents[1]
    assert r.returncode == 3 and "python3 -m venv .venv-verl" in hint
    assert f".venv-verl/bin/pip install '{root}[verl]' 'vllm==0.24.0'" in hint and "TRL >= 1.13" in hint
    assert (root / "pyproject.toml").is_file() and "pip install 'rocmkit[verl]'" not in hint


def test_a_verl_example_script_whose_rollout_dies_in_init_is_named_by_the_exception_it_raised():
    """verl's own examples/grpo_trainer/run_qwen3_4b_fsdp.sh (v0.9.0), certified as a job on one H200 (random
    Qwen3-4B weights): it sets enable_chunked_prefill=False and leaves max_model_len unset, and verl 0.9.1's vLLM
    server, raising max_num_batched_tokens of its frozen config to the model's 40960, dies in __init__. Ray prints
    that actor's traceback with no "Traceback" line, and the driver's copy of it after Ray's ActorDiedError: the
    certificate of the run (before this rule) named only Hydra's closing line."""
    why, kept = _replay_gpu("verl-h200-job-qwen3-4b-frozen-config")
    assert kept["kind"] == "hydra.job_failed"  # what the run itself said
    assert why["kind"] == "exception" and why["process"]["pid"] == 6181
    assert why["summary"].startswith("an error in Ray actor vLLMHttpServer (pid 6181)")
    assert why["summary"].endswith("dataclasses.FrozenInstanceError: Field 'max_num_batched_tokens' is frozen and "
                                   "cannot be modified")
    assert any("self.config.max_num_batched_tokens = self.config.max_model_len" in e["text"] for e in why["evidence"])


def test_a_job_whose_own_workers_filled_the_gpu_before_vllm_started_is_told_it_does_not_fit():
    """verl's own examples/grpo_trainer/run_qwen3_8b_fsdp.sh (v0.9.0: no offload, gpu_memory_utilization 0.6),
    certified as a job on one H200 (random Qwen3-8B weights): the actor and reference workers held 63 GiB when vLLM
    started, and vLLM refused. The run's certificate blamed "another process" and told the user to look for an
    orphaned engine; the GPU was free at the setup, so it is the job that does not fit, and tune's plan is the fix."""
    from rocmkit.certify import engines
    from rocmkit.certify.job import Job
    from rocmkit.certify.settings import Settings

    why, kept = _replay_gpu("verl-h200-job-qwen3-8b-vllm-start")
    assert kept["kind"] == why["kind"] == "vllm.free_memory_at_start" and "another process" in kept["summary"]
    doc = json.loads((DATA / "verl-h200-job-qwen3-8b-vllm-start.json").read_text())
    j = doc["settings"]["job"]
    job = Job(script=j["script"], line=j["line"], overrides=tuple(j["overrides"]), model_path=j["model_path"],
              model_config=tuple(j["model_config"].items()), model_source=j["model_source"], data_files=(),
              builtin_data=True)
    told = engines.get("verl").advise(Settings(engine="verl", gpus=1, job=job), doc["setup"], why)
    # the engine core that raised it, nested in its Ray actor's log prefix (the run's certificate named the actor)
    assert told["summary"].startswith("the job does not fit on this GPU: starting the rollout, vLLM (vLLM "
                                      "EngineCore, pid 8597) wanted 83.88 GiB (gpu_memory_utilization 0.6 of "
                                      "139.8 GiB) and found 76.35 GiB free")
    assert told["memory"] == {"wanted_gib": 83.88, "free_gib": 76.35, "total_gib": 139.8, "utilization": 0.6,
                              "free_at_setup_gib": 139.29, "held_by_the_job_gib": 62.94}
    assert "orphaned" not in told["hint"] and "gpu_memory_utilization below 0.55" in told["hint"]
    assert "for this job, `rocmkit tune --model /var/tmp/models/Qwen3-8B --gpu H200 " in told["hint"]
    assert "actor_rollout_ref.actor.fsdp_config.param_offload=True" in told["tune"]
    assert "host" not in told["tune"]  # the kept setup did not read the host's memory: tune's check left out
    # the H200 host had 128 GiB: the plan's offloads (FSDP2's CPU offload of an 8B's states) do not fit it
    on_host = engines.get("verl").advise(Settings(engine="verl", gpus=1, job=job),
                                         {**doc["setup"], "host_memory": 128 * 2**30}, why)
    assert "; but verl's offloads need " in on_host["tune"] and "of the run's host" in on_host["tune"]
    # a GPU that lacked the room at the setup already: another process may hold it, the engine's words stand
    busy = {**doc["setup"], "gpu_memory": [{**doc["setup"]["gpu_memory"][0], "free": 70 * 2**30}]}
    assert engines.get("verl").advise(Settings(engine="verl", gpus=1, job=job), busy, why) == why


def test_an_error_raised_in_a_ray_task_is_named_with_the_actor_that_raised_it():
    """verl's own examples/tuning/lora/run_qwen3_8b_fsdp.sh (v0.9.0, Qwen3-8B + LoRA rank 64) certified as a job on
    one H200: the first weight sync died in the actor's worker, and only verl's driver printed the traceback, with
    Ray's (coloured) "RayTaskError(NotImplementedError): ray::WorkerDict.actor_rollout_update_weights() (pid=12934"
    lines in it. The run's certificate named no process; verl-check now refuses the job before it starts."""
    why, kept = _replay_gpu("verl-h200-job-qwen3-8b-lora-weight-sync")
    assert kept["process"] is None  # what the run's certificate said, before Ray's coloured lines were read
    assert why["summary"] == ("an error in rank 0 (pid 12934, Ray actor WorkerDict) running actor_rollout_update_"
                              "weights in step 2: log-probs and update: NotImplementedError: offload_to_cpu=True and "
                              "NO_SHARD is not supported yet")
    assert why["process"]["pid"] == 12934
    # the same job's overrides, as certify read them from the script: verl-check's rule names it, with the fix
    from rocmkit.verl import rollout_rules

    doc = json.loads((DATA / "verl-h200-job-qwen3-8b-lora-weight-sync.json").read_text())
    values = dict(o.split("=", 1) for o in doc["settings"]["job"]["overrides"])
    typed = {"actor_rollout_ref.model.lora_rank": int(values["actor_rollout_ref.model.lora_rank"]),
             "actor_rollout_ref.rollout.layered_summon": values["actor_rollout_ref.rollout.layered_summon"] == "True",
             "trainer.n_gpus_per_node": int(values["trainer.n_gpus_per_node"]),
             "trainer.nnodes": int(values["trainer.nnodes"]), "actor_rollout_ref.actor.strategy": "fsdp"}
    found = [p for p in rollout_rules.problems(typed.get, on="cuda") if p["rule"] == "lora-fsdp1-weight-sync"]
    assert found and why["error"].split(": ", 1)[1] in found[0]["message"]


def test_an_empty_lora_adapter_is_named_a_minute_after_vllms_engine_raised_not_at_the_deadline():
    """The same LoRA example with layered_summon=False (the fix verl-check first suggested), one H200: verl sent vLLM
    an adapter with no LoRA tensors, vLLM's engine core logged StopIteration from add_lora and verl waited for the
    sync. The run's certificate said only "ran past --timeout 540 s in step 1: weight sync" (290 s after the error);
    its log now stops the run a minute after the error, naming the engine core and where it raised."""
    from rocmkit.certify import watchdog
    from rocmkit.verl import rollout_rules

    name = "verl-h200-job-qwen3-8b-lora-empty-adapter"
    kept = json.loads((DATA / f"{name}.json").read_text())
    assert kept["cause"]["kind"] == "timed out" and not kept["cause"]["evidence"]
    lines = gzip.decompress((DATA / f"{name}.log.gz").read_bytes()).decode().splitlines()
    clock = [0.0]
    watch = watchdog.Watch(2, clock=lambda: clock[0])
    for text in lines[:-1]:  # the last line is rocmkit's own, at the deadline
        clock[0] += 0.01
        watch.line(text)
        assert watch.check() is None
    assert watch.detail == "step 1: weight sync" and watchdog.short(watch.error_line) == "StopIteration"
    clock[0] += watchdog.ERROR_GRACE_S
    assert watch.check() == "engine error"
    why = cause.name(status="engine error", returncode=None, logs={"run.log": lines},
                     processes=Processes.from_table(kept["run"]["processes"]), where="step 1: weight sync")
    assert why["summary"] == "an error in vLLM EngineCore (pid 14565) in step 1: weight sync: StopIteration"
    assert any("_create_merged_loras_inplace" in e["text"] for e in why["evidence"])
    # verl-check refuses the job's settings before anything starts, with the fix verl's own code agrees with
    values = dict(o.split("=", 1) for o in kept["settings"]["job"]["overrides"])
    assert values["actor_rollout_ref.rollout.layered_summon"] == "False"
    typed = {"actor_rollout_ref.model.lora_rank": int(values["actor_rollout_ref.model.lora_rank"]),
             "actor_rollout_ref.rollout.layered_summon": False, "trainer.n_gpus_per_node": 1, "trainer.nnodes": 1,
             "actor_rollout_ref.actor.strategy": "fsdp"}
    found = [p for p in rollout_rules.problems(typed.get, on="cuda") if p["rule"] == "lora-fsdp1-weight-sync"]
    assert "empty adapter" in found[0]["message"] and "StopIteration" in found[0]["message"]
    assert found[0]["fix"].startswith("actor_rollout_ref.actor.strategy=fsdp2")


def test_a_run_stopped_at_its_deadline_names_the_last_error_its_log_shows():
    """What the LoRA run's certificate said was "ran past --timeout 540 s in step 1: weight sync" and "give it more
    time". The same stop, named again from its log: the error in vLLM's engine core that the run waited on."""
    name = "verl-h200-job-qwen3-8b-lora-empty-adapter"
    kept = json.loads((DATA / f"{name}.json").read_text())
    lines = gzip.decompress((DATA / f"{name}.log.gz").read_bytes()).decode().splitlines()
    why = cause.name(status="timed out", returncode=None, logs={"run.log": lines}, timeout_s=540,
                     processes=Processes.from_table(kept["run"]["processes"]), where="step 1: weight sync")
    assert why["kind"] == "timed out"
    assert why["summary"] == (f"{kept['cause']['summary']}; the log's last error before that: an error in vLLM "
                              "EngineCore (pid 14565): StopIteration")
    assert why["hint"].startswith("the run may have waited on that error") and "--timeout" in why["hint"]
    assert why["evidence"][-1]["text"] == "StopIteration" and why["error"] == "StopIteration"
    # a run stopped with nothing raised in its log keeps the stop's own words
    quiet = cause.name(status="timed out", returncode=None, logs={"run.log": ["step:1 - reward:0.1"]}, timeout_s=5)
    assert quiet["summary"] == "the certification ran past --timeout 5 s and was stopped" and "error" not in quiet


def test_a_traceback_ends_at_its_last_exception_not_its_first():
    """A chained exception (and Ray's copy of a remote traceback) continues after the first exception line; the
    process's next ordinary line ends it."""
    lines = ["Traceback (most recent call last):", '  File "a.py", line 1, in <module>',
             "KeyError: 'x'", "", "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "a.py", line 3, in <module>',
             "    raise RuntimeError('the real one')", "RuntimeError: the real one",
             "INFO 11-29 02:14:04 [loop.py:1] shutting down", "ValueError: printed later, in passing"]
    _, ended = cause.scan(lines, "run.log")
    assert [e.text for e in ended] == ["RuntimeError: the real one"]


RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "dashboard/agent.py", "runtime_env/agent/main.py")


@pytest.mark.slow
@pytest.mark.engine
def test_certify_killed_outright_leaves_no_run_behind(tmp_path, ray_host):
    """kill -9 of certify itself (a batch system's hard limit, the kernel's OOM killer): verl's driver dies with it
    (rocmkit/runtime/proc.py: PR_SET_PDEATHSIG), Ray's reaper takes its daemons and workers. Before, the driver
    trained on unwatched; on a GPU host its Ray worker and vLLM engine held 88 GiB of an H200 for the next run."""
    started, tag, out = time.time(), uuid.uuid4().hex, tmp_path / "c"
    argv = [_verl_python(), "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0", "--steps", "40",
            "--out", str(out)]
    child = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "CI": "true", TAG: tag}, start_new_session=True)
    try:
        deadline = time.monotonic() + 900
        while not ((out / "run.log").exists() and "step:1 " in (out / "run.log").read_text(errors="replace")):
            assert child.poll() is None and time.monotonic() < deadline, "no first step"
            time.sleep(0.5)
        assert _leftovers(started, out, tag)  # the run is there
        child.kill()
        child.wait(timeout=30)
        killed = time.monotonic()

        def run_left() -> list[str]:  # Ray's agents aside (below)
            return [line for line in _leftovers(started, out, tag) if not any(a in line for a in RAY_AGENTS)]

        while run_left() and time.monotonic() < killed + 60:
            time.sleep(0.5)
        # without the death signal the driver went on until its next write to the closed pipe failed (50 s here)
        assert run_left() == [] and time.monotonic() - killed < 20, (time.monotonic() - killed, run_left())
        # Ray's dashboard and runtime-env agents follow their raylet by Ray's own rule (ray/_private/
        # process_watcher.py): a raylet that died without "SIGTERM" in its log is first reported to the GCS, which
        # is gone too, and the GCS client retries until its reconnect timeout (60 s) before the agent exits. On a
        # loaded CI machine they outlived the 60 s above once; they hold no GPU memory, and they do go.
        while _leftovers(started, out, tag) and time.monotonic() < killed + 150:
            time.sleep(1.0)
        assert _leftovers(started, out, tag) == [], time.monotonic() - killed
    finally:
        if child.poll() is None:
            child.kill()
        for line in _leftovers(started, out, tag):  # a failed test leaves nothing running either
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split()[0]), signal.SIGKILL)
