"""The setup step, run inside the target (host Python or image) before any training:
`python -c BOOTSTRAP MODULES certify.json`.

BOOTSTRAP needs nothing but Python: it reports which of the modules the run needs are absent (rocmkit
itself among them) and only then hands over to `main()`, which imports torch and the engine, counts the
GPUs torch sees, runs the engine's own steps first, before and after (certify.json's `target_steps`, a module
name; verl's: start vLLM's model inspection beside the rest, pick the attention, try vLLM's sleep-mode pool, look
for packages that break verl and have verl validate the overrides, rocmkit/certify/intarget/verl_steps.py), and writes the
built-in model, data and reward file into the run folder (so the host needs no torch). Each step prints one
`ROCMKIT-SETUP {json}` line; the host merges them.
"""

from __future__ import annotations

import importlib
import json
import shutil
import sys
import time
import traceback
from pathlib import Path

MARK = "ROCMKIT-SETUP "
BOOTSTRAP = (
    "import importlib.util as u, json, sys\n"
    "missing = [m for m in sys.argv[1].split(',') if u.find_spec(m) is None]\n"
    "print('" + MARK + "' + json.dumps({'python': '%d.%d.%d' % sys.version_info[:3], 'missing': missing}), flush=True)\n"
    "if not missing:\n"
    "    from rocmkit.certify.intarget.setup import main\n"
    "    main(*sys.argv[2:])\n"
)
# The parts a setup can run (certify.json's `target_steps` splits it): "all" in one process; or "first", what the
# run's command needs (torch, the GPUs, the engine's choices, the model and data), and then "beside", the slow
# checks (the engine's imports and own checks), run beside the run's start-up and stopping it if one fails.
PARTS = ("all", "first", "beside")


def emit(doc: dict) -> None:
    print(MARK + json.dumps(doc, default=str), flush=True)


def parse(lines: list[str]) -> dict:
    """The merged report from a setup's output lines (later lines win)."""
    out: dict = {}
    for line in lines:
        at = line.find(MARK)
        if at >= 0:
            try:
                out.update(json.loads(line[at + len(MARK):]))
            except ValueError:
                continue
    return out


def devices(torch) -> dict:
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"torch": torch.__version__, "hip": getattr(torch.version, "hip", None), "cuda": torch.version.cuda,
            "visible": n, "names": [torch.cuda.get_device_name(i) for i in range(n)],
            "visible_env": {k: v for k, v in __import__("os").environ.items()
                            if k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")}}


def gpu_memory(torch, count: int) -> list[dict]:
    """Free and total bytes of each GPU the run will use, as the driver says now (torch.cuda.mem_get_info), and its
    PCI address, so the host can name the processes holding the rest."""
    out = []
    for i in range(count):
        free, total = torch.cuda.mem_get_info(i)
        props = torch.cuda.get_device_properties(i)
        bus = getattr(props, "pci_bus_id", None)
        pci = (f"{getattr(props, 'pci_domain_id', 0):04x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
               if isinstance(bus, int) else None)
        out.append({"index": i, "name": torch.cuda.get_device_name(i), "free": free, "total": total, "pci": pci})
    return out


def short_of_memory(memory: list[dict], need: list[dict]) -> list[int]:
    """The GPUs whose free memory is below what the run needs there (certify.json's gpu_need: a share of the GPU
    and bytes beside it, per GPU)."""
    return [m["index"] for m, n in zip(memory, need) if m["free"] < n["share"] * m["total"] + n["bytes"]]


def prepare(cfg: dict) -> dict:
    """The built-in model, data and reward file (only what the run does not bring itself)."""
    from .. import task

    timings = {}
    if cfg["builtin_model"]:
        from ... import tinymodel

        t = time.perf_counter()
        if cfg.get("model_config"):  # a job's model that is not on this host: its shape, random weights
            tinymodel.build_from_config(Path(cfg["model_dir"]), cfg["model_config"], seed=cfg["seed"])
        else:
            tinymodel.build(Path(cfg["model_dir"]), size=cfg["size"], seed=cfg["seed"])
        timings["model_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    if cfg["builtin_data"]:
        rows = cfg.get("train_rows") or max(64, 4 * cfg["steps"])  # a job's rows: its batches (job.train_rows)
        task.write_dataset(Path(cfg["train_file"]).parent, train_rows=rows, seed=cfg["seed"])
    else:  # verl builds a validation set even when validation is off
        Path(cfg["val_file"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cfg["train_file"], cfg["val_file"])
    shutil.copyfile(Path(task.__file__), cfg["reward_file"])  # verl loads the reward function from a file
    timings["data_s"] = round(time.perf_counter() - t, 3)
    return timings


def main(config_path: str, part: str = "all") -> None:
    cfg = json.loads(Path(config_path).read_text())
    first, beside = part in ("all", "first"), part in ("all", "beside")
    report: dict = {"timings": {}}
    background = None
    try:
        steps = importlib.import_module(cfg["target_steps"]) if cfg.get("target_steps") else None
        if beside and steps is not None:
            background = steps.start(cfg)  # beside everything below
        t = time.perf_counter()
        import torch

        report["timings"]["import_torch_s"] = round(time.perf_counter() - t, 3)
        if first:
            report["devices"] = devices(torch)
            from ...tune import host

            report["host_memory"] = host.memory(None)[0]  # what verl's CPU offloads pin: tune's advice checks it
            from .. import inputs

            report["input_problems"] = inputs.problems(cfg)
            if report["input_problems"]:
                emit(report)  # the user's model or data cannot work: the host says which file and why
                return
            if cfg["gpus"] > report["devices"]["visible"]:
                emit(report)  # the host stops here: no training on a device that was not asked for
                return
            if cfg["gpus"] and cfg.get("gpu_need"):
                report["gpu_memory"] = gpu_memory(torch, cfg["gpus"])
                if short_of_memory(report["gpu_memory"], cfg["gpu_need"]):
                    emit(report)  # another process holds what the run needs: the host names it, nothing starts
                    return
        if beside:
            t = time.perf_counter()
            errors = {}
            for name in cfg["imports"]:
                try:
                    __import__(name)
                except Exception as exc:  # noqa: BLE001 - a broken install is a finding, reported by name
                    errors[name] = f"{type(exc).__name__}: {exc}"
            report["import_errors"] = errors
            report["timings"]["import_engine_s"] = round(time.perf_counter() - t, 3)
            if errors:
                emit(report)
                return
        if first and steps is not None and not steps.choose(cfg, report):
            emit(report)  # the engine's choice cannot run here (an attention asked for by name): the host says why
            return
        if beside and steps is not None and not steps.before(cfg, report):
            emit(report)  # the engine's own check refused the target: the host says why
            return
        if first:
            report["timings"].update(prepare(cfg))
        if beside and steps is not None:
            steps.after(cfg, report, background)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - reported to the host, which says what went wrong
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        if background is not None:  # a setup that stopped early leaves nothing running
            background.stop()
    emit(report)


if __name__ == "__main__":
    main(*sys.argv[1:])
