"""`rocmkit doctor`: leveled validation of a ROCm host, container or image."""

from __future__ import annotations

import json
import sys

import click

from .. import archs
from ..errors import DeadlinePassed, Failed, RocmkitError, UsageError
from ..output import dumps
from .common import json_option


@click.command()
@click.option("--level", type=click.IntRange(1, 2), default=1, show_default=True,
              help="1: static checks, reads only (well under a second). 2: adds GPU measurements (GEMM, memory, links, "
                   "all-reduce, P2P, a few Megatron training steps, VRAM release).")
@json_option
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default=None,
              help="Check a captured tree (from --capture) instead of this host.")
@click.option("--arch", default=None, metavar="ARCH",
              help="The arch the GPUs must be (e.g. the arch your image was built for). Inside a rocmkit image "
                   "the image's manifest says it.")
@click.option("--only", default=None, metavar="ID,...", help="Only findings with these ids (or id prefixes).")
@click.option("--capture", "capture_dir", type=click.Path(file_okay=True), default=None,
              help="Copy the files the doctor reads into this new folder (for bug reports and --root).")
@click.option("--image", default=None, metavar="IMAGE",
              help="Run the doctor inside IMAGE (a rocmkit-built image) through the Docker engine, with the "
                   "ROCm device flags, and report its result.")
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=600, show_default=True, metavar="SECONDS",
              help="With --image: stop the container after this long (exit 124).")
@click.option("--code-objects", "code_objects", is_flag=True,
              help="Also audit the GPU code objects of every shared object in this Python environment's "
                   "site-packages against the target archs, and the aiter / torch-extension JIT caches (reads "
                   "every .so: seconds, not level 1's fraction of one). --image always does it.")
@click.option("--save-baseline", "save_baseline", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write this run (its JSON document: findings, figures, fingerprint) to FILE, as the "
                   "baseline of a good host. Replaces FILE only if it is a doctor document.")
@click.option("--baseline", "baseline_file", type=click.Path(dir_okay=False, exists=True), default=None,
              metavar="FILE", help="Compare this run with a saved one (driver, firmware, ROCm, kernel, partition "
                                   "modes, NUMA, probe figures within --tolerance, checks that passed there).")
@click.option("--compare", "compare_files", nargs=2, type=click.Path(dir_okay=False, exists=True), default=None,
              metavar="A B", help="Compare two saved runs (doctor --json or --save-baseline files), B against A; "
                                  "reads nothing of this host.")
@click.option("--tolerance", type=click.FloatRange(0.01, 0.9), default=0.10, show_default=True,
              help="A probe figure this far below the baseline warns; twice as far fails.")
@click.option("--multi-node", is_flag=True,
              help="Also run the RDMA preflight of a multi-node job: an ACTIVE port, the RoCE v2 GID index "
                   "(NCCL_IB_GID_INDEX) and the devices for NCCL_IB_HCA.")
@click.pass_context
def doctor(ctx, level, as_json, strict, root, arch, only, capture_dir, image, timeout_s, code_objects, save_baseline,
           baseline_file, compare_files, tolerance, multi_node) -> None:
    """Check a ROCm host or container and say what to fix.

    Level 1 reads sysfs, procfs, /dev and the environment: amdgpu driver, /dev/kfd and render-node
    access, GPU count and partitions (SPX/DPX/QPX/CPX), arch and product (incl. SR-IOV VFs), ROCm
    support, NUMA balancing, IOMMU pass-through, GPU-to-NUMA affinity, /dev/shm, memlock,
    visible-devices variables, Ray's no-set variable, arch variables, tuning variables, PyTorch built
    for HIP, framework versions, Docker, and VF tuned configs. In a container, GPUs present on the host
    but not granted are reported as not granted, not as broken.

    Exit 0 when nothing fails, 1 when something fails (--strict: or warns), 2 on bad usage,
    3 when --image has no Docker engine or --level 2 finds no GPU, 124 when --image runs past
    --timeout, 130/143 when interrupted (the container is removed either way).
    """
    if compare_files:
        if image or root or capture_dir or baseline_file or save_baseline:
            raise UsageError("--compare A B compares two saved runs; it takes no --image, --root, --capture, "
                             "--baseline or --save-baseline")
        _compare(ctx, compare_files, tolerance, as_json, strict)
        return
    if image:
        if root or capture_dir:
            raise UsageError("--image runs the doctor inside the image; it takes no --root or --capture")
        _in_image(image, level, as_json, strict, arch, only, timeout_s, multi_node)
        return
    from ..host import facts as facts_mod
    from ..host.checks import Context, run_checks, selected
    from ..host.report import doctor_document, exit_code, heading, table

    if capture_dir and root:
        raise UsageError("--capture records this host; it takes no --root")
    if level >= 2 and root:
        raise UsageError("--level 2 measures this host's GPUs; a captured tree (--root) is checked at level 1")
    if arch:
        archs.parse_targets(arch)  # an unknown --arch is a usage error, before anything is read or written
    facts = facts_mod.collect(root or "/", rdma=multi_node)
    # The image's own targets are compared as written (gpu.arch), never refused: a report beats exit 2.
    manifest_targets = (facts.manifest or {}).get("targets") if isinstance(facts.manifest, dict) else None
    targets = arch or (archs.join_targets(str(t) for t in manifest_targets) if isinstance(manifest_targets, list)
                       else None) \
        or None
    only_ids = {o.strip() for o in only.split(",") if o.strip()} if only else None
    if code_objects and facts.process is not None and root is None:
        from ..host.facts.image_audit_facts import audit_environment

        facts.process.update(audit_environment())
    findings = run_checks(facts, Context(arch=targets, multi_node=multi_node))
    if only_ids:
        # A typo in --only would otherwise select nothing and pass: refuse ids outside every known area.
        areas = {f.id.split(".")[0] for f in findings} | ID_PREFIXES
        unknown = sorted(o for o in only_ids if o.split(".")[0] not in areas)
        if unknown:
            raise UsageError(f"--only {','.join(unknown)}: no check has such an id",
                             hint=f"ids start with one of: {', '.join(sorted(areas))} "
                                  "(`rocmkit doctor --json` lists every finding's id)")
        findings = [f for f in findings if selected(f, only_ids)]
    if capture_dir:
        from ..host.capture import capture

        out = capture(facts, capture_dir)
        click.echo(f"captured {len(set(facts.files_read))} files into {out}; check it with "
                   f"`rocmkit doctor --root {out}`", err=True)
    if level >= 2:
        findings += [f for f in _level2(facts) if selected(f, only_ids)]
    if baseline_file:
        from ..host.baseline import compare

        now = doctor_document(findings, facts, level=level, strict=strict)
        findings += compare(load_run(baseline_file), now, tolerance=tolerance, base_name=baseline_file)
    code = exit_code(findings, strict)
    doc = doctor_document(findings, facts, level=level, strict=strict) if save_baseline or as_json else None
    if save_baseline:
        _save(save_baseline, doc)
    if as_json:
        click.echo(dumps(doc), nl=False)
    else:
        click.echo(table(findings, heading(facts), color=sys.stdout.isatty()), nl=False)
    ctx.exit(code)


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


def _save(path: str, doc: dict) -> None:
    import os

    from ..fileio import write_atomic

    if os.path.exists(path):
        load_run(path)  # only a doctor document is replaced: never a user's other file
    write_atomic(path, dumps(doc))
    click.echo(f"saved this run as a baseline in {path}", err=True)


def _compare(ctx, files: tuple[str, str], tolerance: float, as_json: bool, strict: bool) -> None:
    from ..host.baseline import compare
    from ..host.report import counts, exit_code, table
    from ..output import document

    base, now = (load_run(f) for f in files)
    findings = compare(base, now, tolerance=tolerance, base_name=files[0])
    code = exit_code(findings, strict)
    if as_json:
        click.echo(dumps(document("doctor-compare", {"a": files[0], "b": files[1], "tolerance": tolerance,
                                                      "findings": [f.to_json() for f in findings],
                                                      "summary": counts(findings), "exit_code": code})), nl=False)
    else:
        click.echo(table(findings, f"rocmkit doctor --compare: {files[1]} against {files[0]}",
                         color=sys.stdout.isatty()), nl=False)
    ctx.exit(code)


# First parts of the ids the checks and probes produce, whether or not this host produced one this time.
ID_PREFIXES = {"gpu", "rocm", "kernel", "numa", "container", "env", "software", "probe", "doctor", "baseline",
               "image", "rdma", "nic", "pcie"}


def _level2(facts) -> list:
    """Level 2: the GPU probes (`host.probes.run_probes(facts) -> list[Finding]`, figures in each finding's
    evidence). They may raise a RocmkitError (no GPU: exit 3); anything else they raise is reported as a
    failing finding, so level 1's report is never lost."""
    from ..host.probes import run as probes
    from ..host.model import Finding, Status

    try:
        return list(probes.run_probes(facts))
    except RocmkitError:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe bug is a finding, never a traceback
        return [Finding(id="probe.internal", area="probe", status=Status.FAIL,
                        title=f"the GPU probes crashed: {type(exc).__name__}: {exc}",
                        fix="report this as a rocmkit bug with the output of `rocmkit doctor --level 2 --json`")]


def _in_image(image: str, level: int, as_json: bool, strict: bool, arch: str | None, only: str | None,
              timeout_s: float, multi_node: bool = False) -> None:
    from ..cluster.container import ULIMIT_NOTE, run_container
    from ..engine import Engine, run_cli
    from ..host.model import Finding
    from ..host.facts.reader import read_device_nodes
    from ..host.report import table

    engine = Engine.connect()
    info = engine.image(image)
    if info is None:
        raise UsageError(f"image {image!r} is not in the Docker engine", hint="build it (rocmkit build) or pull it")
    docker = run_cli()
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
                     hint="is rocmkit installed in the image? rocmkit-built images have it. Output:\n  "
                          + "\n  ".join(tail)) from None
    doc["image"] = image
    doc["notes"] = notes
    findings = [Finding.from_json(f) for f in doc["findings"]]
    if strict:
        doc["exit_code"] = 1 if any(f.status.value in ("fail", "warn") for f in findings) else 0
    if as_json:
        click.echo(dumps(doc), nl=False)
    else:
        title = f"rocmkit doctor — inside image {image}" + "".join(f"\n  note: {n}" for n in notes)
        click.echo(table(findings, title, color=sys.stdout.isatty()), nl=False)
    click.get_current_context().exit(doc["exit_code"])
