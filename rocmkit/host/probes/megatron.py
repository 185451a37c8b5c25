"""`probe.megatron`: does Megatron training run here? A small GPT built through megatron-core, a few training
steps with tensor parallelism over the visible GPUs (TP 1 or 2), the loss finite and falling.

verl's Megatron backend needs megatron-core, TransformerEngine (ROCm's fork on AMD) and their fused kernels to
agree with this torch and this GPU; a broken build shows as an import error, a kernel that will not launch, a
NaN, or a loss that does not move. The probe builds the model with TransformerEngine layers
(`get_gpt_layer_with_transformer_engine_spec`) when transformer_engine is installed, else megatron-core's own
layers (`get_gpt_layer_local_spec`), trains it on one fixed batch (a healthy model memorises it: the loss must
fall), one process per GPU (`torch.distributed`, NCCL/RCCL), in a fresh process so a crash or a hang is a
finding, not the doctor's end.

On "cpu" devices the same code runs with gloo and megatron-core's local layers (use_cpu_initialization, no
fused kernels): how the tests run the real path on a machine without a GPU.

    measure_megatron(devices) -> plain dict (figures document's "megatron")
    judge_megatron(doc) -> Finding                 pure: tested on recorded documents
    python -m rocmkit.host.probes.megatron ARGS.json   the worker: spawns one rank per device
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import socket
import statistics
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..model import Finding, Status
from .verdict import AREA

STEPS = 8
LR = 1e-3
TIMEOUT_S = 300.0  # the first CUDA/TE kernel compile can take a minute on a cold cache
DTYPES = {"bf16": "bfloat16", "fp32": "float32"}
FALL_AT = 0.9  # last loss must be below this fraction of the first: a memorised batch falls far more


@dataclass(frozen=True)
class GPT:
    """The probe's model: small enough to build in seconds, large enough that every TP path is used
    (heads and FFN split across 2 ranks, a vocab-parallel embedding and loss)."""

    layers: int = 2
    hidden: int = 256
    heads: int = 8
    ffn: int = 1024
    vocab: int = 1024
    seq: int = 128
    batch: int = 4


FIX = ("Megatron training does not run in this environment: read the error (the first rank's) and check that "
       "megatron-core, TransformerEngine and apex were built for this torch and this GPU arch (`pip show "
       "megatron-core transformer_engine apex`, `python -c 'import transformer_engine.pytorch'`); on ROCm use "
       "ROCm/TransformerEngine and ROCm/apex built with PYTORCH_ROCM_ARCH set to this arch. A NaN or a loss that "
       "does not fall with TE layers and a healthy loss with local ones (`NVTE_*` unset, or TE uninstalled) "
       "points at TransformerEngine's kernels")
REFERENCE = ("https://github.com/NVIDIA/Megatron-LM/tree/main/megatron/core; https://github.com/ROCm/TransformerEngine; "
             "https://github.com/ROCm/Megatron-LM")


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError as exc:  # the parent package is missing (or something it imports: installed, broken)
        return exc.name != name.split(".")[0]
    except (ImportError, ValueError):  # a parent package that fails to import is installed: the worker says why
        return True


# --- measuring: a fresh process spawning one rank per device ---------------------------------------------------

def measure_megatron(devices: list[str], *, steps: int = STEPS, model: GPT = GPT(), timeout_s: float = TIMEOUT_S,
                     layers: str | None = None, dtype: str | None = None,
                     python: str = sys.executable) -> dict[str, Any]:
    """Train the probe GPT with TP = len(devices) (at most 2) on `devices` ("cuda:N", or "cpu" repeated for
    gloo ranks), in a worker run by `python`. `layers` forces "te" or "local"; by default the worker takes TE
    when transformer_engine is installed (GPU only). `dtype` is "bf16" (GPUs' default, as verl trains) or
    "fp32" (the CPU's default; bf16 on the CPU runs the GPU path's casts where the tests run). No megatron-core
    in the worker's environment: available False, saying so."""
    from ...runtime import host_rocmkit, proc

    tp = min(len(devices), 2)
    devices = devices[:tp]
    cpu = devices[0] == "cpu"
    dtype = dtype or ("fp32" if cpu else "bf16")
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}: one of {', '.join(DTYPES)}")
    doc: dict[str, Any] = {"available": True, "tp": tp, "devices": devices, "layers": layers, "dtype": dtype,
                           "steps": steps, "lr": LR, "model": asdict(model), "backend": "gloo" if cpu else "nccl"}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rocmkit-megatron-") as tmp:
        args, result = os.path.join(tmp, "args.json"), os.path.join(tmp, "result.json")
        with open(args, "w") as f:
            json.dump({**doc, "port": _free_port(), "result": result}, f)
        # `python` may be another interpreter (the megatron venv): it runs this rocmkit, not its own
        run = proc.capture([python, "-m", "rocmkit.host.probes.megatron", args], timeout=timeout_s,
                           env=host_rocmkit.host_env())
        if os.path.exists(result):
            with open(result) as f:
                doc.update(json.load(f))
        if (run.timed_out or run.returncode != 0) and doc.get("available", True) and not doc.get("error"):
            # a hang (one rank failed, the others wait in a collective) or a rank that died without a word
            said = [ln.strip() for ln in run.tail if ln.strip()]
            ranks = [json.loads(Path(tmp, n).read_text()).get("error") for n in sorted(os.listdir(tmp))
                     if n.startswith("result.json.rank") and not n.endswith(".tmp")]
            doc["error"] = ((f"did not finish within {timeout_s:.0f} s" if run.timed_out else
                             f"worker exited {run.returncode}: {_last_error(said)}")
                            + "".join(f"; {e}" for e in ranks if e))
    doc["seconds"] = round(time.perf_counter() - started, 2)
    return doc


def _last_error(lines: list[str]) -> str:
    """The line that names the exception (a traceback's last `XError: ...`), else the last line."""
    for ln in reversed(lines):
        if "Error" in ln.split(":")[0] or "Exception" in ln.split(":")[0]:
            return ln[:300]
    return lines[-1][:300] if lines else "no output"


def _version(dist: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _config(torch, args: dict[str, Any], tp: int, cpu: bool):
    from megatron.core.transformer.transformer_config import TransformerConfig

    m = args["model"]
    dtype = getattr(torch, DTYPES[args["dtype"]])
    return TransformerConfig(
        num_layers=m["layers"], hidden_size=m["hidden"], num_attention_heads=m["heads"], ffn_hidden_size=m["ffn"],
        tensor_model_parallel_size=tp, use_cpu_initialization=cpu, params_dtype=dtype,
        bf16=args["dtype"] == "bf16",
        pipeline_dtype=dtype, hidden_dropout=0.0, attention_dropout=0.0,
        # fused kernels only where there is a GPU to run them; on the CPU every fusion is off. Local layers'
        # fused softmax is apex's extension: used (so tested) where apex built it, torch's softmax elsewhere.
        gradient_accumulation_fusion=False, masked_softmax_fusion=fused_softmax(cpu), bias_activation_fusion=not cpu,
        bias_dropout_fusion=not cpu, apply_rope_fusion=False, persist_layer_norm=False)


def fused_softmax(cpu: bool) -> bool:
    return not cpu and _installed("scaled_upper_triang_masked_softmax_cuda")


def _rank(rank: int, args: dict[str, Any]) -> None:
    import torch
    import torch.distributed as dist

    cpu = args["devices"][0] == "cpu"
    tp = int(args["tp"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(args["port"]), RANK=str(rank),
                      WORLD_SIZE=str(tp), LOCAL_RANK=str(rank))
    out: dict[str, Any] = {"rank": rank}
    try:
        if not cpu:
            torch.cuda.set_device(torch.device(args["devices"][rank]))
        # a failed rank leaves the others waiting in a collective: bounded, well inside the worker's deadline
        dist.init_process_group(args["backend"], rank=rank, world_size=tp, timeout=timedelta(seconds=120))
        out.update(_train(torch, args, tp, cpu))
    except Exception as exc:  # noqa: BLE001 - the error is the finding
        traceback.print_exc()  # on stderr: the worker's output, whose last error line names a crash
        text = str(exc).strip().splitlines()
        out["error"] = f"rank {rank}: {type(exc).__name__}: {text[0][:300] if text else ''}"
    if rank == 0 or "error" in out:  # rank 0 reports; another rank reports only its own failure
        _write(args["result"] if rank == 0 else f"{args['result']}.rank{rank}", {**out, "layers": args["layers"]})
    if dist.is_initialized():
        dist.destroy_process_group()


def _cpu_buffers(torch, parallel_state) -> None:
    """megatron-core's local attention takes its score buffer from a global buffer that allocates on
    torch.cuda.current_device(): on the CPU path the same buffer allocates host memory instead."""
    from megatron.core.utils import GlobalMemoryBuffer

    class HostBuffer(GlobalMemoryBuffer):
        def get_tensor(self, tensor_shape, dtype, name, mem_alloc_context=None):
            n = math.prod(tensor_shape)
            if (name, dtype) not in self.buffer or self.buffer[(name, dtype)].numel() < n:
                self.buffer[(name, dtype)] = torch.empty(n, dtype=dtype)
            return self.buffer[(name, dtype)][:n].view(*tensor_shape)

    parallel_state._GLOBAL_MEMORY_BUFFER = HostBuffer()


def _train(torch, args: dict[str, Any], tp: int, cpu: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    import megatron.core
    from megatron.core import parallel_state
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.tensor_parallel.random import (
        initialize_rng_tracker,
        model_parallel_cuda_manual_seed,
    )

    # the distribution's version: megatron.core.__version__ appends the git commit of the working directory
    info: dict[str, Any] = {"megatron_core": _version("megatron-core") or getattr(megatron.core, "__version__", None),
                            "torch": torch.__version__}
    if args["layers"] == "te":
        import transformer_engine
        from megatron.core.models.gpt.gpt_layer_specs import (
            get_gpt_layer_with_transformer_engine_spec,
        )

        info["transformer_engine"] = getattr(transformer_engine, "__version__", None) or _version("transformer-engine")
        spec = get_gpt_layer_with_transformer_engine_spec()
    else:
        from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec

        spec = get_gpt_layer_local_spec()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=tp)
    if cpu:
        _cpu_buffers(torch, parallel_state)
    torch.manual_seed(1234)
    if cpu:  # megatron's tracker keeps CUDA RNG states; dropout is off, so the CPU path takes its no-op tracker
        initialize_rng_tracker(inference_rng_tracker=True, force_reset=True)
    else:
        model_parallel_cuda_manual_seed(1234)
    m = args["model"]
    config = _config(torch, args, tp, cpu)
    model = GPTModel(config=config, transformer_layer_spec=spec, vocab_size=m["vocab"], max_sequence_length=m["seq"])
    if config.bf16:
        # as Megatron's own training (and verl's) wraps it: every parameter in bf16 (local layers' torch norms are
        # made in float32 otherwise, and a float32 activation meets a bf16 weight), float32 loss out
        from megatron.core.transformer.module import Float16Module

        model = Float16Module(config, model)
    device = torch.device("cpu") if cpu else torch.device("cuda", torch.cuda.current_device())
    model.to(device)
    info["fused_softmax"] = fused_softmax(cpu)
    info["parameters_per_rank"] = sum(p.numel() for p in model.parameters())
    optim = torch.optim.Adam(model.parameters(), lr=float(args["lr"]))
    gen = torch.Generator().manual_seed(0)  # the same batch on every rank: TP ranks must see one input
    tokens = torch.randint(0, m["vocab"], (m["batch"], m["seq"] + 1), generator=gen).to(device)
    inputs, labels = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    position_ids = torch.arange(m["seq"], device=device).unsqueeze(0).expand(m["batch"], -1)
    # megatron-core makes the causal mask on "cuda" when given none: on the CPU path it is given one
    mask = torch.triu(torch.ones(m["seq"], m["seq"], dtype=torch.bool), diagonal=1)[None, None] if cpu else None
    info["build_s"] = round(time.perf_counter() - t0, 3)
    losses, times = [], []
    for _ in range(int(args["steps"])):
        t = time.perf_counter()
        optim.zero_grad(set_to_none=True)
        loss = model(inputs, position_ids, mask, labels=labels).float().mean()
        loss.backward()
        optim.step()
        value = loss.item()  # synchronises the device: the step's time is all of it
        times.append(round(time.perf_counter() - t, 4))
        losses.append(value)
        if not math.isfinite(value):
            break
    parallel_state.destroy_model_parallel()
    return {**info, "losses": losses, "step_s": times}


def _write(path: str, data: dict[str, Any]) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(data, f)
    os.replace(path + ".tmp", path)


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        args = json.load(f)
    tp = int(args["tp"])
    cpu = args["devices"][0] == "cpu"
    if not _installed("megatron.core"):  # asked here: the worker's interpreter is the one that trains
        _write(args["result"], {"available": False, "missing": "megatron-core", "reason": "megatron-core is not "
                                f"installed ({sys.executable}): nothing Megatron-based can train here"})
        return 0
    if args.get("layers") is None:
        args["layers"] = "te" if not cpu and _installed("transformer_engine") else "local"
    if tp == 1:
        _rank(0, args)
    else:
        import torch.multiprocessing as mp

        mp.spawn(_rank, args=(args,), nprocs=tp, join=True)
    for r in range(1, tp):  # a failing rank other than 0: its error goes into the result
        extra = f"{args['result']}.rank{r}"
        if os.path.exists(extra) and os.path.exists(args["result"]):
            with open(args["result"]) as f:
                res = json.load(f)
            with open(extra) as f:
                res.setdefault("rank_errors", []).append(json.load(f).get("error"))
            _write(args["result"], res)
    return 0


# --- judging: pure ----------------------------------------------------------------------------------------------

LAYERS = {"te": "TransformerEngine layers", "local": "megatron-core local layers"}


def judge_megatron(doc: dict[str, Any] | None, context: dict[str, Any] | None = None) -> Finding:
    fid, label = "probe.megatron", "Megatron GPT training"
    if not doc:
        return Finding(fid, AREA, Status.SKIP, f"{label}: not measured")
    if not doc.get("available", True):
        return Finding(fid, AREA, Status.SKIP, f"{label} not run: {doc.get('reason', 'not measured')}",
                       {"reason": doc.get("reason")})
    layers = LAYERS.get(doc.get("layers"), str(doc.get("layers")))
    where = f"{layers}, TP={doc.get('tp')} on {', '.join(map(str, doc.get('devices') or []))}" + (
        f", {doc['dtype']}" if doc.get("dtype") else "")
    losses = [float(x) for x in doc.get("losses") or []]
    times = [float(x) for x in doc.get("step_s") or []]
    keys = ("layers", "tp", "devices", "dtype", "backend", "steps", "lr", "model", "megatron_core", "transformer_engine",
            "torch", "fused_softmax", "parameters_per_rank", "build_s", "seconds")
    evidence: dict[str, Any] = {k: doc.get(k) for k in keys if doc.get(k) is not None}
    evidence.update(losses=losses, step_s=times, fall_at=FALL_AT, **(context or {}))
    error = doc.get("error") or next((e for e in doc.get("rank_errors") or [] if e), None)
    if error:
        evidence["error"] = error
        return Finding(fid, AREA, Status.FAIL, f"{label} ({where}) failed: {error}", evidence, FIX, REFERENCE)
    if len(losses) < 2:
        return Finding(fid, AREA, Status.FAIL, f"{label} ({where}): {len(losses)} step(s) ran, 2 needed",
                       evidence, FIX, REFERENCE)
    first, last = losses[0], losses[-1]
    steady = times[1:] or times  # the first step compiles and warms up kernels
    step = statistics.median(steady)
    evidence.update(loss_first=first, loss_last=last, step_s_median=round(step, 4))
    if not all(math.isfinite(x) for x in losses):
        k = next(i for i, x in enumerate(losses) if not math.isfinite(x)) + 1
        return Finding(fid, AREA, Status.FAIL, f"{label} ({where}): loss {losses[k - 1]} at step {k} of "
                       f"{len(losses)}", evidence, FIX, REFERENCE)
    head = f"{label} ({where}): {len(losses)} steps, loss {first:.3f} → {last:.3f}"
    if last >= first * FALL_AT:
        return Finding(fid, AREA, Status.FAIL, f"{head}, did not fall below {FALL_AT:.0%} of the first "
                       "on a batch a healthy model memorises", evidence, FIX, REFERENCE)
    return Finding(fid, AREA, Status.PASS, f"{head}, {step * 1000:.0f} ms/step", evidence, None, REFERENCE)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
