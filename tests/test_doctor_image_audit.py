"""The image audit through the doctor: real shared objects (gcc + objcopy, see test_codeobjects.py), real
dist-info folders read by importlib.metadata, real JIT cache folders; the audit's record goes into a generated
host tree's process facts and the doctor judges it with --root, as it would a capture."""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts.codeobjects import audit_dirs
from rocmkit.host.facts.envaudit import duplicate_distributions, jit_caches
from rocmkit.host.facts import collect
from treegen import HostSpec, healthy_process, write_tree
from test_codeobjects import HOST, bundle, needs_tools, shared_object


def _doctor(tmp: Path, process: dict, **spec) -> dict:
    root = write_tree(tmp / "host", HostSpec(process=healthy_process(**process), **spec))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--json", "--only", "image"])
    assert r.exit_code in (0, 1), r.output
    return {f["id"]: f for f in json.loads(r.output)["findings"]}


@needs_tools
def test_missing_arch_fails_and_present_arch_passes(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    shared_object(site, "only90a", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx90a"]))
    shared_object(site, "generic", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx9-4-generic"]))
    shared_object(site, "plain", None)
    audit = audit_dirs([str(site)])
    found = _doctor(tmp_path / "a", {"code_objects": audit}, manifest={"targets": ["gfx942"]})
    f = found["image.code_objects"]
    assert f["status"] == "fail" and "libonly90a.so" in f["title"] and "libgeneric" not in f["title"]
    assert f["evidence"]["files"][0]["missing"] == {"gfx942": "1 of 1 bundles"}
    (site / "libonly90a.so").unlink()
    found = _doctor(tmp_path / "b", {"code_objects": audit_dirs([str(site)])}, manifest={"targets": ["gfx942"]})
    assert found["image.code_objects"]["status"] == "pass"


def test_not_asked_no_finding_and_cpu_target(tmp_path):
    found = _doctor(tmp_path, {})
    assert "image.code_objects" not in found and "image.jit_cache" not in found
    root = write_tree(tmp_path / "bare", HostSpec())  # a capture without the process record
    ids = {f.id: f for f in run_checks(collect(str(root)), Context())}
    assert ids["image.duplicate_dists"].status.value == "skip"


def _dist(site: Path, name: str, version: str, files: list[str], top: str | None = None,
          installer: str | None = "pip", same: set[str] = frozenset()) -> Path:
    """A dist-info as pip (INSTALLER "pip") or Debian (no INSTALLER) writes it; each file's RECORD hash is
    its own unless listed in `same` (byte-identical across distributions)."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},sha256={'same' if f in same else name + version},1\n" for f in files)
                                 + f"{info.name}/RECORD,,\n")
    if top:
        (info / "top_level.txt").write_text(top + "\n")
    if installer:
        (info / "INSTALLER").write_text(installer + "\n")
    return info


def test_duplicate_distributions(tmp_path):
    site = tmp_path / "site"
    _dist(site, "opencv-python", "4.10.0.84", ["cv2/__init__.py", "cv2/cv2.abi3.so"], top="cv2")
    _dist(site, "opencv-python-headless", "4.10.0.84", ["cv2/__init__.py", "cv2/cv2.abi3.so"])
    _dist(site, "pynvml", "11.5.0", ["pynvml.py"])
    _dist(site, "nvidia-ml-py", "12.560.30", ["pynvml.py", "example.py"])
    # a namespace package shared by design: no report
    _dist(site, "nvidia-cublas-cu12", "12.4", ["nvidia/__init__.py", "nvidia/cublas/lib/libcublas.so.12"])
    _dist(site, "nvidia-cudnn-cu12", "9.1", ["nvidia/__init__.py", "nvidia/cudnn/lib/libcudnn.so.9"])
    dups = duplicate_distributions(metadata.distributions(path=[str(site)]))
    by = {d["import"]: d for d in dups}
    assert set(by) == {"cv2", "pynvml"}
    assert by["cv2"]["kind"] == "overlap" and "cv2/cv2.abi3.so" in by["cv2"]["shared_files"]
    found = _doctor(tmp_path, {"duplicate_distributions": dups})
    f = found["image.duplicate_dists.pynvml"]
    assert f["status"] == "warn" and "nvidia-ml-py" in f["title"] and "pynvml.py" in f["title"]
    assert "image.duplicate_dists.cv2" in found


@needs_tools
def test_stale_jit_caches(tmp_path):
    home = tmp_path / "home"
    jit = home / ".aiter" / "jit"
    jit.mkdir(parents=True)
    shared_object(jit, "module_moe", bundle([HOST, "hipv4-amdgcn-amd-amdhsa--gfx942"]))
    os.rename(jit / "libmodule_moe.so", jit / "module_moe.so")
    py = f"py{os.sys.version_info.major}{os.sys.version_info.minor}{getattr(os.sys, 'abiflags', '')}"
    ext = home / ".cache" / "torch_extensions" / f"{py}_rocm64" / "fused_adam"
    ext.mkdir(parents=True)
    shared_object(ext, "fused_adam", None)
    (ext / "build.ninja").write_text("cuda_cflags = -O3 --offload-arch=gfx90a\n")
    env = {}
    caches = jit_caches(env, home=str(home))
    kinds = {c["kind"]: c for c in caches["caches"]}
    assert kinds["aiter"]["modules"][0]["targets"] == ["gfx942"]
    assert kinds["torch_extensions"]["modules"][0]["offload_arch"] == ["gfx90a"]
    # torch installed after the modules were built, and the image targets gfx950
    caches["torch_installed"] = max(m["mtime"] for c in caches["caches"] for m in c["modules"]) + 86400
    found = _doctor(tmp_path / "t", {"jit_caches": caches}, product="MI355X", manifest={"targets": ["gfx950"]})
    a, t = found["image.jit_cache.aiter"], found["image.jit_cache.torch_extensions"]
    assert a["status"] == "warn" and "before the torch installed now" in a["title"] and str(jit) in a["fix"]
    assert any("not gfx950" in w for m in t["evidence"]["modules"] for w in m["why"])
    caches["torch_installed"] = 0
    found = _doctor(tmp_path / "f", {"jit_caches": caches}, manifest={"targets": ["gfx942"]})
    assert found["image.jit_cache.torch_extensions"]["status"] == "warn"  # gfx90a only
    assert "image.jit_cache.aiter" not in found


def _dpkg(tmp: Path, package: str, *paths: Path) -> Path:
    """dpkg's file list for one package, as /var/lib/dpkg/info/PACKAGE.list holds it."""
    info = tmp / "dpkg-info"
    info.mkdir(exist_ok=True)
    (info / f"{package}.list").write_text("/.\n" + "".join(f"{p}\n" for p in paths))
    return info


def _two_sites(tmp: Path):
    venv, deb = tmp / "venv-site", tmp / "dist-packages"
    _dist(venv, "requests", "2.34.2", ["requests/__init__.py", "requests/api.py"])
    meta = _dist(deb, "requests", "2.28.1", ["requests/__init__.py", "requests/api.py"], installer=None)
    return venv, deb, _dpkg(tmp, "python3-requests", meta, deb / "requests/__init__.py")


def test_debian_copy_shadowed_by_pip_is_the_normal_layout(tmp_path):
    venv, deb, dpkg = _two_sites(tmp_path)
    dists = lambda: metadata.distributions(path=[str(venv), str(deb)])  # noqa: E731
    dups = duplicate_distributions(dists(), path=[str(venv), str(deb)], dpkg_info=str(dpkg))
    copies = dups[0]["distributions"]
    assert [(c["installer"], c["dpkg"], c["sys_path_index"]) for c in copies] == [
        ("pip", None, 0), (None, "python3-requests", 1)]
    f = _doctor(tmp_path / "a", {"duplicate_distributions": dups})["image.duplicate_dists"]
    assert f["status"] == "pass" and "1 Debian package(s) shadowed by pip's copies earlier on sys.path (python3-requests;" in f["title"], f
    assert f["evidence"]["by_design"][0]["why"] == "debian shadowed"

    # dpkg's copy first on sys.path: pip's newer one is never imported, a real problem
    dups = duplicate_distributions(dists(), path=[str(deb), str(venv)], dpkg_info=str(dpkg))
    f = _doctor(tmp_path / "b", {"duplicate_distributions": dups})["image.duplicate_dists.requests"]
    assert f["status"] == "warn"
    assert f"requests 2.28.1 in {deb} (dpkg: python3-requests): apt-get purge python3-requests" in f["fix"]
    assert f"requests 2.34.2 in {venv} (pip): pip uninstall -y requests" in f["fix"]


def test_two_pip_copies_stay_a_warning(tmp_path):
    a, b = tmp_path / "venv-site", tmp_path / "local-dist-packages"
    _dist(a, "torch", "2.6.0", ["torch/__init__.py"])
    _dist(b, "torch", "2.5.1", ["torch/__init__.py"])
    dups = duplicate_distributions(metadata.distributions(path=[str(a), str(b)]), path=[str(a), str(b)],
                                   dpkg_info=str(tmp_path / "no-dpkg"))
    f = _doctor(tmp_path, {"duplicate_distributions": dups})["image.duplicate_dists.torch"]
    assert f["status"] == "warn" and f"torch 2.5.1 in {b} (pip)" in f["fix"]
    assert "image.duplicate_dists" not in _doctor(tmp_path / "x", {"duplicate_distributions": dups})


def test_overlap_of_identical_files_is_not_a_conflict(tmp_path):
    site = tmp_path / "site"
    shared = "opencensus/common/__init__.py"
    _dist(site, "opencensus", "0.11.4", ["opencensus/__init__.py", shared], same={shared})
    _dist(site, "opencensus-context", "0.1.3", [shared, "opencensus/common/runtime_context/__init__.py"], same={shared})
    dups = duplicate_distributions(metadata.distributions(path=[str(site)]), path=[str(site)])
    assert dups[0]["kind"] == "overlap" and dups[0]["identical"] is True
    f = _doctor(tmp_path / "a", {"duplicate_distributions": dups})["image.duplicate_dists"]
    assert f["status"] == "pass" and "opencensus shared by distributions installing identical files" in f["title"]
