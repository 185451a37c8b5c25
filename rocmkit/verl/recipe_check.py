"""`rocmkit verl-check`: a user's launch scripts or overrides files checked against the verl of the image
(or of a Python on this host) before any job starts. The files are read here (launch_script), the overrides
composed and validated by that verl's own config (verl_check.py, run as a file in the target, so the target
needs verl but not rocmkit), and each finding tied to FILE:LINE, with what verl's history says to use instead
(verl_history)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..runtime import proc
from ..errors import EnvironmentMissing, Failed, InputFileError, UsageError
from . import launch_script
from . import config_check as verl_check
from . import history as verl_history
from .launch_script import Invocation

SCHEMA = "rocmkit.verl-check/v1"
SEVERITIES = ("error", "warning", "note")


@dataclass
class RecipeProblem:
    """One problem `rocmkit verl-check` reports in a recipe (a line of a launch script or a config file), as
    verl's own config check sees it; not the doctor's Finding about a host."""
    severity: str
    file: str
    line: int | None
    message: str
    key: str | None = None
    instead: str | None = None

    def where(self) -> str:
        return f"{self.file}:{self.line}" if self.line else self.file

    def to_json(self) -> dict:
        return {"severity": self.severity, "file": self.file, "line": self.line, "key": self.key,
                "message": self.message, "instead": self.instead}


# ---- reading ----

def read_files(paths: list[str], options: launch_script.ReadOptions | None = None) -> list[Invocation]:
    """Each file's main_ppo commands: a script run by bash in the sandbox, or a plain overrides file."""
    out = []
    for path in paths:
        try:
            text = Path(path).read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise InputFileError(path, "", f"cannot be read ({exc})") from None
        found = launch_script.read(path, text, options)
        if not found:
            raise InputFileError(path, "", f"runs no {launch_script.ENTRY_MODULE} and holds no Hydra overrides",
                                 allowed="a launch script that runs python3 -m verl.trainer.main_ppo, or one "
                                         "override (key=value) a line")
        out += found
    return out


def request(inv: Invocation) -> dict:
    """What the target's verl is asked about one main_ppo command."""
    return {"overrides": [o.text for o in inv.overrides], "config_name": inv.config_name, "config_path": inv.config_path}


# ---- judging (pure) ----

def findings(inv: Invocation, verdict: dict) -> list[RecipeProblem]:
    """The parser's problems, what verl rejected, and what its history says, for one command."""
    out = [RecipeProblem(sev, inv.file, line, msg) for sev, line, msg in inv.problems]
    by_key = {o.key: o for o in inv.overrides}
    verl = f"verl {verdict.get('verl')}"
    cfg = verdict.get("config") or {}
    if inv.config_name in verl_history.CONFIG_NAMES:
        use, source = verl_history.CONFIG_NAMES[inv.config_name]
        said = cfg.get("header") or ("is deprecated" if cfg.get("exists") else "does not exist")
        out.append(RecipeProblem("warning" if cfg.get("exists", True) else "error", inv.file,
                           inv.config_name_line or inv.line, f"--config-name={inv.config_name}: {verl}: {said}",
                           key=inv.config_name, instead=f"use {use}; {source}"))
    elif cfg.get("header"):
        out.append(RecipeProblem("warning", inv.file, inv.config_name_line or inv.line,
                           f"--config-name={inv.config_name}: {verl}: {cfg['header']}", key=inv.config_name))
    elif cfg and not cfg.get("exists"):
        out.append(RecipeProblem("error", inv.file, inv.config_name_line or inv.line,
                           f"--config-name={inv.config_name}: {verl} has no such config",
                           instead="one of: " + ", ".join(cfg.get("names", []))))
    if inv.config_path and cfg.get("exists") and not cfg.get("path"):  # a verl-check that did not follow it
        out.append(RecipeProblem("note", inv.file, inv.config_name_line or inv.line,
                           f"--config-path={inv.config_path}: checked against {verl}'s own {inv.config_name}"))
    rejected = {r["index"] for r in verdict.get("rejected", [])}
    for r in verdict.get("rejected", []):
        o = inv.overrides[r["index"]]
        change = verl_history.lookup(o.key)
        kind = change.kind if change else "unknown"
        first = r["error"].splitlines()[0]
        guess = f"did you mean {r['nearest']}?" if r.get("nearest") else None
        if o.prefix == "+" and "An item is already at" in first:  # Hydra's append: the key is verl's own already
            kind, guess = "existing", f"{o.text[1:]} (without the +: verl's config has this key)"
        out.append(RecipeProblem("error", inv.file, o.line, f"{o.text}: {kind} key: {verl}: {first}", key=o.key,
                           instead=verl_history.instead(change) if change else guess))
    for i, o in enumerate(inv.overrides):  # accepted, but verl's history says it is deprecated or ignored
        change = verl_history.lookup(o.key)
        if i not in rejected and change and change.kind in ("deprecated", "ignored"):
            out.append(RecipeProblem("error" if change.kind == "ignored" else "warning", inv.file, o.line,
                               f"{o.text}: {change.kind} in {change.since}", key=o.key,
                               instead=verl_history.instead(change)))
    said = set()
    for p in verdict.get("problems", []):  # verl's rules and its own exceptions, each on its key's line
        key = next((k for k in p["keys"] if k in by_key), p["keys"][0] if p["keys"] else None)
        if p["text"] in said:
            continue
        said.add(p["text"])
        out.append(RecipeProblem(p["severity"], inv.file, by_key[key].line if key in by_key else inv.line,
                                 f"{verl}: {p['text']}", key=key, instead=p.get("fix")))
    for e in verdict.get("errors", []):  # the errors no rule finding already said
        if e in said:
            continue
        if "ignored by verl 0.9" in e and any(f.key and f.key.startswith("custom_reward_function") for f in out):
            continue  # said above, on its line
        key = e.partition("=")[0]  # an error about one override (rocmkit's GPU split rules) goes on its line
        out.append(RecipeProblem("error", inv.file, by_key[key].line if key in by_key else inv.line, f"{verl}: {e}",
                                 key=key if key in by_key else None))
    return sorted(out, key=lambda f: (f.line or 0, SEVERITIES.index(f.severity)))


def document(invocations: list[Invocation], verdicts: list[dict], where: str) -> dict:
    found = [f for inv, v in zip(invocations, verdicts) for f in findings(inv, v)]
    counts = {s: sum(f.severity == s for f in found) for s in SEVERITIES}
    return {"schema": SCHEMA, "target": where, "verl": next((v.get("verl") for v in verdicts), None),
            "commands": [{"file": inv.file, "line": inv.line, "config_name": inv.config_name,
                          "overrides": [o.to_json() for o in inv.overrides], "env": inv.env} for inv in invocations],
            "findings": [f.to_json() for f in found], "counts": counts, "exit_code": 1 if counts["error"] else 0}


def text_lines(invocations, verdicts) -> list[str]:
    """Each command's header and the variables the script exported to it, then its own findings, each said once (a
    file's findings no longer wait for every header, and a finding two checks make is printed once)."""
    out: list[str] = []
    said: set[tuple] = set()
    for inv, verdict in zip(invocations, verdicts):
        out.append(f"{inv.file}:{inv.line or ''}: main_ppo --config-name={inv.config_name}, "
                   f"{len(inv.overrides)} overrides")
        if inv.env:
            out.append("    the script exports: " + ", ".join(f"{k}={shlex.quote(v)}" for k, v in inv.env.items()))
        for f in findings(inv, verdict):
            seen = (f.file, f.line, f.severity, f.message)
            if seen in said:
                continue
            said.add(seen)
            out.append(f"{f.file}:{f.line or ''}: {f.severity}: {f.message}")
            if f.instead:
                out.append(f"    instead: {f.instead}")
    return out


# ---- the edge: verl_check.py in the target ----

def _parse(result: proc.Result, where: str) -> list[dict]:
    for line in reversed(result.stdout or []):
        if line.startswith(verl_check.RECIPE_MARK):
            return json.loads(line[len(verl_check.RECIPE_MARK):])
    said = " | ".join(line for line in result.tail[-6:] if line.strip())[:600]
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", said)
    if missing:  # a Python without verl or Hydra: the environment is missing (exit 3), not a failed check
        raise EnvironmentMissing(f"{where} has no {missing.group(1).split('.')[0]} to read verl's config with",
                                 hint="give a Python with verl installed (--verl-python), or an image with it "
                                      "(--image); `pip install 'rocmkit[verl]'` in a venv of its own brings both")
    raise Failed(f"verl's config could not be read in {where} (exit {result.returncode}): {said}",
                 hint="the target needs Python with verl (and Hydra) installed")


def _inputs(tmp: Path, invocations: list[Invocation]) -> None:
    shutil.copyfile(verl_check.__file__, tmp / "verl_check.py")
    for module in verl_check.RULE_MODULES:  # imported beside it by name
        shutil.copyfile(module.__file__, tmp / Path(module.__file__).name)
    (tmp / "recipes.json").write_text(json.dumps([request(inv) for inv in invocations]))
    tmp.chmod(0o755)
    for p in tmp.iterdir():
        p.chmod(0o644)


def on_host(invocations: list[Invocation], python: str | None, timeout: float) -> tuple[list[dict], str]:
    import importlib.util

    if python is None:
        if importlib.util.find_spec("verl") is None:
            raise EnvironmentMissing("verl is not installed in this Python", hint="--verl-python names a Python "
                                     "that has it, or --image an image")
        python = sys.executable
    elif not Path(python).exists() and shutil.which(python) is None:
        raise UsageError(f"--verl-python {python}: no such file")
    where = f"{python} on this host"
    with tempfile.TemporaryDirectory(prefix="rocmkit-verl-check-") as tmp:
        _inputs(Path(tmp), invocations)
        result = proc.run([python, f"{tmp}/verl_check.py", "--recipe", f"{tmp}/recipes.json"], cwd=tmp,
                          timeout=timeout, keep_stdout=True, what="verl's config check")
    if result.timed_out:
        raise Failed(f"verl's config check did not finish within {timeout:g} s")
    return _parse(result, where), where


def config_folders(invocations: list[Invocation]) -> list[str]:
    """The scripts' absolute --config-path folders that are on this host: an image sees them at the same paths, as
    a job whose container mounts the user's workspace where it is on the host (`docker run -v $PWD:$PWD`). A
    relative --config-path is main_ppo's own folder's business (config_check._main_ppo_path), and a folder this host
    lacks is left to the image."""
    found = {os.path.normpath(inv.config_path) for inv in invocations
             if inv.config_path and os.path.isabs(inv.config_path) and os.path.isdir(inv.config_path)}
    return sorted(f for f in found if not any(f.startswith(g.rstrip("/") + "/") for g in found))  # outermost


def in_image(invocations: list[Invocation], image: str, timeout: float) -> tuple[list[dict], str]:
    from ..runtime.container import run_container
    from ..runtime.docker_client import run_cli
    from ..runtime.docker_engine import Engine

    engine = Engine.connect()
    info = engine.require_image(image)
    folders = config_folders(invocations)
    where = f"image {image} ({info.id[:19]})" + (f", with {', '.join(folders)} of this host" if folders else "")
    with tempfile.TemporaryDirectory(prefix="rocmkit-verl-check-") as tmp:
        _inputs(Path(tmp), invocations)
        inside = "/rocmkit-verl-check"
        result, _ = run_container(info.id, ["python3", f"{inside}/verl_check.py", "--recipe", f"{inside}/recipes.json"],
                                  what=f"verl's config check in {image}", timeout=timeout, docker=run_cli(),
                                  keep_stdout=True, mounts=[(tmp, inside, "ro")] + [(f, f, "ro") for f in folders],
                                  workdir="/tmp", env={"HF_HUB_OFFLINE": "1"}, gpus=False, skip_missing=True,
                                  host_code=False)  # a copied script that imports no rocmkit
    if result.timed_out:
        raise Failed(f"verl's config check in {image} did not finish within {timeout:g} s")
    return _parse(result, where), where
