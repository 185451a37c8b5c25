"""The Miles stack against a saved copy of the pins of radixark/miles docker/Dockerfile.rocm at the commit it
follows (tests/data/miles-dockerfile-rocm.pins.json): the rendered Dockerfiles reproduce them pin for pin,
except the pins listed in NOT_REPRODUCED, each with its reason; a new gap, or a gap closed without updating
the list, fails."""

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
ARCHS = ("gfx942", "gfx950")

NOT_REPRODUCED = {
    "image:gfx950-rocm720": "the rocm720-mi35x variant installs its TransformerEngine wheel and a patched ROCr "
                            "library from the release below; without their file names and sha256 it is not a stack",
    "git:rccl-tests": "diagnostic binaries built with make, not a Python component; rocmkit doctor's probes "
                      "measure all-reduce instead",
    "release_wheels": "Miles lists the release through the GitHub API at build time; no stored source names "
                      "the files or their sha256, and rocmkit does not invent a hash",
}


@pytest.fixture(scope="module")
def miles():
    return stacks.load_builtin("miles")


@pytest.fixture(scope="module")
def rendered(miles):
    return {arch: render_dockerfile(make_plan(miles, [arch])) for arch in ARCHS}


def _reproduced(miles, rendered) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for key, image in PINS["images"].items():
        out[f"image:{key}"] = key in rendered and f"FROM {image} AS base" in rendered[key]
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
    for key, value in PINS["env"].items():
        out[f"env:{key}"] = all(f'ENV {key}="{value}"' in t for t in rendered.values())
    for p in PINS["patches"]:
        c = miles.component(p["component"])
        out[f"patch:{p['component']}"] = bool(c and c.patches) and all(
            f"git apply --check /tmp/rocmkit-patches/{c.name}/{c.patches[0].name}" in t for t in rendered.values())
    out["release_wheels"] = bool(miles.assets)
    return out


def test_every_pin_is_reproduced_or_listed_with_its_reason(miles, rendered):
    result = _reproduced(miles, rendered)
    missing = {k for k, ok in result.items() if not ok}
    assert missing == set(NOT_REPRODUCED), {"missing": sorted(missing - set(NOT_REPRODUCED)),
                                            "reproduced now, drop from NOT_REPRODUCED": sorted(set(NOT_REPRODUCED) - missing)}
    assert len(result) - len(missing) >= 30  # the images, 7 git pins, 11 pip pins, 14 env settings, the patch


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


def test_env_settings_carry_reasons(miles):
    assert all(e.why for e in miles.env)
    assert {e.name for e in miles.env} >= set(PINS["env"])
