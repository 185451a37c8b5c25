"""Partition modes: amdgpu's sysfs state when present, else the XCCs each KFD node holds out of the product's,
so a container granted some partitions of a GPU still sees that GPU's real mode."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.reader import KFD_TOPOLOGY
from rocmkit.host.model import Status
from treegen import HostSpec, healthy_process, write_tree

CAPTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "kfd"


def facts_of(tmp_path, **spec):
    return collect(str(write_tree(tmp_path / "h", HostSpec(process=healthy_process(), **spec))))


def findings(facts):
    return {f.id: f for f in run_checks(facts, Context())}


@pytest.mark.parametrize("product,mode,per_gpu", [
    ("MI300X", "SPX", 1), ("MI300X", "DPX", 2), ("MI300X", "QPX", 4), ("MI300X", "CPX", 8),
    ("MI308X", "DPX", 2), ("MI308X", "CPX", 4), ("MI300A", "TPX", 3), ("MI300A", "CPX", 6),
    ("MI355X", "CPX", 8), ("MI325X", "QPX", 4),
])
@pytest.mark.parametrize("sysfs", [True, False])
def test_mode_with_and_without_amdgpu_sysfs(tmp_path, product, mode, per_gpu, sysfs):
    f = facts_of(tmp_path, product=product, mode=mode, gpus=2, partition_sysfs=sysfs)
    assert [(d.partition_mode, d.partitions, d.mode_partitions) for d in f.devices] == [(mode, per_gpu, per_gpu)] * 2
    assert all(d.compute_partition == (mode if sysfs else None) for d in f.devices)


def test_container_granted_single_cpx_partitions(tmp_path):
    # a pod given one CPX partition of GPU 0 and two of GPU 1; the rest of the host is EPERM
    f = facts_of(tmp_path, mode="CPX", gpus=4, container=True, partition_sysfs=False, not_granted=(2, 3),
                 partitions_granted={0: 1, 1: 2})
    assert [(d.partition_mode, d.partitions, d.mode_partitions) for d in f.devices] == [("CPX", 1, 8), ("CPX", 2, 8)]
    found = findings(f)
    assert found["gpu.count"].evidence["physical"] == 2 and found["gpu.count"].evidence["not_granted_nodes"] == 29
    assert "gpu.partitions.missing" not in found  # not granted is not missing
    assert found["gpu.render"].status == Status.PASS


def test_sysfs_mode_wins_and_memory_partition_is_reported(tmp_path):
    f = facts_of(tmp_path, mode="CPX", gpus=1, memory_mode="NPS4")
    assert f.devices[0].memory_partition == "NPS4"
    dev = findings(f)["gpu.count"].evidence["devices"][0]
    assert dev["compute_partition"] == "CPX" and dev["memory_partition"] == "NPS4"


def test_unknown_sysfs_values_fall_back_to_the_topology(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(mode="QPX", gpus=1, process=healthy_process()))
    (root / "sys/bus/pci/devices/0000:05:00.0/current_compute_partition").write_text("UNKNOWN\n")
    (root / "sys/bus/pci/devices/0000:05:00.0/current_memory_partition").write_text("garbage\n")
    d = collect(str(root)).devices[0]
    assert (d.compute_partition, d.memory_partition, d.partition_mode) == (None, None, "QPX")


def test_a_partition_missing_on_a_host_is_flagged(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(mode="CPX", gpus=2, process=healthy_process()))
    nodes = root / KFD_TOPOLOGY / "nodes"
    last = max(int(n.name) for n in nodes.iterdir())
    (nodes / str(last) / "properties").unlink()
    (nodes / str(last)).rmdir()
    found = findings(collect(str(root)))
    assert found["gpu.partitions.missing"].status == Status.WARN
    assert "0000:15:00.0: 7 of 8 CPX" in found["gpu.partitions.missing"].title


def test_real_mi300x_cpx_capture_lacks_one_partition(tmp_path):
    src = CAPTURES / "mi300x-cpx" / "topology"
    if not src.is_dir():
        pytest.skip("real capture mi300x-cpx not present (../shared/fixtures is absent in a fresh clone)")
    root = tmp_path / "r"
    (root / KFD_TOPOLOGY).parent.mkdir(parents=True)
    (root / KFD_TOPOLOGY).symlink_to(src)
    found = findings(collect(str(root), process=False))
    assert found["gpu.partitions.missing"].evidence["gpus"] == ["0000:e5:00.0: 7 of 8 CPX"]
