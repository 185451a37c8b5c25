"""DRM usage stats, one `/proc/<pid>/fdinfo/<fd>` text of an open DRM file at a time, as the kernel defines them
(Documentation/gpu/drm-usage-stats.rst) and amdgpu prints them (amdgpu_fdinfo.c): `drm-driver:`, `drm-pdev:`
the GPU's PCI address, `drm-client-id:` one DRM file however many fds (or processes, after fork) share it,
`drm-engine-<name>: N ns`, and memory as `drm-<kind>-<region>: N [KiB|MiB]` (amdgpu's `drm-memory-vram:` is an
alias of `drm-resident-vram:` on newer kernels). Read by the doctor's gpu_holders and certify's activity."""

from __future__ import annotations

import re
from typing import NamedTuple

_UNIT = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30}
_DRM_LINE = re.compile(r"^drm-([\w-]+):[ \t]*(\S+)(?:[ \t]+(\S+))?[ \t]*$", re.M)
_MEMORY_KINDS = ("memory", "total", "shared", "active", "resident", "purgeable")
_PCI = re.compile(r"([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


class DrmClient(NamedTuple):
    """One DRM file's usage stats, as one fdinfo text gives them (drm-usage-stats.rst)."""

    client_id: str | None
    pdev: str | None  # lower-case PCI address
    driver: str | None
    engines_ns: int | None  # drm-engine-<name>: N ns, summed; None: no engine key in ns
    memory: dict[str, int]  # "<kind>-<region>" ("memory-vram", "resident-gtt", ...) -> bytes

    @property
    def vram(self) -> int:
        """VRAM this client holds: the resident figure (drm-memory-* is its older alias; drm-total-* also counts
        buffers evicted to system memory), over every VRAM region (amdgpu "vram", xe "vram0")."""
        for kind in ("resident", "memory"):
            found = [v for k, v in self.memory.items() if re.fullmatch(rf"{kind}-vram\d*", k)]
            if found:
                return sum(found)
        return 0


def parse_drm_fdinfo(text: str) -> DrmClient | None:
    """One fdinfo text's DRM usage stats; None for a file that is not a DRM client (no drm- keys)."""
    client = pdev = driver = None
    engines: int | None = None
    memory: dict[str, int] = {}
    found = False
    for key, value, unit in _DRM_LINE.findall(text):
        found = True
        if key == "client-id":
            client = value
        elif key == "pdev":
            pdev = pci_address(value)
        elif key == "driver":
            driver = value
        elif key.startswith("engine-") and not key.startswith("engine-capacity-") and unit == "ns":
            if value.isdigit():
                engines = (engines or 0) + int(value)
        elif (key.partition("-")[0] in _MEMORY_KINDS and "-" in key and not key.startswith("total-cycles-")
              and value.isdigit() and unit in _UNIT):  # (xe's drm-total-cycles-<engine> is a count, not memory)
            memory[key] = memory.get(key, 0) + int(value) * _UNIT[unit]
    return DrmClient(client, pdev, driver, engines, memory) if found else None


def pci_address(bus_id: str) -> str | None:
    """'00000000:1B:00.0' (nvidia-smi) or '0000:c1:00.0' -> '0000:1b:00.0'; None when it is no PCI address."""
    m = _PCI.fullmatch(bus_id.strip())
    if not m:
        return None
    domain, bus, dev, fn = m.groups()
    return f"{int(domain, 16):04x}:{bus.lower()}:{dev.lower()}.{fn}"

