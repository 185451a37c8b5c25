"""Stacks that follow one named upstream recipe, checked pin for pin against a saved copy of that recipe's pins
(tests/data/recipes/*.toml, each pin with its file and line): the rendered Dockerfiles reproduce every pin,
except those listed in NOT_REPRODUCED with their reason; a new gap, or a gap closed without updating the list,
fails. tests/test_miles_stack.py does the same for Miles."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from rocmkit import stacks
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile

DATA = Path(__file__).parent / "data" / "recipes"

NOT_REPRODUCED = {
    "verl-rocm714": {
        "patch:vllm-pr46009": "the MoE weight-storage fix edits two files with sed; no stored copy of vLLM holds "
                              "both at 18d87a87, so no diff could be checked against them",
        "other:amdsmi-from-rocm-sdk-core": "the recipe links amdsmi from torch's pip ROCm SDK (_rocm_sdk_core); "
                                           "that needs the ROCm-from-pip-wheels base kind (schema work in flight). "
                                           "doctor's vllm_amdsmi check names a missing amdsmi",
        "other:megatron-core-assert-to-warning": "a sed over the installed megatron-core in site-packages, not a "
                                                 "source patch rocmkit can check before the build",
    },
    "verl-amd-2609": {
        "git:sglang": "the recipe's SGLang 0801cc05 (0.5.15), while AMD's docs for the release name SGLang 0.5.19: "
                      "SGLang 0.5.19 lives in the verl-sglang-rocm10 stack (test_verl_sglang_rocm10_pins_v0519)",
        "env:SGLANG_USE_AITER": "set with the recipe's SGLang build, which this stack leaves to verl-sglang-rocm10",
        "env:SGLANG_ATTENTION_BACKEND": "set with the recipe's SGLang build, which this stack leaves to "
                                        "verl-sglang-rocm10",
        "other:amdsmi-rtld-local": "the recipe seds rocm_sdk's RTLD_GLOBAL preload off; rocmkit's pip ROCm fix-ups "
                                   "link devel's libamd_smi to core's instead (one copy, the doctor checks it)",
        "other:libz3-link": "a link from z3-solver's site-packages folder into /usr/lib for tilelang's libtvm; "
                            "tilelang comes with vLLM's requirements, and the stack format has no such step",
    },
}


def _recipes():
    return sorted(DATA.glob("*.toml"))


@pytest.fixture(scope="module", params=_recipes(), ids=lambda p: p.stem)
def recipe(request):
    data = tomllib.loads(request.param.read_text())
    stack = stacks.load_builtin(data["stack"])
    rendered = {a: render_dockerfile(make_plan(stack, [a])) for a in data["archs"]}
    rendered["fat"] = render_dockerfile(make_plan(stack, list(data["archs"])))
    return data, stack, rendered


def _reproduced(data, stack, rendered) -> dict[str, bool]:
    texts = list(rendered.values())
    out = {"base": stack.base.image == data["base"]["image"] and all(f"FROM {data['base']['image']} AS base" in t
                                                                     for t in texts)}
    out["archs"] = list(stack.targets) == data["archs"] and \
        f'PYTORCH_ROCM_ARCH="{";".join(data["archs"])}"' in rendered["fat"]
    for pin in data.get("git", []):
        c = next((c for c in stack.git_components if c.git == pin["url"]), None)
        out[f"git:{pin['name']}"] = c is not None and c.commit == pin["commit"] and all(
            f"git checkout --detach {pin['commit']}" in t for t in texts)
    for kind in ("pip", "bound"):
        for p in data.get(kind, []):
            req = Requirement(p["req"])
            version = stack.pinned_version(req.name)
            out[f"{kind}:{p['req']}"] = version is not None and req.specifier.contains(version, prereleases=True)
    # A branch or tag of the recipe: the stack pins a commit read from that ref, or declares it MUTABLE.
    for m in data.get("moving", []):
        c = next((c for c in stack.git_components if c.git == m["url"]), None)
        out[f"moving:{m['name']}"] = c is not None and (c.branch == m["ref"] if c.commit else c.mutable_ref == m["ref"])
    env = {e.name: e.value for e in stack.env}
    comp_env = {e.name: e.value for c in stack.components for e in c.env}
    for key, value in data.get("env", {}).items():
        out[f"env:{key}"] = env.get(key, comp_env.get(key)) == value
    for p in data.get("patch", []):
        c = stack.component(p["component"])
        found = False
        for patch in (c.patches if c else ()):
            text = patch.content.decode()
            files = re.findall(r"^\+\+\+ b/(\S+)$", text, re.M)
            added = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++")]
            if p["file"] in files and added == p.get("added", added) and all(
                    f"git apply --check /tmp/rocmkit-patches/{c.name}/{patch.name}" in t for t in texts):
                found = True
        out[f"patch:{p['name']}"] = found
    for o in data.get("other", []):
        out[f"other:{o['name']}"] = False  # nothing in the stack format expresses these yet
    return out


def test_every_pin_is_reproduced_or_listed_with_its_reason(recipe):
    data, stack, rendered = recipe
    result = _reproduced(data, stack, rendered)
    missing = {k for k, ok in result.items() if not ok}
    listed = set(NOT_REPRODUCED.get(data["recipe"], {}))
    assert missing == listed, {"missing": sorted(missing - listed), "reproduced now, drop": sorted(listed - missing)}


def test_every_recipe_pin_is_exact(recipe):
    data, _, _ = recipe
    for pin in data.get("git", []):
        assert re.fullmatch(r"[0-9a-f]{40}", pin["commit"]), pin
    for p in data.get("pip", []):
        (spec,) = Requirement(p["req"]).specifier
        assert spec.operator == "==", p
    assert re.fullmatch(r"[0-9a-f]{40}", data["commit"])


def test_base_holds_what_the_stack_does_not_rebuild(recipe):
    """The pins the recipe takes prebuilt from its base are not built again by the stack."""
    data, stack, _ = recipe
    rebuilt = {canonicalize_name(c.name) for c in stack.components}
    assert not rebuilt & {canonicalize_name(n) for n in data["base"].get("contains", {})}
    if "rocm" in data["base"].get("contains", {}):
        assert stack.rocm.startswith(data["base"]["contains"]["rocm"])
        assert stack.python == data["base"]["contains"]["python"]


def test_default_stack_is_on_rocm_714_or_later_with_vllm_022():
    from packaging.version import Version

    default = stacks.load(None)
    assert Version(default.rocm) >= Version("7.14")
    vllm = default.component("vllm")
    assert vllm.commit == "18d87a87dc39c1a50f452b218fdcc3aeec48d18e"  # vLLM 0.22.1rc1 (verl README)


def test_sglang_on_its_non_aiter_path_has_vllm_beside_it():
    """SGLANG_USE_AITER=0 sends SGLang's HIP RMSNorm to vLLM's fused_add_rms_norm (sgl-project/sglang
    python/sglang/srt/layers/layernorm.py). verl's recipe sets 0 with triton attention only in an image that
    holds vLLM, and patches that call (verl docker/rocm/Dockerfile.rocm@c791da0bf lines 75-86): a built-in
    stack with SGLang and SGLANG_USE_AITER=0 must carry vLLM too, or its rollout fails on import."""
    checked = []
    for stack in stacks.all_builtin():
        names = {canonicalize_name(c.name) for c in stack.components}
        if "sglang" not in names:
            continue
        checked.append(stack.name)
        env = {e.name: e.value for e in stack.env}
        if env.get("SGLANG_USE_AITER") == "0":
            assert names & {"vllm", "vllm-rocm-fork"}, f"{stack.name}: SGLANG_USE_AITER=0 without vLLM"
    assert "verl-sglang" in checked


def test_verl_sglang_keeps_the_sglang_commit_verl_validates():
    """verl-sglang stays on SGLang 0.5.15 @0801cc05 (verl Dockerfile.rocm@c791da0bf SGLANG_TAG, and the same
    commit in AMD-Ecosystem/verl's ROCm 10.0 Dockerfile.rocm): no stored recipe pins SGLang >= 0.5.19 exactly
    (see the stack file's header). When one does, this test moves with the stack."""
    stack = stacks.load_builtin("verl-sglang")
    commit = "0801cc05ed202544e2e5c67d6b0a1d454de54fca"
    assert stack.component("sglang").commit == commit
    assert stack.component("sgl-kernel").commit == commit
    assert {e.name: e.value for e in stack.env}["HSA_ENABLE_IPC_MODE_LEGACY"] == "1"  # ROCm 7.2 dma-buf IPC leak


def test_verl_vllm_constraint_file_holds_the_bases_torch_and_triton():
    """The base's torch and Triton (recipe README; the exact torch build from Primus' image table, as the
    stack's base source_note says) are exact pins in the image's pip constraint file."""
    data = tomllib.loads((Path(__file__).parent / "data" / "recipes" / "verl-rocm714.toml").read_text())
    s = stacks.load_builtin(data["stack"])
    pins = {Requirement(r).name: next(iter(Requirement(r).specifier)).version for r in s.constraints}
    assert pins["torch"].split("+")[0] == data["base"]["contains"]["torch"] and pins["torch"] in s.base.source_note
    assert pins["triton"] == data["base"]["contains"]["triton"]
    text = render_dockerfile(make_plan(s, list(s.targets)))
    assert f"printf '%s\\n' torch=={pins['torch']} triton=={pins['triton']} > /opt/rocmkit/constraints.txt" in text
    # The rest of the family, and what the stack declares the base provides, still read from the image.
    assert "grep -iE '^(torchvision|torchaudio|transformer[-_.]engine|flash[-_.]attn|amd[-_.]aiter)=='" in text


@pytest.mark.parametrize("recipe", ["verl-rocm714.toml", "verl-amd-2609.toml"])
def test_a_stack_declares_what_its_recipes_base_contains(recipe):
    """Every component the recipe's docs say the base holds prebuilt is declared in [[base.provides]] (or is
    the stack's ROCm or Python), at the docs' version: the build's first step then checks the base for it."""
    data = tomllib.loads((Path(__file__).parent / "data" / "recipes" / recipe).read_text())
    s = stacks.load_builtin(data["stack"])
    provided = {p.name: p for p in s.base.provides}
    for name, value in data["base"]["contains"].items():
        if name == "rocm":
            assert s.rocm.startswith(value)
        elif name == "python":
            assert s.python == value
        elif provided[name].mutable:  # aiter: named by commit, its metadata version published nowhere
            assert value[:9] in provided[name].mutable_reason + provided[name].source_note
        elif name == "transformer-engine":  # README 'TransformerEngine 2.14.0 @ e6ede467'
            assert provided[name].version.startswith("2.14.0") and value[:8] in provided[name].version
        else:  # an exact version, or the release numbers where the docs give no more
            assert (provided[name].version or provided[name].release).split("+")[0] == value.lstrip("v"), name


def test_verl_sglang_rocm10_pins_v0519():
    """SGLang >= 0.5.19 in a verl stack: v0.5.19's commit (0bcd8223, quoted with the tag by stored third-party
    files) with its tag, so `rocmkit lock` re-checks upstream that the tag still names it; on TheRock's pip ROCm
    10.0.0 with SGLang's ROCm 10 torch, the target's device payload only."""
    from packaging.version import Version

    stack = stacks.load_builtin("verl-sglang-rocm10")
    commit = "0bcd822377da7b5718e674eaf9c870d349424dd1"
    for name in ("sglang", "sgl-kernel"):
        c = stack.component(name)
        assert (c.commit, c.tag) == (commit, "v0.5.19")
    assert stack.component("sgl-kernel").subdir == "python/sglang/kernels/aot" and stack.component("sgl-kernel").single_arch
    assert Version(stack.rocm) >= Version("10.0") and stack.base.pip_sdk
    reqs = stack.base.rocm_wheels.requirements(["gfx950"])
    assert "torch==2.11.0+rocm10.0.0" in reqs and "amd-torch-device-gfx950==2.11.0+rocm10.0.0" in reqs
    assert not any("gfx942" in r for r in reqs)
    text = render_dockerfile(make_plan(stack, ["gfx942"]))
    assert "rocm-sdk-device-gfx942==10.0.0" in text and "gfx950" not in text.split("FROM base AS final")[0]


def test_the_default_stays_verl_vllm_and_the_rocm10_stack_says_why():
    """The default is the newest stack a recipe validates end to end as pinned (verl-vllm, ROCm 7.14); the ROCm 10
    stack takes a branch, a tag and two git heads from its recipe, and its file argues why it is not the default."""
    assert stacks.load(None).name == "verl-vllm"
    rocm10 = stacks.load_builtin("verl-rocm10")
    assert {c.name for c in rocm10.mutable_components} == {"vllm", "flash-linear-attention", "mbridge"}
    header = Path(rocm10.path).read_text().split("schema =")[0]
    assert "Not the default stack" in header and "verl-vllm" in header
