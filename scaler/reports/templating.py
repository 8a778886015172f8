"""The one Jinja2 environment of the reports, loading ``scaler/reports/templates/``.

Templates ending in ``.html.j2`` are autoescaped, every other one (Markdown) is
not. Whitespace is the templates' own: block tags on a line of their own leave no
line behind (``trim_blocks``, ``lstrip_blocks``), and the newline that ends a
template file is not part of its output, so a file can end the way editors want
while a page ends exactly where its last tag does.
"""

from __future__ import annotations

import html
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, pass_eval_context, select_autoescape
from jinja2.nodes import EvalContext
from markupsafe import Markup


@pass_eval_context
def _escape_as_stdlib(eval_ctx: EvalContext, value: Any) -> Any:
    """Escape with :func:`html.escape` rather than markupsafe's own escaping.

    Both are safe; they differ in bytes (``&quot;`` and ``&#x27;`` against ``&#34;``
    and ``&#39;``), and the pages keep the bytes they have always had.
    """
    if eval_ctx.autoescape and not isinstance(value, Markup):
        return Markup(html.escape(str(value)))
    return value


@cache
def environment() -> Environment:
    """The environment every report template is rendered in (built once)."""
    return Environment(
        loader=PackageLoader("scaler.reports", "templates"),
        autoescape=select_autoescape(enabled_extensions=("html.j2",), default_for_string=False),
        finalize=_escape_as_stdlib,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=False,
    )


def render_template(name: str, **context: Any) -> str:
    """The template ``name`` rendered with ``context``."""
    return environment().get_template(name).render(**context)
