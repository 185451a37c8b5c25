"""verl's own example launch scripts judged by `rocmkit verl-check` and by verl 0.9.1 itself, and compared.

    mkdir -p /tmp/verl-ex && git -C VERL_REPO archive HEAD examples | tar -x -C /tmp/verl-ex
    PYTHONPATH=$PWD python benchmarks/verl_examples.py /tmp/verl-ex [--verl-python PY] [--json FILE]
    python benchmarks/verl_examples.py --table-from FILE   # the table and lists again, from a saved --json

Each `*.sh` under the folder (the folder is the working directory, as verl's examples are run from a verl
checkout: `bash examples/grpo_trainer/run_x.sh`) is read as `rocmkit verl-check` reads it: run by bash in
the sandbox, the main_ppo commands recorded. Scripts that fail to read are counted by cause (bash's own
message with the script's words taken out, or the deadline). Every main_ppo command read is then judged twice,
each in one process of --verl-python for all commands:
- rocmkit: verl-check's findings for it (recipe_check.on_host and findings, what `verl-check` prints);
  accepted = no error;
- verl: benchmarks/verl_oracle.py's verdict (Hydra compose, validate_config, the workers' conversions, the
  rollout placement, the first step's batch split by verl's own functions).
The table: of the commands verl accepts, how many rocmkit accepts and rejects (false rejects); of those verl
rejects, how many rocmkit rejects naming the same key (a key named in verl's reason is the key of, or named in,
one of rocmkit's errors; keys compared by their last part), rejects with another reason, or accepts (false
accepts). Then each disagreement, grouped by cause.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's rocmkit

from rocmkit.errors import RocmkitError  # noqa: E402
from rocmkit.verl import launch_script, recipe_check  # noqa: E402

sys.path.insert(0, str(REPO / "benchmarks"))
import verl_oracle  # noqa: E402 - its marker only; verl itself is imported in the verl Python, not here


def cause(message: str) -> str:
    """A failure's cause, grouped: bash's message without the script's own words."""
    if "stopped after" in message:
        return "stopped at the deadline"
    if "runs no verl.trainer.main_ppo" in message:
        return "runs another entry point" if "(it ran" in message else "runs no python at all"
    m = re.search(r"line \d+: (.*)$", message)
    if not m:
        status = re.search(r"exited with status (\d+)", message)
        return f"the script's own exit {status.group(1)} (a usage message)" if status else message[:80]
    said = m.group(1)
    said = re.sub(r"^[^:]*: (unbound variable|command not found|No such file or directory)$", r"\1", said)
    said = re.sub(r"^(cd|source|\.): [^:]*: ", r"\1: ", said)
    return said[:80]


def read_all(folder: Path, timeout: float, only: list[str] | None = None,
             limit: int | None = None) -> tuple[list[dict], list]:
    rows, invocations = [], []
    scripts = [s for s in sorted(folder.rglob("*.sh"))
               if not only or any(o in str(s.relative_to(folder)) for o in only)]
    for script in scripts[:limit]:
        rel = str(script.relative_to(folder))
        started = time.monotonic()
        try:
            found = launch_script.read(rel, script.read_text(errors="replace"),
                                       launch_script.ReadOptions(cwd=str(folder), timeout=timeout))
            row = {"file": rel, "read": "main_ppo" if found else "nothing", "invocations": len(found),
                   "overrides": sum(len(i.overrides) for i in found)}
            invocations += [(rel, inv) for inv in found]
        except RocmkitError as exc:
            row = {"file": rel, "read": "failed", "cause": cause(exc.message), "message": exc.message}
        row["seconds"] = round(time.monotonic() - started, 3)
        rows.append(row)
    return rows, invocations


def check_all(invocations: list, python: str, timeout: float) -> list[dict]:
    """Per main_ppo command: verl-check's verdict (the document's errors, accepted = none)."""
    verdicts, _ = recipe_check.on_host([inv for _, inv in invocations], python, timeout)
    out = []
    for (rel, inv), verdict in zip(invocations, verdicts):
        errors = [f for f in recipe_check.findings(inv, verdict) if f.severity == "error"]
        out.append({"file": rel, "line": inv.line, "rocmkit_accepts": not errors,
                    "rocmkit_errors": [{"line": e.line, "key": e.key, "message": e.message[:300]} for e in errors]})
    return out


def oracle_all(invocations: list, python: str, folder: Path, timeout: float) -> list[tuple[bool, str]]:
    """verl's own verdict on each command (benchmarks/verl_oracle.py), all of them in one process of the verl
    Python: a JSON list of main_ppo's arguments in, one marked JSON line of (accepted, reason) out."""
    argvs = []
    for _, inv in invocations:
        at = launch_script.entry_at(inv.argv[1:])
        argvs.append(inv.argv[1:][at + 1:] if at is not None else [])
    with tempfile.TemporaryDirectory(prefix="verl-oracle-") as tmp:
        (Path(tmp) / "argvs.json").write_text(json.dumps(argvs))
        done = subprocess.run([python, str(REPO / "benchmarks" / "verl_oracle.py"), "--batch", f"{tmp}/argvs.json"],
                              cwd=folder, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)})
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(verl_oracle.BATCH_MARK):
            return [tuple(v) for v in json.loads(line[len(verl_oracle.BATCH_MARK):])]
    raise SystemExit(f"verl_oracle gave no verdicts (exit {done.returncode}): {done.stderr[-2000:]}")


DOTTED = re.compile(r"[a-z_]\w*(?:\.\w+)+")  # a whole dotted key, compared as it is
KEYISH = re.compile(r"[A-Za-z_][\w]*(?:\.[\w]+)+|[a-z]+(?:_[a-z0-9]+)+")
NOT_KEYS = {"main_ppo", "validate_config", "omega_conf_to_dataclass", "init_model", "train_mini_batch",
            "prepare_micro_batches", "world_size", "infer_world_size", "verl.trainer.main_ppo"}


def keys_in(text: str) -> set[str]:
    """The config keys a message names, each as its last part (`actor.ppo_micro_batch_size_per_gpu` and a bare
    `ppo_micro_batch_size_per_gpu` are the same key)."""
    found = {k.rsplit(".", 1)[-1] for k in KEYISH.findall(text or "") if k not in NOT_KEYS}
    return {k for k in found if "_" in k} - NOT_KEYS


def same_key(theirs: set[str], ours: set[str]) -> bool:
    """A key in both, or one ending in the other where the shorter is specific (verl's prepare_micro_batches says
    `micro_batch_size_per_gpu` of the actor's `ppo_micro_batch_size_per_gpu`)."""
    return bool(theirs & ours) or any(a.endswith("_" + b) or b.endswith("_" + a)
                                      for a in theirs for b in ours if min(a.count("_"), b.count("_")) >= 2)


# verl's reasons that name no key, and rocmkit's error of the same cause
SAME_CAUSE = ((re.compile(r"LexerNoViableAlt|override_grammar"), re.compile(r"is not a Hydra override")),)
# verl's reasons that are this Python's environment, not a verdict on the configuration
ENVIRONMENT = re.compile(r"vllm version None not supported|couldn't connect to 'https://huggingface.co'|"
                         r"We couldn't connect|No module named '(vllm|sglang)")


def classify(row: dict) -> str:
    if not row["verl_accepts"] and ENVIRONMENT.search(row["verl_reason"]):
        return "environment"
    if row["verl_accepts"]:
        return "both accept" if row["rocmkit_accepts"] else "false reject"
    if row["rocmkit_accepts"]:
        return "false accept"
    ours, dotted = set(), set()
    for e in row["rocmkit_errors"]:
        ours |= keys_in(e["message"]) | ({e["key"].rsplit(".", 1)[-1]} if e["key"] else set())
        dotted |= set(DOTTED.findall(e["message"])) | {e["key"]}
    if same_key(keys_in(row["verl_reason"]), ours) or set(DOTTED.findall(row["verl_reason"])) & dotted:
        return "both reject, same key"
    if any(v.search(row["verl_reason"]) and any(r.search(e["message"]) for e in row["rocmkit_errors"])
           for v, r in SAME_CAUSE):
        return "both reject, same key"
    return "both reject, another reason"


def grouped(text: str) -> str:
    """A message grouped with its kind: values, numbers and paths taken out."""
    said = text.splitlines()[0] if text else ""
    said = re.sub(r"^verl [\d.]+: ", "", said)
    said = re.sub(r"^[\w.+~]+=\S*: ", "KEY=VALUE: ", said)
    said = re.sub(r"'[^']*'", "'X'", said)
    return re.sub(r"\d+", "N", said)[:110]


def _by_cause(rows: list[dict]) -> dict[str, list[dict]]:
    """A disagreement's cause: a false accept's is verl's reason, the others' rocmkit's first error."""
    out: dict[str, list[dict]] = {}
    for r in rows:
        first = r["rocmkit_errors"][0]["message"] if r["rocmkit_errors"] else ""
        r["cause"] = grouped(r["verl_reason"] if r["class"] == "false accept" else first)
        out.setdefault(r["cause"], []).append(r)
    return out


def ignored_only(row: dict) -> bool:
    """A false reject whose every error is a key verl 0.9 silently ignores (`reward_model.reward_manager`): verl
    starts, without the setting the script asked for; verl-check calls that an error on purpose."""
    errors = row["rocmkit_errors"]
    return row["class"] == "false reject" and all(" ignored in verl 0.9" in e["message"] for e in errors)


def table(rows: list[dict], scripts: list[dict]) -> list[str]:
    c = collections.Counter(r["class"] for r in rows)
    accepts = c["both accept"] + c["false reject"]
    rejects = len(rows) - accepts
    by = collections.Counter(r["read"] for r in scripts)
    env = [r for r in rows if r["class"] == "environment"]
    rejects -= len(env)
    return [f"scripts read: {len(scripts)} ({by['main_ppo']} run main_ppo, {by['failed']} fail to read, "
            f"{by['nothing']} hold none); main_ppo invocations: {len(rows)}",
            f"verl accepts {accepts}: rocmkit accepts {c['both accept']}, rejects {c['false reject']} (false rejects; "
            f"{sum(map(ignored_only, rows))} of them only for a key verl 0.9 starts with but silently ignores, an "
            "error by design)",
            f"verl rejects {rejects}: rocmkit rejects naming the same key {c['both reject, same key']}, "
            f"rejects with another reason {c['both reject, another reason']}, accepts {c['false accept']} "
            "(false accepts)",
            f"verl could not judge {len(env)} in this Python (its environment: {_env_said(env)}); rocmkit "
            f"rejects {sum(not r['rocmkit_accepts'] for r in env)} of them"]


def _env_said(rows: list[dict]) -> str:
    said = collections.Counter(ENVIRONMENT.search(r["verl_reason"]).group(0) for r in rows)
    return ", ".join(f"{n} {k}" for k, n in said.most_common()) or "none"


def report(commands: list[dict], scripts: list[dict]) -> None:
    print("\n".join(table(commands, scripts)))
    for cls in ("false reject", "false accept", "both reject, another reason", "environment"):
        bad = [r for r in commands if r["class"] == cls]
        if bad:
            print(f"\n{cls} ({len(bad)}), by cause: script:line | verl's reason | rocmkit's first error")
        for why, group in sorted(_by_cause(bad).items(), key=lambda kv: -len(kv[1])):
            print(f"  [{len(group)}] {why}")
            for r in group:
                first = r["rocmkit_errors"][0] if r["rocmkit_errors"] else None
                ours = f"{first['line']}: {first['message']}"[:160] if first else "accepted"
                print(f"      {r['file']}:{r['line']} | {(r['verl_reason'] or 'accepted')[:160]} | {ours}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, nargs="?")
    ap.add_argument("--verl-python", default="/work/ci-work/venv/bin/python",
                    help="a Python with verl 0.9.1 and Hydra: verl-check's checks and verl's own verdict run in it")
    ap.add_argument("--no-check", action="store_true", help="read only")
    ap.add_argument("--only", action="append", help="only the scripts whose path holds this text (repeatable: any)")
    ap.add_argument("--limit", type=int, help="only the first N scripts")
    ap.add_argument("--script-timeout", type=float, default=launch_script.DEFAULT_TIMEOUT)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", type=Path, help="every script's and every command's row")
    ap.add_argument("--table-from", type=Path, help="print the table and lists of a saved --json; run nothing")
    ap.add_argument("--merge", type=Path, action="append",
                    help="with --table-from: a later --json whose commands replace the same ones (a subset re-run)")
    args = ap.parse_args()
    if args.table_from:
        saved = json.loads(args.table_from.read_text())
        commands = saved["commands"]
        for extra in args.merge or []:  # a later run's rows replace the same commands' (file and line)
            again = {(r["file"], r["line"]): r for r in json.loads(extra.read_text())["commands"]}
            commands = [again.get((r["file"], r["line"]), r) for r in commands]
        for r in commands:
            r["class"] = classify(r)
        report(commands, saved["scripts"])
        return
    if args.folder is None:
        ap.error("a folder of launch scripts is needed")
    folder = args.folder.resolve()
    started = time.monotonic()
    rows, invocations = read_all(folder, args.script_timeout, args.only, args.limit)
    read_s = time.monotonic() - started
    by = collections.Counter(r["read"] for r in rows)
    print(f"{len(rows)} scripts read in {read_s:.1f} s: {by['main_ppo']} run main_ppo "
          f"({len(invocations)} commands), {by['nothing']} hold none, {by['failed']} fail to read")
    for c, n in collections.Counter(r["cause"] for r in rows if r["read"] == "failed").most_common():
        print(f"  {n:4d}  {c}")
    commands: list[dict] = []
    if invocations and not args.no_check:
        started = time.monotonic()
        commands = check_all(invocations, args.verl_python, args.timeout)
        check_s = time.monotonic() - started
        started = time.monotonic()
        for row, (accepted, why) in zip(commands, oracle_all(invocations, args.verl_python, folder, args.timeout)):
            row.update(verl_accepts=accepted, verl_reason=why)
            row["class"] = classify(row)
        print(f"verl-check {check_s:.0f} s, verl's own verdict {time.monotonic() - started:.0f} s")
        report(commands, rows)
    if args.json:
        args.json.write_text(json.dumps({"scripts": rows, "commands": commands, "read_seconds": read_s,
                                         "table": table(commands, rows) if commands else []}, indent=1) + "\n")

if __name__ == "__main__":
    main()
