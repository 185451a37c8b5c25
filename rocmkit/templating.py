"""The one jinja2 environment rocmkit renders its templates with (templates/, shipped in the package as
rocmkit.templates): a missing value is an error (StrictUndefined), block tags leave no blank lines, a file's last
newline is kept. Callers differ only in what their output needs (HTML escaping for the fleet page, other comment
marks for bash, their own filters), given as overrides, so a setting every file needs is made in one place."""

from __future__ import annotations


def environment(**overrides):
    import jinja2  # only the commands that render import it (the doctor's level 1 never does)
    from importlib import resources

    settings = dict(loader=jinja2.FileSystemLoader(str(resources.files("rocmkit.templates"))),
                    undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                    keep_trailing_newline=True, autoescape=False)
    return jinja2.Environment(**{**settings, **overrides})
