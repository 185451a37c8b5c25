"""VF config replication on generated trees shaped like SGLang's layouts, including every defect of the
upstream `find | xargs sed s/MI300X/MI300X_VF/` one-liner."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.errors import Failed, UsageError
from rocmkit.host import vfconfigs

BLOCK = "block_shape=[128, 128]"
LAYOUTS = {
    # SGLang v0.4.0-v0.4.2: MoE configs not yet under moe/
    "v0.4.0": ["srt/layers/quantization/configs", "srt/layers/fused_moe_triton/configs"],
    # v0.4.3+: flat folders under moe/
    "v0.4": ["srt/layers/quantization/configs", "srt/layers/moe/fused_moe_triton/configs"],
    # v0.5.x: per-Triton-version subfolders
    "v0.5": ["srt/layers/quantization/configs", "srt/layers/moe/fused_moe_triton/configs/triton_3_1_0",
             "srt/layers/moe/fused_moe_triton/configs/triton_3_4_0"],
    # v0.5.17: MoE configs moved under moe_runner (the upstream one-liner never looks there)
    "v0.5.17": ["srt/layers/quantization/configs", "srt/layers/moe/moe_runner/triton_utils/configs/triton_3_1_0"],
}


def make_sglang_tree(root: Path, layout: str) -> dict[str, Path]:
    """An SGLang-shaped package: per config folder, files for MI300X, MI325X, MI300X_HF and Radeon,
    and a folder whose own name contains MI300X."""
    pkg = root / "sglang"
    pkg.mkdir(parents=True)
    # Importing it would fail: discovery must not import the package.
    (pkg / "__init__.py").write_text("raise ImportError('rocmkit must not import sglang')\n")
    files = {}
    for i, folder in enumerate(LAYOUTS[layout]):
        d = pkg / folder
        d.mkdir(parents=True)
        for dev in ("AMD_Instinct_MI300X", "AMD_Instinct_MI325X", "AMD_Instinct_MI300X_HF", "AMD_Radeon_Graphics"):
            name = f"N=1536,K={7168 + i},device_name={dev},dtype=fp8_w8a8,{BLOCK}.json"
            (d / name).write_text(json.dumps({"dev": dev, "folder": folder}))
            files[f"{folder}:{dev}"] = d / name
        (d / "E=8,N=4096,device_name=AMD_Instinct_MI300X.json").write_text('{"last": true}')
    odd = pkg / "srt/layers/quantization/configs/MI300X_tuned"
    odd.mkdir()
    (odd / f"N=1,K=1,device_name=AMD_Instinct_MI300X,{BLOCK}.json").write_text("{}")
    return {"pkg": pkg, **files}


def run_dirs(pkg: Path, **kw) -> vfconfigs.Result:
    return vfconfigs.run([str(pkg)], "MI300X", **kw)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_creates_exactly_the_missing_vf_copies_and_is_idempotent(tmp_path, layout):
    tree = make_sglang_tree(tmp_path, layout)
    pkg = tree["pkg"]
    before = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*"))
    first = run_dirs(pkg)
    # one copy per MI300X file: 2 per config folder plus the one in the MI300X_tuned folder
    assert len(first.created) == 2 * len(LAYOUTS[layout]) + 1
    for created in map(Path, first.created):
        assert created.name.count("device_name=AMD_Instinct_MI300X_VF,") + created.name.count(
            "device_name=AMD_Instinct_MI300X_VF.json") == 1
        base = created.with_name(created.name.replace("MI300X_VF", "MI300X"))
        assert created.read_bytes() == base.read_bytes()
        assert created.parent == base.parent  # same folder: the path is never rewritten
    after = sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*"))
    assert set(after) - set(before) == {Path(c).relative_to(pkg).as_posix() for c in first.created}
    # _HF, MI325X (no --product match), Radeon untouched; no _VF_VF
    assert not any("HF_VF" in a or "_VF_VF" in a or "MI325X_VF" in a for a in after)
    second = run_dirs(pkg)
    assert second.created == [] and len(second.present) == len(first.created)
    assert sorted(p.relative_to(pkg).as_posix() for p in pkg.rglob("*")) == after


def test_default_covers_every_product_with_a_vf(tmp_path):
    pkg = make_sglang_tree(tmp_path, "v0.5")["pkg"]
    result = vfconfigs.run([str(pkg)])
    names = [Path(p).name for p in result.created]
    assert any("AMD_Instinct_MI325X_VF" in n for n in names)
    assert any("AMD_Instinct_MI300X_VF" in n for n in names)


def test_conflict_is_reported_and_kept_unless_forced(tmp_path):
    tree = make_sglang_tree(tmp_path, "v0.4")
    src = tree["srt/layers/quantization/configs:AMD_Instinct_MI300X"]
    vf = src.with_name(src.name.replace("MI300X", "MI300X_VF"))
    vf.write_text('{"hand": "tuned"}')
    result = run_dirs(tree["pkg"])
    assert result.conflicts == [str(vf)] and vf.read_text() == '{"hand": "tuned"}'
    forced = run_dirs(tree["pkg"], force=True)
    assert forced.overwritten == [str(vf)] and vf.read_bytes() == src.read_bytes()


def test_dry_run_writes_nothing(tmp_path):
    pkg = make_sglang_tree(tmp_path, "v0.5.17")["pkg"]
    before = sorted(pkg.rglob("*"))
    result = run_dirs(pkg, dry_run=True)
    assert result.created and sorted(pkg.rglob("*")) == before


def test_leftovers_of_the_upstream_one_liner_are_flagged(tmp_path):
    tree = make_sglang_tree(tmp_path, "v0.4")
    src = tree["srt/layers/moe/fused_moe_triton/configs:AMD_Instinct_MI300X"]
    junk = src.with_name(src.name.replace("MI300X", "MI300X_VF_VF"))
    junk.write_text("{}")
    assert str(junk) in run_dirs(tree["pkg"]).stray


def test_vf_name_token_rules():
    pair = vfconfigs.Pair(base="AMD_Instinct_MI300X", vf="AMD_Instinct_MI300X_VF", product="MI300X VF")
    assert vfconfigs.vf_name(f"N=1,K=2,device_name=AMD_Instinct_MI300X,{BLOCK}.json", pair) == \
        f"N=1,K=2,device_name=AMD_Instinct_MI300X_VF,{BLOCK}.json"
    assert vfconfigs.vf_name("E=8,N=4096,device_name=AMD_Instinct_MI300X.json", pair) == \
        "E=8,N=4096,device_name=AMD_Instinct_MI300X_VF.json"
    for name in ("N=1,device_name=AMD_Instinct_MI300X_HF.json", "N=1,device_name=AMD_Instinct_MI300X_VF.json",
                 "N=1,device_name=AMD_Instinct_MI300X.yaml", "README.md", "device_name=AMD_Instinct_MI300X"):
        assert vfconfigs.vf_name(name, pair) is None


def test_installed_package_is_found_without_importing_it(tmp_path, monkeypatch):
    make_sglang_tree(tmp_path, "v0.5")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    result = vfconfigs.run([], "MI300X", strict=True)
    assert result.roots[0]["framework"] == "sglang" and len(result.created) == 7
    assert "sglang" not in sys.modules


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_strict_accepts_every_known_layout(tmp_path, monkeypatch, layout):
    make_sglang_tree(tmp_path, layout)
    monkeypatch.syspath_prepend(str(tmp_path))
    result = vfconfigs.run([], strict=True)
    assert result.problems == [] and result.created


def test_strict_fails_when_config_folders_are_missing(tmp_path, monkeypatch):
    pkg = tmp_path / "sglang"
    (pkg / "srt/layers/quantization/configs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Failed, match="fused_moe_triton/configs or srt/layers/moe/moe_runner"):
        vfconfigs.run([], strict=True)


def test_strict_fails_without_a_framework(tmp_path, monkeypatch):
    monkeypatch.setattr(vfconfigs, "find_installed", list)  # this test machine has no SGLang either way
    with pytest.raises(Failed, match="no framework"):
        vfconfigs.run([], strict=True)
    assert vfconfigs.run([]).created == []  # without --strict: nothing to do, not an error


def test_cli_summary_json_and_errors(tmp_path):
    pkg = make_sglang_tree(tmp_path, "v0.5")["pkg"]
    runner = CliRunner()
    r = runner.invoke(cli, ["vf-configs", str(pkg), "--product", "MI300X", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["schema"] == "rocmkit.vf-configs/v1" and len(doc["created"]) == 7
    r = runner.invoke(cli, ["vf-configs", str(pkg), "--product", "MI300X"])
    assert r.exit_code == 0 and "created 0, already present 7, conflicting 0" in r.output
    r = runner.invoke(cli, ["vf-configs", str(pkg), "--product", "MI999X"])
    assert r.exit_code == 2 and "MI300X" in r.output
    r = runner.invoke(cli, ["vf-configs", str(tmp_path / "missing")])
    assert r.exit_code == 2


def test_unknown_product_lists_known_ones():
    with pytest.raises(UsageError) as exc:
        vfconfigs.pairs_for("sglang", "H100")
    assert "MI300X" in exc.value.hint


def test_copy_keeps_the_originals_permissions(tmp_path):
    """A copy made through a temporary file would be 0600: unreadable for a non-root user in the image."""
    tree = make_sglang_tree(tmp_path, "v0.4")
    src = tree["srt/layers/quantization/configs:AMD_Instinct_MI300X"]
    src.chmod(0o644)
    other = tree["srt/layers/moe/fused_moe_triton/configs:AMD_Instinct_MI300X"]
    other.chmod(0o640)
    run_dirs(tree["pkg"])
    for path, mode in ((src, 0o644), (other, 0o640)):
        vf = path.with_name(path.name.replace("MI300X", "MI300X_VF"))
        assert vf.stat().st_mode & 0o777 == mode


def test_strict_fails_when_no_file_names_a_base_product(tmp_path, monkeypatch):
    """Folders present but the naming changed upstream: the build must not silently ship no VF configs."""
    pkg = tmp_path / "sglang"
    for folder in LAYOUTS["v0.4"]:
        (pkg / folder).mkdir(parents=True)
        (pkg / folder / "N=1,K=2,device_name=AMD_Radeon_Graphics.json").write_text("{}")
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(Failed, match="no config file names device_name=AMD_Instinct_MI300X or "):
        vfconfigs.run([], strict=True)
    # --product narrows what is copied, not what proves the layout: MI355X has no configs here, MI300X does
    make_sglang_tree(tmp_path / "ok", "v0.5")
    monkeypatch.syspath_prepend(str(tmp_path / "ok"))
    assert vfconfigs.run([], "MI355X", strict=True).created == []


def test_device_token():
    assert vfconfigs.device_token(f"N=1,K=2,device_name=AMD_Instinct_MI300X_VF,{BLOCK}.json") == "AMD_Instinct_MI300X_VF"
    assert vfconfigs.device_token("E=8,N=4096,device_name=AMD_Instinct_MI325X.json") == "AMD_Instinct_MI325X"
    assert vfconfigs.device_token("README.md") is None and vfconfigs.device_token("E=8.json") is None


# Doctor check: real facts (rocmkit.host.facts.collect with this process's packages) over a generated
# VF host tree and a generated SGLang on sys.path.

def _doctor(tmp_path: Path, product: str):
    from rocmkit.host.checks import Context, run_checks
    from rocmkit.host.facts import collect
    from treegen import HostSpec, write_tree

    root = write_tree(tmp_path / f"host-{product.replace(' ', '_')}", HostSpec(product=product, gpus=2, process=None))
    found = {f.id: f for f in run_checks(collect(str(root), process=True), Context(), only={"software.vf_configs"})}
    return found.get("software.vf_configs")


def test_doctor_warns_on_a_vf_host_until_the_configs_exist(tmp_path, monkeypatch):
    from rocmkit.host.model import Status

    make_sglang_tree(tmp_path / "site", "v0.5.17")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    before = _doctor(tmp_path, "MI300X VF")
    assert before.status == Status.WARN and before.fix == "rocmkit vf-configs"
    # 2 files per folder + the one in MI300X_tuned, all for this host's product only
    assert len(before.evidence["missing"]) == 5
    assert all("device_name=AMD_Instinct_MI300X_VF" in m for m in before.evidence["missing"])
    assert "MI300X VF host" in before.title
    # Fixing only this host's product is enough: other products' VF copies are not this host's concern.
    r = CliRunner().invoke(cli, ["vf-configs", "--product", "MI300X"])
    assert r.exit_code == 0, r.output
    assert _doctor(tmp_path, "MI300X VF").status == Status.PASS
    # An MI325X VF host still lacks its copies.
    assert _doctor(tmp_path, "MI325X VF").status == Status.WARN
    assert "sglang" not in sys.modules


def test_doctor_is_silent_without_a_vf_or_without_sglang(tmp_path, monkeypatch):
    make_sglang_tree(tmp_path / "site", "v0.4")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert _doctor(tmp_path, "MI300X") is None  # bare metal: torch reports the base name
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path / "site")])
    import importlib

    importlib.invalidate_caches()
    assert _doctor(tmp_path / "2", "MI300X VF") is None
