"""verl with an SGLang rollout: what rocmkit chooses for it, reads from it and names when it fails, judged on runs
kept from two and four H200s (SGLang 0.5.12, verl 0.9.1, benchmarks/gpu_sglang)."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from rocmkit.certify import cause
from rocmkit.certify.processes import Processes
from rocmkit.certify.engines.verl import report
from rocmkit.certify.engines.verl import overrides, sglang_backends, smoke_cuts

DATA = Path(__file__).parent / "data"


def kept(name: str) -> dict:
    return json.loads((DATA / "certify" / f"{name}.json").read_text())


@pytest.mark.parametrize("name, gpus, replicas, tp", [("verl-sglang-h200-1gpu", 1, 1, 1),
                                                      ("verl-sglang-h200x2-tp2", 2, 1, 2)])
def test_the_kept_sglang_certificates_pass_with_what_they_chose(name, gpus, replicas, tp):
    """`certify --host --engine verl --rollout sglang --gpus 1` and `--gpus 2 --rollout-tp 2` (probes on), side by
    side on one host with four H200s: both passed, and say which SGLang ran with which backends and why."""
    c = kept(name)
    assert c["verdict"] == "pass" and c["settings"]["rollout"] == "sglang" and c["settings"]["gpus"] == gpus
    assert c["engine_run"]["layout"]["rollout_replicas"] == replicas and c["engine_run"]["layout"]["rollout_tp"] == tp
    sg = c["engine_run"]["sglang"]
    assert sg["version"] == "0.5.12" and sg["attention_backend"] == "triton" and sg["sampling_backend"] == "pytorch"
    assert "no prebuilt kernels" in sg["why"] and not sg["found"]["fa3"]  # the trimmed sgl_kernel has no flash_ops
    assert all(ch["passed"] for ch in c["checks"] if ch["required"])
    assert "reward rose" in {ch["name"] for ch in c["checks"]}


def test_the_backends_follow_verl_and_sglang_where_their_kernels_are_installed():
    cuda = {"rocm": False, "flashinfer": "0.6.11.post1", "flashinfer_prebuilt": [], "fa3": False}
    plain = sglang_backends.choose(cuda)
    assert (plain["attention_backend"], plain["sampling_backend"]) == ("triton", "pytorch")
    assert plain["overrides"] == [f"{sglang_backends.KEY}.attention_backend=triton",
                                  f"{sglang_backends.KEY}.sampling_backend=pytorch"]
    ready = sglang_backends.choose({**cuda, "flashinfer_prebuilt": ["flashinfer-cubin"]})
    assert ready["attention_backend"] == "flashinfer" and ready["overrides"] == []  # verl's own default stands
    rocm = sglang_backends.choose({"rocm": True, "aiter": True})
    assert rocm["attention_backend"] == "aiter" and rocm["overrides"] == []
    assert sglang_backends.choose({"rocm": True, "aiter": False})["overrides"] == [
        f"{sglang_backends.KEY}.attention_backend=triton"]
    assert overrides.rollout_share(["actor_rollout_ref.rollout.gpu_memory_utilization=0.6",
                                    "+actor_rollout_ref.rollout.gpu_memory_utilization=0.4"]) == 0.4
    assert overrides.rollout_share([]) == overrides.ROLLOUT_MEMORY


def test_sglang_logs_at_info_and_its_graphs_are_a_smoke_cut():
    run = overrides.VerlRun(model_dir="m", train_file="t", val_file="v", reward_file="r", gpus=2, rollout="sglang",
                            tensor_parallel=2)
    out = overrides.overrides(run)
    assert "+actor_rollout_ref.rollout.engine_kwargs.sglang.log_level=info" in out
    assert "+actor_rollout_ref.rollout.engine_kwargs.sglang.disable_piecewise_cuda_graph=True" in out
    assert not any("engine_kwargs.vllm" in o for o in out)
    graphs = smoke_cuts.cuts(backend="fsdp", rollout="sglang", tensor_parallel=2, on_cpu=False, rollout_graphs=True,
                             engine_defaults=False)
    assert not any("piecewise" in o for c in graphs for o in c.overrides)  # --rollout-graphs gives them back


def test_sglang_memory_is_read_from_its_own_lines():
    text = gzip.decompress((DATA / "crash" / "verl-sglang-h200x2-scheduler-sigkill.log.gz").read_bytes()).decode()
    mem = report.sglang_memory(text)
    assert mem["ranks"] == 2 and mem["kv_cache_gb"] == 54.74 and mem["kv_tokens"] == 114780313
    assert report.sglang_memory("nothing of SGLang's") is None


# pid of the scheduler the test killed with SIGKILL (the kill's own record, written beside each run)
@pytest.mark.parametrize("name, pid", [("verl-sglang-h200x2-scheduler-sigkill-first", 13807),
                                       ("verl-sglang-h200x2-scheduler-sigkill", 13675)])
def test_a_killed_sglang_scheduler_is_named_not_the_server_ray_saw_die(name, pid):
    """SGLang at TP 2 on two H200s, its sglang::scheduler_TP1 killed with SIGKILL: it says nothing, its TP-0 peer's
    gloo loses the connection ("Connection reset by peer" / "Connection closed by peer"), SGLang's server stops
    itself and Ray reports the server dead. Both certificates named the server; the kept log and processes name
    the scheduler."""
    doc = json.loads((DATA / "crash" / f"{name}.json").read_text())
    text = gzip.decompress((DATA / "crash" / f"{name}.log.gz").read_bytes()).decode()
    why = cause.name(status=doc["run"]["status"], returncode=doc["run"]["exit_code"],
                     logs={"run.log": text.splitlines()}, processes=Processes.from_table(doc["run"]["processes"]),
                     where="step 1", command="verl's driver (main_ppo)")
    assert why["summary"] == f"SGLang scheduler_TP1 (pid {pid}) was killed by SIGKILL in step 1"
    assert why["ended"]["signal"] == "SIGKILL" and "Connection" in why["ended"]["by"]
    assert doc["cause"]["process"]["role"].startswith("Ray actor")  # what the certificate said at the time


def test_a_killed_sglang_scheduler_at_tp1_is_named_by_its_servers_word():
    """SGLang at TP 1 on one H200, its sglang::scheduler killed with SIGKILL (benchmarks/gpu_sglang/faults.sh kill;
    the .act file is the kill's own record). SGLang's server says "Subprocess scheduler_0 (pid=N) crashed with exit
    code -9" and stops itself, but Ray's log monitor printed its report of the server's death one line earlier: the
    certificate named the server. The server's own word about its child names the scheduler."""
    name = "verl-sglang-h200-scheduler-sigkill"
    doc = json.loads((DATA / "crash" / f"{name}.json").read_text())
    text = gzip.decompress((DATA / "crash" / f"{name}.log.gz").read_bytes()).decode()
    killed = int(re.search(r"kill sglang::scheduler pid=(\d+)", (DATA / "crash" / f"{name}.act").read_text()).group(1))
    why = cause.name(status=doc["run"]["status"], returncode=doc["run"]["exit_code"],
                     logs={"run.log": text.splitlines()}, processes=Processes.from_table(doc["run"]["processes"]),
                     where="step 1", command="verl's driver (main_ppo)")
    assert why["kind"] == "sglang.subprocess_crashed"
    assert why["summary"] == f"SGLang scheduler (pid {killed}) was killed by SIGKILL in step 1"
    assert why["ended"]["by"].startswith("its parent's word: ") and "Subprocess scheduler_0 (pid=" in why["ended"]["by"]
    assert doc["cause"]["process"]["role"] == "Ray actor SGLangHttpServer"  # what the certificate said at the time


def test_tune_reads_mem_fraction_static_as_sglang_allocates_it():
    """tune's SGLang memory model against SGLang 0.5.12's own figures on two H200s (the kept crash run's start-up,
    mem_fraction_static 0.4): weights + KV cache = the fraction of the memory free as the model starts to load."""

    from rocmkit.tune import memory

    text = gzip.decompress((DATA / "crash" / "verl-sglang-h200x2-scheduler-sigkill.log.gz").read_bytes()).decode()
    free = float(re.search(r"TP0\] Load weight begin\. avail mem=([\d.]+) GB", text).group(1))
    mem = report.sglang_memory(text)
    gib = 1 << 30  # SGLang's "GB" (get_available_gpu_memory divides by 1 << 30)
    static = memory.engine_bytes("sglang", 0.4, gpu_bytes=int(143.77 * gib), free_bytes=int(free * gib))
    assert abs(static / gib - (mem["weights_gb"] + mem["kv_cache_gb"])) < 0.05  # 54.73 predicted, 54.74 allocated
    assert memory.engine_bytes("vllm", 0.4, gpu_bytes=100, free_bytes=50) == 40  # vLLM: of the whole GPU
