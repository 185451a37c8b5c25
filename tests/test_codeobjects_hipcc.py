"""The code-object audit on real HIP libraries: tests/data/codeobjects/*.so, compiled by Debian sid's hipcc
(HIP 6.4, clang 21.1.8) from kernel.hip with make.sh there (README.md says how). No GPU is needed to build or
read them; what the audit says is checked against what the compiler was asked to write."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.facts import codeobjects as co
from treegen import HostSpec, healthy_process, write_tree

DATA = Path(__file__).parent / "data" / "codeobjects"
FAT = DATA / "libfat-gfx942-gfx950.so"  # --offload-arch=gfx942 --offload-arch=gfx950
ONLY950 = DATA / "libonly-gfx950.so"  # --offload-arch=gfx950
GENERIC = DATA / "libgeneric-gfx9-4.so"  # --offload-arch=gfx9-4-generic
COMPRESSED = {2: DATA / "libcompressed-gfx942-gfx950.so",  # --offload-compress (header version 2, zstd)
              3: DATA / "libcompressed-v3-gfx942-gfx950.so"}  # COMPRESSED_BUNDLE_FORMAT_VERSION=3


def one_bundle(path: Path) -> dict:
    r = co.audit_file(str(path))
    assert r["error"] is None and len(r["bundles"]) == 1, r
    return r


@pytest.mark.parametrize("path,targets", [(FAT, ["gfx942", "gfx950"]), (ONLY950, ["gfx950"]),
                                          (GENERIC, ["gfx9-4-generic"])], ids=["fat", "only-gfx950", "generic"])
def test_uncompressed_bundles_read_as_compiled(path, targets):
    r = one_bundle(path)
    b = r["bundles"][0]
    # hipcc's linker gathers the bundle in .hip_fatbin; the host entry is not a target
    assert b["section"] == ".hip_fatbin" and b["compressed"] is None and b["count"] == 1
    assert b["targets"] == targets


def test_arch_present_passes_and_missing_arch_is_counted():
    fat, only, generic = one_bundle(FAT), one_bundle(ONLY950), one_bundle(GENERIC)
    assert co.lacking(fat, "gfx942") == 0 and co.lacking(fat, "gfx950") == 0
    assert co.lacking(fat, "gfx90a") == 1
    assert co.lacking(only, "gfx942") == 1 and co.lacking(only, "gfx950") == 0
    # a generic code object runs on every processor of its family
    assert co.lacking(generic, "gfx942") == 0 and co.lacking(generic, "gfx950") == 0
    assert co.lacking(generic, "gfx90a") == 1


@pytest.mark.parametrize("version", [2, 3])
def test_compressed_bundle_header_is_read(version):
    raw = COMPRESSED[version].read_bytes()
    at = raw.find(co.CCOB)
    assert at > 0 and raw.count(co.CCOB) == 1
    r = co.parse_ccob(raw, at, len(raw))
    assert r["compressed"] == "zstd"  # Debian's LLVM has zstd, which clang prefers over zlib
    assert r["end"] - at < 4096  # the header's total size, not the rest of the file


@pytest.mark.skipif(shutil.which("zstd") is None and not os.environ.get("CI"),
                    reason="needs the zstd program (Python < 3.14 has no zstd module); CI provisions it")
@pytest.mark.parametrize("version", [2, 3])
def test_compressed_bundle_targets_read_through_zstd(version):
    r = one_bundle(COMPRESSED[version])
    b = r["bundles"][0]
    assert b["compressed"] == "zstd" and b["targets"] == ["gfx942", "gfx950"] and b["note"] is None
    assert co.lacking(r, "gfx942") == 0 and co.lacking(r, "gfx90a") == 1


@pytest.mark.parametrize("version", [2, 3])
def test_compressed_bundle_without_a_decoder_is_said_not_guessed(version, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")  # no zstd program; this interpreter's modules are as they are
    if co._zstd_decompress(b"", 1) is not None or _has_zstd_module():
        pytest.skip("this interpreter has a zstd module")
    r = one_bundle(COMPRESSED[version])
    b = r["bundles"][0]
    assert b["targets"] is None and b["note"] == "compressed (zstd), targets not read"
    assert co.lacking(r, "gfx942") is None  # not judged, never passed


def _has_zstd_module() -> bool:
    for name in ("compression.zstd", "zstandard"):
        try:
            __import__(name)
            return True
        except ImportError:
            pass
    return False


def _doctor(tmp: Path, site: Path, arch: str) -> dict:
    audit = co.audit_dirs([str(site)])
    root = write_tree(tmp / "host", HostSpec(process=healthy_process(code_objects=audit),
                                             manifest={"targets": [arch]}))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--json", "--only", "image.code_objects"])
    assert r.exit_code in (0, 1), r.output
    return {f["id"]: f for f in json.loads(r.output)["findings"]}["image.code_objects"]


def test_doctor_fails_naming_the_library_without_the_arch(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for p in (FAT, ONLY950, GENERIC):
        shutil.copy(p, site)
    f = _doctor(tmp_path / "a", site, "gfx942")
    assert f["status"] == "fail" and "libonly-gfx950.so" in f["title"] and "gfx942" in f["title"], f
    assert [b["path"].rsplit("/", 1)[-1] for b in f["evidence"]["files"]] == ["libonly-gfx950.so"]
    assert f["evidence"]["files"][0] == {"path": str(site / "libonly-gfx950.so"), "has": ["gfx950"],
                                         "missing": {"gfx942": "1 of 1 bundles"}}
    # every library has gfx950 (or a generic object covering it): the same site passes for an MI355X
    assert _doctor(tmp_path / "b", site, "gfx950")["status"] == "pass"


@pytest.mark.skipif(shutil.which("zstd") is None and not os.environ.get("CI"),
                    reason="needs the zstd program (Python < 3.14 has no zstd module); CI provisions it")
def test_doctor_judges_compressed_libraries(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    for p in COMPRESSED.values():
        shutil.copy(p, site)
    assert _doctor(tmp_path / "a", site, "gfx942")["status"] == "pass"
    f = _doctor(tmp_path / "b", site, "gfx90a")
    assert f["status"] == "fail" and len(f["evidence"]["files"]) == 2, f
