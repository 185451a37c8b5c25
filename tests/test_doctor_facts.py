"""Facts read from files, checked against what the running process measures directly, and a tree that would
hang a naive reader."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.host.facts import collect
from rocmkit.host.facts.reader import memlock_from_limits, shm_from_mounts


def test_shm_from_this_machines_mounts_matches_statvfs():
    mounts = Path("/proc/self/mounts").read_text()
    if not any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts.splitlines()):
        pytest.skip("/dev/shm is not a tmpfs mount here")
    assert shm_from_mounts(mounts, Path("/proc/meminfo").read_text()) == shutil.disk_usage("/dev/shm").total


def test_memlock_from_this_process_limits_matches_getrlimit():
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = resource.RLIM_INFINITY
    expected = {"soft": None if soft == unlimited else soft, "hard": None if hard == unlimited else hard}
    assert memlock_from_limits(Path("/proc/self/limits").read_text()) == expected


@pytest.mark.parametrize("line,size", [
    ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0", 64 << 20),  # Docker's default
    ("tmpfs /dev/shm tmpfs rw,size=16g 0 0", 16 << 30),
    ("tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0", 1000 * 1024 // 2),  # no size=: half of MemTotal
    ("/dev/sda1 /dev/shm ext4 rw 0 0", None),  # not a tmpfs
    ("tmpfs /run tmpfs rw,size=8g 0 0", None),  # no /dev/shm mount
])
def test_shm_parsing(line, size):
    assert shm_from_mounts(line + "\n", "MemTotal:           1000 kB\n") == size


def test_last_shm_mount_wins():
    mounts = "shm /dev/shm tmpfs rw,size=65536k 0 0\ntmpfs /dev/shm tmpfs rw,size=32g 0 0\n"
    assert shm_from_mounts(mounts, "") == 32 << 30


@pytest.mark.parametrize("text,expected", [
    ("Max locked memory         8388608              8388608              bytes\n", {"soft": 8388608, "hard": 8388608}),
    ("Max locked memory         unlimited            unlimited            bytes\n", {"soft": None, "hard": None}),
    ("Max locked memory         65536                unlimited            bytes\n", {"soft": 65536, "hard": None}),
    ("Max locked memory         lots                 unlimited            bytes\n", None),
    ("", None),
])
def test_limits_parsing(text, expected):
    assert memlock_from_limits(text) == expected


def test_a_fifo_in_a_tree_does_not_hang_the_doctor(tmp_path):
    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc/cmdline")
    (tmp_path / "proc/self").mkdir()
    os.mkfifo(tmp_path / "proc/self/limits")
    facts = collect(str(tmp_path))
    assert ("proc/cmdline", "not a regular file") in facts.read_errors and facts.cmdline is None
    # and the whole command, in a real process, finishes
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--root", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr


DOCKER_ROOT = ("1021 977 0:83 / / rw,relatime master:402 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/A:"
               "/var/lib/docker/overlay2/l/B,upperdir=/var/lib/docker/overlay2/x/diff,workdir=/var/lib/docker/overlay2/x/work")
HOST_ROOT = "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard"


@pytest.mark.parametrize("files,dirs,expected", [
    ({".dockerenv": ""}, [], "/.dockerenv"),
    ({"run/.containerenv": ""}, [], "podman"),
    ({}, ["run/secrets/kubernetes.io/serviceaccount"], "Kubernetes"),
    ({"proc/1/cgroup": "12:devices:/kubepods/besteffort/pod1/abc\n"}, [], "kubepods"),
    # cgroup v2 with a cgroup namespace says nothing; the overlay root of the container image does
    ({"proc/1/cgroup": "0::/\n", "proc/self/mountinfo": DOCKER_ROOT + "\n"}, [], "overlay"),
    ({"proc/1/cgroup": "0::/\n", "proc/self/mountinfo": HOST_ROOT + "\n"}, [], None),
])
def test_container_detection(tmp_path, files, dirs, expected):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    for rel in dirs:
        (tmp_path / rel).mkdir(parents=True)
    found = collect(str(tmp_path), process=False).container
    assert (found is None) if expected is None else (expected in found), found


@pytest.mark.parametrize("value,hides", [("NoDevFiles", True), ("-1", True), ("8,0", True), ("0,1", False),
                                         ("GPU-5f1e2d3c4b5a6978", False)])
def test_visible_devices_that_hide_every_gpu(tmp_path, value, hides):
    from rocmkit.host.checks import Context, run_checks
    from treegen import HostSpec, healthy_process, write_tree

    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process(env={"HIP_VISIBLE_DEVICES": value})))
    titles = [f.title for f in run_checks(collect(str(root)), Context()) if f.id.startswith("env.visible_devices")]
    assert any("hides every GPU" in t for t in titles) == hides, titles


@pytest.mark.parametrize("cmdline,warned", [
    ("ro iommu=pt pci=realloc=off pci=bfsort", set()),
    ("ro iommu=pt pci=realloc=off,bfsort", set()),
    ("ro iommu=pt pci=bfsort", {"kernel.pci_realloc"}),
    ("ro iommu=pt pci=realloc=off", {"kernel.pci_bfsort"}),
    ("ro", {"kernel.iommu", "kernel.pci_realloc", "kernel.pci_bfsort"}),
])
def test_kernel_command_line(tmp_path, cmdline, warned):
    from rocmkit.host.checks import Context, run_checks
    from rocmkit.host.model import Status
    from treegen import HostSpec, healthy_process, write_tree

    root = write_tree(tmp_path / "h", HostSpec(cmdline=cmdline, container=True, process=healthy_process()))
    found = {f.id: f for f in run_checks(collect(str(root)), Context()) if f.id.startswith("kernel.")}
    assert {k for k, f in found.items() if f.status == Status.WARN} == warned
    assert all(found[k].fix.startswith("on the host (this is a container)") for k in warned)
    vf = write_tree(tmp_path / "vf", HostSpec(product="MI300X VF", cmdline="ro", process=healthy_process()))
    found = {f.id: f for f in run_checks(collect(str(vf)), Context()) if f.id.startswith("kernel.")}
    assert found["kernel.iommu"].status == Status.SKIP and "kernel.pci_realloc" not in found


# --- property test: the files and records added for partitions, /dev/shm, memlock, containers and Ray ---
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

TEXT = st.one_of(st.text(max_size=120), st.binary(max_size=120).map(lambda b: b.decode("latin-1")),
                 st.sampled_from(["SPX\n", "CPX\n", "NPS4\n", "tmpfs /dev/shm tmpfs size=12x 0 0\n",
                                  "shm /dev/shm tmpfs size=99999999999999999999k 0 0\n",
                                  "Max locked memory 1 2 bytes\n", "1 2 3 4 / - overlay\n", " - \n"]))
JSONISH = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=10)),
                       lambda inner: st.one_of(st.lists(inner, max_size=3),
                                               st.dictionaries(st.text(max_size=8), inner, max_size=3)), max_leaves=8)
FILES = ["proc/self/mounts", "proc/meminfo", "proc/self/limits", "proc/self/mountinfo", "proc/1/cgroup",
         "sys/bus/pci/devices/0000:05:00.0/current_compute_partition",
         "sys/bus/pci/devices/0000:05:00.0/current_memory_partition"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.dictionaries(st.sampled_from(FILES), TEXT, max_size=len(FILES)),
       ray_amd=st.one_of(JSONISH, st.fixed_dictionaries({"gpu_backend": st.sampled_from(["amdsmi", "rocm_smi", None]),
                                                         "amdsmi_guard": JSONISH, "rocr_rule": JSONISH})),
       amdsmi=st.one_of(JSONISH, st.fixed_dictionaries({"status": st.sampled_from(["ok", "error", "absent"]),
                                                        "stage": JSONISH, "import_error": JSONISH,
                                                        "gpus": JSONISH, "error": JSONISH})),
       env=st.dictionaries(st.sampled_from(["ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCM_PATH"]),
                           st.text(max_size=12), max_size=3),
       mode=st.sampled_from(["SPX", "CPX", "QPX"]), granted=st.integers(0, 8))
def test_new_facts_never_crash_the_doctor(tmp_path_factory, files, ray_amd, amdsmi, env, mode, granted):
    import json

    from rocmkit.host.checks import Context, run_checks
    from rocmkit.host.report import doctor_document, heading, table
    from treegen import HostSpec, healthy_process, write_tree

    process = healthy_process(env=env)
    process["ray_amd"], process["gpu_libraries"] = ray_amd, {"amdsmi": amdsmi}
    root = write_tree(tmp_path_factory.mktemp("t"), HostSpec(gpus=2, mode=mode, container=True,
                                                             partitions_granted={0: granted}, process=process))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, errors="replace")
    facts = collect(str(root))
    findings = run_checks(facts, Context())
    assert not [f for f in findings if f.id.startswith("doctor.internal")], findings
    json.dumps(doctor_document(findings, facts, level=1, strict=False))
    table(findings, heading(facts))


def test_only_with_an_unknown_id_is_a_usage_error_and_bad_arch_writes_nothing(tmp_path):
    from click.testing import CliRunner

    from rocmkit.cli import cli
    from treegen import HostSpec, healthy_process, write_tree

    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", "gpu.count,kernal"])
    assert r.exit_code == 2 and "--only kernal: no check has such an id" in r.output
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--only", "numa.affinity,env.ray_rocr", "--json"])
    assert r.exit_code == 0  # known areas, whether or not this host produced a finding there
    r = CliRunner().invoke(cli, ["doctor", "--arch", "gfx1234", "--capture", str(tmp_path / "cap")])
    assert r.exit_code == 2 and not (tmp_path / "cap").exists()


def test_image_manifest_with_foreign_targets_is_a_finding_not_exit_2(tmp_path):
    import json

    from click.testing import CliRunner

    from rocmkit.cli import cli
    from treegen import HostSpec, healthy_process, write_tree

    root = write_tree(tmp_path / "h", HostSpec(manifest={"targets": ["gfx1100"]}, process=healthy_process()))
    r = CliRunner().invoke(cli, ["doctor", "--root", str(root), "--json"])
    arch = {f["id"]: f for f in json.loads(r.stdout)["findings"]}["gpu.arch"]
    assert r.exit_code == 1 and arch["status"] == "fail" and arch["evidence"]["targets"] == ["gfx1100"]


@pytest.mark.parametrize("product,torch_hip,status", [
    ("MI355X", "6.4.43482-0f2d60242", "fail"), ("MI355X", "7.0.51831", "pass"), ("MI300X", "6.2.41133", "pass"),
    ("MI325X", "6.2.41133", "fail"),  # MI325X needs ROCm 6.3 (arch table)
    ("MI300X", "", None), ("MI300X", None, None),  # torch without HIP / no torch: software.torch's business
])
def test_torch_built_rocm_against_the_gpus(tmp_path, product, torch_hip, status):
    from rocmkit.host.checks import Context, run_checks
    from treegen import HostSpec, healthy_process, write_tree

    root = write_tree(tmp_path / "h", HostSpec(product=product, process=healthy_process(torch_hip=torch_hip)))
    found = {f.id: f for f in run_checks(collect(str(root)), Context())}
    assert (found["rocm.torch"].status.value if "rocm.torch" in found else None) == status
