"""The manual (docs/, mkdocs.yml): its tables are made from the data they describe (tests/doc_tables.py), and
the site builds with `mkdocs build --strict`, its CLI reference generated from the click commands, so every
option of every command is in it.

When a stack file or a check changes, the table tests fail until `python tests/doc_tables.py` rewrites them.
The site build needs the `docs` extra (mkdocs, mkdocs-material, mkdocs-click): CI installs it
(.ci/provision/15-docs.sh) and sets ROCMKIT_REQUIRE_DOCS=1, so there it fails instead of skipping."""

from __future__ import annotations

import html
import importlib.util
import os
import re
import subprocess
import sys

import click
import pytest

import doc_tables

from rocmkit.cli import cli


@pytest.mark.parametrize("name", sorted(doc_tables.SECTIONS))
def test_doc_table_matches_the_data(name):
    page = doc_tables.PAGES[name]
    text = page.read_text()
    assert doc_tables.current(text, name) == doc_tables.SECTIONS[name](), (
        f"the {name} table in {page.relative_to(doc_tables.REPO)} is stale: run `python tests/doc_tables.py`")


def test_every_built_in_stack_has_a_table():
    from rocmkit import stacks

    text = doc_tables.current(doc_tables.PAGES["stacks"].read_text(), "stacks")
    assert all(f"**{name}**" in text for name in stacks.builtin_names())


def test_every_command_has_a_guide_section():
    """Each command's prose lives in one guide, under `## rocmkit NAME`, linking to its generated reference."""
    guides = "\n".join(p.read_text() for p in (doc_tables.DOCS / "guides").glob("*.md"))
    for name in cli.list_commands(click.Context(cli)):
        assert f"\n## rocmkit {name}\n" in guides, name
        assert f"(../reference/cli.md#rocmkit-{name})" in guides, name


def test_every_option_says_what_it_does():
    # `--help` and the generated reference show "–" for an option without help text
    ctx = click.Context(cli)
    bare = [f"rocmkit {name} {param.opts[0]}" for name in cli.list_commands(ctx)
            for param in cli.get_command(ctx, name).params
            if isinstance(param, click.Option) and not param.hidden and not param.help]
    assert bare == []


def _sentences(text: str) -> list[str]:
    """The prose of a page, sentence by sentence: code blocks, tables, headings and indented blocks left out,
    each list item a sentence boundary."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    paragraphs, lines = [], []
    for line in text.splitlines():
        s = line.strip()
        if not s or s.startswith(("|", "#", "<!--")) or line.startswith("    "):
            paragraphs.append(" ".join(lines))
            lines = []
            continue
        if re.match(r"^([-*]|\d+\.)\s", s):
            paragraphs.append(" ".join(lines))
            lines, s = [], re.sub(r"^([-*]|\d+\.)\s", "", s)
        lines.append(s)
    paragraphs.append(" ".join(lines))
    return [x for p in paragraphs if p for x in re.split(r"(?<=[.!?])\s+(?=[A-Z`(*\[])", p)]


def test_guide_sentences_are_short():
    """A newcomer reads the guides: no sentence there runs past 60 words."""
    long = [f"{page.name}: {len(s.split())} words: {s[:80]}..." for page in sorted((doc_tables.DOCS / "guides").glob("*.md"))
            for s in _sentences(page.read_text()) if len(s.split()) > 60]
    assert long == []
    assert [len(s.split()) for s in _sentences("One. Two " + "words " * 69 + "end.\n- A list item.")] == [1, 71, 3]


def test_every_guide_starts_with_a_command_to_run():
    """Each command's section shows a command line (a code block naming `rocmkit NAME`) before its details."""
    guides = "\n".join(p.read_text() for p in (doc_tables.DOCS / "guides").glob("*.md"))
    for name in cli.list_commands(click.Context(cli)):
        section = guides.split(f"\n## rocmkit {name}\n", 1)[1].split("\n## ", 1)[0]
        first_block = section.split("```", 2)[1] if "```" in section else ""
        assert re.search(rf"\brocmkit {name}\b", first_block), f"rocmkit {name}: no example before the details"


def _docs_tools() -> str | None:
    missing = [m for m in ("mkdocs", "material", "mkdocs_click") if importlib.util.find_spec(m) is None]
    return f"the docs extra is not installed (missing {', '.join(missing)}): pip install -e '.[docs]'" if missing \
        else None


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    reason = _docs_tools()
    if reason:
        if os.environ.get("ROCMKIT_REQUIRE_DOCS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    out = tmp_path_factory.mktemp("site")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(doc_tables.REPO), os.environ.get("PYTHONPATH")])))
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
                       cwd=doc_tables.REPO, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "WARNING" not in r.stderr, r.stderr
    return out


def _text(page) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page.read_text())).split())


@pytest.mark.slow
def test_site_builds_strict_with_every_page(site):
    for page in ("index.html", "guides/images/index.html", "guides/hosts/index.html", "guides/probes/index.html",
                 "guides/certification/index.html", "guides/clusters/index.html", "guides/tuning/index.html",
                 "guides/supply-chain/index.html", "stacks/index.html", "verified/index.html",
                 "reference/cli/index.html", "architecture/index.html", "development/index.html",
                 "changelog/index.html"):
        assert (site / page).is_file(), page


@pytest.mark.slow
def test_cli_reference_has_every_command_and_option(site):
    """The reference is generated from the click commands: every command, every option name, its help text."""
    page = site / "reference" / "cli" / "index.html"
    raw = page.read_text()
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        start = raw.find(f'id="rocmkit-{name}"')
        assert start >= 0, f"no section for rocmkit {name}"
        nxt = [raw.find(f'id="rocmkit-{other}"') for other in cli.list_commands(ctx) if other != name]
        end = min([i for i in nxt if i > start], default=len(raw))
        section = html.unescape(re.sub(r"<[^>]+>", " ", raw[start:end]))
        squeezed = "".join(section.split())
        for param in command.params:
            if not isinstance(param, click.Option) or param.hidden:
                continue
            for opt in param.opts + param.secondary_opts:
                assert opt in section.split(), f"rocmkit {name}: {opt} missing from the CLI reference"
            if param.help:
                help_text = "".join(param.help.replace("`", "").split())  # `x` is code in the page
                assert help_text in squeezed, f"rocmkit {name} {param.opts[0]}: help text missing"
    assert "Sentinel" not in raw  # click 8.3's UNSET default, which docs/hooks/clickref.py shows as "–"


@pytest.mark.slow
def test_certify_doctor_and_build_reference_is_complete(site):
    """The three commands users start with, option by option, with placeholders such as <stack> kept."""
    text = _text(site / "reference" / "cli" / "index.html")
    ctx = click.Context(cli)
    for name in ("certify", "doctor", "build"):
        command = cli.get_command(ctx, name)
        options = [o for p in command.params if isinstance(p, click.Option) for o in p.opts + p.secondary_opts]
        assert len(options) > 10
        assert all(o in text.split() for o in options), name
    assert "rocmkit/<stack>:[rocm<ver>-]<arch>-<inputs hash>" in text  # escaped, not eaten as an HTML tag


@pytest.mark.slow
def test_generated_tables_reach_the_site(site):
    assert "verl-vllm (default)" in _text(site / "stacks" / "index.html")
    checks = _text(site / "guides" / "hosts" / "index.html")
    from rocmkit.host.checks import all_checks

    assert all(i in checks for c in all_checks() for i in c.ids)
