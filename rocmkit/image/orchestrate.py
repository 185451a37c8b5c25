"""`rocmkit build` from start to end, below the CLI: a BuildRequest in, the plan made once, then the engine
and docker client found, the base image looked up, the stack resolved, MAX_JOBS sized, the Dockerfile rendered, the image built, checked
against the plan (labels, manifest, SBOM), its SBOM copied out, tagged, pushed, and the result as data (the
rocmkit.build/v1 document). Progress and warnings go to the caller's Reporter; failures raise RocmkitError."""

from __future__ import annotations

from pathlib import Path

from ..errors import Failed
from ..fileio import write_atomic
from .plan import DEFAULT_MAX_JOBS, LABEL_PREFIX, MANIFEST_PATH, BuildPlan, make_plan, plan_document
from .request import AUTO, BuildRequest, Reporter
from .sbom import SBOM_PATH


def _plan(request: BuildRequest, report: Reporter) -> BuildPlan:
    plan = make_plan(request.stack, list(request.targets), base_image=request.base_image,
                     sources=request.sources,
                     max_jobs=DEFAULT_MAX_JOBS if request.max_jobs == AUTO else request.max_jobs)
    for w in plan.warnings:
        report.warn(w)
    return plan


def dry_run(request: BuildRequest, report: Reporter) -> tuple[BuildPlan, dict]:
    """The plan and its document (`build --dry-run`); nothing is built and no engine is needed."""
    plan = _plan(request, report)
    doc = plan_document(plan)
    if request.max_jobs == AUTO:
        doc["build_args"]["MAX_JOBS"] = "auto (sized from the builder when the build starts)"
    return plan, doc


def resolve_first(request: BuildRequest, report: Reporter) -> None:
    """Resolve the stack with pip before building: a conflict stops the build in seconds, not hours."""
    from ..stacks.resolve import resolve

    if request.offline:
        report.say("resolve skipped: an offline build (--network none or --wheelhouse) installs nothing from the "
                   "index; check with `rocmkit stacks --resolve --find-links DIR`")
        return
    r = resolve(request.stack, {k: v.path for k, v in request.sources.items()})
    if r.status == "offline":
        report.say("resolve skipped: the package index is not reachable from here")
        return
    for line in r.lines():
        report.say(line)
    if r.status == "conflict":
        raise Failed(f"{request.stack.name} does not resolve: nothing was built",
                     hint="fix the pins named above, or build anyway with --no-resolve")
    if r.status == "partial":
        report.warn("some pins could not be checked before the build (NOT CHECKED above)")
    if r.unread():  # the build clones them; their requirements meet the rest only in the image
        report.warn(f"the requirements of {', '.join(r.unread())} were not resolved before the build (no --source "
                    "for them): a conflict there shows only when the image installs them")


def base_first(engine, plan: BuildPlan) -> None:
    """The base image the Dockerfile starts FROM, looked up before anything slow: an unreachable one fails the
    build in seconds, not after the resolve and BuildKit's start."""
    why = engine.unreachable(plan.base_ref)
    if why:
        option = "--base-image" if plan.base_image_overridden else f"the stack's base image ({plan.stack.name})"
        raise Failed(f"base image {plan.base_ref} cannot be reached: {why}: nothing was built",
                     hint=f"`docker pull {plan.base_ref}` says why (a registry login, a typo in {option}, no "
                          "network); an image in the engine is used as it is")


def build(request: BuildRequest, report: Reporter) -> dict:
    """Build what the request asks for; return the rocmkit.build/v1 document's body."""
    from ..runtime.docker_client import find_cli
    from ..runtime.docker_engine import Engine
    from ..progress import resolve_mode
    from .build import BuildOptions, build_image, default_log_path, failure
    from .jobs import auto_max_jobs, gib_per_job
    from .render import render_dockerfile
    from .sbomlib import check_installed

    plan = _plan(request, report)
    check_installed()
    engine = Engine.connect()
    info = engine.info()
    cli = find_cli(request.docker_cli)
    base_first(engine, plan)  # seconds, before the resolve's minute
    if request.resolve_first:
        resolve_first(request, report)
    if request.max_jobs == AUTO:
        width = max((len(level) for level in plan.levels()), default=1)
        choice = auto_max_jobs(info.mem_total, info.ncpu, width, gib_per_job(request.stack.rocm))
        jobs, jobs_reason = choice.jobs, choice.reason
        plan = plan.with_max_jobs(jobs)
    else:
        jobs = request.max_jobs
        jobs_reason = "given" if jobs != DEFAULT_MAX_JOBS else "default"
    dockerfile = render_dockerfile(plan)
    tty = resolve_mode(request.progress) == "tty"
    opts = BuildOptions(max_jobs=jobs, network=request.network, cache_from=request.cache_from,
                        cache_to=request.cache_to, progress="tty" if tty else "plain", timeout_s=request.timeout_s,
                        wheelhouse=request.wheelhouse)
    log_path = Path(request.log_file).resolve() if request.log_file else default_log_path(plan)
    report.say(f"building {plan.stack.name} for {';'.join(plan.targets)} with {cli.describe()}, engine "
               f"{info.version} at {info.address}")
    report.say(f"max jobs {jobs} ({jobs_reason}); log {log_path}")
    if request.wheelhouse:
        report.say(f"pip installs only from the wheelhouse {request.wheelhouse}")

    outcome = build_image(plan, dockerfile, cli, opts, log_path, report.say)
    if not outcome.ok:
        err = failure(plan, outcome.log, log_path, outcome.returncode)
        report.say(f"---- last lines of {err.stage or 'the build'} ----")
        for line in err.tail:
            report.say(f"  {line}")
        report.say("----")
        raise err

    manifest, sbom = _check_image(engine, outcome.image_id, plan, log_path)
    # The host copy of the SBOM, byte for byte the image's.
    sbom_path = write_atomic(Path(request.sbom_out).resolve() if request.sbom_out
                             else log_path.with_suffix(".cdx.json"), sbom)
    final_tags = list(request.tags) or [plan.tag]
    for ref in final_tags:
        engine.tag(outcome.image_id, ref)
    pushed = []
    if request.push:
        for ref in final_tags:
            report.say(f"pushing {ref}")
            pushed.append({"tag": ref, "digest": engine.push(ref, on_line=lambda s: report.say(f"  {s}")
                                                              if not tty else None)})
    image = engine.image(outcome.image_id)
    doc = result_document(plan, image, manifest, outcome, final_tags, pushed, jobs, jobs_reason, cli, info)
    doc["sbom"] = {"image_path": SBOM_PATH, "host_path": str(sbom_path)}
    return doc


def _check_image(engine, image_id: str, plan: BuildPlan, log_path: Path) -> tuple[dict | None, bytes]:
    """The image must be what the plan says before it gets a name: its labels and manifest carry the inputs
    hash, and it holds its SBOM. Returns its manifest and SBOM."""
    image = engine.image(image_id)
    manifest = engine.read_json(image_id, MANIFEST_PATH) if image else None
    problems, sbom = [], None
    if image is None:
        problems.append(f"the engine has no image {image_id}")
    else:
        if image.labels.get(f"{LABEL_PREFIX}.inputs-hash") != plan.inputs_hash:
            problems.append("label io.rocmkit.inputs-hash differs from the plan")
        if not manifest or manifest.get("inputs_hash") != plan.inputs_hash:
            problems.append(f"{MANIFEST_PATH} is missing or differs from the plan")
        sbom = engine.read_file(image_id, SBOM_PATH)
        if not sbom:
            problems.append(f"{SBOM_PATH} is missing")
    if problems:
        raise Failed("the built image is not what was planned: " + "; ".join(problems), hint=f"full log: {log_path}")
    return manifest, sbom


def result_document(plan, image, manifest, outcome, tags, pushed, jobs, jobs_reason, cli, info) -> dict:
    stages = outcome.log.stages()
    steps = sum(e["steps"] for e in stages.values())
    cached = sum(e["cached"] for e in stages.values())
    return {
        "image": {"id": image.id, "tags": list(tags), "size_bytes": image.size, "labels": image.labels},
        "stack": plan.stack.name,
        "targets": list(plan.targets),
        "inputs_hash": plan.inputs_hash,
        "manifest": manifest,
        "pushed": pushed,
        "build": {
            "seconds": round(outcome.seconds, 1),
            "log": str(outcome.log_path),
            "max_jobs": jobs,
            "max_jobs_reason": jobs_reason,
            "steps": steps,
            "steps_cached": cached,
            "rebuilt_stages": outcome.log.rebuilt_stages(),
            "stages": stages,
            "docker": {"path": cli.path, "version": cli.version, "mode": cli.mode},
            "engine": {"version": info.version, "address": info.address},
            "pip_source": str(outcome.wheelhouse) if outcome.wheelhouse else "index",
        },
        "local_sources": {st.component.name: st.local.path for st in plan.stages if st.local},
        "warnings": list(plan.warnings),
    }
