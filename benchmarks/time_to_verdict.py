"""Time to a verdict, on the CPU and on GPUs, as markdown tables for the docs: a healthy stack (stopped once learning
is proven, and with --steps 16 for the fixed-steps figure) and each failure a user meets. The cases are
failure_verdicts.py's (one way to make each failure); this script runs them with verl's CPU stack (or, with
--gpus, verl on a GPU host) and writes the table.

    python benchmarks/time_to_verdict.py --python .ci-work/venv-verl-cpu/bin/python \\
        [--cases healthy,fixed,rank,weights,data,stall] [--out DIR] [--docs docs/guides/certification.md]
    python benchmarks/time_to_verdict.py --results tests/data/crash/cpu-time-to-verdict.json --docs ...  # no run
    python benchmarks/time_to_verdict.py --gpus 1 --cases healthy,busy,weights,data --python python3  # a GPU host
    python benchmarks/time_to_verdict.py --gpu-table --results $(cat tests/data/crash/gpu-time-to-verdict.files) \\
        --docs docs/guides/certification.md  # the GPU table from the kept GPU runs

A busy GPU cannot be made on the CPU: its row says so (failure_verdicts.py's busy case measures it on a GPU).
Writes DIR/results.json and DIR/time-to-verdict.md; with --docs, replaces the table between the file's
`<!-- time-to-verdict -->` markers (the GPU table: `<!-- time-to-verdict-gpu -->`). Each figure is one run on a shared machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # failure_verdicts.py, beside this script

import failure_verdicts as fv  # noqa: E402

CASES = "healthy,fixed,rank,weights,data,stall"
WHAT = {
    "healthy": "healthy",
    "fixed": "healthy, `--steps 16`",
    "busy": "busy GPU",
    "rank": "killed worker (SIGKILL after step 1)",
    "vllm": "killed vLLM engine (SIGKILL after step 1)",
    "weights": "bad weights (safetensors cut to half)",
    "data": "wrong data (no prompt column)",
    "stall": f"stall (SIGSTOP after step 1, `--stall-timeout {fv.STALL_TIMEOUT_S}`)",
}
MARK = "<!-- time-to-verdict -->"
GPU_MARK = "<!-- time-to-verdict-gpu -->"
GPU_CASES = ("healthy", "busy", "rank", "vllm", "weights", "data", "stall")  # the GPU table's rows, run or not


def options(row: dict) -> str:
    """A GPU row's own certify options, where they are more than the default command's (the GPU count, the stall
    timeout, the probes); nothing for the CPU's rows."""
    words = row.get("command", "").split()
    if "--gpus" not in words or words[words.index("--gpus") + 1] == "0":
        return ""
    keep, skip = [], {"--host", "--engine", "verl", "--out"}
    for i, w in enumerate(words[words.index("certify") + 1:] if "certify" in words else []):
        if w in skip or (i and words[words.index("certify") + i] == "--out"):
            continue
        keep.append(w)
    return f" (`{' '.join(keep)}`)"


def table(results: list[dict], missing: tuple[str, ...] = ()) -> str:
    """The markdown table of one run of the cases (results.json): seconds from the command to its exit, as a ratio
    of the healthy run's, and from the fault (the kill or the freeze) to the exit."""
    base = next((r["wall_s"] for r in results if r["case"] == "healthy"), None)
    rows = ["| case | exit | verdict | seconds to verdict | ÷ healthy | after the fault | steps | what ended it |",
            "|---|---|---|---|---|---|---|---|"]
    for r in results:
        ratio = f"{r['wall_s'] / base:.2f}" if base else "-"
        after = f"{r['wall_s'] - r['killed_after_s']:.1f}" if r.get("killed_after_s") is not None else "-"
        ended = r.get("ended_by") or r.get("cause") or "-"
        rows.append(f"| {WHAT.get(r['case'], r['case'])}{options(r)} | {r['exit']} | {r['verdict'] or 'refused'} | "
                    f"{r['wall_s']} | {ratio} | {after} | {r.get('steps') if r.get('steps') is not None else '-'} | "
                    f"{ended[:160].replace('|', '/')} |")
    made = {r["case"] for r in results}
    if "busy" not in made:
        rows.append(f"| {WHAT['busy']} | - | - | - | - | - | - | not made on the CPU: it needs a GPU whose memory "
                    "another process holds (`--gpus 1 --cases busy` on a GPU host) |")
    for case in missing:
        rows.append(f"| {WHAT.get(case, case)} | - | - | - | - | - | - | not run here yet |")
    return "\n".join(rows) + "\n"


def into_docs(doc: Path, text: str, mark: str = MARK) -> None:
    """Replace what lies between the two markers with the table."""
    old = doc.read_text()
    pattern = re.compile(re.escape(mark) + r".*?" + re.escape(mark), re.S)
    if len(pattern.findall(old)) != 1:
        raise SystemExit(f"{doc}: needs exactly one pair of {mark} markers")
    doc.write_text(pattern.sub(lambda _: f"{mark}\n{text}{mark}", old))


def kept(files: list[Path]) -> list[dict]:
    """The rows of kept results.json files, in the order of CASES (a GPU table gathers several machine runs); a
    case that several files have is taken from the first."""
    rows: list[dict] = []
    for f in files:
        rows += [r for r in json.loads(f.read_text()) if r["case"] not in {x["case"] for x in rows}]
    order = ["healthy", "fixed", "busy", "rank", "vllm", "weights", "data", "stall"]
    return sorted(rows, key=lambda r: order.index(r["case"]) if r["case"] in order else len(order))


def render(files: list[Path], gpu: bool) -> str:
    """The table of kept results files; the GPU table names the cases no GPU run has made."""
    rows = kept(files)
    made = {r["case"] for r in rows}
    return table(rows, missing=tuple(c for c in GPU_CASES if c not in made) if gpu else ())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=os.environ.get("ROCMKIT_VERL_CPU_PYTHON", sys.executable),
                    help="the Python whose rocmkit and verl (the CPU stack) run the cases")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--out", default="bench-time-to-verdict")
    ap.add_argument("--docs", type=Path, default=None, help="a markdown file whose marked table is replaced")
    ap.add_argument("--results", type=Path, nargs="+", default=None,
                    help="render these kept results.json files as one table; run nothing")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs for each case (0: the CPU); the busy case needs one")
    ap.add_argument("--gpu-table", action="store_true",
                    help="with --results: they are GPU hosts' runs; render (and put in --docs) the GPU table")
    args = ap.parse_args()
    mark = GPU_MARK if args.gpus or args.gpu_table else MARK
    if args.results:
        text = render(args.results, gpu=mark == GPU_MARK)
        print(text)
        if args.docs:
            into_docs(args.docs, text, mark)
        return
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # failure_verdicts' own settings for the CPU: no GPU, the only training rank, no more certify options
    case_args = argparse.Namespace(gpus=args.gpus, rank=1 if args.gpus > 1 else 0, python=args.python, extra=[])
    results = []
    for name in args.cases.split(","):
        results.append(fv.run_case(name, case_args, out))
        print(json.dumps(results[-1], indent=1), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))
    text = table(results)
    (out / "time-to-verdict.md").write_text(text)
    print(text)
    if args.docs:
        into_docs(args.docs, text, mark)


if __name__ == "__main__":
    main()
