"""`rocmkit slurm`'s check of the verl overrides it writes into a job, by the checker of `rocmkit verl-check`
(rocmkit.verl.recipe_check): the command line the head node will run, `main_ppo trainer.nnodes=N
trainer.n_gpus_per_node=G` then the plan's overrides (--tune) then the user's (after `--`), composed and validated
by verl's own config and rocmkit's rules for what verl asserts only once the workers start (the rollout and
Megatron GPU split). A job verl would reject is refused before it waits in the queue for a node.

Which verl: the one the job runs. --verl-python names a Python that has it; else the job's Docker image (run
through this host's Docker engine, where the image is present); else, for Apptainer and the nodes' own software,
this Python when it has verl. Where none is reachable, the job is refused with exit 3 (unchecked is a choice the
user makes with --no-verl-check, not one made for them).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import EnvironmentMissing, Failed, UsageError
from ..verl import recipe_check
from ..verl.launch_script import OVERRIDE_RE, Invocation, Override

TIMEOUT = 600  # seconds for verl's check: an import of verl and one compose on a busy login node
NO_VERL_HINT = ("--verl-python PY checks against the verl of that Python (the job's verl version); "
                "--no-verl-check writes the job unchecked")


@dataclass
class Origin:
    """Where a group of overrides of the job comes from, as the user gave it."""
    label: str  # "--nodes and --gpus-per-node", "--tune plan.json", "the overrides after --"
    overrides: tuple[str, ...]


def invocation(origins: list[Origin]) -> tuple[Invocation, dict[int, tuple[str, str]]]:
    """The job's main_ppo command as verl-check's reader would give it, one "line" an override in the order the
    script passes them; and for each line, (where it came from, the override)."""
    overrides, where = [], {}
    for origin in origins:
        for text in origin.overrides:
            m = OVERRIDE_RE.match(text)
            line = len(overrides) + 1
            overrides.append(Override(text=text, key=m.group(2) if m else text.partition("=")[0], line=line,
                                      prefix=(m.group(1) or "") if m else ""))
            where[line] = (origin.label, text)
    # line 0: a finding about no one override (a mandatory value none sets) is said without an origin
    return Invocation(file="the job's overrides", line=0, overrides=overrides), where


def target(runtime: str, image: str | None, verl_python: str | None) -> tuple[str, str | None]:
    """("python", PY or None for this Python) or ("image", IMAGE): the verl the check runs against."""
    if verl_python:
        return "python", verl_python
    if runtime == "docker" and image:
        return "image", image
    return "python", None


def check(origins: list[Origin], runtime: str, image: str | None, verl_python: str | None,
          timeout: float = TIMEOUT) -> tuple[list[str], str, str | None]:
    """Check the job's overrides; returns (warnings, where it was checked, verl's version). Raises UsageError
    (exit 2) naming each override verl rejects and why; EnvironmentMissing (exit 3) when no verl is reachable."""
    inv, where_from = invocation(origins)
    kind, what = target(runtime, image, verl_python)
    try:
        if kind == "image":
            verdicts, where = _in_local_image(inv, what, timeout)
        else:
            verdicts, where = recipe_check.on_host([inv], what, timeout)
    except EnvironmentMissing as exc:
        raise EnvironmentMissing(f"no verl to check the job's overrides with: {exc.message}", hint=NO_VERL_HINT) from None
    except Failed as exc:  # the target has no usable verl (its Python cannot import it): nothing checked
        raise EnvironmentMissing(f"no verl to check the job's overrides with: {exc.message}", hint=NO_VERL_HINT) from None
    doc = recipe_check.document([inv], verdicts, where)
    said = []
    errors = []
    for f in doc["findings"]:
        origin, text = where_from.get(f["line"] or 0, (None, None))
        message = f["message"].removeprefix(f"verl {doc['verl']}: ")  # the heading names verl's version once
        line = f"{origin}: {message}" if origin and (text or "") in message else \
            (f"{origin}: {text}: {message}" if origin else message)
        if f["instead"]:
            line += f" (instead: {f['instead']})"
        if f["severity"] == "error":
            errors.append(line)
        elif f["severity"] == "warning":
            said.append(line)
    if errors:
        raise UsageError(f"verl {doc['verl']} ({where}) rejects the job's overrides:\n  " + "\n  ".join(errors),
                         hint="change or remove the overrides named (`rocmkit verl-check` says the same of a launch "
                              "script); --no-verl-check writes the job as it is")
    return said, where, doc["verl"]


def _in_local_image(inv: Invocation, image: str, timeout: float) -> tuple[list[dict], str]:
    """verl's check in the job's image, through this host's Docker engine: the login node that renders the job
    may have neither, which is an environment missing (exit 3), not a mistake in the job."""
    from ..runtime.docker_engine import Engine

    engine = Engine.connect(timeout=10)
    if engine.image(image) is None:
        raise EnvironmentMissing(f"the image {image} is not in this host's Docker engine (verl's check runs in the "
                                 "job's image)")
    return recipe_check.in_image([inv], image, timeout)
