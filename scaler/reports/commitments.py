"""The commitment advice as the reports show it: one sentence per GPU model, the advice
table and the options behind each advice (:func:`scaler.reports.finance.advise_commitments`).

Both reports carry it: the finance dry-run always, the capacity review when its
horizon allows a projection and a reserved pool exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scaler.reports.document import Column, Section, Table, format_money, money_label
from scaler.reports.finance import (
    BANDS,
    IDLE_RESERVED_SHARE,
    CommitmentAdvice,
    CommitmentOption,
    Note,
    ReservedIdle,
    TradeOff,
)
from scaler.reports.i18n import fmt_number, t


def commitment_section(
    advice: Sequence[CommitmentAdvice],
    unserved_price: float | None,
    lang: str,
    currency: str = "",
    notes: Sequence[Note] = (),
    idle: Sequence[ReservedIdle] = (),
) -> Section:
    """Commitment advice: one sentence per GPU model with its trade-off, the advice table and
    the options behind it; ``notes`` (the projection's) say why a GPU model has no row,
    with its idle reserved capacity from ``idle`` where it has some."""
    sec = Section(
        "commitments", t(lang, "sec_commitments"), [_intro(unserved_price, currency, lang)]
    )
    sec.paragraphs += [advice_headline(c, currency, lang) for c in advice]
    sec.paragraphs += no_row_sentences(notes, idle, currency, lang)
    sec.tables.append(_advice_table(advice, currency, lang))
    sec.tables.append(_options_table(advice, currency, lang))
    return sec


def commitment_recommendations(
    advice: Sequence[CommitmentAdvice], lang: str, currency: str = ""
) -> list[tuple[int, str, str]]:
    """Each advice with its trade-off for the summary; a change ranks above a keep."""
    return [
        (1 if c.kind != "keep" else 3, advice_headline(c, currency, lang), "commitments")
        for c in advice
    ]


def reserved_idle_recommendations(
    idle: Sequence[ReservedIdle], currency: str, lang: str
) -> list[tuple[int, str, str]]:
    """Reserved capacity idle above :data:`IDLE_RESERVED_SHARE` of its GPU-hours, with its cost:
    a commitment to look at, ranked with the commitments to change."""
    return [
        (
            1,
            t(
                lang,
                "summary_reserved_idle",
                model=r.gpu_model,
                pools=", ".join(r.pools),
                share=fmt_number(100 * r.share, lang, 0),
                threshold=fmt_number(100 * IDLE_RESERVED_SHARE, lang, 0),
                idle=fmt_number(r.idle_gpu_hours, lang, 0),
                reserved=fmt_number(r.reserved_gpu_hours, lang, 0),
                cost=format_money(r.idle_cost, currency, lang),
            ),
            "commitments",
        )
        for r in idle
        if r.share > IDLE_RESERVED_SHARE
    ]


def advice_headline(c: CommitmentAdvice, currency: str, lang: str) -> str:
    """The advice sentence and its trade-off: the next level up and down against the advised
    one, in money in every band, and the band that decides."""
    trade = trade_off_sentence(c, currency, lang)
    return f"{_advice_sentence(c, lang)} {trade}".strip()


COMMITMENT_NOTES: frozenset[str] = frozenset({"no_reserved_pool", "no_alternative_pool"})
"""The projection's notes that say why a GPU model has no advice (:func:`no_row_sentences`)."""


def no_row_sentences(
    notes: Sequence[Note], idle: Sequence[ReservedIdle], currency: str, lang: str
) -> list[str]:
    """Why a GPU model has no row in the advice table, one sentence each: no reserved pool, or
    only reserved pools (then with how idle they are, so a summary that leads with idle
    reserved capacity is answered here)."""
    by_model = {r.gpu_model: r for r in idle}
    out = []
    for n in notes:
        model = str(n.params.get("model", ""))
        if n.key == "no_reserved_pool":
            out.append(t(lang, "commit_no_row_no_reserved", model=model))
        elif n.key == "no_alternative_pool":
            r = by_model.get(model)
            if r is None:
                out.append(t(lang, "commit_no_row_only_reserved", model=model, pools="–"))
                continue
            out.append(
                t(
                    lang,
                    "commit_no_row_only_reserved_idle",
                    model=model,
                    pools=", ".join(r.pools),
                    share=fmt_number(100 * r.share, lang, 0),
                    idle=fmt_number(r.idle_gpu_hours, lang, 0),
                    reserved=fmt_number(r.reserved_gpu_hours, lang, 0),
                    cost=format_money(r.idle_cost, currency, lang),
                )
            )
    return out


def _amount(value: float, currency: str, lang: str) -> str:
    """``saves 12.00 USD`` or ``loses 3.00 USD`` (or no change) in the reader's words."""
    if abs(value) < 0.005:
        return t(lang, "trade_same")
    key = "trade_saves" if value > 0 else "trade_loses"
    return t(lang, key, amount=format_money(abs(value), currency, lang))


def _trade_clause(c: CommitmentAdvice, x: TradeOff, currency: str, lang: str) -> str:
    level = t(
        lang,
        "trade_level",
        nodes=x.nodes,
        term=t(lang, "term_" + x.term) if x.term else "",
    )
    band = t(lang, "band_" + x.deciding_band)
    if x.refused:
        return t(
            lang,
            "trade_refused",
            level=level,
            unserved=fmt_number(x.unserved_added[x.deciding_band], lang, 0),
            band=band,
        )
    return t(
        lang,
        "trade_priced",
        level=level,
        **{b: _amount(x.saving[b], currency, lang) for b in BANDS},
        band=band,
    )


def trade_off_sentence(c: CommitmentAdvice, currency: str, lang: str) -> str:
    """Against the advised level, over the horizon: one node more and one fewer, each with its
    saving or loss in the low, expected and high band and the band that decides."""
    clauses = [_trade_clause(c, x, currency, lang) for x in c.trade_offs()]
    if not clauses:
        return ""
    return t(lang, "trade_offs", recommended=c.recommended_nodes, clauses="; ".join(clauses))


def _intro(unserved_price: float | None, currency: str, lang: str) -> str:
    """How the advice is made, and what it does with demand no pool can serve."""
    return t(
        lang,
        "sec_commitments_intro",
        coverage=fmt_number(95, lang, 0),
        unserved_rule=t(lang, "unserved_refused")
        if unserved_price is None
        else t(lang, "unserved_priced", price=format_money(unserved_price, currency, lang)),
    )


def _advice_table(advice: Sequence[CommitmentAdvice], currency: str, lang: str) -> Table:
    """One row per GPU model: the decision, its prices, utilizations and savings."""
    return Table(
        "commitments",
        t(lang, "tbl_commitments"),
        [
            # The option and what it saves first; how it was judged after.
            Column("gpu_model", t(lang, "col_gpu_model")),
            Column("decision", t(lang, "col_decision")),
            Column("recommended_nodes", t(lang, "col_recommended_nodes"), 0),
            Column("term", t(lang, "col_term")),
            *[
                Column(
                    f"monthly_saving{suffix}",
                    money_label(t(lang, "col_saving_band", band=t(lang, "band_" + b)), currency),
                    2,
                )
                for b, suffix in (("expected", ""), ("low", "_low"), ("high", "_high"))
            ],
            Column("pool", t(lang, "col_pool")),
            Column("current_nodes", t(lang, "col_current_nodes"), 0),
            Column("change_nodes", t(lang, "col_change_nodes"), 0),
            Column("base_load_gpus", t(lang, "col_base_load"), 0),
            Column("reserved_price", money_label(t(lang, "col_reserved_price"), currency), 2),
            Column("alternative_price", money_label(t(lang, "col_alternative_price"), currency), 2),
            Column("break_even_utilization", t(lang, "col_break_even"), 0, percent=True),
            Column("changed_utilization", t(lang, "col_changed_utilization"), 0, percent=True),
            Column("utilization", t(lang, "col_commit_utilization"), 0, percent=True),
            Column("unserved_now", t(lang, "col_unserved_now"), 0),
            Column("unserved", t(lang, "col_unserved_after"), 0),
        ],
        [_advice_row(c, lang) for c in advice],
    )


def _advice_row(c: CommitmentAdvice, lang: str) -> dict[str, Any]:
    return {
        "gpu_model": c.gpu_model,
        "pool": c.pool,
        "decision": t(lang, "commit_kind_" + c.kind),
        "current_nodes": c.current_nodes,
        "recommended_nodes": c.recommended_nodes,
        "change_nodes": c.change_nodes,
        "term": c.term or "–",
        "base_load_gpus": c.base_load_gpus,
        "reserved_price": c.term_price,
        "alternative_price": c.alternative_price,
        "break_even_utilization": c.break_even_utilization,
        "changed_utilization": c.changed_utilization,
        "utilization": c.utilization,
        "unserved_now": c.current_unserved_gpu_hours["expected"],
        "unserved": c.unserved_gpu_hours["expected"],
        "monthly_saving": c.monthly_saving,
        "monthly_saving_low": c.monthly_saving_low,
        "monthly_saving_high": c.monthly_saving_high,
    }


def _options_table(advice: Sequence[CommitmentAdvice], currency: str, lang: str) -> Table:
    """The options each advice weighed, with the verdict on each."""
    return Table(
        "commitment_options",
        t(lang, "tbl_commitment_options"),
        [
            # The option, its cost in each case and the verdict first; the rest after.
            Column("gpu_model", t(lang, "col_gpu_model")),
            Column("nodes", t(lang, "col_option_nodes"), 0),
            Column("term", t(lang, "col_term")),
            *[
                Column(
                    f"cost_{b}",
                    money_label(t(lang, "col_cost_band", band=t(lang, "band_" + b)), currency),
                    2,
                )
                for b in ("expected", "low", "high")
            ],
            Column("verdict", t(lang, "col_verdict")),
            Column("price", money_label(t(lang, "col_reserved_price"), currency), 2),
            *[
                Column(f"unserved_{b}", t(lang, "col_unserved_band", band=t(lang, "band_" + b)), 0)
                for b in BANDS
            ],
            Column("utilization", t(lang, "col_commit_utilization"), 0, percent=True),
        ],
        [row for c in advice for row in _option_rows(c, currency, lang)],
    )


def _verdict(c: CommitmentAdvice, o: CommitmentOption, currency: str, lang: str) -> str:
    """Why an option was or was not advised, naming the band and the amount that decide."""
    if (o.nodes, o.term) == (c.recommended_nodes, c.term):
        return t(lang, "option_recommended")
    keep, best = c.current_option(), c.recommended_option()
    if o.nodes == c.current_nodes or keep is None or best is None:
        return t(lang, "option_current")
    if o.refused:
        band = max(BANDS, key=lambda b: o.unserved_gpu_hours[b] - keep.unserved_gpu_hours[b])
        return t(
            lang,
            "option_refused_band",
            unserved=fmt_number(
                o.unserved_gpu_hours[band] - keep.unserved_gpu_hours[band], lang, 0
            ),
            band=t(lang, "band_case_" + band),
        )
    band = max(BANDS, key=lambda b: o.objective[b] - keep.objective[b])
    loss = o.objective[band] - keep.objective[band]
    if loss > 1e-6:
        return t(
            lang,
            "option_loses",
            amount=format_money(loss, currency, lang),
            band=t(lang, "band_case_" + band),
        )
    behind = o.objective["expected"] - best.objective["expected"]
    if behind < -1e-6:
        # Cheaper than the advice, which commits to serve base load that this leaves unserved.
        band = max(BANDS, key=lambda b: o.unserved_gpu_hours[b] - best.unserved_gpu_hours[b])
        return t(
            lang,
            "option_unserved_vs_advice",
            unserved=fmt_number(
                o.unserved_gpu_hours[band] - best.unserved_gpu_hours[band], lang, 0
            ),
            band=t(lang, "band_case_" + band),
        )
    return t(lang, "option_saves_less", amount=format_money(behind, currency, lang))


def _option_rows(c: CommitmentAdvice, currency: str, lang: str) -> list[dict[str, Any]]:
    """The advice's key options (:meth:`CommitmentAdvice.key_options`) as table rows."""
    rows = []
    for o in c.key_options():
        rows.append(
            {
                "gpu_model": c.gpu_model,
                "nodes": o.nodes,
                "term": o.term or "–",
                "price": o.price_per_gpu_hour,
                **{f"cost_{b}": o.cost[b] for b in BANDS},
                **{f"unserved_{b}": o.unserved_gpu_hours[b] for b in BANDS},
                "utilization": o.utilization,
                "verdict": _verdict(c, o, currency, lang),
            }
        )
    return rows


def _advice_sentence(c: CommitmentAdvice, lang: str) -> str:
    """One sentence per recommendation, its numbers taken from the advice's fields."""
    money = {"loss": c.detail_value}
    return t(
        lang,
        "advice_" + c.reason,
        model=c.gpu_model,
        pool=c.pool,
        term=t(lang, "term_" + c.term) if c.term else "",
        nodes=abs(c.change_nodes),
        gpus=fmt_number(abs(c.change_nodes) * c.gpus_per_node, lang, 0),
        current=c.current_nodes,
        recommended=c.recommended_nodes,
        committed=fmt_number(c.current_nodes * c.gpus_per_node, lang, 0),
        base=fmt_number(c.base_load_gpus, lang, 0),
        saving=fmt_number(c.monthly_saving, lang, 2),
        saving_low=fmt_number(c.monthly_saving_low, lang, 2),
        saving_high=fmt_number(c.monthly_saving_high, lang, 2),
        extra=fmt_number(-c.monthly_saving, lang, 2),
        break_even=fmt_number(100 * c.break_even_utilization, lang, 0),
        reserved=fmt_number(c.reserved_price, lang, 2),
        price=fmt_number(c.term_price, lang, 2),
        alternative=fmt_number(c.alternative_price, lang, 2),
        utilization=fmt_number(100 * c.utilization, lang, 0),
        changed=fmt_number(100 * c.changed_utilization, lang, 0),
        unserved=fmt_number(c.unserved_gpu_hours["expected"], lang, 0),
        unserved_now=fmt_number(c.current_unserved_gpu_hours["expected"], lang, 0),
        loss=fmt_number(money["loss"], lang, 2 if c.reason != "keep_release_unserved" else 0),
        band=t(lang, "band_case_" + c.detail_band) if c.detail_band else "",
    )
