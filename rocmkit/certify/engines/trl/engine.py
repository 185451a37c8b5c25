"""TRL's GRPOTrainer: in one process with Hugging Face's generation, or with vLLM (--vllm-mode): server mode
starts `trl vllm-serve` on the first GPU and `accelerate launch` of the trainer on the others, colocate mode
runs vLLM inside each training process (certify/intarget/trl_launch.py and trl_run.py run in the target)."""

from __future__ import annotations

import os
import re

from ....errors import UsageError
from ... import syncproof
from ...intarget import sync_record, trl_launch, trl_run
from ...settings import Settings, VllmMode
from ...signatures import Signature
from ..base import BASE_MODULES, TRAINER_BYTES, TRAINER_WHO, BuiltinTask

# Built-in task: a group of 8 answers per prompt, 2 prompts a step, a high learning rate for a tiny model
# (the reward rises within about ten steps on a CPU). A 0.5B model diverges at the tiny model's rate.
TRL_DEFAULTS = {"beta": 0.04, "num_generations": 8, "batch_size": 16, "max_completion_length": 12}
TRL_LR = {"tiny": 5e-3, "0.5b": 2e-5, "user": 2e-5}
# TRL with vLLM: the server's context (the built-in prompts are short; a user's data gets room) and how long
# rocmkit waits for its /health/ (vLLM's CPU build loads and warms up in about a minute on two cores).
TRL_MAX_MODEL_LEN = {"builtin": 256, "user": 2048}
SERVER_READY_S = 600
SERVER_MEMORY = 0.9  # trl vllm-serve's --gpu_memory_utilization default (trl/scripts/vllm_serve.py ScriptArguments)
ZERO_STAGES = (1, 2, 3)


# What rocmkit's launcher (trl_launch.py) says when the vLLM server never became healthy or died under the trainer:
# the run's cause unless a line before it says more (the server's own error is in its log, server.log).
LAUNCHER_ERROR = Signature(
    "trl.server", re.compile(r"^rocmkit: error: (?P<what>.+)$"), "TRL's launcher stopped the run",
    "the server's own log (the certificate's files.server_log) says why it stopped",
    "rocmkit/certify/intarget/trl_launch.py")


class Trl(BuiltinTask):
    name = "trl"
    options = ("vllm_mode", "zero")
    command_name = "TRL's trainer"
    title = "TRL"

    cli_rank = 1  # after verl's run flags in --help

    def cli_options(self):
        import click

        from ..base import CliOption

        return [
            CliOption("size", ("--vllm-mode",), dict(
                type=click.Choice([m.value for m in VllmMode]), default=Settings.vllm_mode,
                help="With --engine trl: generate with vLLM. server: `trl vllm-serve` on the first GPU and the "
                     "trainer under `accelerate launch` on the others (--gpus 2 or more; --gpus 0: both on the CPU, "
                     "the server on loopback); its log is server.log. colocate: vLLM inside each training process. "
                     "Default: TRL's Hugging Face generation in one process.")),
            CliOption("size", ("--zero",), dict(
                type=click.IntRange(min(ZERO_STAGES), max(ZERO_STAGES)), default=Settings.zero,
                help="With --vllm-mode on GPUs: DeepSpeed ZeRO stage of the trainer (accelerate --use_deepspeed).")),
        ]

    def cli_settings(self, values: dict, ctx) -> dict:
        mode = values["vllm_mode"]
        return {"vllm_mode": VllmMode(mode) if mode else None, "zero": values["zero"]}

    def check(self, s: Settings) -> None:
        if s.vllm_mode is VllmMode.SERVER and s.gpus == 1:
            raise UsageError("--vllm-mode server puts the server on the first GPU and trains on the others: "
                             "--gpus 1 leaves none to train on", hint="--gpus 2 or more, --gpus 0 for the CPU, "
                             "or --vllm-mode colocate on one GPU")
        if s.vllm_mode is VllmMode.COLOCATE and s.on_cpu:
            # TRL's colocate sync calls model.load_weights on vLLM's model, whose linear weights vLLM's CPU build
            # has repacked and emptied (vllm/model_executor/layers/linear.py): the first sync fails
            raise UsageError("--vllm-mode colocate needs GPUs: on the CPU, TRL's weight sync into vLLM's repacked "
                             "model fails", hint="--vllm-mode server runs on the CPU")
        if s.zero is not None:
            if s.zero not in ZERO_STAGES:
                raise UsageError(f"--zero {s.zero}: a DeepSpeed ZeRO stage", hint="1, 2 or 3")
            if s.vllm_mode is None or s.on_cpu:
                raise UsageError("--zero runs TRL's trainer under accelerate with DeepSpeed, on GPUs",
                                 hint="add --vllm-mode server or colocate, and --gpus")

    def refuse_foreign(self, s: Settings) -> None:
        if s.vllm_mode is not None:
            raise UsageError(f"--vllm-mode {s.vllm_mode.value} is TRL's; {s.engine}'s rollout is its own",
                             hint="add --engine trl, or leave out --vllm-mode")
        if s.zero is not None:
            raise UsageError("--zero runs TRL's trainer under accelerate with DeepSpeed: it needs --engine trl",
                             hint="add --engine trl, or leave out --zero")

    def settings_fields(self, s: Settings) -> dict:
        return {**super().settings_fields(s), "vllm_mode": s.vllm_mode.value if s.vllm_mode else None,
                "zero": s.zero}

    def required_modules(self, s: Settings) -> list[str]:
        return (BASE_MODULES + ["trl", "datasets", "accelerate"] + (["vllm"] if s.vllm_mode else [])
                + (["deepspeed"] if s.zero else []))

    def imports(self, s: Settings) -> list[str]:
        return ["trl"] + (["vllm"] if s.vllm_mode else [])

    def configure(self, s: Settings, ws, target) -> dict:
        return {"trl": {"model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "out_dir": str(ws.run_dir),
                        "steps": s.steps, "seed": s.seed, "device": "cpu" if s.on_cpu else "auto", **TRL_DEFAULTS,
                        "lr": TRL_LR[s.size if s.model is None else "user"],
                        "vllm_mode": s.vllm_mode.value if s.vllm_mode else None, "gpus": s.gpus, "zero": s.zero,
                        "server_log": str(ws.server_log), "server_timeout": min(SERVER_READY_S, s.timeout),
                        "max_model_len": TRL_MAX_MODEL_LEN["builtin" if s.data is None else "user"]}}

    def gpu_need(self, s: Settings, cfg: dict) -> list[dict]:
        trainer = {"share": 0.0, "bytes": TRAINER_BYTES, "who": TRAINER_WHO}
        if s.vllm_mode is VllmMode.COLOCATE:
            return [{**trainer, "share": trl_run.COLOCATE_MEMORY,
                     "who": f"vLLM inside the trainer takes {trl_run.COLOCATE_MEMORY:g} of the GPU, plus {TRAINER_WHO}"}
                    ] * s.gpus
        if s.vllm_mode is VllmMode.SERVER:  # the server alone on the first GPU, at trl vllm-serve's default share
            return [{"share": SERVER_MEMORY, "bytes": 0, "who": f"trl vllm-serve takes {SERVER_MEMORY:g} of the GPU "
                     "(its --gpu_memory_utilization default)"}] + [trainer] * (s.gpus - 1)
        return [trainer] * s.gpus

    def rollout_name(self, s: Settings) -> str | None:
        return "vllm" if s.vllm_mode else None  # without vLLM the trained model generates: nothing to compare

    def numerics_context(self, s: Settings, report: dict) -> dict:
        return {"rollout": f"vLLM ({s.vllm_mode.value} mode)" if s.vllm_mode else None}

    def signatures(self) -> tuple:
        return (LAUNCHER_ERROR,)

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        module = trl_launch if s.vllm_mode else trl_run  # run by name in the target
        return [target.python, "-m", module.__name__, str(ws.config)], witness_env(s, ws)

    def numerics(self, s: Settings, steps: dict, report: dict, ws) -> dict | None:
        doc = super().numerics(s, steps, report, ws)
        if witness_env(s, ws, create=False):
            doc["sync"] = syncproof.judge(syncproof.read(ws.sync_dir))
        return doc


def witness_env(s: Settings, ws, create: bool = True) -> dict[str, str]:
    """The witness of the weight syncs where rocmkit carries them (TRL's server mode on the CPU, through a file:
    intarget/file_weights.py), with a test's broken sync passed on; nothing elsewhere (TRL's own NCCL sync)."""
    if not (s.vllm_mode is VllmMode.SERVER and s.on_cpu):
        return {}
    if create:
        ws.sync_dir.mkdir(parents=True, exist_ok=True)
    env = {sync_record.VAR: str(ws.sync_dir)}
    fault = os.environ.get(sync_record.FAULT_VAR)
    if fault:
        try:
            sync_record.parse_fault(fault)
        except ValueError as exc:
            raise UsageError(str(exc), hint="unset it: it is for rocmkit's own tests") from None
        env[sync_record.FAULT_VAR] = fault
    return env


ENGINE = Trl
