"""Every ROCm install on the host or in a captured tree, and what points a process at one: the links in /opt/rocm
(update-alternatives' and the tarball's), ROCM_PATH, the loader's paths (LD_LIBRARY_PATH, /etc/ld.so.conf.d),
the `amd-smi`/`rocm-smi` a shell would run, and the ROCm packages dpkg lists. Only reads: which install wins and
what mixes is decided in rocmkit/host/rocm_layout.py and rocmkit/host/checks/rocm_installs.py.

Links are followed inside the root, so a captured tree whose `/opt/rocm` is an absolute link to
`/opt/rocm-7.2.0` resolves to the tree's copy, not the machine's that reads it."""

from __future__ import annotations

import os
import re

from .reader import Reader

# /opt/rocm-7.2.0 (legacy packages, TheRock's tarball), /opt/rocm/core-10.0 and /opt/rocm/core-asan-7.15 (the Core
# SDK's packages: build_package.py appends -X.Y to /opt/rocm/core), /opt/rocm/core (7.14), /opt/rocm/extras-10
LEGACY = re.compile(r"rocm-(\d+(?:\.\d+)*)(?:-\d+)?")
CORE = re.compile(r"core(?:-asan)?(?:-(\d+(?:\.\d+)*))?")
EXTRAS = re.compile(r"extras-(\d+(?:\.\d+)*)")
# The links that name an install: the legacy and tarball /opt/rocm, and those amdrocm-core's postinst installs
# with update-alternatives (TheRock build_tools/packaging/linux/template/scripts/amdrocm-core-postinst.j2).
LINKS = ("/opt/rocm", "/opt/rocm/core", "/opt/rocm/lib", "/opt/rocm/bin")
TOOLS = ("amd-smi", "rocm-smi", "rocminfo", "hipcc")
ALTERNATIVES = re.compile(r"(rocm|core(-\d+)?|rocm-(lib|bin|include|llvm|share)|amd-smi|rocm-smi|rocminfo|hipcc)")
# dpkg's names for ROCm: the Core SDK's amdrocm-* (amdrocm-core, amdrocm-runtime, amdrocm10.0-gfx94x, ...) and the
# legacy stream's (rocm-core, rocm-hip-runtime, hip-runtime-amd, amd-smi-lib, rocm-smi-lib, rccl, rocblas, ...)
PACKAGES = re.compile(r"(amdrocm[\w.+-]*|rocm[\w.+-]*|hip-runtime-amd|hip-dev|hsa-rocr[\w-]*|amd-smi-lib|rccl|"
                      r"rocblas|comgr)")
DPKG_STATUS = "var/lib/dpkg/status"


def resolve(reader: Reader, path: str, hops: int = 40) -> str | None:
    """The path with every link followed inside the root (absolute targets restart at the root); None where
    something on the way is missing or the links loop."""
    parts, done = [p for p in path.split("/") if p], []
    while parts:
        name = parts.pop(0)
        if name in (".", ""):
            continue
        if name == "..":
            done = done[:-1]
            continue
        here = reader.path("/".join(done + [name]))
        try:
            if os.path.islink(here):
                hops -= 1
                if hops < 0:
                    return None
                target = os.readlink(here)
                done = [] if target.startswith("/") else done
                parts = [p for p in target.split("/") if p] + parts
                continue
            if not os.path.lexists(here):
                return None
        except (OSError, ValueError):
            return None
        done.append(name)
    return "/" + "/".join(done)


def _install(reader: Reader, path: str, kind: str, named: str | None) -> dict | None:
    real = resolve(reader, path)
    if real is None or not os.path.isdir(reader.path(real)):
        return None
    # rocm-core ships .info/version in every layout (TheRock base/artifact.toml: rocm-core's lib component
    # includes ".info/**"); the folder's name is the fallback, and says less (10 of extras-10)
    version = reader.line(f"{real}/.info/version")
    tools = {t: f"{real}/bin/{t}" for t in TOOLS if os.path.lexists(reader.path(f"{real}/bin/{t}"))}
    return {"path": path, "real": real, "kind": kind, "version": version or named,
            "version_from": f"{real}/.info/version" if version else ("its name" if named else None), "tools": tools}


def read(reader: Reader, env: dict[str, str], rocm_sdk: dict | None = None, torch_hip: str | None = None) -> dict:
    """{installs, links, lib_dirs, alternatives, tools, packages}: see the module's docstring."""
    installs: list[dict] = []
    seen: set[str] = set()

    def add(i: dict | None) -> None:
        if i is not None and i["real"] not in seen:
            seen.add(i["real"])
            installs.append(i)

    links = {p: resolve(reader, p) for p in LINKS if os.path.islink(reader.path(p))}
    # Real trees first, so that a link (/opt/rocm -> /opt/rocm-7.2.0) is never the install's own name.
    for name in sorted(reader.listdir("opt")):
        m = LEGACY.fullmatch(name)
        if m and not os.path.islink(reader.path(f"opt/{name}")):
            add(_install(reader, f"/opt/{name}", "legacy", m.group(1)))
    for name in sorted(reader.listdir("opt/rocm")):
        path = f"/opt/rocm/{name}"
        if os.path.islink(reader.path(path)):
            continue  # core -> core-10.0, core-10 -> core-10.0: the link, not another install
        if (m := CORE.fullmatch(name)) is not None:
            add(_install(reader, path, "core", m.group(1)))
        elif (m := EXTRAS.fullmatch(name)) is not None:
            add(_install(reader, path, "extras", m.group(1)))
    if not os.path.islink(reader.path("opt/rocm")) and reader.line("opt/rocm/.info/version") is not None:
        add(_install(reader, "/opt/rocm", "legacy", None))  # a legacy tree copied to /opt/rocm itself
    for real in links.values():  # a link to a tree elsewhere (/opt/rocm -> /usr/local/rocm-6.4)
        if real and real not in seen and reader.line(f"{real}/.info/version") is not None:
            add(_install(reader, real, "legacy", None))
    rocm_path = env.get("ROCM_PATH")
    if rocm_path:
        links["ROCM_PATH"] = resolve(reader, rocm_path)
        # AMD's runtime image sets ROCM_PATH=/opt/rocm, a folder of links (lib -> core-X.Y/lib): its lib/ says which
        links["ROCM_PATH/lib"] = resolve(reader, rocm_path.rstrip("/") + "/lib")
        real = links["ROCM_PATH"]
        if real and real not in seen and reader.line(f"{real}/.info/version") is not None:
            add(_install(reader, links["ROCM_PATH"], "rocm_path", None))
    if rocm_sdk and isinstance(rocm_sdk.get("core"), str):
        # ROCm from pip: its version is the wheel's, which torch.version.hip repeats
        installs.append({"path": rocm_sdk["core"], "real": rocm_sdk["core"], "kind": "pip", "version": torch_hip,
                         "version_from": "torch.version.hip" if torch_hip else None, "tools": {}})
    lib_dirs = [("LD_LIBRARY_PATH", resolve(reader, d) or d) for d in (env.get("LD_LIBRARY_PATH") or "").split(":")
                if d.startswith("/")]
    for name in sorted(reader.listdir("etc/ld.so.conf.d")):
        if name.endswith(".conf"):
            for line in (reader.text(f"etc/ld.so.conf.d/{name}") or "").splitlines():
                d = line.split("#")[0].strip()
                if d.startswith("/"):
                    lib_dirs.append((f"/etc/ld.so.conf.d/{name}", resolve(reader, d) or d))
    alternatives = {}
    for name in sorted(reader.listdir("etc/alternatives")):
        if ALTERNATIVES.fullmatch(name):
            try:
                alternatives[name] = os.readlink(reader.path(f"etc/alternatives/{name}"))
            except (OSError, ValueError):
                pass
    tools = {t: resolve(reader, f"/usr/bin/{t}") for t in TOOLS if os.path.lexists(reader.path(f"usr/bin/{t}"))}
    return {"installs": installs, "links": links, "lib_dirs": lib_dirs, "alternatives": alternatives,
            "tools": tools, "packages": dpkg_packages(reader.text(DPKG_STATUS, limit=1 << 26) or "")}


def dpkg_packages(status: str) -> dict[str, str]:
    """ROCm's installed packages in dpkg's status file: name -> version."""
    out = {}
    for stanza in status.split("\n\n"):
        # a host's status file lists thousands of packages: only ROCm's stanzas are parsed
        m = re.match(r"\s*Package: (\S+)", stanza)
        if m is None or not PACKAGES.fullmatch(m.group(1)):
            continue
        fields = dict(re.findall(r"^([\w-]+): ?(.*)$", stanza, re.M))
        if fields.get("Status", "").endswith(" installed"):
            out[m.group(1)] = fields.get("Version", "")
    return out
