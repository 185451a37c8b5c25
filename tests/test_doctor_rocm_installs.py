"""The doctor on every ROCm install layout (tests/rocmlayouts.py: each tree from a documented file list): the
version it reports, the install a process uses and why, mixed releases, tools and packages."""

from __future__ import annotations

from pathlib import Path

import pytest
from rocmlayouts import LAYOUTS, write_ld_conf
from treegen import HostSpec, healthy_process, write_tree

from rocmkit.host import rocm_layout
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.rocm_installs import dpkg_packages
from rocmkit.host.model import Status


def doctor(tmp_path: Path, layouts: tuple[str, ...], env: dict | None = None, ld: dict | None = None):
    process = healthy_process(docker={"status": "ok", "host": "unix:///var/run/docker.sock"})
    process["env"] = {k: v for k, v in process["env"].items() if k != "ROCM_PATH"} | (env or {})
    root = write_tree(tmp_path / "host", HostSpec(rocm=None, rocm_layouts=layouts, process=process))
    for name, dirs in (ld or {}).items():
        write_ld_conf(root, name, dirs)
    facts = collect(str(root))
    return facts, {f.id: f for f in run_checks(facts, Context())}


def test_only_a_core_sdk_without_links_is_rocm_10(tmp_path):
    """The issue's tree: ROCm only at /opt/rocm/core-10.0, nothing at /opt/rocm/.info/version."""
    facts, found = doctor(tmp_path, ("core-10.0-bare",))
    assert facts.rocm_version == "10.0.0"
    assert found["rocm.version"].status is Status.PASS and "ROCm 10.0.0" in found["rocm.version"].title
    inst = found["rocm.installs"]
    assert inst.status is Status.WARN and "/opt/rocm/core-10.0" in inst.title and "ROCM_PATH" in inst.fix
    assert found["rocm.tools"].status is Status.PASS and "/opt/rocm/core-10.0/bin/amd-smi" in found["rocm.tools"].title
    assert "amdrocm-runtime" in found["rocm.packages"].evidence["packages"]


def test_core_sdk_with_the_meta_package_links(tmp_path):
    facts, found = doctor(tmp_path, ("core-10.0",))
    assert facts.rocm_version == "10.0.0"
    inst = found["rocm.installs"]
    assert inst.status is Status.PASS and "/opt/rocm/core links to /opt/rocm/core-10.0" in inst.title
    assert found["rocm.tools"].status is Status.PASS
    assert found["rocm.packages"].status is Status.PASS and "Core SDK (amdrocm-*)" in found["rocm.packages"].title


@pytest.mark.parametrize("layout, version, path", [
    ("legacy-7.2", "7.2.0-43", "/opt/rocm-7.2.0"), ("tarball-10.0", "10.0.0", "/opt/rocm-10.0.0"),
    ("core-7.14", "7.14.0", "/opt/rocm/core")])
def test_each_layout_reports_its_version(tmp_path, layout, version, path):
    facts, found = doctor(tmp_path, (layout,))
    assert facts.rocm_version == version
    assert found["rocm.installs"].evidence["active"] == path
    assert found["rocm.version"].status is Status.PASS


def test_amds_runtime_image_with_rocm_path_at_a_folder_of_links(tmp_path):
    facts, found = doctor(tmp_path, ("core-10.0-image",), env={"ROCM_PATH": "/opt/rocm"})
    assert facts.rocm_version == "10.0.0"
    assert found["rocm.installs"].status is Status.PASS
    assert found["rocm.installs"].evidence["why"] == "ROCM_PATH=/opt/rocm, whose lib/ links to /opt/rocm/core-10.0/lib"
    _, found = doctor(tmp_path / "no-env", ("core-10.0-image",))  # without ROCM_PATH, /opt/rocm/lib says the same
    assert "/opt/rocm/lib links to /opt/rocm/core-10.0/lib" in found["rocm.installs"].title


def test_extras_are_listed_but_never_the_rocm(tmp_path):
    facts, found = doctor(tmp_path, ("core-10.0", "extras-10"))
    assert facts.rocm_version == "10.0.0"
    kinds = {i["path"]: i["kind"] for i in found["rocm.installs"].evidence["installs"]}
    assert kinds["/opt/rocm/extras-10"] == "extras"


def test_legacy_7_2_beside_core_10_says_which_wins_and_warns_on_mixing(tmp_path):
    # the Core SDK with its alternatives, a legacy /opt/rocm-7.2.0 beside it, a site's ld.so.conf.d naming 7.2's lib
    facts, found = doctor(tmp_path, ("core-10.0", "legacy-7.2-unlinked"), ld={"rocm.conf": ["/opt/rocm-7.2.0/lib"]})
    assert facts.rocm_version == "10.0.0"
    inst = found["rocm.installs"]
    assert inst.status is Status.PASS and "/opt/rocm/core links to /opt/rocm/core-10.0" in inst.title
    assert "ROCm 7.2.0-43 at /opt/rocm-7.2.0" in inst.title
    mixed = found["rocm.mixed"]
    assert mixed.status is Status.WARN and set(mixed.evidence["releases"]) == {"7.2", "10.0"}
    assert "/etc/ld.so.conf.d/rocm.conf: /opt/rocm-7.2.0/lib" in mixed.title and "ROCm 10.0's" in mixed.fix
    assert found["rocm.packages"].status is Status.WARN  # rocm-core 7.2 and amdrocm-* 10.0


def test_rocm_path_wins_and_ld_library_path_mixing(tmp_path):
    facts, found = doctor(tmp_path, ("core-10.0", "legacy-7.2-unlinked"),
                          env={"ROCM_PATH": "/opt/rocm/core-10.0", "LD_LIBRARY_PATH": "/opt/rocm-7.2.0/lib"})
    assert facts.rocm_version == "10.0.0"
    assert found["rocm.installs"].evidence["why"] == "ROCM_PATH=/opt/rocm/core-10.0"
    assert found["rocm.mixed"].status is Status.WARN and "LD_LIBRARY_PATH" in found["rocm.mixed"].title


def test_one_release_on_the_library_path_passes(tmp_path):
    _, found = doctor(tmp_path, ("core-10.0",), ld={"rocm.conf": ["/opt/rocm/lib"]})
    assert found["rocm.mixed"].status is Status.PASS


def test_no_rocm_at_all_skips_as_before(tmp_path):
    facts, found = doctor(tmp_path, ())
    assert facts.rocm_version is None and found["rocm.version"].status is Status.SKIP
    assert "rocm.installs" not in found


def test_every_layout_names_its_source():
    assert all(layout.source for layout in LAYOUTS.values())


def test_active_on_data():
    core = {"path": "/opt/rocm/core-10.0", "real": "/opt/rocm/core-10.0", "kind": "core", "version": "10.0.0"}
    old = {"path": "/opt/rocm-7.2.0", "real": "/opt/rocm-7.2.0", "kind": "legacy", "version": "7.2.0"}
    pip = {"path": "/venv/site-packages/_rocm_sdk_core", "real": "/venv/site-packages/_rocm_sdk_core",
           "kind": "pip", "version": "10.0.1"}
    assert rocm_layout.active([core, old], {}, {}).install is core  # newest, no link: a warning names it
    assert rocm_layout.active([core, old], {"/opt/rocm": "/opt/rocm-7.2.0"}, {}).install is old
    assert rocm_layout.active([core, old], {"/opt/rocm/lib": "/opt/rocm/core-10.0/lib"}, {}).install is core
    assert rocm_layout.active([pip], {}, {}).install is None  # pip's ROCm is the wheel's, never a system ROCm
    assert rocm_layout.active([old], {}, {"ROCM_PATH": "/usr/local/rocm"}).install is None
    assert rocm_layout.release("10.0.0-28484694006") == "10.0" and rocm_layout.release(None) is None


def test_dpkg_packages_keeps_rocm_names_installed():
    status = ("Package: amdrocm-core\nStatus: install ok installed\nVersion: 10.0.0-1\n\n"
              "Package: amdrocm10.0-gfx94x\nStatus: install ok installed\nVersion: 10.0.0-1\n\n"
              "Package: rocm-core\nStatus: deinstall ok config-files\nVersion: 7.2.0\n\n"
              "Package: bash\nStatus: install ok installed\nVersion: 5.2\n")
    assert dpkg_packages(status) == {"amdrocm-core": "10.0.0-1", "amdrocm10.0-gfx94x": "10.0.0-1"}


@pytest.mark.parametrize("layouts", [("core-10.0",), ("core-10.0-bare",), ("legacy-7.2",), ("tarball-10.0",),
                                     ("core-10.0-image",),
                                     ("core-10.0", "legacy-7.2-unlinked")])
def test_a_capture_keeps_the_layout(tmp_path, layouts):
    """--capture then --root gives the same installs, the same choice and the same rocm.* findings."""
    from rocmkit.host.capture import capture

    facts, found = doctor(tmp_path, layouts, ld={"rocm.conf": ["/opt/rocm-7.2.0/lib"]} if len(layouts) > 1 else None)
    again = collect(str(capture(facts, str(tmp_path / "capture"))))
    assert again.rocm_version == facts.rocm_version
    refound = {f.id: f for f in run_checks(again, Context())}
    for fid in ("rocm.version", "rocm.installs", "rocm.mixed", "rocm.tools", "rocm.packages"):
        assert (fid in refound) == (fid in found)
        if fid in found:
            assert (refound[fid].status, refound[fid].title) == (found[fid].status, found[fid].title), fid


def test_amds_legacy_ld_conf_follows_the_rocm_link(tmp_path):
    """AMD's post-install rocm.conf names /opt/rocm/lib: the loader follows the link to the same 7.2, no mixing."""
    _, found = doctor(tmp_path, ("legacy-7.2",))
    releases = found["rocm.mixed"].evidence["releases"]
    assert found["rocm.mixed"].status is Status.PASS
    assert releases == {"7.2": ["the active ROCm (/opt/rocm-7.2.0)", "/etc/ld.so.conf.d/rocm.conf: /opt/rocm-7.2.0/lib"]}


def test_usr_bin_tools_of_another_release_warn(tmp_path):
    # ROCM_PATH picks the legacy 7.2 while /usr/bin/amd-smi is the Core SDK's alternative
    _, found = doctor(tmp_path, ("core-10.0", "legacy-7.2-unlinked"), env={"ROCM_PATH": "/opt/rocm-7.2.0"})
    tools = found["rocm.tools"]
    assert tools.status is Status.WARN and "amd-smi runs /opt/rocm/core-10.0/bin/amd-smi" in tools.title
    assert "update-alternatives --config amd-smi" in tools.fix
