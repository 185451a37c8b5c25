"""The doctor's runs, for `rocmkit doctor` (cli/doctor.py parses the options, calls one of these, prints what it
returns and exits with its code): level 1 over this host or a captured tree and level 2's probes (run), two
saved runs compared (compare_runs), the doctor inside an image (in_image); saving and loading a run.

Messages that belong on stderr while a run goes on (a capture written, a baseline saved) go to `say`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import NamedTuple

from .. import archs
from ..errors import DeadlinePassed, Failed, RocmkitError, UsageError
from ..output import document, dumps
from . import baseline, checks
from .checks import Context, all_checks, run_checks, selected
from .facts import Facts, collect
from .model import Finding, Status
from .report import counts, doctor_document, exit_code, heading
from .roottree import check_root
from .selection import parse_only

Say = Callable[[str], None]


class Outcome(NamedTuple):
    """What a run found, the heading of its table, its exit code and its JSON document."""

    findings: list[Finding]
    title: str
    code: int
    doc: dict | None  # None when neither --json nor --save-baseline asked for it


def id_prefixes() -> frozenset[str]:
    """First parts of the ids the checks and probes produce, whether or not this host produced one this time:
    the ids every check declares (checks.documents), run_checks' own for a crashed check, the probes' and the
    baseline comparison's."""
    from .probes.verdict import AREA as PROBE_AREA

    declared = {i.split(".")[0] for check in all_checks() for i in getattr(check, "ids", ())}
    return frozenset(declared | {checks.INTERNAL_AREA, PROBE_AREA, baseline.AREA})


def run(*, level: int, strict: bool, root: str | None, arch: str | None, only: str | None, capture_dir: str | None,
        code_objects: bool, save_baseline: str | None, baseline_file: str | None, tolerance: float, multi_node: bool,
        as_json: bool, say: Say, force: bool = False, pod_gpus: int | None = None) -> Outcome:
    """Level 1 (and 2) over this host, or level 1 over a captured tree (root)."""
    only_ids = parse_only(only, level=level, baseline_file=bool(baseline_file))  # before anything is read
    if root is not None:
        check_root(root)  # a folder that is not a root tree would read as a host without a driver
    facts = collect(root or "/", rdma=multi_node)
    # The image's own targets are compared as written (gpu.arch), never refused: a report beats exit 2.
    manifest_targets = (facts.manifest or {}).get("targets") if isinstance(facts.manifest, dict) else None
    targets = arch or (archs.join_targets(str(t) for t in manifest_targets) if isinstance(manifest_targets, list)
                       else None) \
        or None
    if code_objects and facts.process is not None and root is None:
        from .facts.image_audit_facts import audit_environment

        facts.process.update(audit_environment())
    findings = run_checks(facts, Context(arch=targets, multi_node=multi_node, pod_gpus=pod_gpus))
    if only_ids:
        findings = [f for f in findings if selected(f, only_ids)]
    if capture_dir:
        from .capture import capture

        out = capture(facts, capture_dir)
        say(f"captured {len(set(facts.files_read))} files into {out}; check it with `rocmkit doctor --root {out}`")
    if level >= 2:
        findings += [f for f in level2(facts) if selected(f, only_ids)]
    if baseline_file:
        now = doctor_document(findings, facts, level=level, strict=strict)
        findings += baseline.compare(load_run(baseline_file), now, tolerance=tolerance, base_name=baseline_file)
    if only_ids and not any(selected(f, only_ids) and not f.evidence.get("not_run") for f in findings):
        # Nothing was checked, so nothing passed: "doctor passed: 0 pass" would read as a clean bill of health.
        where = "this host" if root is None else root
        raise UsageError(f"--only {only}: no selected check reports anything on {where}, so nothing was checked",
                         hint="select ids this host reports (`rocmkit doctor --json` lists them; without a KFD "
                              "topology only gpu.topology speaks for the GPUs), or drop --only")
    code = exit_code(findings, strict)
    doc = doctor_document(findings, facts, level=level, strict=strict) if save_baseline or as_json else None
    if save_baseline:
        save_good(save_baseline, doc, findings, strict, force, say)
    return Outcome(findings, heading(facts), code, doc)


def save_good(path: str, doc: dict, findings: list[Finding], strict: bool, force: bool, say: Say) -> None:
    """A baseline is what other hosts are held to, and a check that failed there passes nowhere against it
    (baseline.compare reports only checks that passed in the baseline): a failing run is saved only with --force,
    and then said so."""
    bad = [f.id for f in findings if f.status is Status.FAIL or (strict and f.status is Status.WARN)]
    if not bad:
        save(path, doc, say)
        return
    which = f"{len(bad)} check(s) {'failed or warned' if strict else 'failed'}: {', '.join(bad[:5])}" + \
        (", ..." if len(bad) > 5 else "")
    if not force:
        say(f"--save-baseline {path}: not saved: {which}; a baseline is a good host's run. "
            "Fix those checks, or add --force to save this run as it is")
        return
    save(path, doc, lambda _: None)
    say(f"saved this run as a baseline in {path}, with --force, although {which}")


def level2(facts: Facts) -> list[Finding]:
    """Level 2: the GPU probes (`probes.run.run_probes(facts) -> list[Finding]`, figures in each finding's
    evidence). They may raise a RocmkitError (no GPU: exit 3); anything else they raise is reported as a
    failing finding, so level 1's report is never lost."""
    from .probes import run as probes
    from .probes.verdict import AREA

    try:
        return list(probes.run_probes(facts))
    except RocmkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe bug is a finding, never a traceback
        return [Finding(id=f"{AREA}.internal", area=AREA, status=Status.FAIL,
                        title=f"the GPU probes crashed: {type(exc).__name__}: {exc}",
                        fix="report this as a rocmkit bug with the output of `rocmkit doctor --level 2 --json`")]


def load_run(path: str) -> dict:
    """A saved doctor run; anything else is a usage error naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != "rocmkit.doctor/v1" or not isinstance(doc.get("findings"), list):
        raise UsageError(f"{path}: not a saved doctor run (a `rocmkit doctor --json` document, schema rocmkit.doctor/v1)")
    return doc


def save(path: str, doc: dict, say: Say) -> None:
    from ..fileio import write_atomic

    if os.path.exists(path):
        load_run(path)  # only a doctor document is replaced: never a user's other file
    write_atomic(path, dumps(doc), what="--save-baseline")
    say(f"saved this run as a baseline in {path}")


def compare_runs(files: tuple[str, str], tolerance: float, strict: bool) -> Outcome:
    """Two saved runs, B against A; reads nothing of this host."""
    base, now = (load_run(f) for f in files)
    findings = baseline.compare(base, now, tolerance=tolerance, base_name=files[0])
    code = exit_code(findings, strict)
    doc = document("doctor-compare", {"a": files[0], "b": files[1], "tolerance": tolerance,
                                      "findings": [f.to_json() for f in findings],
                                      "summary": counts(findings), "exit_code": code})
    return Outcome(findings, f"rocmkit doctor --compare: {files[1]} against {files[0]}", code, doc)


def in_image(image: str, level: int, strict: bool, arch: str | None, only: str | None, timeout_s: float,
             multi_node: bool = False) -> Outcome:
    """`rocmkit doctor --json` run inside IMAGE through the Docker engine, with the ROCm device flags."""
    from ..runtime import imageref

    imageref.checked(image, "--image", image_id=True)
    parse_only(only, level=level)  # a typo is refused here, before a container starts

    from ..runtime.container import ULIMIT_NOTE, read_device_nodes, run_container
    from ..runtime.docker_client import run_cli
    from ..runtime.docker_engine import Engine

    info = Engine.connect().require_image(image)
    docker = run_cli()
    # run_container runs this host's rocmkit in the image (runtime/host_rocmkit.py), as `python3 -m rocmkit`
    inner = ["rocmkit", "doctor", "--json", "--level", str(level), "--code-objects"]
    inner += ["--arch", arch] if arch else []
    inner += ["--only", only] if only else []
    inner += ["--multi-node"] if multi_node else []
    result, ulimits = run_container(info.id, inner, what=f"doctor in {image}", timeout=timeout_s, docker=docker,
                                    nodes=read_device_nodes(), skip_missing=True, keep_stdout=True)
    notes = [] if ulimits else [ULIMIT_NOTE]
    if result.timed_out:
        raise DeadlinePassed(f"the doctor in {image} did not finish within --timeout {timeout_s:g} s; it was stopped")
    try:
        doc = json.loads("\n".join(result.stdout or []))
    except ValueError:
        tail = result.tail[-10:]
        raise Failed(f"the doctor could not run in {image} (exit {result.returncode})",
                     hint="the image needs python3 with rocmkit's dependencies (rocmkit-built images have them); "
                          "this host's rocmkit runs in it from a read-only mount. Output:\n  "
                          + "\n  ".join(tail)) from None
    doc["image"] = image
    doc["notes"] = notes
    findings = [Finding.from_json(f) for f in doc["findings"]]
    if strict:
        doc["exit_code"] = 1 if any(f.status.value in ("fail", "warn") for f in findings) else 0
    title = f"rocmkit doctor — inside image {image}" + "".join(f"\n  note: {n}" for n in notes)
    return Outcome(findings, title, doc["exit_code"], doc)
