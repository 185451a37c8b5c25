"""verl's own example launch scripts through `rocmkit verl-check`'s reader and checker.

    git -C VERL_REPO archive HEAD examples | tar -x -C /tmp/verl-ex
    python benchmarks/verl_examples.py /tmp/verl-ex [--verl-python PY] [--no-check] [--json FILE]

Each `*.sh` under the folder (the folder is the working directory, as verl's examples are run from a verl
checkout: `bash examples/grpo_trainer/run_x.sh`) is read as `rocmkit verl-check` reads it: run by bash in
the sandbox, the main_ppo commands recorded. Reported: how many scripts yield a main_ppo invocation, how
many run something else (another trainer, SFT), and how many fail to read, by cause (bash's own message
with the script's words taken out, or the deadline). Then every invocation read is checked against the
verl of --verl-python (one process for all, the same functions `verl-check` calls: recipe_check.on_host
and findings), and the scripts counted as accepted (no error) or rejected.

`ORACLE` is where verl's own verdict goes (a function from an Invocation's argv to {"accepts": bool,
"reason": str}); while it is None the agreement columns are not measured.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's rocmkit

from rocmkit.errors import RocmkitError  # noqa: E402
from rocmkit.verl import launch_script, recipe_check  # noqa: E402

ORACLE = None  # argv (list[str], the recorded command) -> {"accepts": bool, "reason": str}; h-rules adds verl's


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


def reason(first: str) -> str:
    """A rejection's first error, grouped: numbers and the script's own values taken out."""
    said = re.sub(r"^\d+: ", "", first)
    said = re.sub(r"^[\w.+~]+=\S*: ", "KEY=VALUE: ", said)
    said = re.sub(r"--config-name=\S+:", "--config-name=NAME:", said)
    return re.sub(r"\d+", "N", said)[:100]


def read_all(folder: Path, timeout: float) -> tuple[list[dict], list]:
    rows, invocations = [], []
    for script in sorted(folder.rglob("*.sh")):
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


def check_all(invocations: list, python: str, timeout: float) -> dict[str, dict]:
    """Per file: verl-check's verdict (errors and their first message) over all of the file's commands."""
    verdicts, _ = recipe_check.on_host([inv for _, inv in invocations], python, timeout)
    out: dict[str, dict] = {}
    for (rel, inv), verdict in zip(invocations, verdicts):
        errors = [f for f in recipe_check.findings(inv, verdict) if f.severity == "error"]
        row = out.setdefault(rel, {"errors": 0, "first": None})
        row["errors"] += len(errors)
        row["first"] = row["first"] or (f"{errors[0].line}: {errors[0].message}"[:160] if errors else None)
        if ORACLE is not None:
            row.setdefault("oracle", []).append(ORACLE(inv.argv))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--verl-python", default="/work/ci-work/venv/bin/python")
    ap.add_argument("--no-check", action="store_true", help="read only")
    ap.add_argument("--script-timeout", type=float, default=launch_script.DEFAULT_TIMEOUT)
    ap.add_argument("--timeout", type=float, default=1800)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    started = time.monotonic()
    rows, invocations = read_all(args.folder.resolve(), args.script_timeout)
    read_s = time.monotonic() - started
    by = collections.Counter(r["read"] for r in rows)
    print(f"{len(rows)} scripts read in {read_s:.1f} s: {by['main_ppo']} run main_ppo "
          f"({len(invocations)} commands), {by['nothing']} hold none, {by['failed']} fail to read")
    for c, n in collections.Counter(r["cause"] for r in rows if r["read"] == "failed").most_common():
        print(f"  {n:4d}  {c}")
    if invocations and not args.no_check:
        started = time.monotonic()
        checked = check_all(invocations, args.verl_python, args.timeout)
        for r in rows:
            if r["file"] in checked:
                r.update(checked[r["file"]])
        rejected = [r for r in rows if r.get("errors")]
        print(f"verl-check ({time.monotonic() - started:.0f} s): {len(checked) - len(rejected)} accepted, "
              f"{len(rejected)} rejected")
        for c, n in collections.Counter(reason(r["first"]) for r in rejected).most_common(20):
            print(f"  {n:4d}  {c}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "read_seconds": read_s}, indent=1) + "\n")


if __name__ == "__main__":
    main()
