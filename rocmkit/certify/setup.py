"""The setup step, run inside the target (host Python or image) before any training:
`python -c BOOTSTRAP MODULES certify.json`.

BOOTSTRAP needs nothing but Python: it reports which of the modules the run needs are absent (rocmkit
itself among them) and only then hands over to `main()`, which imports torch and the engine, counts the
GPUs torch sees, for verl picks the actor's attention from what imports (attention.py) and tries vLLM's
sleep-mode pool under the run's allocator settings (sleep_pool.py), writes the built-in model, data and reward
file into the run folder (so the host needs no torch), and for verl validates the overrides, the attention's
among them, against the target's own verl. Each step prints one
`ROCMKIT-SETUP {json}` line; the host merges them.
"""

from __future__ import annotations

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
    "    from rocmkit.certify.setup import main\n"
    "    main(sys.argv[2])\n"
)


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


def prepare(cfg: dict) -> dict:
    """The built-in model, data and reward file (only what the run does not bring itself)."""
    from . import task

    timings = {}
    if cfg["builtin_model"]:
        from . import tinymodel

        t = time.perf_counter()
        tinymodel.build(Path(cfg["model_dir"]), size=cfg["size"], seed=cfg["seed"])
        timings["model_s"] = round(time.perf_counter() - t, 3)
    t = time.perf_counter()
    if cfg["builtin_data"]:
        task.write_dataset(Path(cfg["train_file"]).parent, train_rows=max(64, 4 * cfg["steps"]), seed=cfg["seed"])
    else:  # verl builds a validation set even when validation is off
        Path(cfg["val_file"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(cfg["train_file"], cfg["val_file"])
    shutil.copyfile(Path(task.__file__), cfg["reward_file"])  # verl loads the reward function from a file
    timings["data_s"] = round(time.perf_counter() - t, 3)
    return timings


def _package_dir(name: str) -> str | None:
    """Where a package lies, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None


def choose_attention(cfg: dict, report: dict) -> bool:
    """The actor's attention, from what was asked and what imports here (attention.py). False when the
    implementation asked for by name cannot run here."""
    from . import attention

    t = time.perf_counter()
    found = attention.probe(cfg["gpus"])
    choice = attention.choose(cfg["attention"]["asked"], cfg["gpus"] == 0, found)
    report["attention"] = {**choice, "found": found}
    report["timings"]["attention_s"] = round(time.perf_counter() - t, 3)
    return attention.refusal(choice, found) is None


def main(config_path: str) -> None:
    cfg = json.loads(Path(config_path).read_text())
    report: dict = {"timings": {}}
    try:
        t = time.perf_counter()
        import torch

        report["devices"] = devices(torch)
        report["timings"]["import_torch_s"] = round(time.perf_counter() - t, 3)
        if cfg["gpus"] > report["devices"]["visible"]:
            emit(report)  # the host stops here: no training on a device that was not asked for
            return
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
        if cfg.get("attention") and not choose_attention(cfg, report):
            emit(report)  # asked for an implementation the target cannot run: the host refuses the run
            return
        if cfg.get("sleep_pool"):
            from . import sleep_pool

            t = time.perf_counter()
            report["sleep_pool"] = sleep_pool.inspect(_package_dir("vllm"), test=True)
            report["timings"]["sleep_pool_s"] = round(time.perf_counter() - t, 3)
        report["timings"].update(prepare(cfg))
        if cfg.get("verl_overrides") is not None:  # the engine asked for its overrides to be validated
            from .verl_check import check
            from .verl_overrides import attention_overrides

            t = time.perf_counter()
            chosen = (report.get("attention") or {}).get("chosen")
            report["verl_validation"] = check(cfg["verl_overrides"] + attention_overrides(chosen))
            if cfg.get("tune_overrides"):  # the user's tuned plan, as configuration only (its model is not here)
                report["tune_validation"] = check(cfg["tune_overrides"], files=False)
            report["timings"]["verl_check_s"] = round(time.perf_counter() - t, 3)
        report["ok"] = True
    except Exception as exc:  # noqa: BLE001 - reported to the host, which says what went wrong
        traceback.print_exc()
        report["error"] = f"{type(exc).__name__}: {exc}"
    emit(report)


if __name__ == "__main__":
    main(sys.argv[1])
