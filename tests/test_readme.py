"""The README's tables are made from the data they describe (tests/readme_tables.py): when a stack file or a
check changes, this fails until `python tests/readme_tables.py` rewrites them."""

from __future__ import annotations

import pytest

import readme_tables


@pytest.mark.parametrize("name", sorted(readme_tables.SECTIONS))
def test_readme_table_matches_the_data(name):
    text = readme_tables.README.read_text()
    assert readme_tables.current(text, name) == readme_tables.SECTIONS[name](), (
        f"the README's {name} table is stale: run `python tests/readme_tables.py`")


def test_every_built_in_stack_has_a_table():
    from rocmkit import stacks

    text = readme_tables.current(readme_tables.README.read_text(), "stacks")
    assert all(f"**{name}**" in text for name in stacks.builtin_names())
