#!/usr/bin/env python3
"""Rebuild cost of rocmkit's rendered multi-stage Dockerfile against one sequential chain.

The same generated components (tests/stackgen.py: alpha and beta compile for seconds, gamma is pure
Python, delta needs alpha) are built two ways through the same docker client and engine, with the
same MAX_JOBS and --network none:

  (a) dag:   `rocmkit build` - one stage per component, independent ones in parallel, each cached alone;
  (b) chain: one stage building the components one after another (`COPY` + `pip install .` each), the
             shape of the upstream ROCm recipes (verl, SGLang), where a step's cache depends on every
             step before it.

Scenarios, each timed around the whole command: cold (a fresh base image, so no cache applies), no
change, one component changed that comes first in the chain (alpha), and one that comes last (delta).
Prints a Markdown table with the ratio chain ÷ dag; `--json FILE` also writes the numbers.

    python benchmarks/build_dag.py [--functions 1500] [--max-jobs 2] [--json results.json]

Needs a Docker engine, a docker client with BuildKit, and the base image of .ci/provision/20-docker.sh
(ROCMKIT_TEST_BASE_IMAGE). Leaves tagged images rocmkit-bench/*; remove them with `docker rmi`.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import stackgen  # noqa: E402

from rocmkit.runtime.docker_client import find_cli  # noqa: E402
from rocmkit.runtime.docker_engine import Engine  # noqa: E402

CHAIN_HEAD = """\
FROM {base}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ARG MAX_JOBS
RUN python3.11 -m venv --system-site-packages /opt/venv
ENV PATH=/opt/venv/bin:$PATH
"""
CHAIN_STEP = """\
COPY sources/{name}/ /src/{name}/
RUN cd /src/{name} && export MAX_JOBS && pip install --no-build-isolation --no-deps --no-cache-dir .
"""


def salted_base(engine: Engine, base: str) -> str:
    """A copy of the base image with one label changed: a new image id, so no earlier cache applies."""
    salt = uuid.uuid4().hex[:12]
    tag = f"rocmkit-bench/base:{salt}"
    engine.client.images.build(fileobj=io.BytesIO(f"FROM {base}\nLABEL rocmkit.bench.salt={salt}\n".encode()), tag=tag,
                               rm=True, network_mode="none")
    return tag


def timed(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> float:
    start = time.perf_counter()
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - start
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(argv)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return seconds


class Dag:
    name = "dag"

    def __init__(self, work: Path, base: str, specs, max_jobs: int, cli):
        self.work, self.specs, self.max_jobs, self.cli = work, specs, max_jobs, cli
        self.stack = stackgen.write_stack(work / "stack.toml", "benchdag", base, specs, archs=("gfx942",))
        self.base = base

    def build(self) -> float:
        return timed([sys.executable, "-m", "rocmkit", "build", "--stack-file", str(self.stack), "--arch", "gfx942",
                      "--network", "none", "--max-jobs", str(self.max_jobs), "--progress", "plain",
                      "--docker", self.cli.path, "--base-image", self.base, "--log-file", str(self.work / "last.log"),
                      "--tag", "rocmkit-bench/dag:latest", *stackgen.source_options(self.work / "src", self.specs)])


class Chain:
    name = "chain"

    def __init__(self, work: Path, base: str, specs, max_jobs: int, cli):
        self.work, self.specs, self.max_jobs, self.cli = work, specs, max_jobs, cli
        # The chain builds in dependency order, as the upstream recipes do.
        (work / "Dockerfile").write_text(CHAIN_HEAD.format(base=base)
                                         + "".join(CHAIN_STEP.format(name=s.name) for s in specs))

    def build(self) -> float:
        # The context holds the same sources the dag build copies (its own copy: sources/<name>/).
        ctx = self.work / "context"
        shutil.rmtree(ctx, ignore_errors=True)
        for spec in self.specs:
            shutil.copytree(self.work / "src" / spec.name, ctx / "sources" / spec.name)
        shutil.copy(self.work / "Dockerfile", ctx / "Dockerfile")
        argv = self.cli.build_argv() + ["--progress=plain", "--network", "none", "--build-arg",
                                        f"MAX_JOBS={self.max_jobs}", "-t", "rocmkit-bench/chain:latest"]
        if self.cli.mode == "buildx":
            argv.append("--load")
        return timed(argv + [str(ctx)], env=self.cli.build_env())


def run_variant(kind, root: Path, engine: Engine, base: str, functions: int, max_jobs: int, cli) -> dict[str, float]:
    work = root / kind.name
    specs = stackgen.default_specs(functions=functions)
    for spec in specs:
        stackgen.write_component(work / "src", spec)
    builder = kind(work, salted_base(engine, base), specs, max_jobs, cli)
    times = {"cold": builder.build(), "no change": builder.build()}
    for label, name in (("change alpha (first in the chain)", "alpha"), ("change delta (last in the chain)", "delta")):
        spec = next(s for s in specs if s.name == name)
        shutil.rmtree(work / "src" / name)
        stackgen.write_component(work / "src", stackgen.ComponentSpec(
            spec.name, units=spec.units, functions=spec.functions, needs=spec.needs, revision=spec.revision + 1))
        times[label] = builder.build()
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--functions", type=int, default=1500, help="generated C functions per module (compile time)")
    ap.add_argument("--max-jobs", type=int, default=2, help="MAX_JOBS for both variants")
    ap.add_argument("--base-image", default=os.environ.get("ROCMKIT_TEST_BASE_IMAGE"))
    ap.add_argument("--json", dest="json_out", default=None, help="also write the numbers here")
    args = ap.parse_args()
    if not args.base_image:
        sys.exit("no base image: set ROCMKIT_TEST_BASE_IMAGE (run .ci/provision/20-docker.sh) or pass --base-image")
    engine = Engine.connect()
    info = engine.info()
    cli = find_cli(None)
    with tempfile.TemporaryDirectory(prefix="rocmkit-bench-") as tmp:
        results = {k.name: run_variant(k, Path(tmp), engine, args.base_image, args.functions, args.max_jobs, cli)
                   for k in (Dag, Chain)}
    rows = []
    print(f"engine {info.version}, {info.ncpu} CPUs, {info.mem_total / 2**30:.1f} GiB; client {cli.describe()}; "
          f"MAX_JOBS={args.max_jobs}; {args.functions} C functions per module; {platform.python_version()}")
    print()
    print("| scenario | rocmkit DAG (s) | sequential chain (s) | chain ÷ DAG |")
    print("|---|---:|---:|---:|")
    for scenario, dag_s in results["dag"].items():
        chain_s = results["chain"][scenario]
        rows.append({"scenario": scenario, "dag_s": round(dag_s, 1), "chain_s": round(chain_s, 1),
                     "ratio": round(chain_s / dag_s, 2)})
        print(f"| {scenario} | {dag_s:.1f} | {chain_s:.1f} | {chain_s / dag_s:.2f} |")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"engine": info.version, "ncpu": info.ncpu, "max_jobs": args.max_jobs,
                                                   "functions": args.functions, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
