"""The Miles stacks against a saved copy of the pins of radixark/miles docker/Dockerfile.rocm and the ROCm
variants of docker/build.py at the commit they follow (tests/data/miles-dockerfile-rocm.pins.json): `miles`
is rocm700-mi30x (gfx942) and rocm700-mi35x (gfx950), `miles-rocm720` is rocm720-mi35x. The rendered
Dockerfiles reproduce the pins pin for pin, except those listed in NOT_REPRODUCED, each with its reason; a new
gap, or a gap closed without updating the list, fails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from rocmkit import stacks
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile

PINS = json.loads((Path(__file__).parent / "data" / "miles-dockerfile-rocm.pins.json").read_text())
VARIANTS = {k: v for k, v in PINS["variants"].items() if k != "note"}
# Which stack renders which build.py variant.
STACK_OF = {"rocm700-mi30x": "miles", "rocm700-mi35x": "miles", "rocm720-mi35x": "miles-rocm720"}

_COMMON = {
    "git:rccl-tests": "diagnostic binaries built with make, not a Python component; rocmkit doctor's probes "
                      "measure all-reduce instead",
    "release_wheels": "Miles lists the release through the GitHub API at build time; no stored source names "
                      "the files or their sha256, and rocmkit does not invent a hash",
}
NOT_REPRODUCED = {
    "miles": dict(_COMMON),
    "miles-rocm720": {
        **_COMMON,
        "build_arg:TE_USE_WHEEL=1": "the TE 2.17.0 wheel of release rocm720-gfx950-v0.5.16 (Miles #2660): no stored "
                                    "source gives its file name or sha256 and the release is no package index, so "
                                    "TransformerEngine is built from v2.8_rocm, the Dockerfile's TE_USE_WHEEL=0 path",
        "build_arg:APPLY_ROCR_VMMFIX=1": "the patched libhsa-runtime64 comes from the same release, without a sha256",
    },
}


def _variant(name: str) -> dict:
    v = VARIANTS[name]
    return {"image": f"{v.get('SGLANG_IMAGE_REPO', 'lmsysorg/sglang')}:{v['SGLANG_IMAGE_TAG']}", **v}


@pytest.fixture(scope="module")
def loaded():
    return {name: stacks.load_builtin(name) for name in NOT_REPRODUCED}


@pytest.fixture(scope="module")
def rendered(loaded):
    """stack name -> variant -> its rendered Dockerfile."""
    out: dict[str, dict[str, str]] = {name: {} for name in loaded}
    for variant, name in STACK_OF.items():
        out[name][variant] = render_dockerfile(make_plan(loaded[name], [VARIANTS[variant]["GPU_ARCH"]]))
    return out


# Back-compatible names for the miles stack alone.
@pytest.fixture(scope="module")
def miles(loaded):
    return loaded["miles"]


def _reproduced(miles, rendered: dict[str, str]) -> dict[str, bool]:
    """rendered: variant -> Dockerfile, the variants this stack renders."""
    out: dict[str, bool] = {}
    for variant, text in rendered.items():
        v = _variant(variant)
        out[f"image:{v['image_key']}"] = f"FROM {v['image']} AS base" in text
        for arg in ("TE_USE_WHEEL", "APPLY_ROCR_VMMFIX"):
            if v.get(arg) == "1":  # on: a release file installed; off is the Dockerfile's from-source default
                out[f"build_arg:{arg}=1"] = False
    for pin in PINS["git"]:
        c = next((c for c in miles.git_components if c.git == pin["url"]), None)
        ok = False
        if c is not None:
            text = "\n".join(rendered.values())
            if pin["ref_kind"] == "commit":
                ok = c.commit == pin["ref"] and f"git checkout --detach {pin['ref']}" in text
            else:  # a branch: pinned at the commit it resolved to (branch kept), or built from it, mutable
                ok = (c.branch == pin["ref"] and c.commit is not None and f"git checkout --detach {c.commit}" in text) \
                    or (c.mutable_ref == pin["ref"] and f"origin/{pin['ref']}^{{commit}}" in text)
        out[f"git:{pin['name']}"] = ok
    for r in PINS["pip"]:
        req = Requirement(r)
        version = miles.pinned_version(req.name)
        out[f"pip:{r}"] = version is not None and req.specifier.contains(version, prereleases=True) and all(
            re.search(rf"{re.escape(req.name)}(\[[a-z,]+\])?=={re.escape(version)}\b", t) for t in rendered.values())
    for key, default in PINS["env"].items():
        # ENV key=${key}: a variant's build arg of that name wins over the Dockerfile's value
        out[f"env:{key}"] = all(f'ENV {key}="{VARIANTS[v].get(key, default)}"' in t for v, t in rendered.items())
    for p in PINS["patches"]:
        c = miles.component(p["component"])
        out[f"patch:{p['component']}"] = bool(c and c.patches) and all(
            f"git apply --check /tmp/rocmkit-patches/{c.name}/{c.patches[0].name}" in t for t in rendered.values())
    out["release_wheels"] = bool(miles.assets)
    return out


@pytest.mark.parametrize("name", sorted(NOT_REPRODUCED))
def test_every_pin_is_reproduced_or_listed_with_its_reason(name, loaded, rendered):
    result = _reproduced(loaded[name], rendered[name])
    missing = {k for k, ok in result.items() if not ok}
    assert missing == set(NOT_REPRODUCED[name]), {
        "missing": sorted(missing - set(NOT_REPRODUCED[name])),
        "reproduced now, drop from NOT_REPRODUCED": sorted(set(NOT_REPRODUCED[name]) - missing)}
    assert len(result) - len(missing) >= 30  # the images, 7 git pins, 11 pip pins, 14 env settings, the patch


def test_every_image_of_the_dockerfile_is_some_variant():
    assert {_variant(v)["image"] for v in VARIANTS} == set(PINS["images"].values())
    assert {v["image_key"] for v in VARIANTS.values()} == set(PINS["images"])


def test_the_rocm720_variant_is_its_own_stack(loaded):
    s, v = loaded["miles-rocm720"], _variant("rocm720-mi35x")
    assert tuple(s.targets) == (v["GPU_ARCH"],)
    assert s.base.image == v["image"] and s.rocm == "7.2.0"
    # Same Dockerfile: the same components as the rocm700 stack, in the same order, with the same pins.
    m = loaded["miles"]
    assert [(c.name, c.git, c.commit, c.mutable_ref, tuple(c.pip)) for c in s.components] == \
           [(c.name, c.git, c.commit, c.mutable_ref, tuple(c.pip)) for c in m.components]
    te = s.component("transformer-engine")
    assert te.kind is not stacks.ComponentKind.WHEEL and "TE_USE_WHEEL=1" in te.source_note


def test_branches_resolved_or_mutable_with_a_reason(miles):
    for pin in PINS["git"]:
        c = next((c for c in miles.git_components if c.git == pin["url"]), None)
        if c is None or pin["ref_kind"] != "branch":
            continue
        assert (c.commit and c.branch == pin["ref"]) or (c.mutable and c.mutable_reason), c.name
    megatron = miles.component("megatron-lm")
    assert megatron.commit.startswith("2e64d788") and megatron.branch == "miles-main"


def test_megatron_patch_is_miles_one_file_change(miles):
    (patch,) = miles.component("megatron-lm").patches
    text = patch.content.decode()
    files = re.findall(r"^\+\+\+ b/(\S+)$", text, re.M)
    assert files == ["megatron/legacy/fused_kernels/__init__.py"]
    added = [line[1:].strip() for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added == ["import torch", "if not torch.version.cuda:", "return"]


def test_every_git_pin_is_a_full_commit_or_declared_mutable(miles):
    for c in miles.git_components:
        assert (c.commit and re.fullmatch(r"[0-9a-f]{40}", c.commit)) or c.mutable_reason, c.name


@pytest.mark.parametrize("name", sorted(NOT_REPRODUCED))
def test_env_settings_carry_reasons(name, loaded):
    s = loaded[name]
    assert all(e.why for e in s.env)
    assert {e.name for e in s.env} >= set(PINS["env"])
