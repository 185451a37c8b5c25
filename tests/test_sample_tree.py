"""The sample captured host tree (docs/examples/mi300x-host): the hosts guide's worked `rocmkit doctor --root`
example, run exactly as the guide shows it (from the repository's root, as a user types it), prints what the guide
shows; and the committed tree is what the project's generator writes (tests/sample_tree.py)."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys
from pathlib import Path

import doc_tables
import sample_tree


def guide_example() -> tuple[str, str]:
    block = doc_tables.current(doc_tables.PAGES["sample-doctor"].read_text(), "sample-doctor")
    lines = block.strip().removeprefix("```\n").removesuffix("\n```").splitlines()
    assert lines[0].startswith("$ rocmkit "), lines[0]
    return lines[0][2:], "\n".join(lines[1:]) + "\n"


def test_the_guides_doctor_root_example_prints_what_the_guide_shows():
    command, shown = guide_example()
    assert command == sample_tree.COMMAND
    env = dict(os.environ, PYTHONPATH=str(doc_tables.REPO))
    env.pop("ROCMKIT_DEBUG", None)
    r = subprocess.run([sys.executable, "-m", "rocmkit", *command.split()[1:]], cwd=doc_tables.REPO, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr  # warnings only: the guide says "passed with warnings"
    assert r.stdout == shown, "the hosts guide's sample output is stale: run `python tests/doc_tables.py`"
    assert "WARN  kernel.numa_balancing" in shown and "8 physical GPU(s)" in shown


def test_the_committed_sample_tree_is_what_the_generator_writes(tmp_path):
    fresh = sample_tree.write(tmp_path / "mi300x-host")
    committed = sample_tree.SAMPLE

    def listing(root: Path) -> dict[str, str]:
        return {str(p.relative_to(root)): (f"-> {os.readlink(p)}" if p.is_symlink() else "file")
                for p in root.rglob("*") if p.is_symlink() or p.is_file()}

    assert listing(committed) == listing(fresh), "run `python tests/sample_tree.py`"
    files = [k for k, v in listing(fresh).items() if v == "file"]
    _, mismatch, errors = filecmp.cmpfiles(committed, fresh, files, shallow=False)
    assert not mismatch and not errors, (mismatch[:5], errors[:5])
