"""Reports for people who do not open a terminal: the capacity review and the finance dry-run.

What they compute: forecast against actual over the review period (``reviewing``),
the finance projection and commitment advice (``finance``). How they are built, one
module per part: the report value and cell formatting (``document``), the capacity
review (``capacity``, with ``accuracy``, ``actions``, ``hindsight``, ``mig_review``), the
finance dry-run (``finance_report``), what both share (``commitments``, ``summary``), charts
(``charts``, ``capacity_charts``, ``finance_charts``). How they are written: HTML and
Markdown from the Jinja2 templates in ``templates/`` (``html``, ``markdown``,
``templating``), CSV and JSON (``csvjson``), files (``writing``). Every string a
person reads is in English and Russian (``i18n``).

Reads plans and run records; never acts.
"""
