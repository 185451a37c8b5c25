"""The fleet doctor's second round, on data (the real two-node Slurm cases are in test_fleet_slurm_states.py): a
node's output as untrusted input (nodedoc.py), the rocmkit each node runs as part of the comparison (buildid.py,
compare.py), Slurm's word about a node (slurm_state.py) and what the report makes of each."""

from __future__ import annotations

import base64
import copy
import gzip
import json
import shutil

import pytest
from fleetgen import fleet, node_spec

from rocmkit import buildid
from rocmkit.errors import UsageError
from rocmkit.fleet import compare, nodedoc, slurm_state
from rocmkit.fleet.html import render
from rocmkit.fleet.nodes import expand
from rocmkit.fleet.report import assess, text
from rocmkit.fleet.run import NodeResult, parse_frames

OWN = {"version": "0.1.0", "build": "py-sha256:aaaaaaaaaaaa", "source": "git+https://example.org/rocmkit@" + "a" * 40}


def frame(node: str, rc: int, stdout: str, stderr: str = "", seconds: int = 2) -> list[str]:
    """One task's lines as the node's TASK prints them (srun's label taken off)."""
    body = base64.b64encode(gzip.compress(stdout.encode())).decode()
    err = base64.b64encode(stderr.encode()).decode()
    return [f"@@rocmkit-fleet begin {node} {rc} {seconds}", *[body[i:i + 76] for i in range(0, len(body), 76)],
            "@@rocmkit-fleet stderr " + node, *([err] if err else []), f"@@rocmkit-fleet end {node}"]


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict:
    return fleet(tmp_path_factory.mktemp("good"), {"n1": node_spec()})[0].doc


def run_doc(results, **kw) -> dict:
    return assess(results, level=1, strict=False, tolerance=0.05, deadline_s=120, extra={"rocmkit": OWN}, **kw)


# -- a node's output ------------------------------------------------------------------------------------------------

def test_text_around_the_document_is_tolerated(good):
    doc, around = nodedoc.extract("Welcome to gpu-02 (login banner)\n{not json\n" + json.dumps(good, indent=1)
                                  + "\nmodule: loaded rocm/7.0\n")
    assert doc == good and "Welcome to gpu-02" in around and "module: loaded" in around
    got = parse_frames({0: frame("n2", 0, "banner {x}\n" + json.dumps(good) + "\n")})["n2"]
    assert got.state == "answered" and got.doc == good and got.around == "banner {x}"


@pytest.mark.parametrize(("mangle", "said"), [
    (lambda d: d.update(findings="oops"), "findings: a string, not a list"),
    (lambda d: d["findings"][0].pop("status"), "findings[0].status: missing"),
    (lambda d: d["findings"][1].update(status="great"), "findings[1].status: 'great', not one of"),
    (lambda d: d["findings"][0].update(evidence=[1, 2]), "findings[0].evidence: a list, not an object"),
    (lambda d: d.update(fingerprint={"gpus": {"x": 3}}), "fingerprint.gpus.x: a number, not an object"),
    (lambda d: d["fingerprint"].update(env={"NCCL_IB_HCA": ["mlx5_0"]}), "fingerprint.env.NCCL_IB_HCA: a list"),
    (lambda d: d.update(rocmkit="0.1.0"), "rocmkit: a string, not an object"),
    (lambda d: d.update(exit_code="1"), "exit_code: a string, not a number"),
])
def test_a_malformed_document_names_the_node_and_the_field_and_the_others_stand(tmp_path, good, mangle, said):
    bad = copy.deepcopy(good)
    mangle(bad)
    got = parse_frames({0: frame("n2", 0, json.dumps(bad))})["n2"]
    assert got.state == "invalid" and got.error.startswith("n2's doctor document is malformed: "), got
    assert said in got.error, got.error
    results = fleet(tmp_path, {"n1": node_spec(), "n3": node_spec()}) + [got]
    doc = run_doc(results)
    assert doc["exit_code"] == 1 and doc["failing_nodes"] == ["n2"] and doc["passing_nodes"] == ["n1", "n3"]
    assert doc["exclude"] == "--exclude=n2"
    found = {f["id"]: f for f in doc["findings"] if f["status"] == "fail"}
    assert found["fleet.invalid"]["nodes"] == ["n2"] and said in found["fleet.invalid"]["title"]
    assert "upgrade rocmkit on n2 to the fleet's own, 0.1.0 (build aaaaaaaaaaaa)" in found["fleet.invalid"]["fix"]
    render(doc), text(doc, None)  # the page and the summary take it too


def test_no_document_at_all_and_a_document_of_another_kind():
    got = parse_frames({0: frame("n1", 0, "just text\n"), 1: frame("n2", 0, '{"schema": "x/v1"}\n'),
                        2: frame("n3", 0, "[1, 2]\n")})
    assert got["n1"].state == "error" and "printed no report (exit 0)" in got["n1"].error
    assert got["n2"].state == "invalid" and "schema: 'x/v1', not a rocmkit doctor document (schema rocmkit.doctor/v1)" in got["n2"].error
    assert got["n3"].state == "error" and "printed no report" in got["n3"].error  # JSON, but no object


@pytest.mark.parametrize(("rc", "seconds", "state", "said"), [
    (139, 3, "crashed", "rocmkit crashed on n2 (SIGSEGV)"),
    (134, 3, "crashed", "rocmkit crashed on n2 (SIGABRT)"),
    (137, 3, "crashed", "rocmkit was killed on n2 (SIGKILL) before its deadline: the out-of-memory killer"),
    (137, 125, "deadline", "its doctor ran past the deadline and was stopped"),  # timeout's -k: the deadline's kill
    (124, 120, "deadline", "its doctor ran past the deadline and was stopped"),
    (127, 0, "error", "rocmkit is not installed on n2 (exit 127, command not found)"),
])
def test_an_exit_status_is_read(rc, seconds, state, said):
    got = parse_frames({0: frame("n2", rc, "", "boom", seconds)}, 120)["n2"]
    assert (got.state, got.exit_code) == (state, rc) and got.error.startswith(said), got


def test_a_rocmkit_too_old_for_the_command_gets_the_upgrade_line(tmp_path):
    got = parse_frames({0: frame("n2", 2, "", "Usage: rocmkit doctor [OPTIONS]\nError: No such option: --multi-node")})
    assert got["n2"].state == "error" and "n2's rocmkit is too old for the fleet's command" in got["n2"].error
    assert "--multi-node" in got["n2"].error
    doc = run_doc(fleet(tmp_path, {"n1": node_spec()}) + [got["n2"]])
    fix = next(f["fix"] for f in doc["findings"] if f["id"] == "fleet.error")
    assert fix.startswith("upgrade rocmkit on n2 to the fleet's own, 0.1.0 (build aaaaaaaaaaaa): "
                          f"pip install --upgrade 'rocmkit @ git+https://example.org/rocmkit@{'a' * 40}'"), fix


# -- the rocmkit each node runs ---------------------------------------------------------------------------------

def older(doc: dict) -> dict:
    """The document of a rocmkit that predates the fleet: no identity, a fingerprint of kernel, amdgpu, ROCm, GPUs."""
    old = copy.deepcopy(doc)
    old.pop("rocmkit", None)
    old["fingerprint"] = {k: old["fingerprint"][k] for k in ("kernel", "amdgpu", "rocm", "gpus")}
    return old


@pytest.mark.parametrize("n2", [node_spec(env={"NCCL_SOCKET_IFNAME": "eth1"}), node_spec(torch="2.8.0+rocm6.4")])
def test_an_older_rocmkit_on_one_node_fails_it_and_says_what_it_did_not_report(tmp_path, n2):
    """The issue's case: n2's older rocmkit reports no torch and no environment, so nothing could differ and the
    fleet passed. Now the tool itself differs (n2 has no build identity: it is the older one, the odd one), and
    every fact it did not report is a difference naming it and why."""
    results = fleet(tmp_path, {"n1": node_spec(), "n2": n2})
    results[1] = results[1]._replace(doc=older(results[1].doc))
    doc = run_doc(results)
    assert doc["exit_code"] == 1 and doc["failing_nodes"] == ["n2"] and doc["passing_nodes"] == ["n1"]
    assert doc["exclude"] == "--exclude=n2"
    diffs = {d["id"]: d for d in doc["differences"]}
    tool = diffs["fleet.differs.rocmkit"]
    assert doc["differences"][0] is tool or doc["differences"][0]["id"] == "fleet.differs.rocmkit"
    assert tool["status"] == "fail" and tool["odd_nodes"] == ["n2"]
    assert "an older rocmkit (no build identity) on n2" in tool["title"]
    assert buildid.describe(results[0].doc["rocmkit"]) + " on n1" in tool["title"]
    torch = diffs["fleet.differs.packages.torch"]
    assert torch["odd_nodes"] == ["n2"] and torch["status"] == "fail"
    assert torch["title"] == ("torch differs: 2.9.1+rocm7.0.2 on n1; (not reported) on n2 — n2 did not report torch: "
                              "its rocmkit is older (it reports no build identity)")
    assert torch["fix"] == tool["fix"] and "on n2: pip install --upgrade" in tool["fix"]
    assert any(d["id"].startswith("fleet.differs.env.") and "n2 did not report env" in d["title"]
               for d in doc["differences"])
    assert "FAIL  rocmkit differs" in text(doc, None)


def test_another_build_of_rocmkit_fails_the_fleet_naming_who_runs_what(tmp_path):
    results = fleet(tmp_path, {"n1": node_spec(), "n2": node_spec(), "n3": node_spec()})
    other = {**results[2].doc["rocmkit"], "build": "py-sha256:bbbbbbbbbbbb", "source": None}
    results[2] = results[2]._replace(doc={**results[2].doc, "rocmkit": other})
    doc = run_doc(results)
    tool = {d["id"]: d for d in doc["differences"]}["fleet.differs.rocmkit"]
    assert tool["odd_nodes"] == ["n3"] and doc["failing_nodes"] == ["n3"] and doc["exit_code"] == 1
    assert "(build bbbbbbbbbbbb) on n3" in tool["title"]
    mine = buildid.describe(results[0].doc["rocmkit"])
    assert f"n1, n2 run {mine}; n3 runs 0.1.0 (build bbbbbbbbbbbb)" in tool["fix"], tool["fix"]
    two = run_doc(results[1:])  # one each: no majority, the fleet fails as a whole, nothing excluded
    assert two["exit_code"] == 1 and two["passing_nodes"] == [] and two["exclude"] is None


def test_a_package_missing_on_one_node_is_a_difference(tmp_path):
    results = fleet(tmp_path, {"n1": node_spec(), "n2": node_spec(), "n3": node_spec()})
    results[2].doc["fingerprint"]["packages"].pop("torch")
    diffs = {d.id: d for d in compare.differences({r.node: r.doc for r in results})}
    torch = diffs["fleet.differs.packages.torch"]
    assert torch.odd == ["n3"] and torch.groups[1] == ("(not installed)", ["n3"]) and not torch.notes


def test_the_build_identity_is_a_content_hash(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (pkg / "sub" / "b.py").write_text("y = 2\n")
    first = buildid.build_hash(pkg)
    (pkg / "sub" / "__pycache__").mkdir()
    (pkg / "sub" / "__pycache__" / "b.cpython-311.pyc").write_bytes(b"\0")
    (pkg / "data.json").write_text("{}")
    assert buildid.build_hash(pkg) == first  # caches and data files leave it as it is
    (pkg / "sub" / "b.py").write_text("y = 3\n")
    assert buildid.build_hash(pkg) != first and first.startswith("py-sha256:")
    # a wheel keeps the templates inside the package, an editable install beside it: one commit, one build
    tdir = tmp_path / "templates"
    (tdir / "fleet").mkdir(parents=True)
    (tdir / "__init__.py").write_text("")
    (tdir / "fleet" / "report.html.j2").write_text("<html>")
    editable = buildid.build_hash(pkg, tdir)
    shutil.copytree(tdir, pkg / "templates")
    assert buildid.build_hash(pkg, pkg / "templates") == editable != buildid.build_hash(pkg)
    (pkg / "templates" / "fleet" / "report.html.j2").write_text("<html lang=en>")
    assert buildid.build_hash(pkg, pkg / "templates") != editable
    me = buildid.identity()
    assert me is buildid.identity() and me["build"].startswith("py-sha256:")  # computed once


# -- Slurm's word --------------------------------------------------------------------------------------------------

SCONTROL = """\
NodeName=n1 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 State=IDLE ThreadsPerCore=1 Partitions=debug CfgTRES=cpu=2,mem=1M
NodeName=n2 Arch=x86_64 CPUAlloc=0 State=IDLE+DRAIN Partitions=debug Reason=t7 bad GPU 3 [root@2026-12-07T03:00:01]
NodeName=n3 Arch=x86_64 State=DOWN+NOT_RESPONDING Partitions=debug Reason=Not responding [slurm@2026-12-07T02:00:00]
NodeName=n4 Arch=x86_64 State=IDLE*+RESERVED Partitions=debug
NodeName=n5 Arch=x86_64 State=ALLOCATED Partitions=debug
NodeName=n6 Arch=x86_64 State=MIXED+DRAIN Partitions=debug Reason=swap [ops@2026-12-01T00:00:00]
NodeName=n7 Arch=x86_64 State=IDLE+RESERVED Partitions=debug
NodeName=n8 Arch=x86_64 State=MIXED Partitions=debug
"""


def test_slurm_states_are_read_and_named():
    states = slurm_state.parse(SCONTROL)
    assert states["n2"].reason == "t7 bad GPU 3" and states["n2"].reason_by == "root"
    assert states["n3"].base == "DOWN" and "NOT_RESPONDING" in states["n3"].flags
    assert "NOT_RESPONDING" in states["n4"].flags and states["n4"].base == "IDLE"
    out = {n: slurm_state.verdict(s, in_allocation=False, reservation=False) for n, s in states.items()}
    assert out["n1"] is None and out["n8"] is None  # idle, and mixed (srun decides: it may have room)
    assert out["n2"].kind == "drained" and out["n2"].blames
    assert out["n2"].text == ("n2 is drained in Slurm (Slurm's reason: t7 bad GPU 3, set by root at "
                              "2026-12-07T03:00:01): Slurm's state IDLE+DRAIN")
    assert out["n3"].kind == "down" and "Not responding" in out["n3"].text
    assert out["n4"].kind == "not responding"
    assert (out["n5"].kind, out["n5"].blames) == ("busy", False)
    assert out["n6"].kind == "draining"
    assert (out["n7"].kind, out["n7"].blames) == ("reserved", False) and "--reservation=NAME" in out["n7"].text
    # inside the job's own allocation its nodes are allocated to it, and a reservation it runs in is its own
    assert slurm_state.verdict(states["n5"], in_allocation=True, reservation=False) is None
    assert slurm_state.verdict(states["n7"], in_allocation=False, reservation=True) is None


def unavailable(node: str, kind: str, blames: bool = True) -> NodeResult:
    return NodeResult(node, "unavailable", error=f"{node} is {kind} in Slurm (Slurm's reason: t7)",
                      slurm=(kind, blames))


def test_a_drained_node_is_named_and_the_others_still_checked(tmp_path):
    results = fleet(tmp_path, {"n1": node_spec()}) + [unavailable("n2", "drained")]
    doc = run_doc(results)
    assert doc["exit_code"] == 1 and doc["failing_nodes"] == ["n2"] and doc["passing_nodes"] == ["n1"]
    assert doc["exclude"] == "--exclude=n2" and doc["unavailable_nodes"] == ["n2"]
    f = next(f for f in doc["findings"] if f["id"] == "fleet.slurm.drained")
    assert f["nodes"] == ["n2"] and f["title"] == "n2 is drained in Slurm (Slurm's reason: t7); not asked"
    assert "\n  n2    drained   fleet.slurm.drained" in text(doc, None)
    assert run_doc(results, min_nodes=1)["exit_code"] == 0  # a partial fleet with --min-nodes: as documented


def test_a_busy_node_fails_but_is_not_excluded_and_no_node_at_all_is_exit_3(tmp_path):
    doc = run_doc(fleet(tmp_path, {"n1": node_spec()}) + [unavailable("n2", "busy", blames=False)])
    assert doc["failing_nodes"] == ["n2"] and doc["exclude"] is None and doc["exit_code"] == 1
    assert "taken by Slurm for other work (n2)" in doc["no_exclude"] and doc["why"] == []
    none = run_doc([unavailable("n1", "down"), unavailable("n2", "drained")])
    assert none["exit_code"] == 3 and none["why"][0].startswith("Slurm lets none of the nodes run a job now")
    assert "fleet FAILS: Slurm lets none" in text(none, None)


@pytest.mark.parametrize("bad", ["n[１-２]", "ｎ1", "n1,n２"])
def test_a_host_list_is_plain_ascii(bad):
    with pytest.raises(UsageError, match=r"is not plain ASCII") as exc:
        expand(bad)
    assert "U+FF" in exc.value.message and "plain ASCII" in exc.value.hint


def test_an_active_reservation_is_read_from_scontrol():
    """Slurm 22.05 says IDLE for a node an active reservation holds: the reservation list says it."""
    text = ("ReservationName=rk-x StartTime=2026-12-07T03:07:51 EndTime=2026-12-07T03:17:51 Duration=00:10:00 "
            "Nodes=n[2-3] NodeCnt=2 Flags=IGNORE_JOBS,SPEC_NODES Users=root Groups=(null) Accounts=(null) "
            "State=ACTIVE\nReservationName=later Nodes=n1 Flags=MAINT Users=ops State=INACTIVE\n")
    held = slurm_state.reservations(text)
    assert held == {"n2": ("rk-x, for root, until 2026-12-07T03:17:51", False),
                    "n3": ("rk-x, for root, until 2026-12-07T03:17:51", False)}
    s = slurm_state.parse("NodeName=n2 State=IDLE Partitions=debug\n")["n2"]._replace(reservation=held["n2"][0])
    u = slurm_state.verdict(s, in_allocation=False, reservation=False)
    assert u.kind == "reserved" and u.text.startswith("n2 is reserved in Slurm (reservation rk-x, for root, until ")


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value[:3]):
            yield from _paths(v, (*path, i))


def test_whatever_a_node_sends_the_fleet_never_raises(tmp_path, good):
    """Every field of a real document replaced by a value of another type, one at a time: the document is either
    refused by the schema (the node named) or read whole by the comparison, the page and the summary."""
    import random

    rng = random.Random(71)
    others = ["oops", 7, 1.5, None, True, [], [1, "x"], {}, {"status": "fail"}, float("nan")]
    results = fleet(tmp_path, {"n1": node_spec(), "n3": node_spec()})
    paths = [p for p in _paths(good) if p]
    refused = read = 0
    for path in rng.sample(paths, min(400, len(paths))):
        bad = copy.deepcopy(good)
        where = bad
        for key in path[:-1]:
            where = where[key]
        where[path[-1]] = rng.choice(others)
        got = parse_frames({0: frame("n2", 0, json.dumps(bad))}, 120)["n2"]
        refused += got.state == "invalid"
        read += got.state == "answered"
        doc = run_doc(results + [got])
        render(doc), text(doc, None), json.dumps(doc)
    assert refused and read


def test_the_guides_slurm_example_is_what_the_fleet_prints(tmp_path):
    """The clusters guide's drained node beside another rocmkit: its console block is this page's text, as is."""
    from pathlib import Path

    from fleetgen import pages

    doc, _ = pages(tmp_path)["fleet-slurm"]
    guide = (Path(__file__).resolve().parent.parent / "docs" / "guides" / "clusters.md").read_text()
    assert text(doc, Path("rocmkit-fleet-4712")).strip() in guide


def test_a_node_of_the_same_rocmkit_that_did_not_read_a_fact_says_so(tmp_path):
    """n3 runs the others' rocmkit but its doctor read no Python process (a captured tree): not "another build"."""
    results = fleet(tmp_path, {"n1": node_spec(), "n2": node_spec(), "n3": node_spec()})
    results[2].doc["fingerprint"].pop("packages")
    results[1].doc["rocmkit"] = {**results[1].doc["rocmkit"], "build": "py-sha256:bbbbbbbbbbbb"}
    torch = {d.id: d for d in compare.differences({r.node: r.doc for r in results})}["fleet.differs.packages.torch"]
    assert torch.odd == ["n3"] and torch.notes == ("n3 did not report torch: its doctor did not read it (a captured "
                                                   "tree without its process, or the doctor run without --multi-node)",)


def test_without_scontrol_the_states_are_said_unread(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert slurm_state.read(["n1"]) == ({}, "scontrol is not on PATH")
