"""A user's verl launch script certified as a job (`certify --script`): the script read as `verl-check` reads it
(rocmkit/verl/launch_script.py, in its sandbox), verl's own check of it, and what certify changes for a smoke run.

The user's overrides are the job. certify adds a smoke budget on top (a few steps, no validation, checkpoints in the
run folder, console and file loggers) and, where the script's model or data files are not on this host, stand-ins of
the same shape: a random-weight model built from the architecture's config.json, and the built-in task at the
script's prompt and response lengths. The certificate names each stand-in.

The variables the script exports before main_ppo are the job's too: the run gets them, under certify's own (its
offline, flight-recorder and smoke-run variables), and the certificate names each export certify changed, and why."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputFileError, UsageError

MODEL_KEY = "actor_rollout_ref.model.path"
DATA_KEYS = ("data.train_files", "data.val_files")
DEFAULT_STEPS = 3  # a job's smoke budget: enough to see every phase run twice after the first step's start-up
MODULES = "VERL_USE_EXTERNAL_MODULES"  # verl imports each module it names: the script's and certify's all run
# config.json fields the model table keeps beside the architecture (resources/models.toml), not config.json's own
TABLE_ONLY = ("source", "params_b", "architecture", "attention_bias")


@dataclass(frozen=True)
class Job:
    script: str
    line: int  # the line of the script's main_ppo command
    overrides: tuple[str, ...]  # the user's, as bash passed them to main_ppo
    model_path: str | None  # the script's actor_rollout_ref.model.path
    model_config: tuple[tuple[str, object], ...] | None  # the stand-in's config.json; None: the script's model is here
    model_source: str | None  # where the stand-in's shape came from
    data_files: tuple[str, ...]  # the script's train files
    builtin_data: bool  # True: the script's train files are not on this host
    env: tuple[tuple[str, str], ...] = ()  # what the script exported to main_ppo (launch_script.Invocation.env)
    config_name: str = "ppo_trainer"  # main_ppo's --config-name (verl's Megatron examples: ppo_megatron_trainer)
    config_path: str | None = None  # its --config-path, as bash passed it

    def value(self, key: str) -> str | None:
        return value_of(self.overrides, key)

    @property
    def config(self) -> dict | None:
        return dict(self.model_config) if self.model_config is not None else None


def data_columns(job: Job) -> list[str]:
    """The columns verl reads from the job's data files: the prompt (data.prompt_key), and for its reward the data
    source (data.reward_fn_key) and the ground truth (reward_model; verl's reward loop, naive manager)."""
    return [job.value("data.prompt_key") or "prompt", job.value("data.reward_fn_key") or "data_source",
            "reward_model"]


def backend(job: Job) -> str:
    """The actor's training backend the script asks for: Megatron by verl's Megatron config or engine, else FSDP."""
    engine = job.value("model_engine") or job.value("actor_rollout_ref.actor.strategy") or ""
    return "megatron" if "megatron" in job.config_name or engine == "megatron" else "fsdp"


def config_args(job: Job) -> list[str]:
    """main_ppo's config arguments, as the script gave them (before the overrides)."""
    return ([f"--config-path={job.config_path}"] if job.config_path else []) + (
        [f"--config-name={job.config_name}"] if job.config_name != "ppo_trainer" else [])


def value_of(overrides, key: str) -> str | None:
    """The last value the overrides give `key` (Hydra applies them in order), without its + or ++."""
    found = None
    for o in overrides:
        k, eq, v = o.lstrip("+").partition("=")
        if eq and k == key:
            found = v
    return found


def files_of(value: str | None) -> list[str]:
    """A Hydra value that names files: one path, or a list `[a,b]` (quoted or not)."""
    if not value:
        return []
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    return [p.strip().strip("'\"") for p in text.split(",") if p.strip().strip("'\"")]


def read(script: str, args: list[str], env: dict[str, str], gpus: int | None, timeout: float,
         image: str | None, model_config: str | None, check_timeout: float = 600) -> tuple[Job, list[str]]:
    """The job, and verl-check's report lines of it. A script verl rejects, or one that runs main_ppo more than
    once, is refused (UsageError, exit 2) after those lines are printed by the caller (`lines` of the error)."""
    from ..verl import launch_script, recipe_check

    options = launch_script.ReadOptions(env=env, args=list(args), gpus=gpus, timeout=timeout)
    invocations = recipe_check.read_files([script], options)
    if image:
        verdicts, where = recipe_check.in_image(invocations, image, check_timeout)
    else:
        verdicts, where = recipe_check.on_host(invocations, None, check_timeout)
    lines = recipe_check.text_lines(invocations, verdicts)
    doc = recipe_check.document(invocations, verdicts, where)
    if doc["exit_code"]:
        raise Rejected(f"{script}: verl {doc['verl']} ({where}) rejects the job: {doc['counts']['error']} error(s)",
                       lines)
    if len(invocations) != 1:
        raise InputFileError(script, "main_ppo", f"runs verl.trainer.main_ppo {len(invocations)} times",
                             allowed="a script that starts one job (certify each job's script on its own)")
    inv = invocations[0]
    overrides = tuple(o.text for o in inv.overrides)
    model = value_of(overrides, MODEL_KEY)
    config, source = None, None
    if model_config or not (model and (Path(model) / "config.json").is_file()):
        config, source = stand_in_config(script, model, model_config)
    data = files_of(value_of(overrides, "data.train_files"))
    job = Job(script=str(Path(script).resolve()), line=inv.line, overrides=overrides, model_path=model,
              config_name=inv.config_name, config_path=inv.config_path,
              model_config=tuple(sorted(config.items())) if config is not None else None, model_source=source,
              data_files=tuple(data), builtin_data=not data or not all(os.path.isfile(p) for p in data),
              env=tuple(inv.env.items()))
    return job, lines


class Rejected(UsageError):
    """verl rejects the script: exit 2, after verl-check's own lines."""

    def __init__(self, message: str, lines: list[str]):
        super().__init__(message, hint="nothing was started; the lines above are `rocmkit verl-check`'s")
        self.lines = lines


def stand_in_config(script: str, model: str | None, model_config: str | None) -> tuple[dict, str]:
    """The architecture of a model that is not on this host: --model-config's file, else the table entry whose
    name is the script's model path's last part (Qwen2.5-7B-Instruct for ~/models/Qwen2.5-7B-Instruct)."""
    from ..tune import models

    if model_config:
        try:
            config = json.loads(Path(model_config).read_text())
        except OSError as exc:
            raise UsageError(f"--model-config {model_config}: cannot read ({exc.strerror})") from None
        except ValueError as exc:
            raise InputFileError(model_config, "", f"not JSON ({exc})", allowed="a Hugging Face config.json") from None
        if not isinstance(config, dict):
            raise InputFileError(model_config, "", "not a JSON object", allowed="a Hugging Face config.json")
        models.from_config(config, model_config, model_config)  # names a missing or wrong field
        if not config.get("architectures"):
            raise InputFileError(model_config, "architectures", "missing",
                                 allowed='the class to build, e.g. ["Qwen2ForCausalLM"]')
        return config, model_config
    name = Path(model or "").name
    wanted = name.lower()
    for key, entry in models.table().items():
        if wanted and wanted in (key.lower(), key.split("/")[-1].lower()):
            config = {k: v for k, v in entry.items() if k not in TABLE_ONLY}
            return {**config, "architectures": [entry["architecture"]]}, f"rocmkit's model table ({key})"
    raise InputFileError(script, MODEL_KEY, f"{model or 'not set'}: no such model folder on this host, and "
                         f"{name or 'its name'} is not in rocmkit's model table",
                         allowed="a local model folder, or --model-config FILE (the model's config.json) to "
                                 "train a random-weight model of its shape; `rocmkit tune --list-models` lists the table")


def stand_ins(job: Job) -> list[str]:
    """What the run used in place of the script's own, said plainly (the certificate's job.stand_ins)."""
    out = []
    if job.config is not None:
        out.append(f"model weights: random, in the shape of {job.model_source} (the script's {MODEL_KEY}="
                   f"{job.model_path} is not on this host); tokenizer: rocmkit's built-in one")
    if job.builtin_data:
        prompt, response = job.value("data.max_prompt_length"), job.value("data.max_response_length")
        out.append(f"data: the built-in digits task and its reward (the script's data.train_files "
                   f"{', '.join(job.data_files) or 'not set'} not on this host), prompts padded to "
                   f"data.max_prompt_length={prompt or 'verl default'}, responses up to "
                   f"data.max_response_length={response or 'verl default'} tokens")
    return out


def train_rows(job: Job, steps: int) -> int:
    """Rows of the built-in task the job's steps read: a batch each, and a spare one."""
    try:
        batch = int(job.value("data.train_batch_size") or 0)
    except ValueError:
        batch = 0
    return max(64, (max(1, batch) * (steps + 1)))


def smoke(job: Job, *, steps: int, gpus: int, run_dir: str, ray_temp_dir: str, model_dir: str, train_file: str,
          val_file: str, reward_file: str) -> list[str]:
    """certify's overrides on top of the job's: the smoke budget, and the stand-ins' paths."""
    out = [f"trainer.total_training_steps={steps}", "trainer.test_freq=-1", "trainer.val_before_train=False",
           "trainer.save_freq=-1", f"trainer.default_local_dir={run_dir}/checkpoints",
           "trainer.resume_mode=disable", "trainer.logger=['console','file']",
           f"trainer.n_gpus_per_node={max(1, gpus)}", "trainer.nnodes=1",
           "+ray_kwargs.ray_init.include_dashboard=False", f"+ray_kwargs.ray_init._temp_dir={ray_temp_dir}"]
    if job.config is not None:
        out.append(f"{MODEL_KEY}={model_dir}")
    if job.builtin_data:
        out += [f"data.train_files={train_file}", f"data.val_files={val_file}", "data.prompt_key=prompt",
                f"reward.custom_reward_function.path={reward_file}", "reward.custom_reward_function.name=compute_score"]
    return out


def budget(steps: int) -> dict:
    """The smoke budget as the certificate shows it."""
    return {"steps": steps, "validation": "off", "checkpoints": "none (trainer.save_freq=-1; the run folder's "
            "checkpoints/ if verl writes any)", "loggers": "console and file"}


def merged(user: tuple[str, ...], ours: list[str]) -> list[str]:
    """The user's overrides without the keys certify sets, then certify's: one value a key, so Hydra's `+key`
    (append) never meets a key the other list already added."""
    def key(o: str) -> str:
        return o.lstrip("+~").partition("=")[0]

    taken = {key(o) for o in ours}
    return [o for o in user if key(o) not in taken] + ours


def environment(job: Job, own: dict[str, tuple[str, str]]) -> tuple[dict[str, str], list[dict]]:
    """The run's environment: the script's exports under certify's own variables (`own`: name -> (value, why)); and
    each export the run holds otherwise (its name, the script's value, the run's, why). verl's module list keeps the
    script's modules, then certify's."""
    env = dict(job.env)
    changed = []
    for name, (value, why) in own.items():
        script = env.get(name)
        if script is not None and name == MODULES:
            mine = [m for m in script.split(",") if m]
            value = ",".join(mine + [m for m in value.split(",") if m and m not in mine])
        env[name] = value
        if script is not None and script != value:
            changed.append({"name": name, "script": script, "run": value, "why": why})
    return env, changed


def record(job: Job, steps: int, own: dict[str, tuple[str, str]]) -> dict:
    """The certificate's job: `env` is what the run got of the script's exports as the script set them,
    `env_overridden` what it got otherwise (`own`: certify's variables, as environment() takes them)."""
    changed = environment(job, own)[1]
    taken = {c["name"] for c in changed}
    return {"script": job.script, "line": job.line, "overrides": list(job.overrides), "budget": budget(steps),
            "model": job.model_path if job.config is None else None, "stand_ins": stand_ins(job),
            "env": {k: v for k, v in job.env if k not in taken}, "env_overridden": changed,
            # the stand-in's shape, which tune's prediction beside the measured peak is made for
            **({"model_path": job.model_path, "model_config": job.config, "model_source": job.model_source}
               if job.config is not None else {})}


def lines(job: dict) -> list[str]:
    """certificate.md's lines about the job (the certificate's engine_run.job)."""
    b = job["budget"]
    return ([f"- job: {job['script']}:{job['line']}, {len(job['overrides'])} overrides; smoke budget: {b['steps']} "
             f"steps, validation {b['validation']}, loggers {b['loggers']}, checkpoints {b['checkpoints']}"]
            + [f"- stand-in: {x}" for x in job["stand_ins"]]
            + ([f"- the script's exports: {', '.join(f'{k}={v}' for k, v in job['env'].items())}"]
               if job.get("env") else [])
            + [f"- the script's {c['name']}={c['script']}: the run has {c['run']} ({c['why']})"
               for c in job.get("env_overridden", [])])
