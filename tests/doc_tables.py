"""The manual's tables made from the data they describe: the stacks and their pins from the stack files
(docs/stacks.md), the doctor's checks from the check registry (docs/guides/hosts.md), the GPU probes from
their catalog (docs/guides/probes.md), and what `rocmkit doctor --root` prints for the sample tree
(docs/examples/mi300x-host) in docs/guides/hosts.md.
`python tests/doc_tables.py` rewrites them; tests/test_docs.py fails when the pages and the data drift apart.

Each table lives between `<!-- generated: NAME -->` and `<!-- end generated: NAME -->` in the page PAGES names."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
DEFAULT_STACK = "verl-vllm"


def _code(items) -> str:
    return ", ".join(f"`{i}`" for i in items)


def _repo(url: str) -> str:
    return re.sub(r"^https://github\.com/|\.git$", "", url)


def _pin(c) -> str:
    from rocmkit.stacks import ComponentKind

    if c.kind is ComponentKind.WHEEL:
        text = (f"prebuilt wheel {c.wheel_url} sha256 `{c.wheel_sha256[:12]}`" if c.wheel_url
                else f"prebuilt wheel {_code(c.pip)}" + (f" (from {c.extra_index_url})" if c.extra_index_url else ""))
        return text + ("; held by the constraint file" if c.constrain else "")
    if c.kind is ComponentKind.PIP:
        text = _code(c.pip) + ("; without its dependencies" if c.no_deps else "")
        if c.extra_index_url:
            text += f" (from {c.extra_index_url})"
        return text + (f"; removes {_code(c.remove)}" if c.remove else "")
    ref = f"`{c.commit[:12]}`" + (f" (tag `{c.tag}`)" if c.tag else "") + (
        f" (branch `{c.branch}`)" if c.branch else "") if c.commit else f"`{c.mutable_ref}` **MUTABLE**"
    text = f"{_repo(c.git)} {ref}"
    if c.subdir != ".":
        text += f", `{c.subdir}/`"
    if c.extras:
        text += f" with {_code(f'[{e}]' for e in c.extras)}"
    text += "".join(f"; patch `{p.file}` (sha256 `{p.sha256[:12]}`)" for p in c.patches)
    return text + ("; build-only (offered to the stages that need it)" if not c.install else "")


def stack_table(stack) -> str:
    from rocmkit import archs

    rocm = f"ROCm {stack.rocm}" if stack.has_rocm else "no ROCm"
    python = f"Python {stack.python} ({stack.base.python_from.value})"
    targets = "the CPU" if stack.on_cpu else archs.join_targets(stack.targets).replace(";", " and ")
    head = (f"**{stack.name}**{' (default)' if stack.name == DEFAULT_STACK else ''} — {stack.description}; {rocm}, "
            f"{python}, {targets}.")
    if stack.source_note:
        head += f" {stack.source_note}."
    rows = [("base image", f"`{stack.base.image}`" + "".join(f"; for {a}: `{i}`" for a, i in
                                                              stack.base.image_per_arch.items()),
             stack.base.source_note)]
    if stack.base.apt:
        rows.append(("apt", _code(stack.base.apt), "packages the base lacks are installed (the image's distribution)"))
    rw = stack.base.rocm_wheels
    if rw:
        index = rw.index_url or rw.find_links
        device = _code(rw.device) + "".join(f"; `{{arch}}` for {a}: `{n}`" for a, n in rw.arch_names.items())
        rows.append(("ROCm wheels", _code(rw.packages) + (f"; per arch {device}" if rw.device else "")
                     + (f" (from {index})" if index else ""), rw.note))
    if stack.base.pip:
        index = stack.base.pip_extra_index_url or stack.base.pip_find_links
        rows.append(("base pins", _code(stack.base.pip) + (f" (from {index})" if index else ""), stack.base.pip_note))
    rows += [(f"{p.name} (from the base)",
              f"`{p.distribution}=={p.version}`, checked by the build's first step" if p.version else
              f"`{p.distribution}` release `{p.release}` (any build of it), checked by the build's first step"
              if p.release else
              f"`{p.distribution}` **MUTABLE**, recorded by the build's first step ({p.mutable_reason})",
              p.source_note) for p in stack.base.provides]
    if stack.base.amdsmi_from_rocm:
        rows.append(("amdsmi", "the image's own `/opt/rocm/share/amd_smi`",
                     "vLLM and SGLang find ROCm GPUs through amdsmi; this one matches the image's ROCm exactly"))
    rows += [(c.name, _pin(c), c.source_note) for c in stack.components]
    rows += [(f"asset {a.name}", f"{a.url} " + (f"sha256 `{a.sha256[:12]}`" if a.sha256 else "**MUTABLE**"),
              a.why + (f" ({a.mutable_reason})" if a.mutable_reason else "")) for a in stack.assets]
    if stack.constraints:
        rows.append(("constraints", _code(stack.constraints), "held by the image's pip constraint file"))
    rows += [(f"env `{e.name}`", f"`{e.value}`", e.why) for e in stack.env]
    lines = [head, "", "| component | pin | source of the pin |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def stacks_section() -> str:
    from rocmkit import stacks

    order = sorted(stacks.all_builtin(), key=lambda s: (s.name != DEFAULT_STACK, s.name))
    return "\n\n".join(stack_table(s) for s in order)


def card_section() -> str:
    """Component × stack × how pinned, for the components the product card names (rocmkit/stacks/card.py)."""
    from rocmkit import stacks
    from rocmkit.stacks.card import CARD, cell, pins

    order = sorted(stacks.all_builtin(), key=lambda s: (s.name != DEFAULT_STACK, s.name))
    lines = ["| stack | " + " | ".join(CARD) + " |", "|---" * (len(CARD) + 1) + "|"]
    for s in order:
        found = pins(s)
        lines.append(f"| **{s.name}** | " + " | ".join(cell(found[c]) for c in CARD) + " |")
    return "\n".join(lines)


def checks_section() -> str:
    from rocmkit.host.checks import all_checks

    lines = ["| id | what is checked (reference) |", "|---|---|"]
    lines += [f"| {_code(c.ids)} | {c.what} |" for c in all_checks()]
    return "\n".join(lines)


def probes_section() -> str:
    from rocmkit.host.probes.catalog import PROBES

    lines = ["| id | measured | judged against |", "|---|---|---|"]
    lines += [f"| {_code(p.ids)} | {p.measured} | {p.judged} |" for p in PROBES]
    return "\n".join(lines)


def sample_doctor_section() -> str:
    """`rocmkit doctor --root` of the sample tree (docs/examples/mi300x-host, tests/sample_tree.py), run from the
    repository's root as the guide says, and what it prints."""
    import os

    from click.testing import CliRunner

    from rocmkit.cli import cli

    command = "rocmkit doctor --root docs/examples/mi300x-host"
    old = os.getcwd()
    os.chdir(REPO)
    try:
        out = CliRunner().invoke(cli, command.split()[1:]).output
    finally:
        os.chdir(old)
    return f"```\n$ {command}\n{out.rstrip()}\n```"


SECTIONS = {"stacks": stacks_section, "card": card_section, "checks": checks_section, "probes": probes_section,
            "sample-doctor": sample_doctor_section}
# The page each table lives in.
PAGES = {"stacks": DOCS / "stacks.md", "card": DOCS / "stacks.md", "checks": DOCS / "guides" / "hosts.md",
         "probes": DOCS / "guides" / "probes.md",
         "sample-doctor": DOCS / "guides" / "hosts.md"}


def _span(text: str, name: str) -> tuple[int, int]:
    begin, end = f"<!-- generated: {name} -->\n", f"\n<!-- end generated: {name} -->"
    i, j = text.find(begin), text.find(end)
    if i < 0 or j < 0:
        raise SystemExit(f"{PAGES[name].relative_to(REPO)} has no generated section {name!r}")
    return i + len(begin), j


def current(text: str, name: str) -> str:
    i, j = _span(text, name)
    return text[i:j]


def rewrite(text: str, name: str) -> str:
    i, j = _span(text, name)
    return text[:i] + SECTIONS[name]() + text[j:]


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    for name, page in PAGES.items():
        old = page.read_text()
        new = rewrite(old, name)
        if new != old:
            page.write_text(new)
        state = "rewritten" if new != old else "already matches the data"
        print(f"{page.relative_to(REPO)}: the {name} table {state}")
