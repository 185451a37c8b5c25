"""An MkDocs hook that mends two things mkdocs-click 0.9.0's table style gets wrong with click 8.3, before any
page is rendered:

- an option without a default shows click 8.3's internal `Sentinel.UNSET` (flags: False; others: None);
- help text goes into the page as raw Markdown/HTML, so a placeholder such as `<stack>` vanishes as an unknown
  tag and a `|` would split the table: help text is escaped instead.

Only the presentation changes; every row still comes from the click option itself. tests/test_docs.py checks the
built pages for both faults."""

from __future__ import annotations

import html

import click
from mkdocs_click import _docs

_PIPE = "&#124;"


def _escape(text: str) -> str:
    """HTML-escape outside `code` spans (inside them Markdown escapes by itself); `|` everywhere."""
    parts = text.split("`")
    parts[::2] = [html.escape(p, quote=False) for p in parts[::2]]
    return "`".join(parts).replace("|", _PIPE)


def _unset(value) -> bool:
    return value is None or repr(value).endswith("UNSET")


def _row(option: click.Option) -> str:
    names = ", ".join(f"`{opt}`" for opt in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{opt}`" for opt in option.secondary_opts)
    value_type = _docs._format_table_option_type(option)
    description = _escape(" ".join(option.help.split())) if option.help else "–"
    if option.required:
        default = "_required_"
    elif option.is_flag and not option.secondary_opts and _unset(option.default):
        default = "`False`"
    elif _unset(option.default) or option.default == () or option.default == []:
        default = "–"
    else:
        default = _escape(f"`{option.default}`")
    return f"| {names} | {value_type} | {description} | {default} |"


_original_description = _docs._make_description


def _description(ctx: click.Context, remove_ascii_art: bool = False):
    for line in _original_description(ctx, remove_ascii_art):
        yield _escape(line).replace(_PIPE, "|")


_docs._format_table_option_row = _row
_docs._make_description = _description
