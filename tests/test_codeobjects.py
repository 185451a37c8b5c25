"""The code-object audit on real ELF shared objects: gcc builds them, objcopy adds a `.hip_fatbin` section
holding a clang offload bundle written here per LLVM's documented format (ClangOffloadBundler.rst). The
payloads are not real AMDGPU code objects (a few bytes each): the audit reads only the bundle's entry table,
and the ELF and bundle framing are real."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import pytest

from rocmkit.host.facts import codeobjects as co

needs_tools = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("objcopy")),
                                 reason="needs gcc and objcopy")


def bundle(triples: list[str], payload: bytes = b"\x7fELF-not-a-real-code-object") -> bytes:
    """A clang offload bundle: magic, u64 count, (u64 offset, u64 size, u64 triple length, triple) per entry,
    then the payloads (the host's entry is empty, as clang writes it)."""
    header = len(co.MAGIC) + 8 + sum(24 + len(t) for t in triples)
    table, data, off = b"", b"", header
    for t in triples:
        body = b"" if t.startswith("host-") else payload + t.encode()
        table += struct.pack("<QQQ", off, len(body), len(t)) + t.encode()
        data += body
        off += len(body)
    return co.MAGIC + struct.pack("<Q", len(triples)) + table + data


def ccob_zlib(inner: bytes, version: int = 3) -> bytes:
    comp = zlib.compress(inner)
    if version == 3:
        head = struct.pack("<HHQQQ", 3, 0, 32 + len(comp), len(inner), 0)
    else:
        head = struct.pack("<HHIIQ", 2, 0, 24 + len(comp), len(inner), 0)
    return co.CCOB + head + comp


HOST = "host-x86_64-unknown-linux-gnu-"


def shared_object(tmp: Path, name: str, fatbin: bytes | None, section: str = ".hip_fatbin") -> Path:
    src = tmp / f"{name}.c"
    src.write_text("int kernel_stub(int x) { return x + 1; }\n")
    so = tmp / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    if fatbin is not None:
        blob = tmp / f"{name}.bin"
        blob.write_bytes(fatbin)
        subprocess.run(["objcopy", "--add-section", f"{section}={blob}", "--set-section-flags",
                        f"{section}=alloc,readonly", str(so)], check=True)
    return so


@needs_tools
def test_missing_target_found_and_present_target_passes(tmp_path):
    only_90a = shared_object(tmp_path, "a", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"]))
    both = shared_object(tmp_path, "b", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a",
                                               "hipv4-amdgcn-amd-amdhsa--gfx942"])
                         + bundle([HOST, "hip-amdgcn-amd-amdhsa--gfx942"]))
    ra, rb = co.audit_file(str(only_90a)), co.audit_file(str(both))
    assert ra["error"] is None and co.targets_of(ra) == ["gfx90a:sramecc+:xnack-"]
    assert co.lacking(ra, "gfx942") == 1 and co.lacking(ra, "gfx90a") == 0
    assert co.targets_of(rb) == ["gfx90a", "gfx942"] and co.lacking(rb, "gfx942") == 0
    assert sum(b["count"] for b in rb["bundles"]) == 2 and co.lacking(rb, "gfx90a") == 1
    assert all(b["section"] == ".hip_fatbin" for b in rb["bundles"])


@needs_tools
def test_generic_target_counts_for_its_processors(tmp_path):
    so = shared_object(tmp_path, "g", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx9-4-generic:xnack-"]))
    r = co.audit_file(str(so))
    assert co.targets_of(r) == ["gfx9-4-generic:xnack-"]
    assert co.lacking(r, "gfx942") == 0 and co.lacking(r, "gfx950") == 0 and co.lacking(r, "gfx90a") == 1


@needs_tools
def test_bundle_in_rodata_and_compressed_bundles(tmp_path):
    ro = shared_object(tmp_path, "r", b"padding" + bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx950"]), ".rodata.kern")
    r = co.audit_file(str(ro))
    assert co.targets_of(r) == ["gfx950"] and r["bundles"][0]["section"] == ".rodata.kern"
    for version in (2, 3):
        z = shared_object(tmp_path, f"z{version}", ccob_zlib(bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx942"]),
                                                              version))
        rz = co.audit_file(str(z))
        assert rz["bundles"][0]["compressed"] == "zlib" and co.targets_of(rz) == ["gfx942"]
    # zstd without a zstd module here: reported as compressed, never guessed
    zs = co.CCOB + struct.pack("<HHQQQ", 3, 1, 32 + 16, 100, 0) + b"\x28\xb5\x2f\xfd" + b"\0" * 12
    rs = co.audit_buffer(_elf_with(tmp_path, zs))
    b = rs["bundles"][0]
    assert b["compressed"] == "zstd"
    if co._zstd_decompress(b"", 1) is None:  # no zstd module in this interpreter
        assert b["targets"] is None and b["note"] == "compressed (zstd), targets not read"
        assert co.lacking(rs, "gfx942") is None  # not judged, never passed


def _elf_with(tmp: Path, blob: bytes) -> bytes:
    return shared_object(tmp, "x", blob).read_bytes()


@needs_tools
def test_malformed_files_are_reported_not_raised(tmp_path):
    good = shared_object(tmp_path, "m", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx942"])).read_bytes()
    cases = {
        "truncated.so": good[:200],
        "garbage.so": b"\x7fELF" + b"\xff" * 100,
        "text.so": b"/* GNU ld script */ GROUP ( libc.so.6 )\n" * 3,
        "empty.so": b"",
    }
    # a bundle whose entry points past the section: reported as a bad bundle, the file still listed
    bad = bytearray(bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx942"]))
    struct.pack_into("<Q", bad, len(co.MAGIC) + 8 + 24 + len(HOST), 1 << 40)
    cases["badentry.so"] = shared_object(tmp_path, "bad", bytes(bad)).read_bytes()
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
        r = co.audit_file(str(tmp_path / name))
        assert isinstance(r["bundles"], list)
        assert r["error"], name
    (tmp_path / "notes.txt").write_text("x")
    report = co.audit_dirs([str(tmp_path)])
    listed = {Path(f["path"]).name: f for f in report["files"]}
    assert "libm.so" in listed and "text.so" not in listed and "truncated.so" in listed
    assert report["files_scanned"] >= len(cases)


def test_triples():
    assert co.target_of("hipv4-amdgcn-amd-amdhsa--gfx942") == "gfx942"
    assert co.target_of("hip-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-") == "gfx90a:sramecc+:xnack-"
    assert co.target_of("hip-amdgcn-amd-amdhsa-gfx906") == "gfx906"
    assert co.target_of("hipv4-amdgcn-amd-amdhsa--gfx9-4-generic") == "gfx9-4-generic"
    assert co.target_of(HOST) is None and co.target_of("openmp-nvptx64-nvidia-cuda--sm_90") is None
