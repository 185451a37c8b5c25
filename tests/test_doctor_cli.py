"""The doctor end to end: real KFD captures, capture/--root round trip, CLI options, and a property
test that random or corrupt trees never crash it."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmkit.cli import cli
from rocmkit.errors import EnvironmentMissing
from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import PROCESS_FILE, collect
from rocmkit.host.facts.reader import KFD_TOPOLOGY
from rocmkit.host.model import Finding, Status
from rocmkit.host.report import doctor_document, heading, table
from treegen import HostSpec, healthy_process, write_tree

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "kfd"
# name: (GPU nodes, physical GPUs, partitions per GPU, arch)
EXPECTED = {
    "mi300x-spx-gpuq": (1, 1, {1}, "gfx942"),
    "mi300x-cpx": (63, 8, {8, 7}, "gfx942"),  # one partition (e5:00.7) is absent from that capture
    "mi308x-cpx": (32, 8, {4}, "gfx942"),
    "mi210-xgmi": (8, 8, {1}, "gfx90a"),
    "vega10-legacy": (2, 2, {1}, None),  # old kernel: no gfx_target_version key
}


def root_for_capture(tmp_path: Path, name: str) -> Path:
    src = CAPTURES / name
    topo = src / "topology" if (src / "topology").is_dir() else src
    root = tmp_path / name
    link = root / KFD_TOPOLOGY
    link.parent.mkdir(parents=True)
    link.symlink_to(topo)
    return root


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_captures_give_physical_gpus_and_partitions(tmp_path, name):
    if not (CAPTURES / name).is_dir():
        pytest.skip(f"real capture {name} not present (../shared/fixtures is absent in a fresh clone)")
    nodes, physical, parts, gfx = EXPECTED[name]
    facts = collect(str(root_for_capture(tmp_path, name)), process=False)
    assert sum(n.is_gpu for n in facts.nodes) == nodes
    assert len(facts.devices) == physical
    assert {d.partitions for d in facts.devices} == parts
    assert {d.gfx for d in facts.devices} == {gfx}
    findings = {f.id: f for f in run_checks(facts, Context())}
    assert findings["gpu.count"].evidence["physical"] == physical
    assert not any(k.startswith("doctor.internal") for k in findings)


def test_capture_then_root_reproduces_the_result(tmp_path):
    src = write_tree(tmp_path / "src", HostSpec(mode="CPX", container=True, not_granted=(5, 6, 7),
                                                process=healthy_process(env={"HIP_VISIBLE_DEVICES": ""})))
    first = collect(str(src))
    out = capture(first, str(tmp_path / "cap"))
    second = collect(str(out))
    a = [f.to_json() for f in run_checks(first, Context())]
    b = [f.to_json() for f in run_checks(second, Context())]
    assert a == b
    assert (out / PROCESS_FILE).exists()
    with pytest.raises(Exception, match="not an empty folder"):
        capture(first, str(out))


def test_capture_of_this_machine_via_cli(tmp_path):
    out = tmp_path / "cap"
    r = CliRunner().invoke(cli, ["doctor", "--capture", str(out), "--json"])
    assert r.exit_code in (0, 1), r.output
    live = json.loads(r.stdout)
    r2 = CliRunner().invoke(cli, ["doctor", "--root", str(out), "--json"])
    replay = json.loads(r2.stdout)
    # everything but the access judgement (not made on a captured tree) comes out the same
    strip = lambda doc: {(f["id"], f["status"]) for f in doc["findings"] if f["id"] != "gpu.kfd"}  # noqa: E731
    assert strip(live) == strip(replay)


def test_cli_json_strict_only_and_bad_usage(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(numa_balancing="1", process=healthy_process()))
    runner = CliRunner()
    r = runner.invoke(cli, ["doctor", "--root", str(root), "--json"])
    doc = json.loads(r.stdout)
    assert doc["schema"] == "rocmkit.doctor/v1" and doc["level"] == 1
    assert doc["summary"]["warn"] >= 1 and r.exit_code == 0 and doc["exit_code"] == 0
    assert doc["host"]["gpus"][0]["product"] == "MI300X"
    assert runner.invoke(cli, ["doctor", "--root", str(root), "--strict"]).exit_code == 1
    r = runner.invoke(cli, ["doctor", "--root", str(root), "--only", "kernel.numa_balancing", "--json"])
    assert [f["id"] for f in json.loads(r.stdout)["findings"]] == ["kernel.numa_balancing"]
    r = runner.invoke(cli, ["doctor", "--root", str(root), "--arch", "gfx1234"])
    assert r.exit_code == 2 and "unknown arch" in r.output
    r = runner.invoke(cli, ["doctor", "--root", str(tmp_path / "nope")])
    assert r.exit_code == 2
    r = runner.invoke(cli, ["doctor", "--root", str(root), "--capture", str(tmp_path / "c")])
    assert r.exit_code == 2 and "takes no --root" in r.output


def test_table_groups_by_area_with_fixes(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(numa_balancing="1", process=healthy_process()))
    facts = collect(str(root))
    text = table(run_checks(facts, Context()), heading(facts))
    assert "\nGPU\n" in text and "\nKERNEL\n" in text and "fix: sudo sysctl -w kernel.numa_balancing=0" in text
    assert text.rstrip().splitlines()[-1].startswith("doctor passed with warnings")


# --- property test: random and corrupt trees never crash the doctor ---------------------------------

garbage = st.one_of(st.binary(max_size=200).map(lambda b: b.decode("latin-1")),
                    st.lists(st.tuples(st.sampled_from(["simd_count", "gfx_target_version", "device_id",
                                                        "location_id", "unique_id", "num_xcc", "drm_render_minor",
                                                        "fw_version", "hive_id", "domain", "junk"]),
                                       st.one_of(st.integers(0, 2**64), st.text(max_size=8))), max_size=12)
                    .map(lambda kv: "".join(f"{k} {v}\n" for k, v in kv)))


# Variables whose values the checks parse (indices, numbers, versions): fed any text, "²" and "٣" included.
ENV_KEYS = ["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_MIN_NCHANNELS",
            "PYTORCH_ROCM_ARCH", "GPU_ARCHS", "HSA_OVERRIDE_GFX_VERSION", "HIP_FORCE_DEV_KERNARG",
            "HSA_NO_SCRATCH_RECLAIM", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_X"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.builds(HostSpec, product=st.sampled_from(["MI300X", "MI308X", "MI355X", "MI300X VF", "MI210"]),
                      gpus=st.integers(0, 4), mode=st.sampled_from(["SPX", "DPX", "QPX", "CPX"]),
                      numa_balancing=st.text(max_size=3), cmdline=st.text(max_size=40), rocm=st.one_of(
                          st.none(), st.text(max_size=8)), amdgpu=st.one_of(st.none(), st.text(max_size=6))),
       corrupt=st.lists(st.tuples(st.integers(0, 40), garbage), max_size=6),
       process=st.one_of(st.none(), st.just("{not json"), st.just('{"env": {"A": 1}}'), st.just("[]"),
                         st.dictionaries(st.sampled_from(ENV_KEYS), st.text(max_size=8), max_size=6).map(
                             lambda env: json.dumps(healthy_process(env=env)))),
       remove=st.lists(st.sampled_from(["dev/kfd", "proc/cmdline", "sys/module", "opt/rocm", "sys/bus"]), max_size=3))
def test_random_and_corrupt_trees_never_crash(tmp_path_factory, spec, corrupt, process, remove):
    root = write_tree(tmp_path_factory.mktemp("t"), spec)
    nodes = root / KFD_TOPOLOGY / "nodes"
    for index, text in corrupt:
        target = nodes / str(index) / "properties"
        if target.is_dir():
            continue
        if index % 7 == 3 and target.exists():
            target.unlink()
            target.mkdir()  # a directory where a file should be
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, errors="replace")
    if process is not None:
        (root / PROCESS_FILE).write_text(process)
    for rel in remove:
        p = root / rel
        shutil.rmtree(p) if p.is_dir() else (p.unlink() if p.exists() else None)
    facts = collect(str(root))
    findings = run_checks(facts, Context(arch="gfx942"))
    assert not [f for f in findings if f.id.startswith("doctor.internal")], findings
    json.dumps(doctor_document(findings, facts, level=1, strict=False))
    table(findings, heading(facts))


def test_level1_reads_only(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    before = {p: p.stat().st_mtime_ns for p in root.rglob("*")}
    CliRunner().invoke(cli, ["doctor", "--root", str(root), "--json"])
    assert {p: p.stat().st_mtime_ns for p in root.rglob("*")} == before and os.listdir(root)


# --- level 2: the contract with rocmkit.host.probes (`run_probes(facts) -> list[Finding]`) ----------------

def _probes_module(monkeypatch, run_probes):
    """Put run_probes where the doctor calls it from."""
    monkeypatch.setattr("rocmkit.host.probes.run.run_probes", run_probes)


def test_level2_findings_join_the_report(monkeypatch, tmp_path):
    seen = []

    def run_probes(facts):
        seen.append(facts)
        return [Finding(id="probe.gemm.bf16", area="probe", status=Status.WARN, title="bf16 GEMM 410 TFLOP/s",
                        evidence={"tflops": 410.0, "expected": 1307.0})]

    _probes_module(monkeypatch, run_probes)
    r = CliRunner().invoke(cli, ["doctor", "--level", "2", "--json", "--only", "probe"])
    doc = json.loads(r.stdout)
    assert doc["level"] == 2 and [f["id"] for f in doc["findings"]] == ["probe.gemm.bf16"]
    assert doc["findings"][0]["evidence"]["tflops"] == 410.0 and seen and seen[0].live
    assert CliRunner().invoke(cli, ["doctor", "--level", "2", "--only", "probe", "--strict"]).exit_code == 1
    r = CliRunner().invoke(cli, ["doctor", "--level", "2", "--root", str(tmp_path)])
    assert r.exit_code == 2 and "level 1" in r.output


def test_level2_probe_errors(monkeypatch):
    def crashes(facts):
        raise RuntimeError("HIP error: invalid device function")

    _probes_module(monkeypatch, crashes)
    r = CliRunner().invoke(cli, ["doctor", "--level", "2", "--json", "--only", "probe"])
    doc = json.loads(r.stdout)
    assert r.exit_code == 1 and doc["findings"][0]["id"] == "probe.internal"
    assert "invalid device function" in doc["findings"][0]["title"]

    def no_gpu(facts):
        raise EnvironmentMissing("no GPU visible to PyTorch")

    _probes_module(monkeypatch, no_gpu)
    r = CliRunner().invoke(cli, ["doctor", "--level", "2"])
    assert r.exit_code == 3 and "no GPU visible" in r.output


@pytest.mark.parametrize("selector, suggestion", [("gpu.kdf", "gpu.kfd"), ("kernel.numa_balance", "kernel.numa_balancing"),
                                                   ("gpu,gpu.kdf", "gpu.kfd")])
def test_only_that_selects_no_check_is_refused_naming_the_closest_ids(tmp_path, selector, suggestion):
    # a typo in a known area ("gpu.") used to run 0 checks and say "doctor passed"
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", selector])
    assert r.exit_code == 2, r.output
    assert "no check has such an id" in r.output and f"did you mean {suggestion}" in r.output
    assert "passed" not in r.output
    # --image refuses it too, before it looks for an engine or starts a container
    r = CliRunner().invoke(cli, ["doctor", "--image", "no-such-image", "--only", selector])
    assert r.exit_code == 2 and f"did you mean {suggestion}" in r.output


def test_only_accepts_ids_prefixes_and_family_members(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    for selector in ("gpu.kfd", "gpu", "kernel.log", "env.arch.gfx942", "gpu.kfd,env"):
        r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", selector, "--json"])
        if r.exit_code == 2:  # accepted, but this healthy tree has no finding of that family: nothing checked
            assert "nothing was checked" in r.output and "no check has such an id" not in r.output, r.output
            continue
        assert r.exit_code in (0, 1), (selector, r.output)
        wanted = selector.split(",")
        assert all(any(f["id"] == w or f["id"].startswith(w + ".") for w in wanted)
                   for f in json.loads(r.stdout)["findings"])


@pytest.mark.parametrize("strict", [[], ["--strict"]])
def test_a_selection_that_reports_nothing_is_refused_not_passed(tmp_path, strict):
    # A host without a KFD topology: gpu.arch and gpu.count say nothing (gpu.topology speaks for the GPUs), so
    # `--only gpu.arch,gpu.count` checked nothing; it used to print "doctor passed: 0 pass ..." and exit 0.
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    shutil.rmtree(root / "sys" / "class" / "kfd")
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--arch", "gfx942", "--only", "gpu.arch,gpu.count",
                                 *strict])
    assert r.exit_code == 2, r.output
    assert "--only gpu.arch,gpu.count" in r.output and "nothing was checked" in r.output and "passed" not in r.output
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", "gpu.topology,gpu.count", *strict])
    assert r.exit_code == 1 and "gpu.topology" in r.output  # one selected check spoke: a normal report


def test_only_probe_ids_need_level_2(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", "probe.hbm"])
    assert r.exit_code == 2 and "--level 2" in r.output
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", "probe.hmb"])
    assert r.exit_code == 2 and "did you mean probe.hbm" in r.output


@pytest.mark.parametrize("part", ["sys/class/kfd/kfd/topology", "sys/class/kfd/kfd", "sys/class/kfd/kfd/topology/nodes",
                                  "sys/module/amdgpu", "sys"])
def test_root_that_is_a_part_of_a_tree_says_where_it_belongs(tmp_path, part):
    # pointed at a bare topology/ copied from /sys/class/kfd/kfd, the doctor said "amdgpu kernel driver is not loaded"
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root / part)])
    assert r.exit_code == 2, r.output
    assert f"looks like the host's /{part} alone" in r.output and f"TREE/{part}" in r.output
    assert "not loaded" not in r.output and "Traceback" not in r.output


def test_root_that_is_no_tree_says_what_a_tree_holds(tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "readme.txt").write_text("hello\n")
    r = CliRunner().invoke(cli, ["doctor", "--root", str(folder)])
    assert r.exit_code == 2 and "not a root filesystem tree" in r.output
    assert "sys/class/kfd/kfd/topology/nodes/N/properties" in r.output and "rocmkit doctor --capture" in r.output


def test_real_topology_copied_alone_is_refused_and_placed_it_checks(tmp_path):
    src = CAPTURES / "mi300x-cpx" / "topology"
    if not src.is_dir():
        pytest.skip("real capture mi300x-cpx not present (../shared/fixtures is absent in a fresh clone)")
    r = CliRunner().invoke(cli, ["doctor", "--root", str(src)])
    assert r.exit_code == 2 and "sys/class/kfd/kfd/topology" in r.output
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root_for_capture(tmp_path, "mi300x-cpx")), "--json"])
    found = {f["id"]: f for f in json.loads(r.stdout)["findings"]}
    assert found["gpu.driver"]["status"] == "pass"
    # the device node is absent from the tree, and the fix says so instead of "load the amdgpu driver"
    assert "not in the captured tree" in found["gpu.kfd"]["title"]
    assert "modprobe" not in found["gpu.kfd"]["fix"] and "--capture" in found["gpu.kfd"]["fix"]
