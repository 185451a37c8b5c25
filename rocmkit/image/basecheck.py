"""The build step that checks the base image holds what the stack declares it provides: its ROCm (the stack's
`rocm`, where the base supplies ROCm) and each `[[base.provides]]` distribution at its exact version.

It runs first in the `base` stage, in the base's own Python, before any package is fetched or compiled, so a
retagged base that changed TransformerEngine fails the build in seconds and says which component and both
versions; it runs again at the end of `final`, where a later install that replaced a base component is
caught the same way. Standard library only (the base has nothing else to rely on), no network. The script is
written into the image by printf, one line per argument, so the rendered Dockerfile shows every line of it.

Pure: the script's text and its arguments, from data already validated (rocmkit/stacks/provides.py)."""

from __future__ import annotations

from ..stacks import Stack

SCRIPT_PATH = "/opt/rocmkit/basecheck.py"
VERSIONS_PATH = "/opt/rocmkit/base-versions.txt"
ROCM = "rocm"  # the name the check gives the base's ROCm

# Arguments: WHEN (base | final), then NAME DISTRIBUTION VERSION triples; DISTRIBUTION `-` is the base's ROCm
# (the .info/version of /opt/rocm, $ROCM_PATH or the /opt/rocm-X.Y.Z that matches, else TheRock's
# rocm-sdk-core), compared by as many release numbers as the stack's `rocm` gives (7.14.0 holds 7.14.0-1,
# 7.14.0a20260608 and 7.14.0.70140), as is a VERSION `release:X.Y.Z` (a `release` entry); VERSION `-` is a
# MUTABLE entry (recorded, not checked).
# A declared version without a local label (+...) matches any local build of it, as PEP 440's == does.
# The lines hold no single quote (the renderer's shell quoting would split them) and no line starts with `#`.
SCRIPT = r"""import glob
import importlib.metadata as md
import os
import re
import sys


def canon(name):
    return re.sub(r"[-_.]+", "-", name or "").lower()


have = {}
for d in reversed(list(md.distributions())):
    have[canon(d.metadata["Name"])] = d.version


def read(p):
    with open(p) as f:
        return f.read().strip(), p


def rocm(declared):
    paths = ["/opt/rocm/.info/version"]
    if os.environ.get("ROCM_PATH"):
        paths.append(os.path.join(os.environ["ROCM_PATH"], ".info", "version"))
    for p in paths:
        if os.path.isfile(p):
            return read(p)
    trees = [read(p) for p in sorted(glob.glob("/opt/rocm-*/.info/version"))]
    if trees:
        return next((t for t in trees if same_release(t[0], declared)), trees[0])
    v = have.get("rocm-sdk-core")
    return v, "rocm-sdk-core" if v else None


def same_release(held, declared):
    m = re.match(r"[0-9]+(\.[0-9]+)*", held or "")
    have = [int(x) for x in m.group(0).split(".")] if m else []
    want = [int(x) for x in declared.split(".")]
    have = (have + [0] * len(want))[:len(want)]
    return held is not None and have == want


def matches(declared, held):
    if held is None:
        return False
    if "+" not in declared:
        held = held.split("+")[0]
    return held == declared


when, args = sys.argv[1], sys.argv[2:]
bad, lines = [], []
for name, dist, version in zip(args[0::3], args[1::3], args[2::3]):
    if dist == "-":
        held, where = rocm(version)
        ok = same_release(held, version)
    else:
        held, where = have.get(canon(dist)), dist
        if version.startswith("release:"):
            ok = same_release(held, version.split(":")[1])
            version = "release " + version.split(":")[1]
        else:
            ok = version == "-" or matches(version, held)
    lines.append("%s %s %s" % (name, held or "absent", where or "-"))
    if not ok:
        bad.append("component %s: the stack declares %s, the %s holds %s" % (
            name, version, "base image" if when == "base" else "image", held or "none (absent)"))
if when == "base":
    os.makedirs(os.path.dirname(sys.argv[0]), exist_ok=True)
    with open(os.path.join(os.path.dirname(sys.argv[0]), "base-versions.txt"), "w") as f:
        f.write("".join(line + "\n" for line in lines))
for line in bad:
    print("rocmkit: " + line, file=sys.stderr)
if bad:
    hint = ("the base image is not the one the stack was written for (a retagged or another image): pin it by "
            "digest (rocmkit lock) or update the versions in the stack") if when == "base" else (
            "a later install replaced a component the base provides: pin it in the stack or keep it out")
    print("rocmkit: hint: " + hint, file=sys.stderr)
    sys.exit(1)
print("rocmkit: the %s holds what the stack declares: %s" % (
    "base image" if when == "base" else "image", ", ".join(lines) or "nothing declared"))
"""


def checked(stack: Stack) -> list[tuple[str, str, str]]:
    """(name, distribution, version) the step reads, `-` as in SCRIPT: ROCm where the base supplies it (not a
    CPU stack, not ROCm installed from wheels by the stack itself), then each declared distribution."""
    out = []
    if stack.has_rocm and not stack.base.rocm_wheels:
        out.append((ROCM, "-", stack.rocm))
    out += [(p.name, p.distribution, p.version or (f"release:{p.release}" if p.release else "-"))
            for p in stack.base.provides]
    return out


def script_lines() -> list[str]:
    """SCRIPT without blank lines (printf writes one argument per line; Python does not need them)."""
    lines = [line for line in SCRIPT.splitlines() if line.strip()]
    for line in lines:  # a Dockerfile drops a continued line that starts with `#` as a comment
        if "'" in line or line.lstrip().startswith("#"):
            raise ValueError(f"basecheck line not safe to render: {line!r}")
    return lines


def summary(stack: Stack) -> str:
    """What the step checks, in words, for the comment above it."""
    parts = [f"ROCm {stack.rocm}"] if stack.has_rocm and not stack.base.rocm_wheels else []
    fixed = [p.name for p in stack.base.provides if p.version]
    released = [p.name for p in stack.base.provides if p.release]
    loose = [p.name for p in stack.base.provides if p.mutable]
    if fixed:
        parts.append(", ".join(fixed) + " at the versions the stack declares")
    if released:
        parts.append(", ".join(released) + " at the release the stack declares")
    if loose:
        parts.append(", ".join(loose) + " recorded, not checked (MUTABLE)")
    return "; ".join(parts)


def arguments(stack: Stack) -> list[str]:
    return [x for triple in checked(stack) for x in triple]


def final_arguments(stack: Stack) -> list[str]:
    """The declared distributions only, for the final stage's second reading: the base's ROCm cannot change
    after the first (and the pip-SDK fix-ups link /opt/rocm to another tree by then)."""
    return [x for triple in checked(stack) if triple[1] != "-" for x in triple]
