"""What certify's flow asks of an engine, with the defaults of an engine that trains the built-in task under the
shared steps (flow.py: settings, target, workspace, setup in the target, probes, the run under the watchdog,
the judge, the certificate). An engine overrides only the steps it does differently, the way cibuildwheel's
platform modules sit behind one interface: TRL and verl train the built-in task; Miles runs its own test in its
image and judges it by its exit (miles.py).

An engine owns its options: the Settings fields it reads (`options`), their checks in combination (`check`), and
the refusal of its options when another engine is chosen (`refuse_foreign`). It supplies its part of certify.json,
its command, its fields of the certificate's settings, its section of the certificate (`run_record`, the
certificate's `engine_run`), its part of the dry-run plan, and where it runs under Slurm, its cluster job."""

from __future__ import annotations

from dataclasses import dataclass

from ..judge import RunStatus, Verdict, judge
from ..settings import Settings
from ..watchdog import Watch

# What the trainer needs on each GPU beside the rollout's share: the built-in model's weights, optimizer state and
# activations (under 1 GiB) and each process's CUDA/HIP context (about 0.5 GiB), with room.
TRAINER_BYTES = 2 << 30
TRAINER_WHO = "2 GiB for the trainer (its model, optimizer and GPU context)"
# What every run needs in the target before the engine's own modules (top-level import names).
BASE_MODULES = ["rocmkit", "torch", "transformers", "tokenizers", "pyarrow"]
# What every run's command has in its environment (flow.command; where an engine sets one, its value is kept).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


@dataclass(frozen=True)
class ClusterJob:
    """How `rocmkit slurm` starts this engine's driver once the Ray cluster is up (cluster/slurm.py)."""
    entrypoint: tuple[str, ...]  # the driver's command before its arguments
    reserved: tuple[str, ...]  # arguments rocmkit fills from --nodes and --gpus-per-node
    # Where the driver goes through `ray job submit` (this command before `--`) with a runtime env whose two `%s`
    # are the head's address; empty: the driver runs on the head node as it is.
    submit: tuple[str, ...] = ()
    runtime_env: tuple[tuple[str, str], ...] = ()
    # The driver is verl's main_ppo: `rocmkit slurm` has verl check its overrides, and its node count can follow
    # the fleet preflight (--min-nodes). Asked of the job, so the cluster code compares no engine names.
    main_ppo: bool = False

    def check_argument(self, arg: str) -> None:
        """A user argument, refused with the reason (UsageError); the engine's own syntax rules."""

    def driver(self, args: tuple[str, ...], entrypoint: tuple[str, ...], nodes: int, gpus_per_node: int) -> list[str]:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class CliOption:
    """One of an engine's `rocmkit certify` flags: click.option's arguments, and `after`, the shared flag --help
    lists it after (rocmkit/cli/certify.py collects every engine's flags from the registry, as pytest collects its
    plugins' pytest_addoption; among several engines' flags after one shared flag, their `cli_rank` orders them)."""
    after: str
    decls: tuple[str, ...]
    attrs: dict


def rocmkit_requirement(extra: str) -> str:
    """What pip installs rocmkit with an extra from: this rocmkit's own source folder where it runs from one (a
    clone, an editable install; rocmkit is not on the package index), else the name for a local index."""
    from pathlib import Path

    import rocmkit

    root = Path(rocmkit.__file__).resolve().parents[1]
    return f"'{root}[{extra}]'" if (root / "pyproject.toml").is_file() else f"'rocmkit[{extra}]' (from rocmkit's source)"


class CertifyEngine:
    name: str  # what --engine says
    options: tuple[str, ...] = ()  # the Settings fields only this engine reads
    extra: str = "certify"  # rocmkit's pip extra that brings the engine to a host Python
    first_phase = "starting the trainer"  # the watchdog's phase before the engine says what it does
    setup_in_target = True  # False: nothing of rocmkit runs in the target before the engine (Miles' own test)
    probes = True  # the doctor's GPU probes are measured where the run happens
    cluster: ClusterJob | None = None  # the engine's job under `rocmkit slurm`; None: not offered there
    command_name = "the training command"  # what the certificate calls the command certify ran, when it died
    title = ""  # how the certificate's picture names the engine ("TRL"); empty: its name

    # ---- options ----

    cli_rank = 9  # where this engine's flags stand in `certify --help` among other engines' after one shared flag

    def cli_options(self) -> list[CliOption]:
        """This engine's own `rocmkit certify` flags (cli/certify.py declares only the shared ones)."""
        return []

    def cli_settings(self, values: dict, ctx) -> dict:
        """Settings fields from this engine's flags. `values` holds every flag's click value by parameter name
        (ctx, click's context, says which were given); what this returns goes over the shared flags' fields."""
        return {}

    def check(self, s: Settings) -> None:
        """This engine's options in combination with the rest (UsageError). The generic checks ran before."""

    def refuse_foreign(self, s: Settings) -> None:
        """Refuse this engine's options when another engine was chosen (UsageError naming the option)."""

    def settings_fields(self, s: Settings) -> dict:
        """The certificate's settings beyond engine, GPUs, timeouts and command."""
        return {}

    # ---- the target ----

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

    def target_argv(self, s: Settings, target, inner: list[str], env: dict[str, str], ws) -> list[str]:
        """The argv that runs `inner` in the target, for the record and --dry-run."""
        return target.command(inner, env, ws)

    def after_setup(self, cfg: dict, report: dict) -> bool:
        """What the setup's report changes in certify.json; True when the command must be made again."""
        return False

    def install_hint(self, s: Settings, python: str) -> str:
        return f"{python} -m pip install {rocmkit_requirement(self.extra)}"

    def cpu_hint(self) -> str:
        """Added to '--gpus 0 runs on the CPU' when too few GPUs are visible."""
        return ""

    def setup_refusal(self, report: dict) -> tuple[str, str] | None:
        """Why the target cannot run this engine as asked, read from the setup's report (exit 3), or None."""
        return None

    def configuration_rejection(self, report: dict) -> tuple[str, str] | None:
        """The engine's own rejection of the run's configuration, found by the setup (exit 2), or None."""
        return None

    def extra_checks(self, report: dict) -> list[dict]:
        """Checks the setup measured that the certificate carries beside the run's."""
        return []

    def plan_fields(self, report: dict) -> dict:
        """The engine's part of the --dry-run plan (rocmkit.certify-plan/v1)."""
        return {}

    def plan_lines(self, plan: dict) -> list[str]:
        """What `certify --dry-run` prints of the engine's part of the plan."""
        return []

    # ---- the run ----

    def gpu_need(self, s: Settings, cfg: dict) -> list[dict]:
        """What the run needs free on each GPU before it starts ({share of the GPU, bytes beside it, who}), so a
        GPU another process holds is refused in seconds (setup.short_of_memory), not after the engine's start-up."""
        return [{"share": 0.0, "bytes": TRAINER_BYTES, "who": TRAINER_WHO}] * s.gpus

    def watch(self, s: Settings) -> Watch:
        return Watch(s.steps, stall_s=s.stall_timeout or float("inf"), first_phase=self.first_phase)

    def execute(self, s: Settings, target, ws, inner: list[str], env: dict[str, str], *, timeout: float, follow):
        """Run the engine's command in the target under the watchdog; the runner's Result."""
        return target.run(inner, env, ws, timeout=timeout, on_line=follow.line, log_path=ws.log,
                          what="the certification run", stop_when=follow.tick, on_stop=follow.before_stop)

    def device(self, s: Settings, report: dict) -> str | None:
        if s.on_cpu:
            return "cpu"
        names = (report.get("devices") or {}).get("names") or []
        return ", ".join(names[: s.gpus]) or None  # torch saw none: say nothing rather than "?"

    def verdict(self, s: Settings, steps: dict, status: RunStatus, run, probes: dict | None, extra: list[dict],
                ws) -> Verdict:
        """The run judged: every step ran, finite losses, the reward rose where that is asked, no probe failed."""
        return judge(steps, s.steps, status, require_learning=s.learning_required, probes=probes, extra=extra)

    def run_record(self, s: Settings, report: dict, run, ws) -> dict | None:
        """The engine's own record of the run: the certificate's `engine_run`."""
        return None

    def summary_lines(self, engine_run: dict | None) -> list[str]:
        """The certificate's markdown lines about the engine's own record."""
        return []

    def settings_section(self, settings: dict) -> list[str]:
        """The certificate's closing markdown section about the engine's recorded settings (verl: the smoke run's
        start-up cuts); nothing by default."""
        return []

    def reported_mfu(self, series) -> dict | None:
        """The engine's own MFU of the update, from its per-step metrics (`series(key)`: the key's values by step),
        as the certificate's `metrics.mfu`; None: rocmkit estimates it where it knows the device's peak."""
        return None

    def advise(self, s: Settings, report: dict, why: dict) -> dict:
        """The cause of a run that did not finish well, with what the engine knows to add to its fix."""
        return why

    def signatures(self) -> tuple:
        """The engine's own failure signatures (certify/signatures.py's Signature), tried before the shared ones."""
        return ()

    def run_notes(self, run) -> list[str]:
        """Notes on the run for the certificate (beside the target's)."""
        return []

    def numerics(self, s: Settings, steps: dict, report: dict, ws) -> dict | None:
        """The certificate's `numerics`: the rollout's log-probs against the trainer's (certify/numerics.py), and
        the weight syncs where the engine watches them; None where the engine's own test logs neither."""
        return None


class BuiltinTask(CertifyEngine):
    """An engine that trains the built-in task (or a user's model and data) for --steps steps."""

    def rollout_name(self, s: Settings) -> str | None:
        """What generates the rollouts (the key of its numerics band)."""
        return None

    def numerics_context(self, s: Settings, report: dict) -> dict:
        """What the run used on each side, for the likely cause of a mismatch from the first step."""
        return {}

    def numerics(self, s: Settings, steps: dict, report: dict, ws) -> dict | None:
        from .. import numerics

        return numerics.judge(steps, engine=self.name, rollout=self.rollout_name(s), device="cpu" if s.on_cpu
                              else "gpu", context=self.numerics_context(s, report))

    def settings_fields(self, s: Settings) -> dict:
        return {"steps": s.steps, "model": str(s.model) if s.model else f"built-in {s.size}",
                "data": str(s.data) if s.data else "built-in digits task", "learning_required": s.learning_required}
