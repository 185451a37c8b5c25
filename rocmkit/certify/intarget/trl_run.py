"""The TRL engine's run, as its own process: `python -m rocmkit.certify.intarget.trl_run RUN.json`.

It runs where the stack is (on the host, or inside the image through the Docker engine) and writes
`metrics.jsonl` in verl's file-logger format ({"step": N, "data": {...}} per step) plus `run.json`, so the
certificate is read the same way for both engines. Per-phase times come from timing the trainer's own
methods (generation, reference and old log-probs, reward, update), synchronising the GPU around each.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path

COLOCATE_MEMORY = 0.3  # vLLM's share of each GPU inside TRL's trainer (its vllm_gpu_memory_utilization)


def _sync():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def make_trainer_class():
    from trl import GRPOTrainer

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer that records how long each phase of a step takes and how many tokens it made."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.phase = {"gen": 0.0, "ref": 0.0, "old_log_prob": 0.0, "score_total": 0.0, "step_total": 0.0}
            self.tokens = {"completion": 0, "total": 0}
            self._scoring = False

        def _timed(self, key, fn, *args, **kwargs):
            _sync()
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            _sync()
            self.phase[key] += time.perf_counter() - t
            return out

        def _generate(self, prompts):
            out = self._timed("gen", super()._generate, prompts)
            prompt_ids, completion_ids = out[0], out[1]
            self.tokens["completion"] += sum(len(c) for c in completion_ids)
            self.tokens["total"] += sum(len(p) + len(c) for p, c in zip(prompt_ids, completion_ids))
            return out

        def _get_per_token_logps_and_entropies(self, model, *args, **kwargs):
            if not self._scoring:  # inside compute_loss: part of the update
                return super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
            key = "ref" if model is self.ref_model else "old_log_prob"
            return self._timed(key, super()._get_per_token_logps_and_entropies, model, *args, **kwargs)

        def _generate_and_score_completions(self, inputs):
            self._scoring = True
            try:
                return self._timed("score_total", super()._generate_and_score_completions, inputs)
            finally:
                self._scoring = False

        def training_step(self, *args, **kwargs):
            return self._timed("step_total", super().training_step, *args, **kwargs)

        def take_phases(self) -> dict:
            p, t = self.phase, self.tokens
            other = max(p["score_total"] - p["gen"] - p["ref"] - p["old_log_prob"], 0.0)
            out = {"timing_s/gen": p["gen"], "timing_s/ref": p["ref"], "timing_s/old_log_prob": p["old_log_prob"],
                   "timing_s/reward": other, "timing_s/update_actor": max(p["step_total"] - p["score_total"], 0.0),
                   "timing_s/step": p["step_total"], "perf/completion_tokens": t["completion"],
                   "perf/total_num_tokens": t["total"]}
            for k in p:
                p[k] = 0.0
            t["completion"] = t["total"] = 0
            return out

    return TimedGRPOTrainer


def run(cfg: dict) -> dict:
    import torch
    from datasets import load_dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig

    from ..task import compute_score

    out = Path(cfg["out_dir"])
    out.mkdir(parents=True, exist_ok=True)
    metrics_path = out / "metrics.jsonl"
    main_process = int(os.environ.get("RANK", "0")) == 0  # under accelerate launch only rank 0 writes
    if main_process:
        metrics_path.write_text("")
    cuda = cfg.get("device", "auto") != "cpu" and torch.cuda.is_available()
    data = load_dataset("parquet", data_files=cfg["train_file"], split="train")
    mode = cfg.get("vllm_mode")  # None: TRL generates with HF; server/colocate: with vLLM (trl_launch.py)
    vllm = {}
    if mode == "server":
        vllm = {"use_vllm": True, "vllm_mode": "server", "vllm_server_timeout": cfg["server_timeout"],
                "vllm_server_base_url": os.environ["ROCMKIT_TRL_SERVER_URL"]}
        if not cuda:  # TRL's weight sync is NCCL on CUDA only; on the CPU the weights go through a file
            from trl.generation import vllm_generation

            from .file_weights import client_class

            vllm_generation.VLLMClient = client_class(out / "weights")
    elif mode == "colocate":
        vllm = {"use_vllm": True, "vllm_mode": "colocate", "vllm_gpu_memory_utilization": COLOCATE_MEMORY,
                "vllm_max_model_length": cfg["max_model_len"]}

    def reward(completions, reward_model, data_source, **kwargs):
        texts = [c[-1]["content"] if isinstance(c, list) else c for c in completions]
        return [compute_score(src, t, rm["ground_truth"]) for t, rm, src in zip(texts, reward_model, data_source)]

    args = GRPOConfig(
        output_dir=str(out / "trainer"), max_steps=cfg["steps"], learning_rate=cfg["lr"], beta=cfg["beta"],
        num_generations=cfg["num_generations"], per_device_train_batch_size=cfg["batch_size"],
        max_completion_length=cfg["max_completion_length"], logging_steps=1, report_to="none", save_strategy="no",
        gradient_checkpointing=False, use_cpu=not cuda, bf16=cuda and cfg.get("bf16", True), seed=cfg["seed"],
        temperature=1.0, lr_scheduler_type="constant", warmup_steps=0, dataloader_num_workers=0,
        disable_tqdm=True,  # the log gets whole lines; rocmkit shows the progress
        **vllm,
    )
    Trainer = make_trainer_class()
    trainer = Trainer(model=cfg["model_dir"], reward_funcs=[reward], args=args, train_dataset=data)

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if not logs or "loss" not in logs or not main_process:
                return
            row = {k: v for k, v in logs.items() if isinstance(v, (int, float))}
            row.update(trainer.take_phases())
            with open(metrics_path, "a") as f:
                f.write(json.dumps({"step": state.global_step, "data": row}) + "\n")
            # verl's console format, so one reader follows both engines' progress
            print(f"step:{state.global_step} - " + " - ".join(f"{k}:{v}" for k, v in row.items()), flush=True)

    trainer.add_callback(Record())
    started = time.perf_counter()
    trainer.train()
    return {
        "engine": "trl", "steps_done": trainer.state.global_step, "wall_s": time.perf_counter() - started,
        "device": torch.cuda.get_device_name(0) if cuda else "cpu", "torch": torch.__version__,
        "hip": getattr(torch.version, "hip", None), "cuda": torch.version.cuda,
        "parameters": sum(p.numel() for p in trainer.model.parameters()),
        "precision": "bf16" if args.bf16 else "fp32", "generation": f"vllm {mode}" if mode else "hf",
        "processes": trainer.accelerator.num_processes,
    }


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())["trl"]  # certify.json, written by rocmkit certify
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    result_path = Path(cfg["out_dir"]) / "run.json"
    try:
        result = run(cfg)
        result["status"] = "finished"
    except Exception as exc:  # the certificate reports the failure; the traceback goes to the run log
        traceback.print_exc()
        result = {"engine": "trl", "status": "crashed", "error": f"{type(exc).__name__}: {exc}"}
    Path(cfg["out_dir"]).mkdir(parents=True, exist_ok=True)
    if int(os.environ.get("RANK", "0")) == 0:
        result_path.write_text(json.dumps(result, indent=1))
    sys.exit(0 if result["status"] == "finished" else 1)


if __name__ == "__main__":
    main()
