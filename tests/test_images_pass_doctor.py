"""rocmkit's images pass rocmkit's doctor: for every built-in GPU stack × arch × product of that arch the stack's
ROCm supports, what the image will hold (from its BuildPlan: the final stage's ENV, every pinned version, the
ROCm version, the manifest) is put into a container's facts on an otherwise healthy 8-GPU host of that product
(tests/treegen.py), and the doctor's own checks (rocmkit.host.checks.run_checks, not a copy of their rules)
judge it. Any warning or failure is then caused by the image.

What the plan cannot know is left out, and the check that needs it with it: a stack whose torch comes unpinned
from its base image gives the doctor no torch version, so `software.torch` is not held against it (a rocmkit
build records the real one in the image, where `rocmkit doctor --image` judges it).
"""

from __future__ import annotations

import re

import pytest
from packaging.requirements import Requirement
from treegen import HostSpec, healthy_process, write_tree

from rocmkit import __version__, archs, stacks
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.model import Status
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile

# Findings the doctor rightly makes about an image, each with the reason it stands; the test fails when one no
# longer occurs, so the list cannot go stale.
KNOWN = {
    ("verl-rocm6", "MI325X", "rocm.torch"): "the recipe's torch 2.6.0+rocm6.2.4 (the one vLLM 0.8.5 builds against) "
    "predates ROCm 6.3, the first ROCm that supports MI325X (arch table); verl-rocm6 is verl's MI300X recipe",
}


def _cases():
    for name in stacks.builtin_names():
        stack = stacks.load_builtin(name)
        for target in stack.targets:
            if target == archs.CPU:
                continue
            arch = archs.get_arch(target)
            for product in arch.products:
                if product.vf_of is None and archs.rocm_supports(stack.rocm, arch, product):
                    yield pytest.param(name, target, product.name, id=f"{name}-{target}-{product.name}")


def pins(plan) -> dict[str, str]:
    """Every `name==version` the image installs or holds: base pins, pip components, the pip constraint."""
    stack = plan.stack
    reqs = list(stack.base.pip) + [r for c in stack.pip_components for r in c.pip] + list(stack.constraints)
    out = {}
    for r in reqs:
        req = Requirement(r)
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if exact:
            out[req.name.lower()] = exact[0]
    return out


def image_process(plan) -> tuple[dict, set[str]]:
    """The process facts a doctor run inside the image would read, and the finding ids it cannot judge."""
    env = {e.name: e.value for e in plan.runtime_env}
    packages = {**pins(plan), "rocmkit": __version__}
    unknown = set()
    proc = healthy_process(env=env)
    torch = packages.get("torch")
    if torch is None:
        unknown.add("software.torch")
    else:
        local = re.search(r"\+rocm([0-9.]+?)(?:[a-z]|\.lw|\.git|$)", torch)
        proc["torch_hip"] = local.group(1) if local else plan.stack.rocm
    if plan.stack.base.pip_sdk:
        # the layout the base really has: ROCm in site-packages (TheRock's SDK), no /opt/rocm tree; the image's
        # fix-ups leave one libamd_smi (the others link to _rocm_sdk_core's) and amdsmi installed from it
        site = "/usr/local/lib/python3.12/dist-packages"
        lib = f"{site}/_rocm_sdk_core/lib/libamd_smi.so"
        proc["rocm_sdk"] = {"core": f"{site}/_rocm_sdk_core", "devel": f"{site}/_rocm_sdk_devel",
                            "amd_smi_libs": [{"path": lib, "real": lib}], "amdsmi_packages": [f"{site}/amdsmi"]}
    proc["packages"] = packages  # exactly the image's pins: none of the healthy default's
    proc["ray_noset_vars"] = [k for k in env if k.startswith("RAY_EXPERIMENTAL_NOSET_")]
    return proc, unknown


@pytest.mark.parametrize("name,target,product", list(_cases()))
def test_the_image_passes_the_doctor(tmp_path, name, target, product):
    plan = make_plan(stacks.load_builtin(name), [target])
    dockerfile = render_dockerfile(plan)
    for e in plan.runtime_env:  # the facts are what the Dockerfile sets: its final stage's ENV lines
        assert f'ENV {e.name}="{e.value}"' in dockerfile, e.name
    proc, unknown = image_process(plan)
    rocm = None if plan.stack.base.pip_sdk else plan.stack.rocm  # pip's ROCm is proc["rocm_sdk"] (image_process)
    root = write_tree(tmp_path / "host", HostSpec(product=product, gpus=8, container=True, rocm=rocm,
                                                   manifest=plan.manifest, process=proc))
    findings = run_checks(collect(str(root)), Context(arch=target))
    raised = {f.id: f for f in findings if f.status in (Status.WARN, Status.FAIL) and f.id not in unknown}
    known = {i for (n, p, i) in KNOWN if (n, p) == (name, product)}
    assert known <= set(raised), f"no longer raised, drop from KNOWN: {known - set(raised)}"
    bad = [f"{f.status.name} {i}: {f.title}" for i, f in raised.items() if i not in known]
    assert not bad, f"{name} on {product} (ROCm {plan.stack.rocm}):\n" + "\n".join(bad)
    if plan.stack.base.pip_sdk:  # the pip SDK was read as the image's ROCm, its one libamd_smi judged
        by_id = {f.id: f for f in findings}
        assert "(pip)" in by_id["rocm.installs"].title and by_id["software.amd_smi_copies"].status is Status.PASS
    # the multi-GPU rules ran (an 8-GPU gfx942/gfx950 host), not skipped for want of facts
    assert {"env.nccl_min_nchannels", "env.hip_force_dev_kernarg", "software.versions"} <= {f.id for f in findings}


def test_every_gpu_stack_is_judged():
    judged = {p.values[0] for p in _cases()}
    gpu = {n for n in stacks.builtin_names() if archs.CPU not in stacks.load_builtin(n).targets}
    assert judged == gpu
