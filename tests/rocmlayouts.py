"""ROCm's install layouts as file lists, each with the source it comes from, for treegen.write_tree
(HostSpec.rocm_layouts) and the docs' examples (docs/guides/hosts.md, "ROCm installs"). Only the files the doctor
reads are listed: `.info/version`, `bin/` tools, a few `lib/` names, links, dpkg's status, ld.so.conf.d.

Test support, not part of rocmkit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

THEROCK = "ROCm/TheRock@89553ce3746e"
POSTINST = f"{THEROCK}:build_tools/packaging/linux/template/scripts/amdrocm-core-postinst.j2"


class Layout(NamedTuple):
    source: str  # where the file list comes from
    files: dict[str, str]  # path -> content
    links: dict[str, str]  # path -> target, as the installer makes it
    packages: dict[str, str] = {}  # dpkg package -> version


def _tree(prefix: str, version: str, libs: tuple[str, ...], tools=("amd-smi", "rocm-smi", "rocminfo")) -> dict:
    files = {f"{prefix}/.info/version": version + "\n"}
    files.update({f"{prefix}/bin/{t}": "#!/bin/sh\n" for t in tools})
    files.update({f"{prefix}/lib/{lib}": "" for lib in libs})
    return files


def _alternatives(prefix: str, major: str, tools=("amd-smi", "rocm-smi", "rocminfo")) -> dict[str, str]:
    """The links amdrocm-core's postinst makes: `update-alternatives --install /opt/rocm/core core PREFIX`,
    `/opt/rocm/core-MAJOR`, `/opt/rocm/{bin,lib,include,llvm,amdgcn,libexec,share}`, and /usr/bin/<tool> for the
    tools in PREFIX/bin; each through /etc/alternatives/<name>, as update-alternatives does."""
    links = {}
    for link, name, target in (("/opt/rocm/core", "core", prefix), (f"/opt/rocm/core-{major}", f"core-{major}", prefix),
                               ("/opt/rocm/bin", "rocm-bin", f"{prefix}/bin"),
                               ("/opt/rocm/lib", "rocm-lib", f"{prefix}/lib")):
        links[link], links[f"/etc/alternatives/{name}"] = f"/etc/alternatives/{name}", target
    for t in tools:
        links[f"/usr/bin/{t}"], links[f"/etc/alternatives/{t}"] = f"/etc/alternatives/{t}", f"{prefix}/bin/{t}"
    return links


HIP7 = ("libamdhip64.so.7", "librocm_smi64.so.1", "librocblas.so.5", "librccl.so.1")
HIP10 = ("libamdhip64.so.10", "librocm_smi64.so.1", "libamd_smi.so.26", "librocblas.so.5", "librccl.so.1")
CORE_PACKAGES = {name: "10.0.0-28484694006" for name in (
    "amdrocm", "amdrocm-core", "amdrocm-base", "amdrocm-runtime", "amdrocm-amdsmi", "amdrocm-blas", "amdrocm-rccl")}

LAYOUTS: dict[str, Layout] = {
    # Legacy packages (ROCm <= 7.2): the tree in /opt/rocm-X.Y.Z, /opt/rocm linked to it through update-alternatives
    # ('rocm'), and the loader's file AMD's post-install steps write; package names rocm-core, hip-runtime-amd, ...
    "legacy-7.2": Layout(
        "rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.2/install/post-install.html (the 'rocm' "
        "alternative: `update-alternatives --config rocm`; /etc/ld.so.conf.d/rocm.conf naming /opt/rocm/lib and "
        "/opt/rocm/lib64); the versioned /opt/rocm-<ver> tree from the same docs",
        {**_tree("/opt/rocm-7.2.0", "7.2.0-43", HIP7), "/etc/ld.so.conf.d/rocm.conf": "/opt/rocm/lib\n/opt/rocm/lib64\n"},
        {"/opt/rocm": "/etc/alternatives/rocm", "/etc/alternatives/rocm": "/opt/rocm-7.2.0"},
        {"rocm-core": "7.2.0.70200-43~24.04", "hip-runtime-amd": "7.2.26015.70200-43~24.04",
         "amd-smi-lib": "26.2.0.70200-43~24.04", "rocm-smi-lib": "7.8.0.70200-43~24.04"}),
    # The same legacy tree where the Core SDK came first: /opt/rocm is then a directory (core-10.0 and its links),
    # and update-alternatives does not replace a directory with its 'rocm' link, so nothing points at 7.2 but what a
    # site adds (ld.so.conf.d, LD_LIBRARY_PATH, ROCM_PATH)
    "legacy-7.2-unlinked": Layout(
        "as legacy-7.2, without /opt/rocm (update-alternatives(1): an existing non-link is not replaced)",
        _tree("/opt/rocm-7.2.0", "7.2.0-43", HIP7), {},
        {"rocm-core": "7.2.0.70200-43~24.04", "hip-runtime-amd": "7.2.26015.70200-43~24.04"}),
    # AMD's runtime image: the meta packages amdrocmX.Y-<gfx> and amdrocm-core-sdkX.Y-<gfx>, then `ln -sfn` of
    # core-X.Y's bin lib include libexec share into /opt/rocm (where none is there), and ENV ROCM_PATH=/opt/rocm
    "core-10.0-image": Layout(
        f"{THEROCK}:dockerfiles/install_rocm_packages.sh (the links), dockerfiles/rocm_runtime.Dockerfile "
        "(ENV ROCM_PATH=/opt/rocm)",
        _tree("/opt/rocm/core-10.0", "10.0.0", HIP10),
        {f"/opt/rocm/{d}": f"/opt/rocm/core-10.0/{d}" for d in ("bin", "lib")}, CORE_PACKAGES),
    # TheRock's tarball: install_rocm_tarball.sh extracts to /opt/rocm-${VERSION} and runs `ln -sfn ... /opt/rocm`
    "tarball-10.0": Layout(
        f"{THEROCK}:dockerfiles/install_rocm_tarball.sh (ROCM_INSTALL_DIR=/opt/rocm-$VERSION; ln -sfn it /opt/rocm); "
        ".info/version from rocm-core (base/artifact.toml)",
        _tree("/opt/rocm-10.0.0", "10.0.0", HIP10), {"/opt/rocm": "/opt/rocm-10.0.0"}),
    # The Core SDK's packages with the amdrocm meta package (which pulls amdrocm-core, whose postinst runs
    # update-alternatives): /opt/rocm/core-10.0 (build_package.py: DEFAULT_INSTALL_PREFIX + "-MAJOR.MINOR")
    "core-10.0": Layout(
        f"{THEROCK}:build_tools/packaging/linux/build_package.py (prefix /opt/rocm/core-X.Y), package.json "
        f"(amdrocm -> amdrocm-core), {POSTINST} (the links)",
        _tree("/opt/rocm/core-10.0", "10.0.0", HIP10), _alternatives("/opt/rocm/core-10.0", "10"), CORE_PACKAGES),
    # The same tree without the links: the packages installed without amdrocm-core's postinst (amdrocm-runtime
    # alone, or a container that copied the tree); the captured tree had only this
    "core-10.0-bare": Layout(
        f"{THEROCK}:build_tools/packaging/linux/build_package.py (prefix /opt/rocm/core-X.Y); no meta package",
        _tree("/opt/rocm/core-10.0", "10.0.0", HIP10), {},
        {"amdrocm-runtime": "10.0.0-28484694006", "amdrocm-amdsmi": "10.0.0-28484694006"}),
    # ROCm 7.14's packages: the prefix was /opt/rocm/core, without a version (build_package.py's default before the
    # -X.Y suffix; native_linux_package_install_test.py still passes --install-prefix /opt/rocm/core)
    "core-7.14": Layout(
        f"{THEROCK}:build_tools/packaging/linux/native_linux_package_install_test.py (--install-prefix /opt/rocm/core)",
        _tree("/opt/rocm/core", "7.14.0", HIP7), {}),
    # Projects built on the Core SDK (AMD's transition guide: /opt/rocm/extras-10/)
    "extras-10": Layout(
        "rocm.docs.amd.com 10.0.0, \"Transition guide from legacy ROCm release stream\" (/opt/rocm/extras-10)",
        {"/opt/rocm/extras-10/lib/libhipsparselt.so.0": ""}, {}),
}


def write_layout(root: Path, name: str) -> None:
    layout = LAYOUTS[name]
    for path, text in layout.files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    for path, target in layout.links.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.is_symlink() and not p.exists():  # a link over another layout's folder: the folder stays
            os.symlink(target, p)  # absolute, as the installer writes it: the doctor resolves it inside the root
    if layout.packages:
        status = root / "var/lib/dpkg/status"
        status.parent.mkdir(parents=True, exist_ok=True)
        with status.open("a") as out:
            for pkg, version in layout.packages.items():
                out.write(f"Package: {pkg}\nStatus: install ok installed\nArchitecture: amd64\n"
                          f"Version: {version}\n\n")


def write_ld_conf(root: Path, name: str, dirs: list[str]) -> None:
    """A site's /etc/ld.so.conf.d file naming ROCm's library folders."""
    p = root / "etc/ld.so.conf.d" / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(d + "\n" for d in dirs))


if __name__ == "__main__":  # python tests/rocmlayouts.py OUT LAYOUT... [--ld FILE=DIR]: a host tree to try
    import sys

    REPO = Path(__file__).resolve().parent.parent
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    from treegen import HostSpec, healthy_process, write_tree

    args, ld = sys.argv[1:], {}
    while "--ld" in args:
        i = args.index("--ld")
        name, _, d = args[i + 1].partition("=")
        ld.setdefault(name, []).append(d)
        del args[i:i + 2]
    out, names = Path(args[0]), tuple(args[1:])
    process = healthy_process()
    process["env"].pop("ROCM_PATH", None)
    root = write_tree(out, HostSpec(rocm=None, rocm_layouts=names, process=process))
    for name, dirs in ld.items():
        write_ld_conf(root, name, dirs)
    print(f"wrote {out}: {', '.join(names) or 'no ROCm'}")
