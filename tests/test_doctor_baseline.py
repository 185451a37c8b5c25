"""Fleet depth: a good host's run saved as the baseline, this host compared with it, two saved runs compared.
Trees are generated (treegen); probe figures are the ones recorded on real GPUs
(tests/data/probes), lowered by hand to make a slow GPU."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.probes import run as probes
from rocmkit.host.baseline import compare
from rocmkit.host.facts import collect
from rocmkit.host.model import Status
from rocmkit.host.report import doctor_document
from treegen import HostSpec, write_tree

PROBES = Path(__file__).parent / "data" / "probes"


def doctor(*args: str):
    return CliRunner().invoke(cli, ["doctor", *args])


def by_id(findings) -> dict:
    return {(f["id"] if isinstance(f, dict) else f.id): f for f in findings}


def test_a_changed_firmware_is_flagged_against_the_baseline(tmp_path):
    good, bad = write_tree(tmp_path / "good", HostSpec()), write_tree(tmp_path / "bad", HostSpec(fw_versions=(177, 178)))
    base = tmp_path / "base.json"
    out = doctor("--root", str(good), "--save-baseline", str(base))
    assert out.exit_code == 0, out.output
    saved = json.loads(base.read_text())
    assert saved["fingerprint"]["gpus"]["0000:15:00.0"]["fw_mec"] == 177 and saved["fingerprint"]["kernel"]
    out = doctor("--root", str(bad), "--baseline", str(base), "--json")
    found = by_id(json.loads(out.stdout)["findings"])
    assert found["baseline.firmware"]["status"] == "warn"
    assert "fw_mec 177 → 178 on 0000:15:00.0" in found["baseline.firmware"]["title"]
    assert found["baseline.software"]["status"] == "pass" and found["baseline.gpus"]["status"] == "pass"
    same = json.loads(doctor("--root", str(good), "--baseline", str(base), "--json").stdout)["findings"]
    assert {f["status"] for f in same if f["id"].startswith("baseline.")} == {"pass", "skip"}


def test_partition_mode_missing_gpus_and_regressed_checks(tmp_path):
    base = doctor_document([], collect(str(write_tree(tmp_path / "a", HostSpec()))), level=1, strict=False)
    facts = collect(str(write_tree(tmp_path / "b", HostSpec(gpus=7, mode="CPX"))))
    now = doctor_document([], facts, level=1, strict=False)
    found = by_id(compare(base, now))
    assert found["baseline.gpus"].status is Status.FAIL and "0000:75:00.0" in found["baseline.gpus"].title
    slow = doctor_document([], collect(str(write_tree(tmp_path / "c", HostSpec(links={2: (16.0, 16)})))),
                           level=1, strict=False)
    gpus = by_id(compare(base, slow))["baseline.gpus"]
    assert gpus.status is Status.WARN and "pcie '32.0 GT/s PCIe x16' → '16.0 GT/s PCIe x16' on 0000:25:00.0" in gpus.title
    base["findings"] = [{"id": "kernel.numa_balancing", "status": "pass"}]
    now["findings"] = [{"id": "kernel.numa_balancing", "status": "fail", "title": "NUMA balancing is on"}]
    assert by_id(compare(base, now))["baseline.findings"].status is Status.FAIL


def test_every_check_that_got_worse_is_named_failures_first():
    # Six checks passed in the baseline; five warn now and the sixth (listed last by the checks) fails. The title
    # used to name the first five, so the one failure was the one left out; a warn → fail was not counted at all.
    ids = ["gpu.kfd", "gpu.render", "kernel.numa_balancing", "env.visible", "system.shm", "software.torch"]
    base = {"findings": [{"id": i, "status": "pass"} for i in ids] + [{"id": "system.memlock", "status": "warn"}]}
    now = {"findings": [{"id": i, "status": "warn"} for i in ids[:5]] + [{"id": "software.torch", "status": "fail"},
                                                                       {"id": "system.memlock", "status": "fail"}]}
    found = by_id(compare(base, now, base_name="base.json"))["baseline.findings"]
    assert found.status is Status.FAIL
    title = found.title
    assert title.startswith("7 check(s) are worse than on base.json: software.torch (pass → fail), "
                            "system.memlock (warn → fail), gpu.kfd (pass → warn)"), title
    assert all(i in title for i in ids)
    assert [r["id"] for r in found.evidence["regressed"]][:2] == ["software.torch", "system.memlock"]


def run_with_figures(scale_gpu1: float = 1.0) -> dict:
    doc = json.loads((PROBES / "h200-x2.json").read_text())
    doc = copy.deepcopy(doc)
    for fig in doc["gpus"][1]["figures"].values():
        fig["value"] *= scale_gpu1
        fig["samples"] = [s * scale_gpu1 for s in fig["samples"]]
    return {"schema": "rocmkit.doctor/v1", "findings": [f.to_json() for f in probes.findings_for(doc)]}


@pytest.mark.parametrize(("scale", "status"), [(0.97, "pass"), (0.85, "warn"), (0.78, "fail")])
def test_a_probe_figure_below_the_baseline(tmp_path, scale, status):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(run_with_figures()))
    b.write_text(json.dumps(run_with_figures(scale)))
    out = doctor("--compare", str(a), str(b), "--json")
    doc = json.loads(out.stdout)
    assert doc["schema"] == "rocmkit.doctor-compare/v1"
    figures = by_id(doc["findings"])["baseline.figures"]
    assert figures["status"] == status, figures["title"]
    if status != "pass":
        assert "GPU 1" in figures["title"] and "GPU 0" not in figures["title"].split(":")[1]
        assert out.exit_code == (1 if status == "fail" else 0)


def test_bad_files_are_named_and_nothing_is_overwritten(tmp_path):
    junk = tmp_path / "notes.txt"
    junk.write_text("my notes")
    out = doctor("--compare", str(junk), str(junk))
    assert out.exit_code == 2 and "notes.txt: not JSON" in out.output
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}')
    out = doctor("--compare", str(other), str(other))
    assert out.exit_code == 2 and "not a saved doctor run" in out.output
    tree = write_tree(tmp_path / "t", HostSpec())
    out = doctor("--root", str(tree), "--save-baseline", str(other))
    assert out.exit_code == 2 and other.read_text() == '{"a": 1}'
    out = doctor("--compare", str(other), str(other), "--root", str(tree))
    assert out.exit_code == 2 and "takes no" in out.output


def test_a_failing_run_is_not_saved_as_a_baseline_without_force(tmp_path):
    """A baseline is what other hosts are held to: a host whose check fails is not saved as one in silence."""
    bad = write_tree(tmp_path / "bad", HostSpec(kfd=False))
    base = tmp_path / "base.json"
    out = doctor("--root", str(bad), "--save-baseline", str(base))
    assert out.exit_code == 1 and not base.exists()
    assert f"--save-baseline {base}: not saved: 1 check(s) failed: gpu.kfd" in out.stderr
    assert "add --force" in out.stderr
    out = doctor("--root", str(bad), "--save-baseline", str(base), "--force")
    assert out.exit_code == 1 and json.loads(base.read_text())["schema"] == "rocmkit.doctor/v1"
    assert f"saved this run as a baseline in {base}, with --force, although 1 check(s) failed" in out.stderr
    out = doctor("--root", str(bad), "--force")
    assert out.exit_code == 2 and "--save-baseline" in out.output
