"""BuildPlan → Dockerfile text through Jinja2 (StrictUndefined). Pure, but for `compare_dir` and
`RenderedDir.write` (`rocmkit render --all`), which read and write the rendered folder."""

from __future__ import annotations

import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from .. import archs
from . import basecheck
from .constraints import CONSTRAINTS_PATH, held_from_image, name_pattern, stack_pins
from .plan import MANIFEST_PATH, BuildPlan
from .sbom import SBOM_PATH

# The first line of every rendered file; `render --all` only ever replaces or removes files that start so.
RENDERED_MARK = "# Rendered by rocmkit"

PATCHES_DIR = "patches"  # patches/<component>/<file>: the stack's patch files, copied into their stages
from .components import ASSETS_DIR, ASSETS_MOUNT  # noqa: E402,F401 (the assets folder; stackfiles reads it here)
WHEELHOUSE_DIR = "wheelhouse"  # a folder of the build context, empty unless `rocmkit build --wheelhouse`
WHEELHOUSE_MOUNT = "/tmp/wheelhouse"
# Every RUN that runs pip: its download cache, and the wheelhouse (where PIP_FIND_LINKS points when set).
PIP_MOUNTS = ["--mount=type=cache,target=/root/.cache/pip",
              f"--mount=type=bind,source={WHEELHOUSE_DIR},target={WHEELHOUSE_MOUNT}"]

# Post-install steps a stack can ask for, as the exact RUN lines the final stage gets.
POST_STEP_LINES = {
    # Issue 5: VF-named copies of SGLang's tuned configs, by rocmkit's own code; --strict fails the build
    # when the config folders it expects are missing.
    "vf-configs": "RUN rocmkit vf-configs --strict",
}


def _dq(value: str) -> str:
    """A Dockerfile ENV/LABEL value in double quotes. Stack values are validated to hold no quote,
    backslash or `$`; this guards against a rocmkit bug producing one."""
    text = str(value)
    if any(ch in text for ch in '"\\$\n`'):
        raise ValueError(f"unsafe value for a Dockerfile instruction: {text!r}")
    return f'"{text}"'


@functools.cache
def _environment():
    from ..templating import environment

    env = environment()
    env.filters["sq"] = lambda v: shlex.quote(str(v))
    env.filters["dq"] = _dq
    env.filters["assignments"] = lambda pairs: [f"{k}={_dq(v)}" for k, v in pairs]
    env.filters["cont"] = lambda items: " \\\n    ".join(items)  # one item per continued line
    env.filters["wheel_mounts"] = lambda names, root: [
        f"--mount=type=bind,from=build-{n},source=/wheels,target={root}/{n}" for n in names]
    env.filters["zip"] = lambda a, b: list(zip(a, b))
    return env




def _apt_packages(plan: BuildPlan) -> list[str]:
    """The stack's packages plus what the rendered steps themselves run: git to clone, ccache if on."""
    packages = set(plan.stack.base.apt)
    if plan.stack.base.ccache:
        packages.add("ccache")
    if any(not s.local for s in plan.stages):
        packages.add("git")
    return sorted(packages)


def render_dockerfile(plan: BuildPlan) -> str:
    from .components import blocks, final_install

    stack = plan.stack
    env = _environment()

    def render(template: str, **context) -> str:
        return env.get_template(template).render(base=stack.base, pip_mounts=PIP_MOUNTS, **context)

    parts = blocks(plan, render)
    return env.get_template("Dockerfile.j2").render(
        plan=plan,
        stack=stack,
        base=stack.base,
        apt=_apt_packages(plan),
        py=stack.python,
        rocm=stack.has_rocm,
        targets=list(plan.targets),
        constraint_pins=(pins := stack_pins(stack, plan.targets)),
        constrained=[name_pattern(n) for n in held_from_image(stack, pins)],
        base_check=basecheck.arguments(stack),
        base_check_final=basecheck.final_arguments(stack),
        base_check_lines=basecheck.script_lines(),
        base_check_summary=basecheck.summary(stack),
        base_check_path=basecheck.SCRIPT_PATH,
        base_versions_path=basecheck.VERSIONS_PATH,
        rocm_wheels=stack.base.rocm_wheels,
        constraints_path=CONSTRAINTS_PATH,
        manifest_path=MANIFEST_PATH,
        sbom_path=SBOM_PATH,
        manifest_json=json.dumps(plan.manifest, separators=(",", ":")),
        local_stages=[s for s in plan.stages if s.local],
        blocks=parts,
        final=final_install(parts),
        post_steps=[POST_STEP_LINES[s] for s in stack.post],
        pip_mounts=PIP_MOUNTS,
        assets_mount=ASSETS_MOUNT,
    )


def image_slug(stack_name: str, targets) -> str:
    """One image's name in files and bake targets: <stack>-<targets>."""
    return f"{stack_name}-{archs.targets_slug(targets)}"


def dockerfile_name(stack_name: str, targets: list[str] | tuple[str, ...]) -> str:
    return f"{image_slug(stack_name, targets)}.Dockerfile"


def render_all(out_dir: str | Path) -> dict[Path, str]:
    """Every built-in stack × each of its archs → {path: text}, for `rocmkit render --all`."""
    from .. import stacks
    from .plan import make_plan

    out = Path(out_dir)
    result: dict[Path, str] = {}
    for stack in stacks.all_builtin():
        for arch in stack.targets:
            result[out / dockerfile_name(stack.name, [arch])] = render_dockerfile(make_plan(stack, [arch]))
    return result


@dataclass(frozen=True)
class RenderedDir:
    """What `rocmkit render --all` would change in a folder: files to (re)write and files rocmkit rendered earlier
    for stacks or archs that no longer exist."""

    wanted: dict[Path, str]
    stale: list[Path]
    leftovers: list[Path]

    def write(self) -> None:
        from ..fileio import write_atomic

        for p in self.stale:
            write_atomic(p, self.wanted[p])
        for p in self.leftovers:
            p.unlink()


def compare_dir(out_dir: str | Path) -> RenderedDir:
    """Every built-in stack × arch rendered, against what `out_dir` holds now."""
    out = Path(out_dir)
    wanted = render_all(out)
    leftovers = [p for p in sorted(out.glob("*.Dockerfile"))
                 if p not in wanted and p.read_text(errors="replace").startswith(RENDERED_MARK)]
    stale = [p for p, text in wanted.items() if not p.exists() or p.read_text() != text]
    return RenderedDir(wanted, stale, leftovers)
