"""The GPU code objects a shared object carries, read with the standard library only.

HIP puts each translation unit's device code into a clang offload bundle: the magic
`__CLANG_OFFLOAD_BUNDLE__`, a uint64 entry count, then per entry uint64 offset (from the bundle's start),
uint64 size, uint64 triple length and the triple (`hipv4-amdgcn-amd-amdhsa--gfx942`,
`hip-amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-`, `host-x86_64-unknown-linux-gnu-`). The linker gathers them
in the `.hip_fatbin` section; some libraries keep bundles in `.rodata`, so the whole file is scanned for the
magic. `--offload-compress` bundles start with `CCOB` (u16 version, u16 method — llvm::compression::Format,
0 zlib, 1 zstd — then v1: u32 uncompressed size; v2: u32 file size, u32 uncompressed size; v3: u64, u64;
then a u64 hash and the compressed bundle). zlib ones are read; zstd ones through Python 3.14's
compression.zstd, the zstandard module or the `zstd` program, else they are reported as "compressed,
targets not read".

A kernel of one translation unit runs on a GPU only if that unit's bundle has a code object for the GPU's
processor (or a generic one covering it): "invalid device function" / hipErrorNoBinaryForGpu otherwise.
Nothing here raises for a malformed file: it becomes the report's error.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
import time
import zlib

MAGIC = b"__CLANG_OFFLOAD_BUNDLE__"
CCOB = b"CCOB"
FATBIN_SECTIONS = (".hip_fatbin", ".hipFatBinSegment")

# LLVM AMDGPUUsage, "AMDGPU Generic Processors" (code object v6): what each generic target runs on.
GENERIC = {
    "gfx9-generic": {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"},
    "gfx9-4-generic": {"gfx940", "gfx941", "gfx942", "gfx950"},
    "gfx10-1-generic": {"gfx1010", "gfx1011", "gfx1012", "gfx1013"},
    "gfx10-3-generic": {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"},
    "gfx11-generic": {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"},
    "gfx12-generic": {"gfx1200", "gfx1201"},
}
MAX_ENTRIES = 4096  # a real bundle has one entry per target plus the host's; more is not a bundle
SO_NAME = re.compile(r"\.so(\.[0-9.]+)?$")


class NotABundle(ValueError):
    pass


def target_of(triple: str) -> str | None:
    """The target id of an amdgcn entry's triple (`gfx942`, `gfx90a:xnack-`, `gfx9-4-generic`); None for the
    host's entry or another device kind. Triple = <kind>-<arch>-<vendor>-<os>-<env>-<target id>; older
    compilers wrote no env (`hip-amdgcn-amd-amdhsa-gfx906`)."""
    parts = triple.split("-")
    if len(parts) < 5 or parts[1] != "amdgcn":
        return None
    rest = parts[4:] if parts[4].startswith("gfx") else parts[5:]
    target = "-".join(rest)
    return target or None


def processor(target: str) -> str:
    return target.split(":")[0]


def runs_on(target: str, arch: str) -> bool:
    """Whether a code object for target id `target` can run on processor `arch` (features such as xnack-
    matter only when the GPU's mode differs; the audit judges the processor)."""
    p = processor(target)
    return p == processor(arch) or processor(arch) in GENERIC.get(p, ())


def parse_bundle(buf, start: int, end: int) -> tuple[list[str], int]:
    """(target ids, end offset) of the uncompressed bundle at buf[start:]; NotABundle if it is not one."""
    pos = start + len(MAGIC)
    if pos + 8 > end:
        raise NotABundle("truncated header")
    (n,) = struct.unpack_from("<Q", buf, pos)
    if not 0 < n <= MAX_ENTRIES:
        raise NotABundle(f"{n} entries")
    pos += 8
    targets, extent = [], pos
    for _ in range(n):
        if pos + 24 > end:
            raise NotABundle("truncated entry table")
        off, size, tlen = struct.unpack_from("<QQQ", buf, pos)
        pos += 24
        if not 0 < tlen <= 256 or pos + tlen > end:
            raise NotABundle("bad triple length")
        raw = bytes(buf[pos:pos + tlen])
        pos += tlen
        if not re.fullmatch(rb"[\x21-\x7e]+", raw) or b"-" not in raw:
            raise NotABundle("triple is not text")
        if start + off + size > end or (size and off < pos - start):
            raise NotABundle(f"entry {raw.decode()} lies outside the data")
        extent = max(extent, start + off + size)
        t = target_of(raw.decode())
        if t and t not in targets:
            targets.append(t)
    return targets, max(extent, pos)


def _zstd_decompress(data: bytes, limit: int) -> bytes | None:
    try:
        from compression import zstd  # Python 3.14
        return zstd.ZstdDecompressor().decompress(data, max_length=limit)
    except ImportError:
        pass
    try:
        import io

        import zstandard  # type: ignore[import-not-found]
        return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read(limit)
    except ImportError:
        pass
    return _zstd_program(data, limit)


def _zstd_program(data: bytes, limit: int) -> bytes | None:
    """The `zstd` program's decompression (Python < 3.14 has no zstd module; images often ship the program).
    The input is the stream's first MiB only, so zstd ends with an error after writing what it could: the
    output is used whatever its exit code, and judged by the caller (it must start with the bundle magic)."""
    import shutil
    import subprocess

    exe = shutil.which("zstd")
    if not exe:
        return None
    try:
        r = subprocess.run([exe, "-dcq"], input=data, capture_output=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout[:limit] or None


def parse_ccob(buf, start: int, end: int) -> dict:
    """A compressed bundle: {"compressed": method, "targets": [...] or None, "note", "end"}. Only its
    beginning is decompressed (the entry table is at the front)."""
    if start + 8 > end:
        raise NotABundle("truncated")
    version, method = struct.unpack_from("<HH", buf, start + 4)
    if version == 1:
        size, (usize, _h), hdr = None, struct.unpack_from("<IQ", buf, start + 8), 20
    elif version == 2:
        (size, usize, _h), hdr = struct.unpack_from("<IIQ", buf, start + 8), 24
    elif version == 3:
        (size, usize, _h), hdr = struct.unpack_from("<QQQ", buf, start + 8), 32
    else:
        raise NotABundle(f"version {version}")
    if method not in (0, 1) or usize == 0 or (size is not None and not hdr < size <= end - start):
        raise NotABundle("bad header")
    stop = start + size if size else end
    name = "zlib" if method == 0 else "zstd"
    data = bytes(buf[start + hdr:min(stop, start + hdr + (1 << 20))])  # the table sits in the first bytes
    limit = min(usize, 1 << 20)
    try:
        inner = zlib.decompressobj().decompress(data, limit) if method == 0 else _zstd_decompress(data, limit)
    except Exception:  # noqa: BLE001 - zlib.error, zstd errors: a corrupt stream
        raise NotABundle(f"{name} stream does not decompress") from None
    if inner is None:
        return {"compressed": name, "targets": None, "note": f"compressed ({name}), targets not read", "end": stop}
    if not inner.startswith(MAGIC):
        raise NotABundle("decompressed data is not a bundle")
    try:
        targets, _ = parse_bundle(inner, 0, len(inner) if len(inner) < usize else 1 << 62)
    except (NotABundle, struct.error):
        return {"compressed": name, "targets": None, "note": f"compressed ({name}), entry table not read",
                "end": stop}
    return {"compressed": name, "targets": targets, "note": None, "end": stop}


def elf_sections(buf) -> list[tuple[str, int, int]]:
    """(name, file offset, size) of each section with file contents; ValueError for a malformed ELF."""
    if buf[:4] != b"\x7fELF":
        raise ValueError("not an ELF file")
    cls, data = buf[4], buf[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise ValueError("bad ELF class or byte order")
    e = "<" if data == 1 else ">"
    if cls == 2:
        shoff, = struct.unpack_from(e + "Q", buf, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", buf, 0x3A)
        fmt, need = e + "IIQQQQ", 40
    else:
        shoff, = struct.unpack_from(e + "I", buf, 0x20)
        shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", buf, 0x2E)
        fmt, need = e + "IIIIII", 24
    if shoff == 0:
        return []
    if shentsize < need or shoff + shentsize > len(buf):
        raise ValueError("section header table outside the file")
    if shnum == 0 or shstrndx == 0xFFFF:  # extended numbering: the real values sit in section 0
        _n, _t, _f, _a, _o, size0 = struct.unpack_from(fmt, buf, shoff)
        shnum = shnum or size0
        if shstrndx == 0xFFFF:
            shstrndx = struct.unpack_from(e + "I", buf, shoff + (40 if cls == 2 else 24))[0]  # sh_link
    if shnum > 1 << 20 or shoff + shnum * shentsize > len(buf):
        raise ValueError("section header table outside the file")
    raw = [struct.unpack_from(fmt, buf, shoff + i * shentsize) for i in range(shnum)]
    if shstrndx >= shnum:
        raise ValueError("no section name table")
    _n, _t, _f, _a, stroff, strsize = raw[shstrndx]
    if stroff + strsize > len(buf):
        raise ValueError("section name table outside the file")
    out = []
    for name_off, sh_type, _flags, _addr, off, size in raw:
        if sh_type == 8 or size == 0:  # SHT_NOBITS (.bss): no bytes in the file
            continue
        if off + size > len(buf):
            raise ValueError("a section lies outside the file")
        stop = buf.find(b"\0", stroff + name_off, stroff + strsize)
        name = bytes(buf[stroff + name_off:stop if stop >= 0 else stroff + strsize]).decode("ascii", "replace")
        out.append((name, off, size))
    return out


def audit_buffer(buf) -> dict:
    """{"bundles": [{"section", "targets", "compressed", "note", "count"}], "error"} for one file's bytes."""
    try:
        sections = elf_sections(buf)
    except (ValueError, struct.error) as exc:
        return {"bundles": [], "error": str(exc)}
    fat = [(o, o + s) for n, o, s in sections if n in FATBIN_SECTIONS]

    def section_at(pos: int) -> str | None:
        return next((n for n, o, s in sections if o <= pos < o + s), None)

    found, errors = [], []
    for magic in (MAGIC, CCOB):
        pos = buf.find(magic)
        while pos >= 0:
            in_fat = any(a <= pos < b for a, b in fat)
            nxt = pos + 1
            try:
                if magic == MAGIC:
                    targets, stop = parse_bundle(buf, pos, len(buf))
                    b = {"targets": targets, "compressed": None, "note": None}
                else:
                    r = parse_ccob(buf, pos, len(buf))
                    stop = r.pop("end")
                    b = r
                found.append((pos, stop, b))
                nxt = stop if stop > pos else pos + 1
            except (NotABundle, struct.error) as exc:
                # Outside the fat-binary section the magic is also a plain string (the HIP runtime's own check).
                if in_fat and magic == MAGIC:
                    errors.append(f"bad bundle at {pos:#x}: {exc}")
            pos = buf.find(magic, nxt)
    groups: dict[tuple, dict] = {}
    for pos, _stop, b in sorted(found, key=lambda x: x[0]):
        if any(p < pos < s for p, s, _ in found):  # a magic inside another bundle's payload
            continue
        key = (section_at(pos), tuple(b["targets"] or ()) if b["targets"] is not None else None, b["compressed"],
               b["note"])
        g = groups.setdefault(key, {"section": key[0], "targets": b["targets"], "compressed": b["compressed"],
                                    "note": b["note"], "count": 0})
        g["count"] += 1
    return {"bundles": list(groups.values()), "error": "; ".join(errors[:3]) or None}


def audit_file(path: str) -> dict:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 64:
                return {"path": path, "bundles": [], "error": None if size else "empty file"}
            with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                r = audit_buffer(mm)
    except (OSError, ValueError) as exc:
        r = {"bundles": [], "error": f"unreadable: {exc}"}
    return {"path": path, **r}


def shared_objects(dirs) -> list[str]:
    """Every regular `*.so` / `*.so.N` file under dirs, once (symlinks and hard links skipped)."""
    seen, out = set(), []
    for top in dirs:
        for d, subdirs, files in os.walk(top, onerror=lambda e: None):
            subdirs.sort()
            for f in sorted(files):
                if not SO_NAME.search(f):
                    continue
                p = os.path.join(d, f)
                try:
                    st = os.stat(p, follow_symlinks=False)
                except OSError:
                    continue
                if os.path.islink(p) or (st.st_dev, st.st_ino) in seen:
                    continue
                seen.add((st.st_dev, st.st_ino))
                out.append(p)
    return out


def audit_dirs(dirs) -> dict:
    """The audit of every shared object under dirs: files without code objects are only counted; files with
    code objects or a malformed ELF are listed."""
    t = time.monotonic()
    paths = shared_objects(dirs)
    listed = []
    for p in paths:
        r = audit_file(p)
        if r["bundles"] or (r["error"] and r["error"] != "not an ELF file"):
            listed.append(r)
    return {"dirs": list(dirs), "files_scanned": len(paths), "files": listed,
            "seconds": round(time.monotonic() - t, 3)}


def lacking(report: dict, arch: str) -> int | None:
    """How many of a file's bundles (with targets read) have no code object that runs on arch; None when no
    bundle's targets could be read."""
    judged = [b for b in report.get("bundles", []) if isinstance(b, dict) and isinstance(b.get("targets"), list)
              and b["targets"]]
    if not judged:
        return None
    return sum(int(b.get("count", 1)) for b in judged if not any(runs_on(t, arch) for t in b["targets"]))


def targets_of(report: dict) -> list[str]:
    return sorted({t for b in report.get("bundles", []) if isinstance(b, dict)
                   for t in (b.get("targets") or [])})
