"""`rocmkit doctor`: leveled validation of a ROCm host, container or image."""

from __future__ import annotations

import sys

import click

from .. import archs
from ..errors import UsageError
from ..fleet.cli import fleet_options
from ..output import dumps
from .common import InputFile, json_option


@click.command()
@click.option("--level", type=click.IntRange(1, 2), default=1, show_default=True,
              help="1: static checks, reads only (well under a second). 2: adds GPU measurements (GEMM, memory, links, "
                   "all-reduce, P2P, a few Megatron training steps, VRAM release).")
@json_option
@click.option("--strict", is_flag=True, help="Warnings fail too (exit 1).")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default=None,
              help="Check a captured tree instead of this host: DIR holds the host's files at their own paths "
                   "(sys/class/kfd/kfd/topology, sys/module/amdgpu, proc/..., dev/kfd), as --capture writes them; "
                   "a folder laid out otherwise is refused (exit 2), naming where a part of a tree belongs.")
@click.option("--arch", default=None, metavar="ARCH",
              help="The arch the GPUs must be (e.g. the arch your image was built for). Inside a rocmkit image "
                   "the image's manifest says it.")
@click.option("--only", default=None, metavar="ID,...", help="Only findings with these ids, id prefixes (gpu) or family members (env.arch.gfx942). "
                   "A selector that matches no check's id is refused (exit 2) with the closest ids; so is a "
                   "selection that reports nothing here (nothing was checked), with --strict or without.")
@click.option("--capture", "capture_dir", type=click.Path(file_okay=True), default=None,
              help="Copy the files the doctor reads into this new folder (for bug reports and --root), with the kernel "
                   "log of this boot (/dev/kmsg) and the previous one (the systemd journal).")
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
                   "baseline of a good host. Replaces FILE only if it is a doctor document. A run with a failing "
                   "check is not saved without --force.")
@click.option("--force", is_flag=True,
              help="With --save-baseline: save the run even though a check failed (--strict: or warned). Without "
                   "it such a run is not saved, and the doctor says why.")
@click.option("--baseline", "baseline_file", type=InputFile(dir_okay=False, exists=True), default=None,
              metavar="FILE", help="Compare this run with a saved one (driver, firmware, ROCm, kernel, partition "
                                   "modes, NUMA, probe figures within --tolerance, checks that passed there).")
@click.option("--compare", "compare_files", nargs=2, type=InputFile(dir_okay=False, exists=True), default=None,
              metavar="A B", help="Compare two saved runs (doctor --json or --save-baseline files), B against A; "
                                  "reads nothing of this host.")
@click.option("--tolerance", type=click.FloatRange(0.01, 0.9), default=0.10, show_default=True,
              help="A probe figure this far below the baseline warns; twice as far fails.")
@click.option("--multi-node", is_flag=True,
              help="Also run the RDMA preflight of a multi-node job: an ACTIVE port, the RoCE v2 GID index "
                   "(NCCL_IB_GID_INDEX) and the devices for NCCL_IB_HCA.")
@click.option("--stalled", "stalled", multiple=True, metavar="PID|ray",
              help="Instead of the checks: where every process of a running job stood (repeatable). PID and its "
                   "descendants, or `ray`: every Ray raylet of this node with its workers. Takes each Python "
                   "process's stack with py-spy (root, or ptrace_scope 0), its role, state, CPU use and GPU memory, "
                   "the kernel-log faults, and says who waits for whom, within 30 s, stopping nothing. Exit 0 when "
                   "a process of the job is at work, 1 when they all wait or one is stopped.")
@click.option("--stall-out", "stall_out", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="With --stalled: a new folder for the full stacks and the report (default: "
                   "rocmkit-stall-HOST-TIME in the current folder).")
@click.option("--pod-gpus", "pod_gpus", type=click.IntRange(min=1), default=None, metavar="N",
              help="In a Kubernetes pod that requested N GPUs (or partitions) of AMD's device plugin: check that it "
                   "can open exactly N (render nodes present and openable; sysfs lists all of the host's GPUs, and "
                   "their absent render nodes are not failures). The preflight init container of `rocmkit kuberay`.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Also write this run's JSON document to FILE, whatever it found (the preflight leaves it where "
                   "the pod's other containers and `kubectl cp` can read it).")
@fleet_options
@click.pass_context
def doctor(ctx, level, as_json, strict, root, arch, only, capture_dir, image, timeout_s, code_objects, save_baseline,
           force, baseline_file, compare_files, tolerance, multi_node, stalled, stall_out, pod_gpus,
           report_file) -> None:
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
    from ..fleet import cli as fleet_cli
    from ..host import doctor as host_doctor
    from ..host.report import table

    if (pod_gpus or report_file) and (compare_files or image or stalled or fleet_cli.wanted(ctx)):
        raise UsageError("--pod-gpus and --report belong to a check of this host or pod", hint="leave out --compare, "
                         "--image, --stalled and --fleet")
    if fleet_cli.wanted(ctx):  # --fleet / --nodes: the doctor on every node of a Slurm allocation (rocmkit/fleet)
        ctx.exit(fleet_cli.run(ctx, level=level, as_json=as_json, strict=strict, arch=arch, only=only, image=image,
                               baseline_file=baseline_file, tolerance=tolerance, code_objects=code_objects,
                               incompatible={"--root": bool(root), "--capture": bool(capture_dir),
                                             "--compare": bool(compare_files), "--stalled": bool(stalled),
                                             "--save-baseline": bool(save_baseline)}))
    if force and not save_baseline:
        raise UsageError("--force saves a failing run with --save-baseline", hint="add --save-baseline FILE")
    if save_baseline:  # a path that cannot be written is said before the checks run, not after
        from ..fileio import check_writable

        check_writable(save_baseline, what="--save-baseline")
    if report_file:
        from ..fileio import check_writable

        check_writable(report_file, what="--report")
    if stalled:
        from .stalled import stalled_report

        ctx.exit(stalled_report(stalled, stall_out, as_json, other_options=bool(
            compare_files or image or root or capture_dir or baseline_file or save_baseline or level > 1)))
    elif stall_out:
        raise UsageError("--stall-out is where --stalled writes the stacks", hint="add --stalled PID")
    if compare_files:
        if image or root or capture_dir or baseline_file or save_baseline:
            raise UsageError("--compare A B compares two saved runs; it takes no --image, --root, --capture, "
                             "--baseline or --save-baseline")
        out = host_doctor.compare_runs(compare_files, tolerance, strict)
    elif image:
        if root or capture_dir:
            raise UsageError("--image runs the doctor inside the image; it takes no --root or --capture")
        out = host_doctor.in_image(image, level, strict, arch, only, timeout_s, multi_node)
    else:
        if capture_dir and root:
            raise UsageError("--capture records this host; it takes no --root")
        if level >= 2 and root:
            raise UsageError("--level 2 measures this host's GPUs; a captured tree (--root) is checked at level 1")
        if arch:
            archs.parse_targets(arch)  # an unknown --arch is a usage error, before anything is read or written
        out = host_doctor.run(level=level, strict=strict, root=root, arch=arch, only=only, capture_dir=capture_dir,
                              code_objects=code_objects, save_baseline=save_baseline, baseline_file=baseline_file,
                              tolerance=tolerance, multi_node=multi_node, as_json=as_json or bool(report_file),
                              force=force, say=lambda message: click.echo(message, err=True), pod_gpus=pod_gpus)
        if report_file:
            from ..fileio import write_atomic

            write_atomic(report_file, dumps(out.doc), what="--report")
    if as_json:
        click.echo(dumps(out.doc), nl=False)
    else:
        click.echo(table(out.findings, out.title, color=sys.stdout.isatty()), nl=False)
    ctx.exit(out.code)
