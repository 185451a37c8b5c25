"""certify's engines behind one interface, registered by name as the image's component kinds are
(image/components.py): `ENGINES[EngineKind.TRL]`. flow.py asks the engine of the run for everything that differs
between them and branches on none; a new engine is a class here.

Each supplies: the modules the setup finds before anything imports (`required_modules`) and the ones it then
imports (`imports`), its part of certify.json (`configure`), its command in the target (`command`), what the
setup's report changes in it (`after_setup`), its install hints, its fields of the certificate's settings and
its run record, its first phase and its watchdog. Miles runs its own test and writes its certificate itself
(`certifies_itself`, miles_run.py)."""

from __future__ import annotations

from . import miles_run
from ..verl import overrides as verl_overrides
from ..verl import report as verl_report
from .settings import SERVER_READY_S, TRL_DEFAULTS, TRL_LR, TRL_MAX_MODEL_LEN, Backend, EngineKind, Rollout, Settings
from .watchdog import Watch

# verl's learning rate on the built-in task; a user's model gets a rate a real model survives. The tiny model
# learns the task in 12 steps at 5e-3 (five CPU runs: the reward rose 0.79-0.93, the judge needs 0.3).
VERL_LR = {"tiny": 5e-3, "0.5b": 2e-5, "user": 1e-5}
# The built-in answer is a number: 16 tokens hold it with room; a user's data gets verl's usual room.
VERL_RESPONSE_TOKENS = {"builtin": 16, "user": 32}
BASE_MODULES = ["rocmkit", "torch", "transformers", "tokenizers", "pyarrow"]


class CertifyEngine:
    """What flow.py asks of an engine. The defaults suit an engine that runs under the generic flow."""

    kind: EngineKind
    extra: str = "certify"  # rocmkit's pip extra that brings the engine to a host Python
    first_phase = "starting the trainer"  # the watchdog's phase before the engine says what it does
    certifies_itself = False  # True: certify() below runs the whole certification, not flow.py's steps

    def required_modules(self, s: Settings) -> list[str]:
        """Import names the run needs in the target, in the order a user would install them (top-level names:
        the setup's find_spec cannot look inside a package that is absent)."""
        return list(BASE_MODULES)

    def imports(self, s: Settings) -> list[str]:
        """What the setup imports once they are all there (a broken install is a failed check)."""
        return []

    def configure(self, s: Settings, ws, target) -> dict:
        """Its part of certify.json."""
        return {}

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def after_setup(self, cfg: dict, report: dict) -> bool:
        """What the setup's report changes in certify.json; True when the command must be made again."""
        return False

    def install_hint(self, s: Settings, python: str) -> str:
        return f"pip install 'rocmkit[{self.extra}]' in {python}"

    def cpu_hint(self) -> str:
        """Added to '--gpus 0 runs on the CPU' when too few GPUs are visible."""
        return ""

    def settings_fields(self, s: Settings) -> dict:
        """The certificate's settings that only this engine reads (None for the others)."""
        return {"rollout": None, "backend": None, "attn": None, "rollout_graphs": None}

    def watch(self, s: Settings) -> Watch:
        return Watch(s.steps, stall_s=s.stall_timeout or float("inf"), first_phase=self.first_phase)

    def run_record(self, s: Settings, report: dict, log_text: str) -> dict | None:
        """The engine's own record in the certificate (verl: rollout, backend, attention, graphs)."""
        return None

    def certify(self, s: Settings, display):
        """The whole certification, for an engine that certifies itself (Outcome as flow.certify)."""
        raise NotImplementedError


class Trl(CertifyEngine):
    """TRL's GRPOTrainer; with vLLM, trl_launch starts the server and/or `accelerate launch` of trl_run."""

    kind = EngineKind.TRL

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

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        module = "rocmkit.certify.intarget.trl_launch" if s.vllm_mode else "rocmkit.certify.intarget.trl_run"
        return [target.python, "-m", module, str(ws.config)], {}


class Verl(CertifyEngine):
    """verl's main_ppo with a vLLM or SGLang rollout, FSDP or Megatron actor; the setup validates its overrides."""

    kind = EngineKind.VERL
    extra = "verl"
    first_phase = "starting Ray"

    @staticmethod
    def run(s: Settings, ws, target) -> verl_overrides.VerlRun:
        size = s.size if s.model is None else "user"
        return verl_overrides.VerlRun(
            model_dir=str(ws.model_dir), train_file=str(ws.train_file), val_file=str(ws.val_file),
            reward_file=str(ws.reward_file), gpus=s.gpus, steps=s.steps, rollout=s.rollout.value, lr=VERL_LR[size],
            max_response_length=VERL_RESPONSE_TOKENS["builtin" if s.data is None else "user"],
            ray_temp_dir=f"/tmp/rocmkit-ray-{target.run_id[:8]}", backend=s.backend.value, train_tp=s.tp,
            train_pp=s.pp, rollout_graphs=s.rollout_graphs)

    def required_modules(self, s: Settings) -> list[str]:
        return (BASE_MODULES + ["verl", "hydra", "ray", s.rollout.value]
                + (["megatron", "mbridge"] if s.backend is Backend.MEGATRON else []))

    def imports(self, s: Settings) -> list[str]:
        return ["verl"]

    def configure(self, s: Settings, ws, target) -> dict:
        return {"verl_overrides": verl_overrides.overrides(self.run(s, ws, target)), "tune_overrides": list(s.tune),
                # the setup picks the attention where it can see what imports; the pool check needs vLLM's sleep mode
                "attention": {"asked": s.attn} if s.backend is Backend.FSDP else None,
                "sleep_pool": s.rollout is Rollout.VLLM and not s.on_cpu}

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        env = verl_overrides.environment(self.run(s, ws, target), str(ws.metrics))
        return [target.python, "-m", "verl.trainer.main_ppo", *cfg.get("run_overrides", cfg["verl_overrides"])], env

    def after_setup(self, cfg: dict, report: dict) -> bool:
        if not report:
            return False
        cfg["run_overrides"] = verl_report.run_overrides(cfg, report)  # the setup chose the attention
        return True

    def install_hint(self, s: Settings, python: str) -> str:
        return super().install_hint(s, python) + (", or the verl-cpu stack's packages for a CPU run" if s.on_cpu
                                                  else "")

    def cpu_hint(self) -> str:
        return " (the verl engine needs the verl-cpu stack for that)"

    def settings_fields(self, s: Settings) -> dict:
        return {"rollout": s.rollout.value, "backend": s.backend.value, "attn": s.attn,
                "rollout_graphs": s.rollout_graphs}

    def run_record(self, s: Settings, report: dict, log_text: str) -> dict | None:
        return verl_report.record(report, log_text, s.rollout_graphs)


class Miles(CertifyEngine):
    """Miles' own short e2e test in a Miles image; it writes its certificate itself (miles_run.py)."""

    kind = EngineKind.MILES
    first_phase = "Miles' test"
    certifies_itself = True

    def watch(self, s: Settings) -> Watch:
        # Miles' output has no step lines rocmkit reads and its own retries print tracebacks: the stall rule only
        return Watch(0, stall_s=s.stall_timeout or float("inf"), first_phase=self.first_phase, fatal=False)

    def certify(self, s: Settings, display):
        return miles_run.certify(s, display, self.watch(s))


ENGINES: dict[EngineKind, CertifyEngine] = {e.kind: e() for e in (Trl, Verl, Miles)}


def of(s: Settings) -> CertifyEngine:
    return ENGINES[s.engine]
