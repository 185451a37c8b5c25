"""The sample captured host tree users try `rocmkit doctor --root` on (docs/examples/mi300x-host, shown in
docs/guides/hosts.md): eight MI300X in SPX mode on ROCm 7.0.2 with NUMA auto-balancing left on, written by the
project's own generator (tests/treegen.py, whose layout and formats follow the kernel and the real captures in
../shared/fixtures; those captures are not copied into the repository).

`python tests/sample_tree.py` rewrites it; tests/test_sample_tree.py fails when it and the generator drift apart.
Git keeps no empty folder, so each empty one gets a `.keep` file (the doctor reads nothing by that name)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "docs" / "examples" / "mi300x-host"
COMMAND = "rocmkit doctor --root docs/examples/mi300x-host"  # run from the repository's root


def write(dest: Path) -> Path:
    from treegen import HostSpec, write_tree

    root = write_tree(dest, HostSpec(product="MI300X", gpus=8, mode="SPX", rocm="7.0.2", numa_balancing="1"))
    for folder in sorted(p for p in Path(root).rglob("*") if p.is_dir() and not p.is_symlink()):
        if not any(folder.iterdir()):
            (folder / ".keep").write_text("")
    return Path(root)


if __name__ == "__main__":
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    shutil.rmtree(SAMPLE, ignore_errors=True)
    write(SAMPLE)
    print(f"wrote {SAMPLE.relative_to(REPO)}")
