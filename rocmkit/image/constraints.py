"""The image's pip constraint file (PIP_CONSTRAINT): what a later `pip install` may not replace. Every stack
holds the PyTorch family the base installed (read from the image, whatever the base is). A stack that opts in
(ROCm from wheels, `constrain = true` on a component, or top-level `constraints`) also gets its exact pins,
known at render time, written into the file: the ROCm wheels with each target's device payload, the pinned
torch and Triton, the marked components. Pure: text from data."""

from __future__ import annotations

import re

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ..stacks import ComponentKind, Stack

CONSTRAINTS_PATH = "/opt/rocmkit/constraints.txt"
# Only the PyTorch family is held: a stack may deliberately build its own Triton (upstream swaps it last).
CONSTRAINED_PACKAGES = ("torch", "torchvision", "torchaudio")
TRITON_PACKAGES = ("triton", "pytorch-triton-rocm")


def opted_in(stack: Stack) -> bool:
    return bool(stack.base.rocm_wheels or stack.constraints or any(c.constrain for c in stack.components))


def stack_pins(stack: Stack, targets) -> list[str]:
    """name==version lines, one per distribution (the first declaration wins), or [] without the opt-in.
    Extras go: a constraint holds a version only."""
    if not opted_in(stack):
        return []
    reqs: list[str] = []
    if stack.base.rocm_wheels:
        reqs += stack.base.rocm_wheels.requirements(targets)
    held = {canonicalize_name(n) for n in CONSTRAINED_PACKAGES + TRITON_PACKAGES}
    reqs += [r for r in stack.base.pip if canonicalize_name(Requirement(r).name) in held]
    for c in stack.components:
        if c.constrain:
            reqs += [c.wheel_pin()] if c.kind is ComponentKind.WHEEL else list(c.pip)
    reqs += stack.constraints
    out: dict[str, str] = {}
    for r in reqs:
        req = Requirement(r)
        out.setdefault(canonicalize_name(req.name), f"{req.name}{req.specifier}")
    return list(out.values())


def held_from_image(stack: Stack, pins: list[str]) -> list[str]:
    """The distributions whose installed versions the file takes from the image: the PyTorch family, a ROCm
    Triton when the base pins one, and what the stack declares the base provides (its check has just read
    them), less those already pinned."""
    pinned = {canonicalize_name(Requirement(r).name) for r in stack.base.pip}
    names = list(CONSTRAINED_PACKAGES) + sorted({n for n in pinned if n in TRITON_PACKAGES})
    listed = {canonicalize_name(n) for n in names}
    names += [p.distribution for p in stack.base.provides if canonicalize_name(p.distribution) not in listed]
    taken = {canonicalize_name(Requirement(p).name) for p in pins}
    return [n for n in names if canonicalize_name(n) not in taken]


def name_pattern(name: str) -> str:
    """A distribution name as an `grep -iE` pattern that matches however pip spells its separators
    (transformer_engine, transformer-engine)."""
    return re.sub(r"[-_.]+", "[-_.]", name)
