"""GPU architecture facts, from rocmkit/resources/archs.toml (one table per arch).

The table is edited as archs.toml (comments, sources) and read from archs.json beside it, the same data that
`python -m rocmkit.archs` writes from the TOML (tests/test_archs_table.py holds the two equal): importing tomllib
and parsing the TOML cost `doctor --root` about 4 ms, a twentieth of its whole run, where json (imported anyway)
reads the copy in a tenth of a millisecond.
"""

from __future__ import annotations

import functools
import json
import os
from typing import NamedTuple

from .errors import UsageError


class Product(NamedTuple):
    """One PCI device of an arch (a [[arch.X.product]] of archs.toml): its ids, names and level-2 peaks."""

    name: str
    arch: str
    pci_ids: tuple[str, ...]
    torch_name: str
    vf_of: str | None = None
    min_rocm: str | None = None
    memory_gib: float | None = None
    peak_bf16_tflops: float | None = None
    peak_fp8_tflops: float | None = None
    hbm_tbps: float | None = None
    config_copies: tuple[str, ...] = ()
    # GPUs one module shows: each die of a multi-die module (MI250X: 2) is a GPU of its own to ROCm, and the
    # memory and peaks above are one die's (a job's GPU), not the module's.
    dies_per_module: int = 1
    # Level-2 probe figures (see archs.toml): host link peak per direction, the GPU-to-GPU links
    # ("mesh": one link per peer, "switch": all links into a switch), and what a healthy GPU delivers
    # as a fraction of each peak (the arch's [expect] table, overridden per product).
    pcie_gbps: float | None = None
    link_topology: str | None = None
    link_count: int | None = None
    link_gbps: float | None = None
    expect: tuple[tuple[str, float], ...] = ()

    def expected_fraction(self, key: str) -> float | None:
        return dict(self.expect).get(key)

    @property
    def is_vf(self) -> bool:
        return self.vf_of is not None


class Arch(NamedTuple):
    """One GPU architecture (an [arch.X] table of archs.toml) and its products."""

    name: str
    vendor: str  # "amd" | "nvidia"
    family: str
    fp8: str  # "fnuz" | "e4m3" | "none"
    status: str  # "supported" | "legacy" | "probe-only"
    products: tuple[Product, ...]
    gfx_target_version: int | None = None
    compute_capability: str | None = None
    min_rocm: str | None = None

    @property
    def buildable(self) -> bool:
        """Whether images can target this arch (AMD archs only)."""
        return self.vendor == "amd"

    def product(self, name: str) -> Product | None:
        return next((p for p in self.products if p.name == name), None)


def join_targets(targets) -> str:
    """A list of targets as every build system, label and manifest writes it: `;`-separated."""
    return ";".join(targets)


def split_targets(text: str) -> list[str]:
    """A list of targets as people and tools write it: `;` or `,` between names, blanks ignored."""
    return [t.strip() for t in text.replace(",", ";").split(";") if t.strip()]


def targets_slug(targets) -> str:
    """The targets in names (files, tags, bake targets, logs): `-`-separated."""
    return "-".join(targets)


_PRODUCT_FIELDS = {"name", "pci_ids", "torch_name", "vf_of", "min_rocm", "memory_gib",
                   "peak_bf16_tflops", "peak_fp8_tflops", "hbm_tbps", "config_copies",
                   "pcie_gbps", "link_topology", "link_count", "link_gbps", "expect", "dies_per_module"}

# What level-2 probes measure, as keys of an [expect] table: bf16/fp8 GEMM vs peak_*_tflops, device copy vs
# hbm_tbps, pinned host copies vs pcie_gbps, all-reduce bus bandwidth and pairwise P2P copies vs the links.
EXPECT_KEYS = {"gemm_bf16", "gemm_fp8", "hbm", "pcie", "allreduce", "p2p"}


def _resource(name: str) -> str:
    # Beside this module, not through importlib.resources: its import costs the doctor a tenth of its run, and
    # rocmkit is only ever installed as files (the stacks' loader uses importlib.resources).
    return os.path.join(os.path.dirname(__file__), "resources", name)


def toml_table() -> dict:
    """archs.toml as parsed: what archs.json must hold."""
    from .tomlread import load_toml_text

    with open(_resource("archs.toml"), encoding="utf-8") as f:
        return load_toml_text(f.read(), "archs.toml")


def json_text(raw: dict) -> str:
    """archs.json's text for the parsed TOML `raw` (its first key says where it comes from)."""
    return json.dumps({"generated_from": "archs.toml: edit that, then run `python -m rocmkit.archs`", **raw},
                      indent=1) + "\n"


@functools.cache
def _table() -> tuple[dict[str, Arch], dict[str, dict]]:
    with open(_resource("archs.json"), encoding="utf-8") as f:
        raw = json.load(f)
    archs: dict[str, Arch] = {}
    for name, spec in raw["arch"].items():
        products = []
        for p in spec.get("product", []):
            unknown = set(p) - _PRODUCT_FIELDS
            if unknown:  # a typo in the packaged table is a bug in rocmkit, not user input
                raise ValueError(f"archs.toml: {name}: unknown product fields {sorted(unknown)}")
            expect = {**spec.get("expect", {}), **p.get("expect", {})}
            if set(expect) - EXPECT_KEYS or p.get("link_topology", "mesh") not in ("mesh", "switch"):
                raise ValueError(f"archs.toml: {name}: {p['name']}: expect keys must be among {sorted(EXPECT_KEYS)}, "
                                 "link_topology 'mesh' or 'switch'")
            products.append(Product(arch=name, **{**p, "pci_ids": tuple(i.lower() for i in p["pci_ids"]),
                                                  "config_copies": tuple(p.get("config_copies", ())),
                                                  "expect": tuple(sorted(expect.items()))}))
        archs[name] = Arch(
            name=name, vendor=spec["vendor"], family=spec["family"], fp8=spec["fp8"], status=spec["status"],
            products=tuple(products), gfx_target_version=spec.get("gfx_target_version"),
            compute_capability=spec.get("compute_capability"), min_rocm=spec.get("min_rocm"),
        )
    for name, spec in raw["build_variable"].items():
        if set(spec) != {"format", "read_by"} or spec["format"] not in ("list", "offload-flags"):
            raise ValueError(f"archs.toml: build_variable.{name}: needs format ('list' or 'offload-flags') and "
                             "read_by, nothing else")
    return archs, raw["build_variable"]


def all_archs() -> dict[str, Arch]:
    return dict(_table()[0])


def build_arch_env(targets: list[str]) -> tuple[tuple[str, str], ...]:
    """Every build system's arch variable (archs.toml's [build_variable.X]) set to `targets`: `;`-separated, or
    as --offload-arch flags. (Plain pairs, no record class: the doctor loads this table and never needs them.)"""
    return tuple((name, " ".join(f"--offload-arch={t}" for t in targets) if spec["format"] == "offload-flags"
                  else join_targets(targets)) for name, spec in _table()[1].items())


def known_build_archs() -> list[str]:
    return sorted(a.name for a in _table()[0].values() if a.buildable)


def get_arch(name: str) -> Arch:
    """The arch called `name`; a UsageError listing the known ones otherwise."""
    arch = _table()[0].get(name.strip().lower())
    if arch is None:
        raise UsageError(f"unknown arch {name!r}", hint=f"known archs: {', '.join(sorted(_table()[0]))}")
    return arch


def get_build_arch(name: str) -> Arch:
    """An arch images can be built for (AMD only)."""
    arch = _table()[0].get(name.strip().lower())
    if arch is None:
        raise UsageError(f"unknown arch {name!r}", hint=f"build targets: {', '.join(known_build_targets())}")
    if not arch.buildable:
        raise UsageError(f"arch {arch.name!r} is not a build target ({arch.vendor} {arch.family})",
                         hint=f"build targets: {', '.join(known_build_targets())}")
    return arch


# The build target of a CPU-only stack: code built for the host's CPU, no GPU arch and no arch variables.
CPU = "cpu"


def known_build_targets() -> list[str]:
    return known_build_archs() + [CPU]


def is_cpu(targets) -> bool:
    return list(targets) == [CPU]


def check_build_target(name: str) -> str:
    """A build target: an AMD GPU arch, or the CPU."""
    if name.strip().lower() == CPU:
        return CPU
    return get_build_arch(name).name


def parse_targets(spec: str) -> list[str]:
    """'gfx942', 'gfx942,gfx950', 'gfx942;gfx950' or 'cpu' -> validated, de-duplicated, in the given order."""
    names = split_targets(spec)
    if not names:
        raise UsageError(f"--arch {spec!r} names no arch", hint=f"build targets: {', '.join(known_build_targets())}")
    out: list[str] = []
    for n in names:
        a = check_build_target(n)
        if a not in out:
            out.append(a)
    if CPU in out and len(out) > 1:
        raise UsageError(f"{spec!r}: cpu is a target of its own, not combined with GPU archs",
                         hint="build the CPU stack and the GPU stacks as separate images")
    return out


def gfx_name(target_version: int) -> str:
    """KFD gfx_target_version (major*10000 + minor*100 + stepping) -> 'gfx<major><minor hex><stepping hex>'."""
    major, minor, step = target_version // 10000, (target_version // 100) % 100, target_version % 100
    return f"gfx{major}{minor:x}{step:x}"


def product_for_pci_id(device_id: str | int) -> Product | None:
    """Product for a PCI device id given as 0x74a1, 74A1 or an int (KFD's decimal device_id)."""
    key = f"0x{device_id:04x}" if isinstance(device_id, int) else "0x" + device_id.lower().removeprefix("0x")
    for arch in _table()[0].values():
        for p in arch.products:
            if key in p.pci_ids:
                return p
    return None


def vf_products() -> list[Product]:
    return [p for a in _table()[0].values() for p in a.products if p.is_vf]


def product_for_torch_name(name: str | None) -> Product | None:
    """The product torch names so (torch.cuda.get_device_name: "AMD Instinct MI300X", "NVIDIA H200")."""
    for arch in _table()[0].values():
        for p in arch.products:
            if name and p.torch_name == name:
                return p
    return None


def product_named(name: str) -> Product | None:
    for arch in _table()[0].values():
        for p in arch.products:
            if p.name.lower() == name.strip().lower():
                return p
    return None


def min_rocm_for(arch: Arch, product: Product | None = None) -> str | None:
    return (product.min_rocm if product and product.min_rocm else None) or arch.min_rocm


def rocm_release(version: str) -> tuple[int, ...] | None:
    """A ROCm version's release numbers, or None when it does not start with them: "6.4.1" and
    /opt/rocm/.info/version's "6.4.1-120" are (6, 4, 1). ROCm versions are dotted releases, not PEP 440
    versions; and packaging.version is a tenth of `doctor --root`'s imports."""
    parts = version.strip().split("-", 1)[0].split(".")
    return tuple(int(p) for p in parts) if all(p.isascii() and p.isdigit() for p in parts) else None


def rocm_supports(rocm: str, arch: Arch, product: Product | None = None) -> bool:
    """Whether ROCm version `rocm` is at least the minimum for this arch (and product); False for a version
    that is not a dotted release."""
    need = min_rocm_for(arch, product)
    if need is None:
        return True
    have, floor = rocm_release(rocm), rocm_release(need)
    if have is None or floor is None:
        return False
    width = max(len(have), len(floor))  # 6.3 is 6.3.0
    return have + (0,) * (width - len(have)) >= floor + (0,) * (width - len(floor))


if __name__ == "__main__":  # python -m rocmkit.archs: archs.json from archs.toml
    from .fileio import write_atomic

    write_atomic(_resource("archs.json"), json_text(toml_table()))
