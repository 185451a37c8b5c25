"""What users read names its sources publicly: no label that only the people who wrote rocmkit understand.

Users read the manual (docs/, but for the changelog and the development notes, which are the project's own
record), the README, every command's `--help`, the stack and table files (rocmkit/resources/*.toml, their text
fields: descriptions, source notes, reasons) and whatever rocmkit prints: the string literals in rocmkit/
(docstrings and comments aside). None of them may say "seed 000", "the seed recipe", "issue 27", "a stored
copy", "the team", "the session that measured this", a lent machine's kind (`nvidia-h100-x1`) or a path outside
the repository (`../shared`); a source is named by its public title or link instead (verl's docs, AMD's ROCm
docs and blogs, the upstream repository and its pull request). A `(README, "Section")` pointer must name a
section the README has.

PENDING lists the offenders in files that other work is changing at the time of writing, by place and text;
they are fixed where those files are edited, and then removed from PENDING (the test fails for an entry that
no longer matches, so the list only shrinks).
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import click

from rocmkit.cli import cli

REPO = Path(__file__).resolve().parent.parent
NOT_FOR_USERS = {"changelog.md", "development.md"}  # the project's own record of its work

PATTERNS = {
    "a seed document": re.compile(r"\bseed[ _-]?0\d\d|\bseeds? (recipe|documents?|benchmark|study|Dockerfile)\b"
                                  r"|\bthe seed\b(?!s? (of|for|value|argument|option|=))|\bseed's\b", re.I),
    "an issue number": re.compile(r"\bissues? \d+\b", re.I),
    "a stored copy": re.compile(r"\bstored (copy|copies|here|file|files|source|sources|snapshot|recipe|repository)\b"
                                r"|\bno stored\b|\bin the stored\b", re.I),
    "the team": re.compile(r"\bthe team\b", re.I),
    "a work session": re.compile(r"\b(this|that|the|each|a) session\b", re.I),
    "a lent machine's kind": re.compile(r"\bnvidia-h[12]00(-x\d)?\b|\blent (NVIDIA )?(GPUs?|machines?)\b", re.I),
    "a path outside the repository": re.compile(r"\.\./shared\b"),
}
README_POINTER = re.compile(r'README, "([^"]+)"')

# (place, text matched): user-visible strings still carrying a label, each to be fixed where its file is next
# edited; none now.
PENDING: set[tuple[str, str]] = set()


def _findings(place: str, text: str) -> set[tuple[str, str]]:
    found = {(place, m.group(0)) for pattern in PATTERNS.values() for m in pattern.finditer(text)}
    readme = (REPO / "README.md").read_text()
    for m in README_POINTER.finditer(text):
        if not re.search(rf"^#+ {re.escape(m.group(1))}\s*$", readme, re.M):
            found.add((place, m.group(0)))
    return found


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def doc_pages() -> dict[str, str]:
    pages = {p.relative_to(REPO).as_posix(): p.read_text() for p in sorted((REPO / "docs").rglob("*.md"))
             if p.name not in NOT_FOR_USERS}
    return {"README.md": (REPO / "README.md").read_text(), **pages}


def help_texts() -> dict[str, str]:
    ctx = click.Context(cli)
    out = {"rocmkit --help": " ".join(filter(None, [cli.help, cli.epilog]))}
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        parts = [command.help, command.short_help, command.epilog]
        parts += [p.help for p in command.params if isinstance(p, click.Option)]
        out[f"rocmkit {name} --help"] = "\n".join(p for p in parts if p)
    return out


def resource_texts() -> dict[str, str]:
    files = sorted((REPO / "rocmkit" / "resources").rglob("*.toml"))
    return {p.relative_to(REPO).as_posix(): "\n".join(_strings(tomllib.loads(p.read_text()))) for p in files}


def code_literals() -> dict[str, str]:
    """Every string literal in rocmkit/ but docstrings and other bare string statements (f-string parts too)."""
    out = {}
    for path in sorted((REPO / "rocmkit").rglob("*.py")):
        tree = ast.parse(path.read_text())
        bare = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
        literals = [n.value for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in bare]
        out[path.relative_to(REPO).as_posix()] = "\n".join(literals)
    return out


def offenders(sources: dict[str, str]) -> set[tuple[str, str]]:
    return {f for place, text in sources.items() for f in _findings(place, text)}


def test_patterns_catch_the_labels_and_spare_ordinary_words():
    labelled = ["source: seed 000 + arithmetic", "the seed-004 shape", "seed000's script", "the seed recipe",
                "issue 27's target", "no copy is stored here", "in the stored copy", "the team's runner",
                "withheld in the session that measured this", "on one H100 (`nvidia-h100-x1`)",
                "Measured on lent NVIDIA GPUs", "carried by `../shared/tools`", '(README, "No such section")']
    assert all(_findings("t", text) for text in labelled), [t for t in labelled if not _findings("t", t)]
    ordinary = ["generated from a seed inside the target", "--seed 7", "the seed of the random generator",
                "a grandchild in its own session", "Docker's credential helper", "sgl-project/sglang#3219",
                "`docker login` stored", "the issue is known", '(README, "Install")']
    assert not [t for t in ordinary if _findings("t", t)]


def test_docs_and_readme_name_their_sources_publicly():
    assert offenders(doc_pages()) - PENDING == set()


def test_help_texts_name_their_sources_publicly():
    assert offenders(help_texts()) - PENDING == set()


def test_stack_and_table_files_name_their_sources_publicly():
    assert offenders(resource_texts()) - PENDING == set()


def test_strings_rocmkit_prints_name_their_sources_publicly():
    assert offenders(code_literals()) - PENDING == set()


def test_pending_only_shrinks():
    """An entry whose string was fixed goes from PENDING, so the list never hides a new offender there."""
    every = offenders({**doc_pages(), **help_texts(), **resource_texts(), **code_literals()})
    assert PENDING - every == set(), "fixed: remove these from PENDING"
