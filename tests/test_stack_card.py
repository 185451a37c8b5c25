"""Issue 70: every component the product card names (ROCm, torch, TransformerEngine, vLLM/SGLang, Triton, aiter,
torch_memory_saver) is pinned in every built-in stack where it is present: built from a commit, installed at an
exact version, or declared as coming from the base and checked by the build. Where a stack declares none, this
file says why; where no published file gives a version, the stack says so (MUTABLE, with its reason)."""

from __future__ import annotations

import pytest

from rocmkit import stacks
from rocmkit.stacks.card import CARD, pins

# Stack -> card components it does not hold, each with the reason. A new stack, or a component added to or
# dropped from one, fails the test below until this table says which.
ABSENT = {
    "verl-vllm": {"SGLang": "verl's recipe adds SGLang in its last stage; rocmkit keeps it in verl-sglang",
                  "torch_memory_saver": "the vLLM rollout sleeps through vLLM's sleep mode; the recipe installs none"},
    "verl-rocm10": {"SGLang": "SGLang 0.5.19 is the verl-sglang-rocm10 stack",
                    "torch_memory_saver": "the vLLM rollout sleeps through vLLM's own sleep mode"},
    "verl-vllm-rocm702": {"SGLang": "a vLLM stack"},
    "verl-sglang": {"TransformerEngine": "no Megatron: the Python 3.10 base cannot install megatron-core 0.18",
                    "vLLM": "an SGLang stack"},
    "verl-sglang-rocm10": {"TransformerEngine": "no Megatron in this SGLang stack", "vLLM": "an SGLang stack"},
    "miles": {"vLLM": "Miles rolls out with SGLang"},
    "miles-rocm720": {"vLLM": "Miles rolls out with SGLang"},
    "trl-vllm": {"TransformerEngine": "TRL trains with accelerate and DeepSpeed", "SGLang": "a vLLM stack",
                 "torch_memory_saver": "TRL's vLLM server runs on its own GPU"},
    "verl-cpu": {"ROCm": "a CPU stack", "TransformerEngine": "a CPU stack", "SGLang": "a CPU stack",
                 "Triton": "a CPU stack", "aiter": "a CPU stack", "torch_memory_saver": "a CPU stack"},
    "trl-cpu": {"ROCm": "a CPU stack", "TransformerEngine": "a CPU stack", "SGLang": "a CPU stack",
                "Triton": "a CPU stack", "aiter": "a CPU stack", "torch_memory_saver": "a CPU stack"},
}


@pytest.mark.parametrize("name", stacks.builtin_names())
def test_every_card_component_is_pinned_or_said_absent(name):
    found = pins(stacks.load_builtin(name))
    absent = ABSENT.get(name, {})
    for component in CARD:
        if component in absent:
            assert not found[component], f"{name}: {component} is listed absent but the stack pins it"
        else:
            assert found[component], f"{name}: {component} is neither pinned nor listed absent (with why) here"


@pytest.mark.parametrize("name", stacks.builtin_names())
def test_every_mutable_pin_says_why(name):
    s = stacks.load_builtin(name)
    names = {n for names in CARD.values() for n in names}
    for c in s.components:
        if c.name in names and c.mutable:
            assert c.mutable_reason
    for p in s.base.provides:
        assert p.version or p.release or p.mutable_reason, (name, p.name)


def test_the_default_stack_checks_every_base_component_it_can():
    """verl-vllm: ROCm, torch, TransformerEngine and Triton from the base, each checked at the version the
    recipe's README and Primus' table give; vLLM from a commit; only aiter (named by commit, not by version)
    is recorded rather than checked."""
    found = pins(stacks.load_builtin("verl-vllm"))
    assert {p.how for c in ("ROCm", "torch", "TransformerEngine", "Triton") for p in found[c]} <= {"base", "exact"}
    assert [p.how for p in found["vLLM"]] == ["commit"]
    assert [p.how for p in found["aiter"]] == ["mutable"]
    assert "2.14.0.dev0+e6ede467" in found["TransformerEngine"][0].text


def test_the_host_set_up_and_the_image_agree_on_the_rollout_or_the_docs_say_why():
    """The README's host venv installs a vLLM for verl; the default image builds its own. Where the versions
    differ, docs/stacks.md names both and says why (issue 70)."""
    import re
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    host = re.search(r"\.venv-verl/bin/pip install [^\n]*'vllm==([0-9][^']*)'", (repo / "README.md").read_text())
    assert host, "the README's verl venv line pins no vllm: update this test with what it installs"
    vllm = stacks.load_builtin("verl-vllm").component("vllm")
    image = re.search(r"vLLM (\d+\.\d+\.\d+\w*) @ ([0-9a-f]{8})", vllm.source_note)
    assert image and vllm.commit.startswith(image.group(2))
    if host.group(1) != image.group(1):
        docs = (repo / "docs" / "stacks.md").read_text()
        why = docs[docs.index("**The rollout's version on the host and in the image differ"):].split("\n\n", 1)[0]
        assert f"`vllm=={host.group(1)}`" in why and f"vLLM {image.group(1)} at `{vllm.commit[:8]}`" in why
