"""Hardware-health checks (RAS, PCIe links, ACS, GPUs other processes hold, power caps) on generated trees: a healthy
host and one with each fault, read through the real reader; the capture/--root round trip keeps the bridge
chain; and this machine's own sysfs, where it has PCI bridges."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.health import ACS_ID, HealthFacts, Reader, _bridge
from rocmkit.host.model import Status
import holdergen
from treegen import HostSpec, bridge_config, healthy_process, write_tree

IDS = ("gpu.ras", "gpu.pcie_link", "nic.pcie_link", "pcie.acs", "gpu.busy", "gpu.power_cap")


def check(tmp_path: Path, arch: str | None = None, **spec):
    spec.setdefault("rdma_nics", 2)
    root = write_tree(tmp_path / "host", HostSpec(process=healthy_process(), **spec))
    return {f.id: f for f in run_checks(collect(str(root)), Context(arch=arch)) if f.id in IDS}


def test_healthy_host_passes_every_health_check(tmp_path):
    found = check(tmp_path)
    assert {k: f.status for k, f in found.items()} == {i: Status.PASS for i in IDS}
    assert found["pcie.acs"].evidence["bridges_checked"] == 8 * 3 + 2  # 3 above each GPU, + each NIC's port
    assert found["gpu.busy"].evidence["self_pid"] == 4242  # the doctor's own KFD process is not "other"
    assert found["gpu.busy"].title == \
        "no other process holds GPU memory; at most 288 MiB of 192.0 GiB in use on 8 GPU(s)"


def test_uncorrectable_errors_and_failed_pages_fail(tmp_path):
    found = check(tmp_path, ras={2: {"umc": (3, 10)}}, bad_pages={5: "RF"})
    f = found["gpu.ras"]
    assert f.status == Status.FAIL and "0000:25:00.0: uncorrectable {'umc': 3}" in f.title
    assert "0000:55:00.0: 1 bad page(s) failed to retire" in f.title
    assert f.evidence["gpus"]["0000:55:00.0"]["bad_pages"] == {"R": 1, "F": 1} and "RMA" in f.fix


@pytest.mark.parametrize("spec,text", [
    ({"ras": {1: {"gfx": (0, 7)}}}, "0000:15:00.0: correctable {'gfx': 7}"),
    ({"bad_pages": {0: "RRP"}}, "retired/pending pages {'R': 2, 'P': 1}"),
])
def test_correctable_errors_and_retired_pages_warn(tmp_path, spec, text):
    f = check(tmp_path, **spec)["gpu.ras"]
    assert f.status == Status.WARN and text in f.title, f.title


def test_no_ras_folder_is_a_skip_that_says_so(tmp_path):
    f = check(tmp_path, ras_sysfs=False)["gpu.ras"]
    assert f.status == Status.SKIP and "no ras/ folder" in f.title


def test_unparsable_ras_file_is_not_a_pass(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(process=healthy_process()))
    Path(root, "sys/bus/pci/devices/0000:05:00.0/ras/umc_err_count").write_text("garbage\n")
    f = {f.id: f for f in run_checks(collect(str(root)), Context())}["gpu.ras"]
    assert f.status == Status.WARN and "could not read ['umc_err_count']" in f.title


def test_gpu_link_below_max_warns_naming_the_slot(tmp_path):
    found = check(tmp_path, links={3: (32.0, 8), 4: (16.0, 16)}, nic_links={1: (16.0, 16)})
    f = found["gpu.pcie_link"]
    assert f.status == Status.WARN and "2 GPU(s)" in f.title
    assert "0000:35:00.0 at 32.0 GT/s PCIe x8 of 32.0 GT/s PCIe x16" in f.title and "reseat" in f.fix
    assert "power" not in f.title  # a narrower link is physical, not power management
    assert f.evidence["devices"]["0000:45:00.0"]["upstream"]["bridge"] == "0000:44:00.0"
    n = found["nic.pcie_link"]
    assert n.status == Status.WARN and "mlx5_1 (0000:16:00.0) at 16.0 GT/s" in n.title


def test_gpu_only_slower_says_it_may_be_power_managed(tmp_path):
    f = check(tmp_path, links={0: (2.5, 16)})["gpu.pcie_link"]
    assert f.status == Status.WARN and "idle GPU to save power" in f.title


def test_acs_on_the_bridge_above_a_gpu_warns(tmp_path):
    f = check(tmp_path, acs={6: 0x1D})["pcie.acs"]  # SrcValid ReqRedir CmpltRedir UpstreamFwd, as BIOSes set it
    assert f.status == Status.WARN and "0000:64:00.0 (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+)" in f.title
    assert "ECAP_ACS+0x6.w=0000" in f.fix and f.evidence["enabled"] == {
        "0000:64:00.0": ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"]}


def test_acs_without_root_is_skipped_saying_root_is_needed(tmp_path):
    f = check(tmp_path, config_root=False, acs={0: 0x1D})["pcie.acs"]
    assert f.status == Status.SKIP and "needs root" in f.title and len(f.evidence["needs_root"]) == 26


def test_acs_capability_is_found_by_walking_the_list(tmp_path):
    """The ACS header is found wherever the extended list puts it; a looping list ends."""
    root = write_tree(tmp_path / "h", HostSpec(gpus=1, process=healthy_process()))
    facts = collect(str(root))
    reader = Reader(str(root), facts.live)
    cfg = Path(root, "sys/bus/pci/devices/0000:04:00.0/config")
    assert _bridge(reader, "x", "sys/bus/pci/devices/0000:04:00.0").acs_control == 0
    data = bytearray(bridge_config(0x04))
    assert int.from_bytes(data[0x148:0x14A], "little") == ACS_ID
    data[0x100:0x104] = (0x0001 | 0x100 << 20).to_bytes(4, "little")  # AER pointing at itself: no ACS reached
    cfg.write_bytes(bytes(data))
    assert _bridge(reader, "x", "sys/bus/pci/devices/0000:04:00.0").acs_control is None
    cfg.write_bytes(b"\xff" * 4096)  # a device gone from the bus reads all ones
    assert _bridge(reader, "x", "sys/bus/pci/devices/0000:04:00.0").acs_control is None


def started_at() -> str:
    """The holders' start as the doctor prints it (UTC, the utc fixture): the date only when it is not today."""
    import time

    when = holdergen.BTIME + 8040  # 2026-11-28 10:14 UTC
    today = time.gmtime()[:3] == time.gmtime(when)[:3]
    return time.strftime("%H:%M" if today else "%b %d %H:%M", time.gmtime(when))


def test_another_process_holding_vram_warns_naming_it(tmp_path, utc):
    found = check(tmp_path, kfd_procs={31337: {0: 40 << 30, 1: 2 << 30}, 555: {}})
    f = found["gpu.busy"]
    assert f.status == Status.WARN and f.title.startswith("1 other process(es) hold GPU memory: ")
    assert ("GPU 0000:05:00.0: 40.3 GiB of 192.0 GiB in use — pid 31337 (python3 -m vllm.entrypoints.openai.api_s...) "
            f"40.0 GiB, started {started_at()}; GPU 0000:15:00.0: 2.3 GiB") in f.title
    assert "kill <pid>" in f.fix and "amd-smi process" in f.fix and "HIP_VISIBLE_DEVICES" in f.fix
    assert [h["pid"] for h in f.evidence["holders"]] == [31337]  # 555 holds nothing; the doctor (4242) is not other
    assert f.evidence["holders"][0]["source"] == "kfd" and f.evidence["holders"][0]["started"] == holdergen.BTIME + 8040
    assert f.evidence["gpus"]["0000:05:00.0"] == {
        "total_bytes": 196592 << 20, "used_bytes": (288 << 20) + (40 << 30), "held_by_others_bytes": 40 << 30,
        "unseen_bytes": 288 << 20, "memory_source": "sysfs mem_info_vram", "partitions": 1}


def test_a_gpu_others_hold_half_of_fails(tmp_path, utc):
    # vLLM's "Free memory on device cuda:0 (8.91/139.8 GiB) on startup is less than desired GPU memory
    # utilization (0.4, 55.92 GiB)": the doctor says it before the job starts
    f = check(tmp_path, kfd_procs={4711: {2: 96 << 30}}, cmdlines={4711: "VLLM::EngineCore"})["gpu.busy"]
    assert f.status == Status.FAIL and f.title.startswith("less than half the memory is free on 1 GPU(s): ")
    assert (f"GPU 0000:25:00.0: 96.3 GiB of 192.0 GiB in use — pid 4711 (VLLM::EngineCore) 96.0 GiB, "
            f"started {started_at()}") in f.title and "gpu_memory_utilization 0.5" in f.title


def test_memory_no_visible_process_holds_fails_saying_so(tmp_path):
    # another container's processes without KFD, or a reader without root: mem_info_vram_used still tells
    f = check(tmp_path, kfd=False, vram_unseen={1: 150 << 30})["gpu.busy"]
    assert f.status == Status.FAIL and "GPU 0000:15:00.0: 150.3 GiB of 192.0 GiB in use by no process visible here" \
        in f.title and f.evidence["holders"] == []


def test_a_process_seen_through_drm_fdinfo_only_warns(tmp_path, utc):
    """No KFD proc folder: every process's DRM fdinfo is read (its render-node fds, amdgpu's format)."""
    f = check(tmp_path, kfd=False, drm_procs={777: {3: 20 << 30}})["gpu.busy"]
    assert f.status == Status.WARN and "GPU 0000:35:00.0: 20.3 GiB of 192.0 GiB in use — pid 777" in f.title
    assert f.evidence["holders"][0]["source"] == "drm-fdinfo"
    assert f.evidence["source"] == "DRM fdinfo (/proc/<pid>/fdinfo: 1 process(es) read)"


def test_a_partitioned_gpu_is_warned_about_not_failed(tmp_path):
    # in CPX mode a GPU's partitions go to different jobs by design; its memory figures are the whole GPU's
    f = check(tmp_path, mode="CPX", kfd_procs={4711: {0: 120 << 30}})["gpu.busy"]
    assert f.status == Status.WARN and "(its 8 partitions share it)" in f.title


def test_nothing_readable_is_skipped_saying_why(tmp_path):
    f = check(tmp_path, kfd=False, vram_sysfs=False)["gpu.busy"]
    assert f.status == Status.SKIP and "no KFD proc folder" in f.title and "no DRM fdinfo" in f.title
    f = check(tmp_path / "2", kfd=False)["gpu.busy"]  # the GPUs' use readable, not who uses them
    assert f.status == Status.SKIP and "at most 288 MiB of 192.0 GiB in use" in f.title


def test_lowered_power_cap_warns(tmp_path):
    found = check(tmp_path, power_caps={7: 600, 6: 720})  # 720 W is within 5 % of 750 W
    f = found["gpu.power_cap"]
    assert f.status == Status.WARN and "1 GPU(s)" in f.title and "0000:75:00.0 at 600 W of 750 W" in f.title


def test_cpu_target_skips_the_gpu_only_health_findings(tmp_path):
    found = check(tmp_path, arch="cpu", acs={0: 0x04}, power_caps={0: 300})
    assert found["pcie.acs"].status == Status.SKIP and found["gpu.power_cap"].status == Status.SKIP


@pytest.mark.parametrize("holder", [{"kfd_procs": {777: {1: 1 << 30}}},
                                    {"kfd": False, "drm_procs": {777: {1: 1 << 30}}}], ids=["kfd", "drm-fdinfo"])
def test_capture_then_root_keeps_the_bridge_chain_and_the_gpu_holders(tmp_path, holder):
    src = write_tree(tmp_path / "src", HostSpec(gpus=2, rdma_nics=1, acs={1: 0x04}, links={0: (16.0, 16)},
                                                process=healthy_process(), **holder))
    first = collect(str(src))
    out = capture(first, str(tmp_path / "cap"))
    second = collect(str(out))
    a = [f.to_json() for f in run_checks(first, Context()) if f.id in IDS]
    b = [f.to_json() for f in run_checks(second, Context()) if f.id in IDS]
    assert a == b and len(a) == len(IDS)
    assert [f["evidence"]["holders"][0]["pid"] for f in b if f["id"] == "gpu.busy"] == [777]
    assert os.path.islink(out / "sys/bus/pci/devices/0000:05:00.0")


def test_broken_trees_never_raise(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(gpus=1, rdma_nics=1, process=healthy_process()))
    dev = Path(root, "sys/bus/pci/devices/0000:05:00.0")
    (dev / "current_link_speed").write_text("fast\n")
    (dev / "hwmon/hwmon2/power1_cap").write_text("-\n")
    os.remove(Path(root, "sys/class/infiniband/mlx5_0/device"))
    os.symlink("/nonexistent/escape", Path(root, "sys/class/infiniband/mlx5_0/device"))
    os.mkfifo(Path(root, "sys/bus/pci/devices/0000:04:00.0/config.fifo"))
    os.remove(Path(root, "sys/bus/pci/devices/0000:03:00.0/config"))
    os.mkfifo(Path(root, "sys/bus/pci/devices/0000:03:00.0/config"))
    facts = collect(str(root))
    found = {f.id: f for f in run_checks(facts, Context())}
    assert not any(k.startswith("doctor.internal") for k in found)
    assert "mlx5_0" not in facts.health.nics  # a link out of the tree is not followed
    assert found["pcie.acs"].status == Status.SKIP and "unreadable" in found["pcie.acs"].title
    assert found["gpu.power_cap"].status == Status.SKIP


def test_this_machines_bridges_are_read_without_error():
    """The real sysfs: every PCI device's bridge chain resolves, and a config read gives 64 bytes (not root)
    or the whole space (root), never a crash."""
    devices = Path("/sys/bus/pci/devices")
    if not devices.is_dir() or not any(devices.iterdir()):
        pytest.skip("no PCI devices in this machine's sysfs")
    from rocmkit.host.facts.health import _bridges

    reader, h = Reader("/", live=True), HealthFacts()
    for dev in sorted(devices.iterdir())[:16]:
        chain = _bridges(reader, h, os.path.relpath(os.path.realpath(dev), "/"))
        assert all(b in h.bridges for b in chain)
    for b in h.bridges.values():
        assert b.config_bytes is None or b.config_bytes in (64, 256, 4096) or b.config_bytes > 64
