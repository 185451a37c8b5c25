"""Planning: the stage DAG, arch checks, derived runtime env, the inputs hash and tag."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from rocmkit import stacks
from rocmkit.errors import InputFileError, UsageError
from rocmkit.image.plan import DEFAULT_MAX_JOBS, LocalSource, make_plan, plan_document
from rocmkit.raycompat import HIP_VAR, ROCR_VAR
from rocmkit.stacks import EnvVar

EXAMPLE = Path(__file__).parent / "data" / "stacks" / "dev-example.toml"


@pytest.fixture
def stack():
    return stacks.load_file(EXAMPLE)


def with_ray(stack, version):
    comps = tuple(dataclasses.replace(c, pip=(f"ray[default]=={version}",)) if c.name == "ray" else c
                  for c in stack.components)
    return dataclasses.replace(stack, components=comps)


def test_stages_follow_the_dependency_dag(stack):
    plan = make_plan(stack, ["gfx942"])
    assert [s.name for s in plan.stages] == ["build-alpha", "build-beta", "build-gamma"]
    assert plan.levels() == [["build-alpha", "build-beta"], ["build-gamma"]]
    assert plan.stages[2].needs == ("alpha", "beta")
    assert plan.build_args == {"MAX_JOBS": str(DEFAULT_MAX_JOBS)}
    assert DEFAULT_MAX_JOBS < 64


def test_transitive_needs_are_installed(stack):
    comps = list(stack.components)
    comps[1] = dataclasses.replace(comps[1], needs=("alpha",))  # beta needs alpha; gamma needs beta
    comps[2] = dataclasses.replace(comps[2], needs=("beta",))
    plan = make_plan(dataclasses.replace(stack, components=tuple(comps)), ["gfx942"])
    assert plan.levels() == [["build-alpha"], ["build-beta"], ["build-gamma"]]
    assert plan.stages[2].needs == ("alpha", "beta")


def test_arch_variables_all_carry_the_targets(stack):
    single = [c for c in stack.git_components if c.single_arch]
    multi_stack = dataclasses.replace(stack, components=tuple(
        dataclasses.replace(c, single_arch=False) if c in single else c for c in stack.components))
    plan = make_plan(multi_stack, ["gfx942", "gfx950"])
    env = dict(plan.arch_env)
    for name in ("PYTORCH_ROCM_ARCH", "GPU_ARCHS", "NVTE_ROCM_ARCH", "AMDGPU_TARGET", "GPU_TARGETS"):
        assert env[name] == "gfx942;gfx950"
    assert env["HIPCC_COMPILE_FLAGS_APPEND"] == "--offload-arch=gfx942 --offload-arch=gfx950"


def test_single_arch_component_refuses_two_targets(stack):
    with pytest.raises(UsageError, match="gamma for exactly one arch"):
        make_plan(stack, ["gfx942", "gfx950"])


def test_unsupported_arch_and_too_old_rocm(stack):
    with pytest.raises(UsageError, match="does not support arch gfx90a"):
        make_plan(stack, ["gfx90a"])
    old = dataclasses.replace(stack, rocm="6.3.4")
    with pytest.raises(InputFileError, match="ROCm 6.3.4 does not support gfx950"):
        make_plan(old, ["gfx950"])
    make_plan(old, ["gfx942"])  # gfx942 is fine on 6.3.4


@pytest.mark.parametrize("version,var", [("2.44.1", ROCR_VAR), ("2.45.0", HIP_VAR), ("2.60.0", HIP_VAR)])
def test_ray_noset_variable_follows_the_pinned_ray(stack, version, var):
    plan = make_plan(with_ray(stack, version), ["gfx942"])
    names = [e.name for e in plan.runtime_env]
    assert var in names and ({HIP_VAR, ROCR_VAR} - {var}).isdisjoint(names)
    assert plan.labels["io.rocmkit.ray-version"] == version


def test_stack_may_not_set_the_ray_variable_itself(stack):
    bad = dataclasses.replace(stack, env=stack.env + (EnvVar(ROCR_VAR, "1", "wrong"),))
    with pytest.raises(InputFileError, match="derived from the pinned Ray version"):
        make_plan(bad, ["gfx942"])


def test_identical_inputs_give_identical_tags(stack):
    a = make_plan(stack, ["gfx942"])
    b = make_plan(stacks.load_file(EXAMPLE), ["gfx942"])
    assert a.tag == b.tag and a.inputs_hash == b.inputs_hash
    assert a.tag.startswith("rocmkit/dev-example:rocm7.0.2-gfx942-")
    assert make_plan(stack, ["gfx942"], max_jobs=3).tag == a.tag  # parallelism does not change the image


def test_every_input_changes_the_tag(stack):
    base = make_plan(stack, ["gfx942"]).tag
    assert make_plan(stack, ["gfx950"]).tag != base
    assert make_plan(stack, ["gfx942"], base_image="mirror.example.com/rocm/dev:7.0.2").tag != base
    assert make_plan(with_ray(stack, "2.60.0"), ["gfx942"]).tag != base
    comps = tuple(dataclasses.replace(c, commit="f" * 40) if c.name == "alpha" else c for c in stack.components)
    assert make_plan(dataclasses.replace(stack, components=comps), ["gfx942"]).tag != base


def test_local_sources_count_by_content_not_path(stack):
    one = make_plan(stack, ["gfx942"], sources={"alpha": LocalSource("alpha", "/a/alpha", "d" * 64)})
    two = make_plan(stack, ["gfx942"], sources={"alpha": LocalSource("alpha", "/elsewhere", "d" * 64)})
    three = make_plan(stack, ["gfx942"], sources={"alpha": LocalSource("alpha", "/a/alpha", "e" * 64)})
    assert one.tag == two.tag != three.tag
    assert one.labels["io.rocmkit.local-sources"] == "alpha=sha256:" + "d" * 12
    entry = next(c for c in one.manifest["components"] if c["name"] == "alpha")
    assert entry["local_source"] == {"digest": "d" * 64}
    assert one.manifest == two.manifest  # the image records content, not where it was built from


def test_mutable_components_warn_unless_built_locally(stack):
    plan = make_plan(stack, ["gfx942"])
    assert any("gamma is MUTABLE" in w for w in plan.warnings)
    assert plan.labels["io.rocmkit.mutable-components"] == "gamma"
    local = make_plan(stack, ["gfx942"], sources={"gamma": LocalSource("gamma", "/g", "a" * 64)})
    assert not local.warnings and "io.rocmkit.mutable-components" not in local.labels


def test_bad_plan_inputs(stack):
    with pytest.raises(UsageError, match="no git component 'ray'"):
        make_plan(stack, ["gfx942"], sources={"ray": LocalSource("ray", "/r", "a" * 64)})
    with pytest.raises(UsageError, match="not an image reference"):
        make_plan(stack, ["gfx942"], base_image="bad image; rm -rf /")
    with pytest.raises(UsageError, match="at least 1"):
        make_plan(stack, ["gfx942"], max_jobs=0)


def test_plan_document_is_complete(stack):
    doc = plan_document(make_plan(stack, ["gfx942"]))
    assert doc["parallel_levels"] == [["build-alpha", "build-beta"], ["build-gamma"]]
    assert doc["stages"][2]["needs"] == ["build-alpha", "build-beta"]
    assert doc["stages"][2]["mutable"] is True
    assert doc["final"]["pip"] == ["ray[default]==2.53.0", "tensordict==0.6.2"]
    assert doc["runtime_env"][HIP_VAR] == "1"


def test_with_max_jobs_is_the_plan_made_with_them():
    """`build --max-jobs auto` makes the plan once and sets MAX_JOBS when the builder is known."""
    stack = stacks.load_builtin("verl-vllm")
    assert make_plan(stack, ["gfx942"]).with_max_jobs(5) == make_plan(stack, ["gfx942"], max_jobs=5)
    with pytest.raises(UsageError):
        make_plan(stack, ["gfx942"]).with_max_jobs(0)
