"""The --multi-node RDMA preflight (rdma.*) on generated trees.

No captured /sys/class/infiniband of an AMD cluster node exists here: the trees follow the sysfs layout and
value formats of Documentation/ABI/stable/sysfs-class-infiniband, and the GID table mlx5 fills for an IPv4
address (link-local v1/v2, then ::ffff:a.b.c.d v1/v2 — why recipes set NCCL_IB_GID_INDEX=3)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.checks.rdma import hca_selection
from rocmkit.host.facts import collect
from rocmkit.host.facts.rdma import Gid, Port, read_rdma
from rocmkit.host.facts.reader import Reader
from rocmkit.host.model import Status
from treegen import HostSpec, healthy_ports, healthy_process, roce_gids, write_tree


def tree(tmp_path: Path, ports=(), env=None) -> Path:
    process = healthy_process(env={**healthy_process()["env"], **(env or {})})
    return write_tree(tmp_path / "host", HostSpec(rdma=tuple(ports), process=process))


def preflight(tmp_path: Path, ports=(), env=None, multi_node=True) -> dict:
    root = tree(tmp_path, ports, env)
    facts = collect(str(root), rdma=multi_node)
    return {f.id: f for f in run_checks(facts, Context(multi_node=multi_node), only={"rdma"})}


def down(p: Port) -> Port:
    return dataclasses.replace(p, state="1: DOWN", phys_state="3: Disabled")


def test_tree_reads_back_as_written(tmp_path):
    ports = healthy_ports(4)
    root = tree(tmp_path, ports)
    rdma = read_rdma(Reader(str(root), live=False))
    assert rdma.found and rdma.ports == list(ports)
    assert [g.ipv4 for g in rdma.ports[1].gids] == [None, None, "10.0.1.11", "10.0.1.11"]


def test_healthy_roce_host(tmp_path):
    found = preflight(tmp_path, healthy_ports(8))
    assert {k: v.status for k, v in found.items()} == {"rdma.port": Status.PASS, "rdma.hca": Status.PASS,
                                                      "rdma.gid": Status.PASS}
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7" in found["rdma.hca"].title
    assert found["rdma.gid"].title.endswith("NCCL_IB_GID_INDEX=3")
    assert found["rdma.gid"].evidence["gid_index"] == {f"mlx5_{i}:1": 3 for i in range(8)}


def test_healthy_infiniband_host_needs_no_gid_index(tmp_path):
    found = preflight(tmp_path, healthy_ports(2, link_layer="InfiniBand"))
    assert all(f.status == Status.PASS for f in found.values())
    assert "InfiniBand" in found["rdma.gid"].title


def test_without_multi_node_nothing_is_read_and_it_says_so(tmp_path):
    found = preflight(tmp_path, healthy_ports(2), multi_node=False)
    assert list(found) == ["rdma"] and found["rdma"].status == Status.SKIP and "--multi-node" in found["rdma"].title
    assert collect(str(tree(tmp_path / "b", healthy_ports(2)))).rdma is None


def test_no_rdma_devices_fails(tmp_path):
    found = preflight(tmp_path, ())
    assert found["rdma.port"].status == Status.FAIL and "TCP" in found["rdma.port"].title
    assert "rdma.gid" not in found


@pytest.mark.parametrize("ports", [(), "down"], ids=["no-devices", "all-down"])
def test_a_tcp_cluster_that_says_so_passes(tmp_path, ports):
    """NCCL_IB_DISABLE=1 (as a Slurm job passes it to the preflight): no RDMA is needed, so none is a pass."""
    ports = [down(p) for p in healthy_ports(2)] if ports == "down" else ports
    found = preflight(tmp_path, ports, env={"NCCL_IB_DISABLE": "1"})
    assert list(found) == ["rdma.port"] and found["rdma.port"].status == Status.PASS
    assert "TCP sockets" in found["rdma.port"].title
    # NCCL_IB_DISABLE=0 is RCCL's default, not a choice of TCP
    assert preflight(tmp_path / "zero", ports, env={"NCCL_IB_DISABLE": "0"})["rdma.port"].status == Status.FAIL


def test_rdma_switched_off_while_ports_are_active_warns(tmp_path):
    found = preflight(tmp_path, healthy_ports(2), env={"NCCL_IB_DISABLE": "1"})
    f = found["rdma.port"]
    assert list(found) == ["rdma.port"] and f.status == Status.WARN
    assert f.evidence["active"] == ["mlx5_0:1", "mlx5_1:1"] and "unset NCCL_IB_DISABLE" in f.fix


def test_no_active_port_fails(tmp_path):
    found = preflight(tmp_path, [down(p) for p in healthy_ports(2)])
    f = found["rdma.port"]
    assert f.status == Status.FAIL and "no RDMA port is ACTIVE" in f.title
    assert f.evidence["down"] == {"mlx5_0:1": "1: DOWN, 3: Disabled", "mlx5_1:1": "1: DOWN, 3: Disabled"}


def test_one_port_down_warns_and_is_left_out_of_the_hca_list(tmp_path):
    ports = list(healthy_ports(3))
    ports[1] = down(ports[1])
    found = preflight(tmp_path, ports)
    assert found["rdma.port"].status == Status.WARN and "mlx5_1:1" in found["rdma.port"].title
    assert found["rdma.hca"].evidence["nccl_ib_hca"] == "mlx5_0,mlx5_2"


def test_roce_without_an_ipv4_v2_gid_warns(tmp_path):
    link_local = tuple(g for g in roce_gids("10.0.0.1", "ens0") if g.ipv4 is None)
    found = preflight(tmp_path, [dataclasses.replace(p, gids=link_local) for p in healthy_ports(2)])
    f = found["rdma.gid"]
    assert f.status == Status.WARN and "no RoCE v2 GID with an IPv4 address" in f.title


def test_some_ports_without_an_ipv4_gid_are_named(tmp_path):
    ports = list(healthy_ports(2))
    ports[1] = dataclasses.replace(ports[1], gids=ports[1].gids[:2])
    f = preflight(tmp_path, ports)["rdma.gid"]
    assert f.status == Status.WARN and f.evidence["without_ipv4_v2_gid"] == ["mlx5_1:1"]


def test_gid_index_differing_between_ports_warns(tmp_path):
    ports = list(healthy_ports(2))
    # a second address on the first device shifts nothing; a device whose table starts later does
    ports[1] = dataclasses.replace(ports[1], gids=tuple(Gid(g.index + 2, g.gid, g.type, g.ndev) for g in ports[1].gids))
    f = preflight(tmp_path, ports)["rdma.gid"]
    assert f.status == Status.WARN and f.evidence["gid_index"] == {"mlx5_0:1": 3, "mlx5_1:1": 5}


def test_set_gid_index_that_is_wrong_warns_with_the_right_one(tmp_path):
    f = preflight(tmp_path, healthy_ports(2), env={"NCCL_IB_GID_INDEX": "1"})["rdma.gid"]
    assert f.status == Status.WARN and f.fix == "export NCCL_IB_GID_INDEX=3"
    assert preflight(tmp_path / "ok", healthy_ports(2), env={"NCCL_IB_GID_INDEX": "3"})["rdma.gid"].status == Status.PASS


@pytest.mark.parametrize("value,status", [("mlx5_9", Status.WARN), ("mlx5", Status.PASS), ("=mlx5_1:1", Status.PASS),
                                          ("^mlx5_0,mlx5_1", Status.WARN), ("mlx5_0:2", Status.WARN)])
def test_set_nccl_ib_hca_must_select_an_active_port(tmp_path, value, status):
    f = preflight(tmp_path, healthy_ports(2), env={"NCCL_IB_HCA": value})["rdma.hca"]
    assert f.status == status, f.title


def test_hca_selection_follows_nccls_syntax():
    names = [("mlx5_0", 1), ("mlx5_1", 1), ("mlx5_10", 1), ("bnxt_re0", 1)]
    assert hca_selection("mlx5_1", names) == [("mlx5_1", 1), ("mlx5_10", 1)]  # a prefix
    assert hca_selection("=mlx5_1", names) == [("mlx5_1", 1)]  # exact
    assert hca_selection("^mlx5", names) == [("bnxt_re0", 1)]  # all but
    assert hca_selection("mlx5_0:2", names) == []  # another port


def test_empty_and_malformed_gid_entries_are_skipped(tmp_path):
    root = tree(tmp_path, healthy_ports(1))
    base = root / "sys/class/infiniband/mlx5_0/ports/1"
    (base / "gids/5").write_text("not a gid\n")
    facts = collect(str(root), rdma=True)
    assert [g.index for g in facts.rdma.ports[0].gids] == [0, 1, 2, 3]
    # the kernel refuses types of an empty entry (EINVAL): they are never read
    assert not any("gid_attrs/types/6" in r for r in facts.files_read)


def test_capture_of_a_multi_node_tree_reproduces_it(tmp_path):
    ports = list(healthy_ports(2))
    ports[1] = down(ports[1])
    facts = collect(str(tree(tmp_path, ports)), rdma=True)
    first = [(f.id, f.status, f.title) for f in run_checks(facts, Context(multi_node=True), only={"rdma"})]
    cap = capture(facts, str(tmp_path / "cap"))
    again = collect(str(cap), rdma=True)
    assert [(f.id, f.status, f.title) for f in run_checks(again, Context(multi_node=True), only={"rdma"})] == first


def test_cli_multi_node_exit_codes(tmp_path):
    ok = tree(tmp_path / "ok", healthy_ports(2))
    bad = tree(tmp_path / "bad", [down(p) for p in healthy_ports(2)])
    run = CliRunner().invoke
    assert run(cli, ["doctor", "--root", str(ok), "--multi-node", "--only", "rdma,kernel.log"]).exit_code == 0
    r = run(cli, ["doctor", "--root", str(bad), "--multi-node", "--only", "rdma,kernel.log", "--json"])
    assert r.exit_code == 1
    assert {f["id"]: f["status"] for f in json.loads(r.stdout)["findings"]} == {"kernel.log": "pass", "rdma.port": "fail"}
    r = run(cli, ["doctor", "--root", str(bad), "--only", "rdma"])
    assert r.exit_code == 0 and "give --multi-node" in r.output


def test_live_multi_node_on_this_machine(tmp_path):
    """Whatever this machine has: no /sys/class/infiniband is a failure, never a pass."""
    facts = collect("/", process=False, rdma=True)
    found = {f.id: f for f in run_checks(facts, Context(multi_node=True), only={"rdma"})}
    if not Path("/sys/class/infiniband").is_dir() or not facts.rdma.ports:
        assert found["rdma.port"].status == Status.FAIL
    else:
        assert found["rdma.port"].status in (Status.PASS, Status.WARN, Status.FAIL)
