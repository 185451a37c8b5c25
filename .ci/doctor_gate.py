"""The image gate's judgement of `rocmkit doctor --image IMAGE --json`: fail on any warning or failure the
image's build caused, pass on those that come from where the doctor ran it.

`doctor --strict` is no use here: inside a CI container the doctor also warns about the host (no GPU, a
memlock limit from `docker run`), which no change to the stack or template can fix. What the build decides is
the image's contents (image.*: code objects, duplicate distributions, JIT caches), its environment
(env.*: ENV lines), and its software and ROCm userspace (software.*, rocm.*), except the one software check
about this host's Docker engine.

    python3 .ci/doctor_gate.py REPORT.json    # exit 1, naming each finding, when the build caused any
"""

from __future__ import annotations

import json
import sys

BUILD_AREAS = ("image.", "env.", "software.", "rocm.")
HOST_IDS = {"software.docker"}  # the engine the doctor talks to, not one in the image
BAD = {"warn", "fail"}


def build_caused(report: dict) -> list[dict]:
    """The findings of one doctor report that the image's build caused and that are not a pass."""
    findings = report.get("findings")
    if not isinstance(findings, list):
        raise ValueError("no 'findings' list: not a `rocmkit doctor --json` report")
    return [f for f in findings if isinstance(f, dict) and f.get("status") in BAD
            and str(f.get("id", "")).startswith(BUILD_AREAS) and f.get("id") not in HOST_IDS]


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: doctor_gate.py REPORT.json", file=sys.stderr)
        return 2
    try:
        with open(argv[0]) as fh:
            report = json.load(fh)
        bad = build_caused(report)
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        print(f"doctor gate: {argv[0]}: {e}", file=sys.stderr)
        return 2
    for f in bad:
        print(f"doctor gate: {f['status']} {f['id']}: {f.get('title')}" + (f"\n    fix: {f['fix']}" if f.get("fix") else ""),
              file=sys.stderr)
    if bad:
        print(f"doctor gate: {len(bad)} finding(s) caused by the image's build", file=sys.stderr)
        return 1
    print("doctor gate: no warning or failure caused by the image's build")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
