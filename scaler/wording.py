"""Reasons as values, and the one string table per language they are rendered from.

A decision in a plan carries a :class:`Reason`: a code (one of :data:`CODES`, constants
like Karpenter's disruption reasons), its parameters (JSON scalars or lists of them: the
quantile, GPUs, a time, the lead time, the binding bound, the signals) and references to
the evidence the plan already holds (``risk.margins.chat_rps``: the margin that signal
learnt, stated once with the signal). Text is made at the edge (the terminal table,
``-o json/yaml``, Events, the reports) by :func:`render`, from :data:`TEMPLATES`: per
language, per code, a Python format string over the parameters, and per optional
parameter a clause appended where that parameter is set (:data:`CLAUSES`). Words that
are values rather than prose (a bound's name, a MIG profile ``whole``) go through
:data:`TERMS`. A test renders every code in every language, so a new code without a
translation fails.

Plans written before reasons were values (``schema_version`` 1) hold a sentence;
:meth:`Reason.from_value` reads it as :data:`LEGACY` with the sentence as its ``text``
parameter, rendered as it is in every language.

This module sits at the bottom of ``scaler``'s layers so that planning, actuation,
reports and the CLI all render from it.
"""

from __future__ import annotations

import math
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Scalar = str | int | float | bool | None
Param = Scalar | tuple[Scalar, ...]

# --- the codes ----------------------------------------------------------------------

SCALE_UP_FORECAST = "scale-up.forecast"
"""More nodes for the near-term demand of the GPU model's signals."""
SCALE_UP_HELD = "scale-up.held-data"
"""Held on stale, suspect or missing data, and the newest observation already needs more."""
SCALE_DOWN_DEMAND = "scale-down.demand-stays-under"
"""Demand stays at or under what fewer nodes serve for the lead time and stabilization."""
SCALE_DOWN_MAX_NODES = "scale-down.above-max-nodes"
"""The pool holds more than ``max_nodes``: it steps down by ``max_step_nodes`` a cycle."""
NO_OP_FITS = "no-op.fits"
"""The nodes held now fit the near-term demand."""
MIG_RELAYOUT_NOW = "mig.relayout-now"
"""A node's MIG layout changes now, in the lowest-demand window."""
MIG_RELAYOUT_SCHEDULED = "mig.relayout-scheduled"
"""A node's MIG layout changes later, in the lowest-demand window."""
MIG_RELAYOUT_ON_JOIN = "mig.relayout-on-join"
"""A node still to come is labelled with its layout when it joins (no drain)."""
MIG_RESUME = "mig.relayout-resume"
"""A relayout an earlier run started is finished (or rolled back)."""
MIG_KEEP = "mig.layouts-kept"
"""Nodes keep their MIG layouts."""
SHARING_LABEL = "sharing.label"
"""A node is labelled for time-slicing or MPS."""
KUEUE_QUOTA = "kueue.quota"
"""A ClusterQueue's nominal quota follows the spare GPUs the plan forecasts."""
KUEUE_UNREADABLE = "kueue.unreadable"
"""The ClusterQueue could not be read; its quota stays as it is."""
NOTE_HELD = "note.held-data"
"""Plan note: a GPU model held on stale, suspect or missing data."""
NOTE_ABOVE_MAX = "note.above-max-nodes"
"""Plan note: a pool found above its ``max_nodes``."""
NOTE_BELOW_MIN = "note.below-min-nodes"
"""Plan note: a pool found below its ``min_nodes``."""
NOTE_BUDGET = "note.budget"
"""Plan note: the budget is below what a GPU model's pools cannot shed this cycle."""
NOTE_SHORTFALL = "note.shortfall"
"""Plan note: demand that cannot be covered, from when, and what binds."""
NOTE_LEAD_LEARNED = "note.lead-time-learned"
"""Plan note: an ``auto`` pool's lead time learnt from its node starts."""
NOTE_LEAD_FALLBACK = "note.lead-time-fallback"
"""Plan note: an ``auto`` pool's lead time is its fallback (too few node starts)."""
MARGIN_GROWTH = "margin.growth"
"""A signal's near-term rule: the newest observation times the forecast's growth quantile."""
MARGIN_MEDIAN = "margin.forecast-median"
"""A signal's near-term rule: the newest observation moved as the forecast median moves."""
MARGIN_FLAT = "margin.newest-observation"
"""A signal's near-term rule: the newest observation with its margin, as reacting does."""
MARGIN_POLICY = "margin.policy"
"""A signal with too little history to learn a margin: ``policy.headroom_fraction``."""
LEGACY = "legacy.text"
"""A sentence from a plan written before reasons were values, shown as it is."""

CODES: tuple[str, ...] = (
    SCALE_UP_FORECAST,
    SCALE_UP_HELD,
    SCALE_DOWN_DEMAND,
    SCALE_DOWN_MAX_NODES,
    NO_OP_FITS,
    MIG_RELAYOUT_NOW,
    MIG_RELAYOUT_SCHEDULED,
    MIG_RELAYOUT_ON_JOIN,
    MIG_RESUME,
    MIG_KEEP,
    SHARING_LABEL,
    KUEUE_QUOTA,
    KUEUE_UNREADABLE,
    NOTE_HELD,
    NOTE_ABOVE_MAX,
    NOTE_BELOW_MIN,
    NOTE_BUDGET,
    NOTE_SHORTFALL,
    NOTE_LEAD_LEARNED,
    NOTE_LEAD_FALLBACK,
    MARGIN_GROWTH,
    MARGIN_MEDIAN,
    MARGIN_FLAT,
    MARGIN_POLICY,
    LEGACY,
)

LANGS: tuple[str, ...] = ("en", "ru")


# --- the value ----------------------------------------------------------------------


def _scalar(key: str, value: object) -> Scalar:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    raise TypeError(f"reason parameter {key!r}: {value!r} is not a JSON scalar")


def _param(key: str, value: object) -> Param:
    if isinstance(value, (list, tuple)):
        return tuple(_scalar(key, v) for v in value)
    return _scalar(key, value)


@dataclass(frozen=True)
class Reason:
    """Why a decision was made: a code, its parameters and the evidence it points at."""

    code: str
    params: Mapping[str, Any] = field(default_factory=dict)
    """JSON scalars or tuples of them, by name (lists are kept as tuples)."""
    refs: tuple[str, ...] = ()
    """Dotted paths of the plan's evidence (``risk.margins.chat_rps``)."""

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"reason code {self.code!r} is not one of scaler.wording.CODES")
        object.__setattr__(
            self, "params", {str(k): _param(str(k), v) for k, v in self.params.items()}
        )
        object.__setattr__(self, "refs", tuple(str(r) for r in self.refs))

    def text(self, lang: str = "en") -> str:
        """The one-line rendering in ``lang``."""
        return render(self, lang)

    def __str__(self) -> str:
        return render(self, "en")

    def with_params(self, refs: Sequence[str] = (), **params: object) -> Reason:
        """This reason with more parameters (and references)."""
        return Reason(self.code, {**self.params, **params}, (*self.refs, *refs))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        """The plan JSON's form: code, parameters, references and the English text."""
        return {
            "code": self.code,
            "params": {k: list(v) if isinstance(v, tuple) else v for k, v in self.params.items()},
            "refs": list(self.refs),
            "text": self.text("en"),
        }

    @classmethod
    def from_value(cls, value: object) -> Reason:
        """A reason from its JSON form, or a plan's old sentence (:data:`LEGACY`)."""
        if isinstance(value, Reason):
            return value
        if isinstance(value, Mapping) and value.get("code") in CODES:
            return cls(
                str(value["code"]),
                dict(value.get("params") or {}),
                tuple(value.get("refs") or ()),
            )
        if isinstance(value, Mapping):
            return cls(LEGACY, {"text": str(value.get("text", value))})
        return cls(LEGACY, {"text": str(value)})


def legacy(text: str) -> Reason:
    """A sentence that has no code of its own, shown as it is."""
    return Reason(LEGACY, {"text": text})


def hhmm(ts: Any) -> str:
    """``HH:MMZ`` of a (UTC) timestamp: the times reasons name."""
    return f"{ts:%H:%M}Z"


def margin_reason(signal: str, entry: Mapping[str, Any]) -> Reason:
    """The one line stating ``signal``'s near-term rule and the evidence it was learnt
    from, from the plan's ``risk.margins.<signal>`` entry (the fact every pool reason
    naming the signal refers to)."""
    ref = (f"risk.margins.{signal}",)
    margin = float(entry.get("margin") or 0.0)
    if entry.get("source") != "learned":
        return Reason(MARGIN_POLICY, {"signal": signal, "margin_pct": 100 * margin}, ref)
    params: dict[str, Any] = {
        "signal": signal,
        "margin_pct": 100 * margin,
        "days": entry.get("history_days"),
        "unserved_pct": 100 * float(entry.get("unserved_share") or 0.0),
        "reactive_unserved_pct": 100 * float(entry.get("reactive_unserved_share") or 0.0),
        "cost_ratio": entry.get("cost_ratio"),
        "reactive_cost_ratio": entry.get("reactive_cost_ratio"),
    }
    g, f = entry.get("growth_cost_ratio"), entry.get("flat_cost_ratio")
    growth = entry.get("growth")
    if isinstance(growth, Mapping):
        params.update(
            level=f"q{float(growth.get('level', 0.0)):g}",
            method=growth.get("method"),
            origins=growth.get("samples"),
        )
        if g is not None and f:
            params["growth_saves_pct"] = round(100 * (1 - float(g) / float(f)), 4)
        return Reason(MARGIN_GROWTH, params, ref)
    if g is not None and f:
        params["growth_costs_pct"] = round(100 * (float(g) / float(f) - 1), 4)
    return Reason(MARGIN_MEDIAN if entry.get("forecast_shape") else MARGIN_FLAT, params, ref)


# --- rendering ----------------------------------------------------------------------


def render(reason: Reason | str, lang: str = "en") -> str:
    """``reason`` in ``lang`` (English where ``lang`` is not known); a plain string as it is."""
    if isinstance(reason, str):
        return reason
    table = TEMPLATES.get(lang, TEMPLATES["en"])
    params = dict(reason.params)
    fmt = _Formatter(lang)
    text = fmt.format(table[reason.code], **params)
    for key, clause in CLAUSES.get(lang, CLAUSES["en"]).items():
        if key in params and params[key] not in (None, False, (), ""):
            text += fmt.format(clause, **params)
    return text


def term(word: str, lang: str) -> str:
    """A value word (a bound's name, ``whole``) in ``lang``."""
    return TERMS.get(lang, {}).get(word, word)


class _Formatter(string.Formatter):
    """``str.format`` with numbers as ``lang`` writes them, lists joined, and ``!t``
    (a value word through :data:`TERMS`)."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def get_value(self, key: int | str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        if isinstance(key, str) and "*" in key:
            # ``{counts*profiles}``: MIG instances as ``26 x 1g.10gb, 2 x whole``.
            counts, names = key.split("*", 1)
            return ", ".join(
                f"{n} x {term(str(p), self.lang)}"
                for n, p in zip(kwargs[counts], kwargs[names], strict=False)
            )
        return super().get_value(key, args, kwargs)

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion == "t":
            if isinstance(value, tuple):
                return tuple(term(str(v), self.lang) for v in value)
            return term(str(value), self.lang)
        return super().convert_field(value, conversion)

    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, tuple):
            return ", ".join(self.format_field(v, format_spec) for v in value)
        if value is None:
            return "–"
        text = format(value, format_spec)
        if self.lang == "ru" and isinstance(value, (int, float)) and not isinstance(value, bool):
            text = text.replace(",", "\u00a0").replace(".", ",")
        return text


def pairs(counts: Mapping[str, int]) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """MIG instance counts by profile as two parallel tuples (counts, profiles), sorted."""
    items = sorted(counts.items())
    return tuple(int(n) for _, n in items), tuple(p for p, _ in items)


# --- the string tables --------------------------------------------------------------

TEMPLATES: dict[str, dict[str, str]] = {
    "en": {
        SCALE_UP_FORECAST: (
            "{gpus:.1f} GPUs of {model} by {at} ({signals}; lead {lead_min}m): "
            "+{nodes} node(s) (+{cost_per_hour:.2f}/h)"
        ),
        SCALE_UP_HELD: (
            "held data, forecast not used: newest observation needs {gpus:.1f} GPUs of "
            "{model}: +{nodes} node(s) (+{cost_per_hour:.2f}/h)"
        ),
        SCALE_DOWN_DEMAND: (
            "{gpus:.1f} GPUs of {model} or less until {until} ({signals}; lead {lead_min}m "
            "+ {stabilization_min}m stabilization): -{nodes} node(s) (-{saves_per_hour:.2f}/h)"
        ),
        SCALE_DOWN_MAX_NODES: (
            "{nodes_now} node(s) above max_nodes {max_nodes}: -{nodes} node(s), at most "
            "{max_step} a cycle (-{saves_per_hour:.2f}/h)"
        ),
        NO_OP_FITS: (
            "{nodes_now} node(s) fit {gpus:.1f} GPUs of {model} at {at} ({signals}; lead "
            "{lead_min}m); {cost_per_hour:.2f}/h unchanged"
        ),
        MIG_RELAYOUT_NOW: (
            "{node} {from_layout} -> {to_layout} ({gpus_changed} GPU(s), drain {change_min}m) "
            "now, in the low-demand window {window}"
        ),
        MIG_RELAYOUT_SCHEDULED: (
            "{node} {from_layout} -> {to_layout} ({gpus_changed} GPU(s), drain "
            "{change_min}m) in the low-demand window {window}"
        ),
        MIG_RELAYOUT_ON_JOIN: "{node} -> {to_layout} when it joins (no drain)",
        MIG_RESUME: "finish the relayout of {node} started {since}: {from_layout} -> {to_layout}, {step}",
        MIG_KEEP: "{nodes} node(s) keep their MIG layouts ({quantile} MIG demand of {model})",
        SHARING_LABEL: (
            "{model}: {gpus} GPU(s) shared {replicas} ways by {mode} for {workloads} "
            "({have} labelled); label node {node} {label}={config}, one of {count}"
        ),
        KUEUE_QUOTA: (
            "ClusterQueue {queue}: {resource} nominalQuota {quota_from} -> {quota_to} "
            "(spare GPUs forecast for the next hour)"
        ),
        KUEUE_UNREADABLE: "ClusterQueue {queue} unreadable ({error}): quota left as it is",
        NOTE_HELD: "{model}: {why}; holding current capacity (no scale-down)",
        NOTE_ABOVE_MAX: (
            "{pool}: {nodes_now} node(s) now is above max_nodes ({max_nodes}); stepping down "
            "by at most max_step_nodes ({max_step}) a cycle"
        ),
        NOTE_BELOW_MIN: (
            "{pool}: {nodes_now} node(s) now is below min_nodes ({min_nodes}); planning "
            "from {planned}"
        ),
        NOTE_BUDGET: (
            "{model}: budget {budget_per_hour:.2f}/h is below what these pools cannot shed "
            "this cycle ({least_per_hour:.2f}/h); no scale-up"
        ),
        NOTE_SHORTFALL: (
            "{model}: {quantile} demand cannot be covered from {at} (up to {gpus_short:.1f} "
            "GPUs short; bound: {bound!t})"
        ),
        NOTE_LEAD_LEARNED: (
            "pool '{pool}': lead time {lead_time_s:,} s learned ({quantile} of {starts} node starts)"
        ),
        NOTE_LEAD_FALLBACK: (
            "pool '{pool}': lead time {lead_time_s:,} s fallback ({starts} of {needed} "
            "observations needed)"
        ),
        MARGIN_GROWTH: (
            "near term: newest x growth {level} ({method}, {origins} origins) x (1 + "
            "{margin_pct:.1f}%), learnt on {days:.1f} d: {unserved_pct:.2f}% unserved, "
            "{cost_ratio:.2f}x demand (reactive {reactive_unserved_pct:.2f}%, "
            "{reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_MEDIAN: (
            "near term: newest x forecast median change x (1 + {margin_pct:.1f}%), learnt on "
            "{days:.1f} d: {unserved_pct:.2f}% unserved, {cost_ratio:.2f}x demand (reactive "
            "{reactive_unserved_pct:.2f}%, {reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_FLAT: (
            "near term: newest x (1 + {margin_pct:.1f}%), learnt on {days:.1f} d: "
            "{unserved_pct:.2f}% unserved, {cost_ratio:.2f}x demand (reactive "
            "{reactive_unserved_pct:.2f}%, {reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_POLICY: (
            "near term: newest x (1 + {margin_pct:.1f}%), policy.headroom_fraction (too "
            "little history to learn one)"
        ),
        LEGACY: "{text}",
    },
    "ru": {
        SCALE_UP_FORECAST: (
            "{gpus:.1f} GPU {model} к {at} ({signals}; подготовка {lead_min} мин): "
            "+{nodes} узл. (+{cost_per_hour:.2f}/ч)"
        ),
        SCALE_UP_HELD: (
            "данные удержаны, прогноз не используется: последнему наблюдению нужно "
            "{gpus:.1f} GPU {model}: +{nodes} узл. (+{cost_per_hour:.2f}/ч)"
        ),
        SCALE_DOWN_DEMAND: (
            "не больше {gpus:.1f} GPU {model} до {until} ({signals}; подготовка {lead_min} мин "
            "+ {stabilization_min} мин стабилизации): -{nodes} узл. (-{saves_per_hour:.2f}/ч)"
        ),
        SCALE_DOWN_MAX_NODES: (
            "{nodes_now} узл. больше max_nodes {max_nodes}: -{nodes} узл., не больше "
            "{max_step} за цикл (-{saves_per_hour:.2f}/ч)"
        ),
        NO_OP_FITS: (
            "{nodes_now} узл. покрывают {gpus:.1f} GPU {model} к {at} ({signals}; подготовка "
            "{lead_min} мин); {cost_per_hour:.2f}/ч без изменений"
        ),
        MIG_RELAYOUT_NOW: (
            "{node} {from_layout} → {to_layout} ({gpus_changed} GPU, вывод {change_min} мин) "
            "сейчас, в окне низкого спроса {window}"
        ),
        MIG_RELAYOUT_SCHEDULED: (
            "{node} {from_layout} → {to_layout} ({gpus_changed} GPU, вывод {change_min} мин) "
            "в окне низкого спроса {window}"
        ),
        MIG_RELAYOUT_ON_JOIN: "{node} → {to_layout} при появлении узла (без вывода)",
        MIG_RESUME: (
            "завершить переразметку {node}, начатую {since}: {from_layout} → {to_layout}, {step}"
        ),
        MIG_KEEP: "{nodes} узл. сохраняют разметку MIG (спрос MIG {quantile} на {model})",
        SHARING_LABEL: (
            "{model}: {gpus} GPU делятся на {replicas} через {mode} для {workloads} "
            "({have} размечено); разметить узел {node} {label}={config}, один из {count}"
        ),
        KUEUE_QUOTA: (
            "ClusterQueue {queue}: {resource} nominalQuota {quota_from} → {quota_to} "
            "(свободные GPU по прогнозу на ближайший час)"
        ),
        KUEUE_UNREADABLE: "ClusterQueue {queue} не читается ({error}): квота не меняется",
        NOTE_HELD: "{model}: {why}; текущая мощность сохраняется (без сокращения)",
        NOTE_ABOVE_MAX: (
            "{pool}: сейчас {nodes_now} узл., больше max_nodes ({max_nodes}); сокращение не "
            "больше max_step_nodes ({max_step}) за цикл"
        ),
        NOTE_BELOW_MIN: (
            "{pool}: сейчас {nodes_now} узл., меньше min_nodes ({min_nodes}); план строится "
            "от {planned}"
        ),
        NOTE_BUDGET: (
            "{model}: бюджет {budget_per_hour:.2f}/ч ниже того, что эти пулы не могут "
            "освободить за цикл ({least_per_hour:.2f}/ч); без наращивания"
        ),
        NOTE_SHORTFALL: (
            "{model}: спрос {quantile} не покрывается с {at} (не хватает до {gpus_short:.1f} "
            "GPU; ограничение: {bound!t})"
        ),
        NOTE_LEAD_LEARNED: (
            "пул '{pool}': время подготовки {lead_time_s:,} с по наблюдениям ({quantile} по "
            "{starts} запускам узлов)"
        ),
        NOTE_LEAD_FALLBACK: (
            "пул '{pool}': время подготовки {lead_time_s:,} с, резервное значение (есть "
            "{starts} из {needed} нужных наблюдений)"
        ),
        MARGIN_GROWTH: (
            "ближайшее время: последнее x рост {level} ({method}, {origins} точек) x (1 + "
            "{margin_pct:.1f}%), по {days:.1f} дн.: {unserved_pct:.2f}% не обслужено, "
            "{cost_ratio:.2f}x спроса (реактивно {reactive_unserved_pct:.2f}%, "
            "{reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_MEDIAN: (
            "ближайшее время: последнее x изменение медианы прогноза x (1 + "
            "{margin_pct:.1f}%), по {days:.1f} дн.: {unserved_pct:.2f}% не обслужено, "
            "{cost_ratio:.2f}x спроса (реактивно {reactive_unserved_pct:.2f}%, "
            "{reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_FLAT: (
            "ближайшее время: последнее x (1 + {margin_pct:.1f}%), по {days:.1f} дн.: "
            "{unserved_pct:.2f}% не обслужено, {cost_ratio:.2f}x спроса (реактивно "
            "{reactive_unserved_pct:.2f}%, {reactive_cost_ratio:.2f}x)"
        ),
        MARGIN_POLICY: (
            "ближайшее время: последнее x (1 + {margin_pct:.1f}%), policy.headroom_fraction "
            "(истории мало, чтобы выучить запас)"
        ),
        LEGACY: "{text}",
    },
}
"""Language -> code -> format string over the reason's parameters."""

CLAUSES: dict[str, dict[str, str]] = {
    "en": {
        "held": "; held data, holding",
        "bound": "; bound: {bound!t}",
        "lead_from": "; lead time {lead_from!t} ({lead_starts} node starts)",
        "single": "; one layout on every GPU (mig.strategy single)",
        "cover": "; before the layouts fall short",
        "saved_h": "; saves {saved_h:.1f} GPU-h against {drain_h:.1f} GPU-h of drain",
        "held_signals": "; {held_signals} stale or missing",
        "not_worth_h": "; a relayout would save {not_worth_h:.1f} GPU-h for {drain_h:.1f} GPU-h of drain",
        "short": "; the pool's GPUs cannot hold it all: short {short*short_profiles}",
        "held_nodes": "; held: {held_nodes}",
        "blocked": "; {blocked} would need mig.strategy=mixed: not re-partitioned",
        "flavors": " on {flavors}",
        "held_flavors": "; held: {held_flavors}",
        "unnamed": "; name the ResourceFlavor of {unnamed} in kubernetes.kueue.flavors",
        "growth_saves_pct": "; growth {growth_saves_pct:.1f}% cheaper than newest x margin",
        "growth_costs_pct": "; forecast growth not used: {growth_costs_pct:.1f}% costlier",
    },
    "ru": {
        "held": "; данные удержаны, мощность удерживается",
        "bound": "; ограничение: {bound!t}",
        "lead_from": "; время подготовки {lead_from!t} (запусков узлов: {lead_starts})",
        "single": "; одна разметка на всех GPU (mig.strategy single)",
        "cover": "; до того, как разметки перестанет хватать",
        "saved_h": "; экономит {saved_h:.1f} GPU-ч против {drain_h:.1f} GPU-ч на вывод",
        "held_signals": "; {held_signals} устарели или отсутствуют",
        "not_worth_h": "; переразметка сэкономила бы {not_worth_h:.1f} GPU-ч за {drain_h:.1f} GPU-ч вывода",
        "short": "; GPU пула не вмещают весь спрос: не хватает {short*short_profiles}",
        "held_nodes": "; удержаны: {held_nodes}",
        "blocked": "; {blocked}: нужна mig.strategy=mixed, переразметки нет",
        "flavors": " на {flavors}",
        "held_flavors": "; удержаны: {held_flavors}",
        "unnamed": "; укажите ResourceFlavor для {unnamed} в kubernetes.kueue.flavors",
        "growth_saves_pct": "; рост на {growth_saves_pct:.1f}% дешевле, чем последнее x запас",
        "growth_costs_pct": "; рост по прогнозу не используется: на {growth_costs_pct:.1f}% дороже",
    },
}
"""Language -> optional parameter -> the clause appended where that parameter is set,
in this order."""

TERMS: dict[str, dict[str, str]] = {
    "en": {},
    "ru": {
        "bridging": "переходный период",
        "stabilization": "стабилизация",
        "released-recently": "недавно освобождён",
        "stale-data": "устаревшие данные",
        "no-new-observation": "нет новых наблюдений",
        "budget": "бюджет",
        "whole": "целый GPU",
        "learned": "по наблюдениям",
        "fallback": "резервное",
    },
}
"""Value words per language; ``max_nodes``, ``max_step`` and profile names read the same
everywhere."""
