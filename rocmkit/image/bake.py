"""Stacks × archs → a `docker buildx bake` definition (HCL or JSON) for CI and buildx users: one target per
stack × arch, one group per stack, MAX_JOBS as an arg, the plan's tag and labels; and the rows of `rocmkit
matrix` (the same stack × arch list for CI image pipelines). Pure, except `select` (reads stack files) and
`prepare_context`, which writes the folder the targets build from.

The context is a folder holding `rocmkit-dist/` (rocmkit's own wheel, which every rendered Dockerfile's
final stage installs) and `dockerfiles/` (the rendered Dockerfiles). Bake resolves a relative
`context` against the folder it runs in, so the file says `context = "."` and is run from that folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import UsageError
from .plan import DEFAULT_MAX_JOBS, BuildPlan, make_plan
from .render import dockerfile_name, image_slug, render_dockerfile

REGISTRY_VAR = "REGISTRY"
DEFAULT_REGISTRY = "rocmkit"
MAX_JOBS_VAR = "MAX_JOBS"
DOCKERFILES_DIR = "dockerfiles"
# BuildKit's own attestations beside the image's /opt/rocmkit/sbom.cdx.json: SLSA provenance with every build
# arg and step, and BuildKit's SPDX scan. Builders that keep them: docker-container, kubernetes and remote
# drivers (and the docker driver with the containerd image store), when pushing or writing an OCI output.
ATTEST = ("type=provenance,mode=max", "type=sbom")
REGISTRY_RE = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")


def check_registry(registry: str) -> str:
    if not REGISTRY_RE.match(registry):
        raise UsageError(f"--registry {registry!r} is not a repository prefix", hint="e.g. ghcr.io/my-org")
    return registry


def select(stack_names, stack_files) -> list:
    """The stacks to bake: the named built-in ones and the files; neither given, every built-in stack."""
    from .. import stacks

    loaded = [stacks.load_builtin(n) for n in stack_names] + [stacks.load_file(p) for p in stack_files]
    if not loaded:
        loaded = stacks.all_builtin()
    if not loaded:
        raise UsageError("no stacks to bake", hint="name one with --stack or --stack-file")
    names = [s.name for s in loaded]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"stack {dupes[0]} given twice")
    return loaded


def plans_for(loaded, max_jobs: int = DEFAULT_MAX_JOBS) -> list[BuildPlan]:
    """One single-arch plan per stack × each of its targets, in order."""
    return [make_plan(stack, [arch], max_jobs=max_jobs) for stack in loaded for arch in stack.targets]


def matrix_rows() -> list[dict]:
    """Every built-in stack × arch for a CI matrix (`rocmkit matrix`): stack, arch, ROCm, its rendered Dockerfile,
    the default tag's version part and whether anything in it is mutable."""
    from .. import stacks

    rows = []
    for plan in plans_for(stacks.all_builtin()):
        s, arch = plan.stack, plan.targets[0]
        rows.append({"stack": s.name, "arch": arch, "rocm": s.rocm,
                     "dockerfile": f"{DOCKERFILES_DIR}/{dockerfile_name(s.name, [arch])}",
                     "tag": plan.tag.split(":", 1)[1], "mutable": bool(plan.warnings)})
    return rows


def target_name(plan: BuildPlan) -> str:
    return image_slug(plan.stack.name, plan.targets)


def definition(plans: list[BuildPlan], *, dockerfiles_dir: str = DOCKERFILES_DIR, context: str = ".",
               max_jobs: int = DEFAULT_MAX_JOBS, registry: str = DEFAULT_REGISTRY) -> dict:
    """The bake definition as data, in bake's JSON shape (variable / group / target)."""
    groups: dict[str, list[str]] = {}
    targets: dict[str, dict] = {}
    for plan in plans:
        name = target_name(plan)
        groups.setdefault(plan.stack.name, []).append(name)
        repo, _, version = plan.tag.partition(":")
        image = repo.split("/", 1)[1]  # plan tags are rocmkit/<stack>; the registry part is a variable
        targets[name] = {
            "description": f"{plan.stack.name} for {';'.join(plan.targets)}: {plan.stack.description}",
            "context": context,
            "dockerfile": f"{dockerfiles_dir}/{dockerfile_name(plan.stack.name, plan.targets)}",
            "target": "final",
            "platforms": ["linux/amd64"],  # ROCm userspace and the Instinct hosts are x86-64
            "args": {"MAX_JOBS": f"${{{MAX_JOBS_VAR}}}"},
            "tags": [f"${{{REGISTRY_VAR}}}/{image}:{version}"],
            "labels": dict(plan.labels),
            "attest": list(ATTEST),
        }
    return {
        "variable": {
            # No `description` here: buildx releases before 0.18 reject it on variables.
            REGISTRY_VAR: {"default": registry},
            MAX_JOBS_VAR: {"default": str(max_jobs)},
        },
        "group": {"default": {"targets": sorted(groups)}, **{g: {"targets": t} for g, t in sorted(groups.items())}},
        "target": dict(sorted(targets.items())),
    }


def to_json(defn: dict) -> str:
    return json.dumps(defn, indent=2) + "\n"


def _hcl_string(value: str) -> str:
    # HCL template escapes: a literal ${ or %{ must be doubled; our own ${VAR} references are kept.
    text = json.dumps(value)
    for var in (REGISTRY_VAR, MAX_JOBS_VAR):
        text = text.replace("${" + var + "}", "\0" + var + "\0")
    text = text.replace("${", "$${").replace("%{", "%%{")
    for var in (REGISTRY_VAR, MAX_JOBS_VAR):
        text = text.replace("\0" + var + "\0", "${" + var + "}")
    return text


def _hcl_value(value, indent: str) -> str:
    if isinstance(value, str):
        return _hcl_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(_hcl_value(v, indent) for v in value) + "]"
    if isinstance(value, dict):
        inner = indent + "  "
        rows = [f"{inner}{_hcl_string(k)} = {_hcl_value(v, inner)}" for k, v in value.items()]
        return "{\n" + "\n".join(rows) + f"\n{indent}}}"
    raise TypeError(f"no HCL form for {value!r}")


def to_hcl(defn: dict, header: str = "") -> str:
    out = [header.rstrip("\n")] if header else []
    for kind in ("variable", "group", "target"):
        for name, body in defn[kind].items():
            out.append(f'{kind} "{name}" {{')
            for key, value in body.items():
                out.append(f"  {key} = {_hcl_value(value, '  ')}")
            out.append("}")
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def header(context_dir: str | None) -> str:
    how = (f"cd {context_dir} && docker buildx bake [GROUP|TARGET]" if context_dir else
           "rocmkit bake --context-dir DIR (writes rocmkit-dist/, dockerfiles/ and this file there), then "
           "cd DIR && docker buildx bake [GROUP|TARGET]")
    return ("# Rendered by rocmkit bake. One target per stack x arch, one group per stack.\n"
            f"# Build: {how}\n"
            "# Variables: REGISTRY, the image repository prefix (tags are REGISTRY/<stack>:<version>);\n"
            "# MAX_JOBS, parallel compile jobs per build stage (hipcc jobs need GBs of memory each).\n"
            "# Override: REGISTRY=ghcr.io/ORG MAX_JOBS=16 docker buildx bake --push verl-vllm\n")


def prepare_context(plans: list[BuildPlan], context_dir: Path, dockerfiles_dir: str = DOCKERFILES_DIR) -> list[Path]:
    """Write rocmkit-dist/ (rocmkit's own wheel and the CycloneDX library of the SBOM step), an empty
    wheelhouse/ and the rendered Dockerfiles into context_dir."""
    from ..fileio import write_atomic
    from .build import DIST_DIR, fill_wheelhouse
    from .sbomlib import LIB_DIR, vendor
    from .selfwheel import build_self_wheel

    dist = context_dir / DIST_DIR
    for old in dist.glob("rocmkit-*.whl") if dist.is_dir() else ():
        old.unlink()  # one wheel only: the Dockerfile installs rocmkit-dist/*.whl
    written = [build_self_wheel(dist), vendor(dist / LIB_DIR)]
    fill_wheelhouse(context_dir, None)
    for plan in plans:
        path = context_dir / dockerfiles_dir / dockerfile_name(plan.stack.name, plan.targets)
        written.append(write_atomic(path, render_dockerfile(plan)))
    return written
