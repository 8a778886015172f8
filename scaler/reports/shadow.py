"""The shadow scorecard: the capacity the cluster ran against tiercast's plan, over a period.

Two sources feed it, and both go through :func:`score_shadow`:

* the run records (:func:`shadow_input_from_records`): every cycle, dry-run or not,
  records per pool the nodes, Ready nodes and allocatable GPUs the cluster had, the
  nodes tiercast planned now, and the demand in GPUs (``RunRecord.shadow``,
  :func:`scaler.records.shadow_summary`); ``tiercast shadow`` and the review read them;
* a replay from the cluster's Prometheus (:mod:`scaler.replay.from_prometheus`):
  kube-state-metrics' node series for the incumbent, the walk-forward replay's
  requests for tiercast (``tiercast simulate --prometheus-url``).

The rules, on a grid of steps (the cycle, or the replay's 5 minutes):

* **What the cluster ran** is billed for every node of the pool (``nodes x
  gpus_per_node`` GPUs, Ready or booting) and serves with the allocatable GPUs of its
  Ready nodes.
* **tiercast's plan** is billed for the nodes it asks for at each step
  (``planned x gpus_per_node``) and serves with the nodes that have been asked for
  for the pool's lead time, the replay's rule
  (:func:`scaler.replay.fleets.usable_nodes`, starting warm); a replay passes the
  usable nodes it computed itself.
* Money is GPU-hours times the pool's ``price_per_gpu_hour``.
* **Unserved demand** is counted per GPU model (pools of one model serve one demand):
  ``max(0, demand - serving GPUs)`` per step, in GPU-hours, and the share of steps short.
* **Changes** are the steps at which a pool's node count (the cluster) or request
  (tiercast) differs from the step before.
* A step is scored for a GPU model only where its demand and the capacity of every
  one of its pools are known, and then for both sides alike. Steps without capacity
  history are counted and said (:attr:`Scorecard.missing`); never filled in.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError, TiercastError
from forecaster.forecasting import SeriesForecast
from forecaster.series import parse_duration
from forecaster.tables import aligned
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, PoolConfig
from scaler.planning.demand import newest_demand_by_model
from scaler.plans import CapacityPlan, iso

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PoolTrack:
    """One pool over the grid: what the cluster had and what tiercast asked for."""

    pool: str
    gpu_model: str
    """Canonical GPU model name: the pools of one model serve one demand."""
    gpus_per_node: int
    price_per_gpu_hour: float
    lead_time_s: int
    planned: np.ndarray
    """Nodes tiercast asked for at each step."""
    nodes: np.ndarray
    """Nodes the cluster had at each step (NaN: not known)."""
    ready_gpus: np.ndarray
    """Allocatable GPUs of the pool's Ready nodes at each step (NaN: not known)."""
    planned_usable: np.ndarray | None = None
    """Nodes of tiercast's plan serving at each step, where the source computed them (a
    replay); None: the lead-time rule on :attr:`planned`."""


@dataclass(frozen=True)
class ShadowInput:
    """The pools and the demand on one grid of steps."""

    index: pd.DatetimeIndex
    step_s: float
    pools: tuple[PoolTrack, ...]
    demand: Mapping[str, np.ndarray]
    """GPUs demanded per GPU model at each step (NaN: not known)."""
    currency: str = ""
    source: str = ""
    """Where the figures come from, for the header (``run records FILE``, ``Prometheus URL``)."""


@dataclass(frozen=True)
class Side:
    """What one side (the cluster, or tiercast's plan) paid for and changed."""

    gpu_hours: float
    cost: float
    changes: int


@dataclass(frozen=True)
class Unserved:
    """Demand one side left unserved."""

    gpu_hours: float
    steps_short: int
    steps: int

    @property
    def share_short(self) -> float:
        return self.steps_short / self.steps if self.steps else 0.0


@dataclass(frozen=True)
class PoolScore:
    pool: str
    gpu_model: str
    ran: Side
    plan: Side
    steps: int
    """Steps scored for this pool (those of its GPU model)."""


@dataclass(frozen=True)
class ModelScore:
    gpu_model: str
    pools: tuple[str, ...]
    demand_gpu_hours: float
    ran: Unserved
    plan: Unserved


@dataclass(frozen=True)
class Scorecard:
    """The scorecard over the scored steps (:func:`score_shadow`)."""

    start: pd.Timestamp | None
    end: pd.Timestamp | None
    """Start of the first and end of the last step of the grid."""
    step_s: float
    steps: int
    """Steps of the grid."""
    scored_steps: int
    """Steps at which at least one GPU model was scored."""
    pools: list[PoolScore]
    models: list[ModelScore]
    ran: Side
    plan: Side
    ran_unserved: Unserved
    plan_unserved: Unserved
    currency: str = ""
    source: str = ""
    gaps: list[Gap] = field(default_factory=list)
    """The pools whose capacity history is missing over some or all steps."""

    @property
    def missing(self) -> list[str]:
        """One line per pool whose capacity history is missing (:attr:`gaps`)."""
        return [g.line() for g in self.gaps]

    @property
    def days(self) -> float:
        return self.scored_steps * self.step_s / 86400.0

    @property
    def saving(self) -> float:
        """What acting would have saved: the cluster's cost minus the plan's."""
        return self.ran.cost - self.plan.cost

    @property
    def saving_share(self) -> float:
        return self.saving / self.ran.cost if self.ran.cost > 0 else math.nan

    def verdict(self, lang: str = "en") -> str:
        """One line: what acting would have cost, against what the cluster ran (``ru``:
        in Russian)."""
        if lang == "ru":
            return self._verdict_ru()
        if not self.scored_steps:
            return "verdict: no step has both capacity history and demand; nothing to compare"
        money = _money(abs(self.saving), self.currency)
        share = "" if math.isnan(self.saving_share) else f" ({100 * abs(self.saving_share):.1f}%)"
        cost = f"cost {money} {'less' if self.saving >= 0 else 'more'}{share}"
        delta = self.plan_unserved.gpu_hours - self.ran_unserved.gpu_hours
        if abs(delta) < 0.05:
            served = f"the same unserved demand ({self.plan_unserved.gpu_hours:.1f} GPU-h)"
        else:
            served = f"{abs(delta):.1f} GPU-h {'more' if delta > 0 else 'less'} unserved"
        return f"verdict: over {_days(self.days)}, acting would have {cost} with {served}"

    def _verdict_ru(self) -> str:
        from scaler.reports.i18n import fmt_number

        if not self.scored_steps:
            return (
                "вывод: ни на одном шаге нет сразу мощности кластера и спроса; сравнивать не с чем"
            )
        money = f"{fmt_number(abs(self.saving), 'ru', 2)} {self.currency or '$'}"
        share = (
            ""
            if math.isnan(self.saving_share)
            else f" ({fmt_number(100 * abs(self.saving_share), 'ru', 1)}%)"
        )
        cost = f"на {money} {'дешевле' if self.saving >= 0 else 'дороже'}{share}"
        delta = self.plan_unserved.gpu_hours - self.ran_unserved.gpu_hours
        if abs(delta) < 0.05:
            unserved = fmt_number(self.plan_unserved.gpu_hours, "ru", 1)
            served = f"при том же необслуженном спросе ({unserved} GPU-ч)"
        else:
            more = "больше" if delta > 0 else "меньше"
            served = f"при необслуженном спросе на {fmt_number(abs(delta), 'ru', 1)} GPU-ч {more}"
        days = (
            f"{fmt_number(self.days, 'ru', 1)} сут."
            if self.days >= 1
            else f"{fmt_number(self.days * 24, 'ru', 1)} ч"
        )
        return f"вывод: за {days} действия tiercast обошлись бы {cost} {served}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: every figure, the verdict line and what is missing."""
        out = asdict(self)
        out["start"] = None if self.start is None else self.start.isoformat()
        out["end"] = None if self.end is None else self.end.isoformat()
        out["days"] = round(self.days, 4)
        out["saving"] = self.saving
        out["saving_share"] = None if math.isnan(self.saving_share) else self.saving_share
        out["verdict"] = self.verdict()
        out["missing"] = self.missing
        return out


def _days(days: float) -> str:
    if days >= 1:
        return f"{days:.1f} days"
    return f"{days * 24:.1f} hours"


def _money(value: float, currency: str) -> str:
    return f"{value:,.2f} {currency}" if currency else f"${value:,.2f}"


def _changes(values: np.ndarray) -> int:
    """Steps whose value differs from the step before (the scored steps only, in order)."""
    v = np.asarray(values, dtype=float)
    return int(np.count_nonzero(np.abs(np.diff(v)) > 1e-9)) if len(v) > 1 else 0


def _lead_steps(lead_time_s: int, step_s: float) -> int:
    return max(0, math.ceil(lead_time_s / step_s - 1e-9)) if step_s > 0 else 0


def serving_nodes(requested: np.ndarray, lead_steps: int) -> np.ndarray:
    """Nodes serving per step under the replay's lead-time rule, starting warm at
    ``requested[0]``: ``U(t) = min(R(t), max(U(t-1), min(R(t-L..t))))``, a raise serves
    once asked for ``lead_steps`` steps, a cut at once (the rule of
    :func:`scaler.replay.fleets.usable_nodes`; reports do not import the replay)."""
    r = np.asarray(requested, dtype=np.int64)
    u = np.empty_like(r)
    prev = int(r[0]) if len(r) else 0
    for t in range(len(r)):
        lo = max(0, t - lead_steps)
        held = (
            int(r[lo : t + 1].min()) if t >= lead_steps else min(int(r[0]), int(r[: t + 1].min()))
        )
        prev = min(int(r[t]), max(prev, held))
        u[t] = prev
    return u


def _plan_usable(track: PoolTrack, step_s: float) -> np.ndarray:
    if track.planned_usable is not None:
        return np.asarray(track.planned_usable, dtype=float)
    planned = np.asarray(track.planned, dtype=np.int64)
    return serving_nodes(planned, _lead_steps(track.lead_time_s, step_s)).astype(float)


def _model_mask(data: ShadowInput, model: str, tracks: list[PoolTrack]) -> np.ndarray:
    """Steps scored for ``model``: its demand and every one of its pools' capacity known."""
    demand = np.asarray(data.demand.get(model, np.full(len(data.index), np.nan)), dtype=float)
    mask = np.isfinite(demand)
    for t in tracks:
        mask &= np.isfinite(np.asarray(t.nodes, dtype=float))
        mask &= np.isfinite(np.asarray(t.ready_gpus, dtype=float))
    return mask


def _side(gpus: np.ndarray, price: float, counts: np.ndarray, step_h: float) -> Side:
    gpu_hours = float(np.sum(gpus)) * step_h
    return Side(gpu_hours, gpu_hours * price, _changes(counts))


def _unserved(
    demand: np.ndarray, serving: np.ndarray, step_h: float
) -> tuple[Unserved, np.ndarray]:
    short = np.maximum(0.0, demand - serving)
    shorted = short > 1e-9
    return Unserved(float(short.sum()) * step_h, int(shorted.sum()), len(short)), shorted


@dataclass(frozen=True)
class Gap:
    """Where one pool's capacity history is missing."""

    pool: str
    missing: int
    steps: int
    first: str
    """The first step without it (``YYYY-MM-DD HH:MM``, UTC)."""

    def line(self, lang: str = "en") -> str:
        if lang == "ru":
            if self.missing == self.steps:
                return f"пул {self.pool}: истории мощности нет совсем; не учтён ни с одной стороны"
            return (
                f"пул {self.pool}: истории мощности нет на {self.missing} из {self.steps} шагов "
                f"(первый {self.first}Z); эти шаги не учтены ни с одной стороны"
            )
        if self.missing == self.steps:
            return f"pool {self.pool}: no capacity history at all; left out of both sides"
        return (
            f"pool {self.pool}: capacity history missing at {self.missing} of {self.steps} "
            f"steps (first {self.first}Z); those steps are left out of both sides"
        )


def _gap(track: PoolTrack, known: np.ndarray, index: pd.DatetimeIndex) -> Gap | None:
    """Where ``track``'s capacity history is missing; None when it is complete."""
    lacking = ~known
    if not lacking.any():
        return None
    first = index[int(np.argmax(lacking))]
    return Gap(track.pool, int(lacking.sum()), len(lacking), f"{first:%Y-%m-%d %H:%M}")


def score_shadow(data: ShadowInput) -> Scorecard:
    """The scorecard of ``data`` (the module docstring gives the rules)."""
    step_h = data.step_s / 3600.0
    by_model: dict[str, list[PoolTrack]] = {}
    for t in data.pools:
        by_model.setdefault(t.gpu_model, []).append(t)
    pools: list[PoolScore] = []
    models: list[ModelScore] = []
    gaps: list[Gap] = []
    n = len(data.index)
    any_scored = np.zeros(n, dtype=bool)
    any_short = {"ran": np.zeros(n, dtype=bool), "plan": np.zeros(n, dtype=bool)}
    for model, tracks in by_model.items():
        mask = _model_mask(data, model, tracks)
        any_scored |= mask
        for t in tracks:
            known = np.isfinite(np.asarray(t.nodes, dtype=float)) & np.isfinite(
                np.asarray(t.ready_gpus, dtype=float)
            )
            gap = _gap(t, known, data.index)
            if gap is not None:
                gaps.append(gap)
        demand = np.asarray(data.demand.get(model, np.full(n, np.nan)), dtype=float)[mask]
        ran_serving = np.zeros(int(mask.sum()))
        plan_serving = np.zeros(int(mask.sum()))
        for t in tracks:
            nodes = np.asarray(t.nodes, dtype=float)[mask]
            planned = np.asarray(t.planned, dtype=float)[mask]
            ran = _side(nodes * t.gpus_per_node, t.price_per_gpu_hour, nodes, step_h)
            plan = _side(planned * t.gpus_per_node, t.price_per_gpu_hour, planned, step_h)
            pools.append(PoolScore(t.pool, model, ran, plan, int(mask.sum())))
            ran_serving += np.asarray(t.ready_gpus, dtype=float)[mask]
            plan_serving += _plan_usable(t, data.step_s)[mask] * t.gpus_per_node
        ran_u, ran_short = _unserved(demand, ran_serving, step_h)
        plan_u, plan_short = _unserved(demand, plan_serving, step_h)
        any_short["ran"][np.flatnonzero(mask)[ran_short]] = True
        any_short["plan"][np.flatnonzero(mask)[plan_short]] = True
        names = tuple(t.pool for t in tracks)
        models.append(ModelScore(model, names, float(demand.sum()) * step_h, ran_u, plan_u))
    scored = int(any_scored.sum())
    return Scorecard(
        start=data.index[0] if n else None,
        end=data.index[-1] + pd.Timedelta(seconds=data.step_s) if n else None,
        step_s=data.step_s,
        steps=n,
        scored_steps=scored,
        pools=pools,
        models=models,
        ran=_total(p.ran for p in pools),
        plan=_total(p.plan for p in pools),
        ran_unserved=Unserved(
            sum(m.ran.gpu_hours for m in models), int(any_short["ran"].sum()), scored
        ),
        plan_unserved=Unserved(
            sum(m.plan.gpu_hours for m in models), int(any_short["plan"].sum()), scored
        ),
        currency=data.currency,
        source=data.source,
        gaps=gaps,
    )


def _total(sides: Any) -> Side:
    listed = list(sides)
    return Side(
        sum(s.gpu_hours for s in listed),
        sum(s.cost for s in listed),
        sum(s.changes for s in listed),
    )


def _pct(u: Unserved) -> str:
    return f"{100 * u.share_short:.1f}%"


def format_scorecard(card: Scorecard) -> str:
    """The scorecard as text: a header, one row per pool and side, the unserved demand per
    GPU model, the totals, what is missing, and the verdict line."""
    cur = card.currency or "$"
    head = "shadow scorecard"
    if card.source:
        head += f" | {card.source}"
    if card.start is not None and card.end is not None:
        head += (
            f" | {card.start:%Y-%m-%d %H:%M}Z to {card.end:%Y-%m-%d %H:%M}Z, "
            f"{card.scored_steps} of {card.steps} steps of {_step(card.step_s)} scored"
        )
    rows: list[tuple[str, ...]] = [
        ("POOL", "SIDE", "GPU-H", f"COST {cur}", "CHANGES", "UNSERVED GPU-H", "STEPS SHORT")
    ]
    alone = {m.gpu_model: m for m in card.models if len(m.pools) == 1}
    for p in card.pools:
        m = alone.get(p.gpu_model)
        for side, figures, unserved in (
            ("cluster", p.ran, m.ran if m else None),
            ("tiercast", p.plan, m.plan if m else None),
        ):
            rows.append(_row(p.pool, side, figures, unserved))
    for m in card.models:
        if len(m.pools) > 1:
            label = f"{m.gpu_model} ({len(m.pools)} pools)"
            rows.append((label, "cluster", "", "", "", f"{m.ran.gpu_hours:.1f}", _pct(m.ran)))
            rows.append((label, "tiercast", "", "", "", f"{m.plan.gpu_hours:.1f}", _pct(m.plan)))
    rows.append(_row("TOTAL", "cluster", card.ran, card.ran_unserved))
    rows.append(_row("TOTAL", "tiercast", card.plan, card.plan_unserved))
    lines = [head, *aligned(rows, right=(2, 3, 4, 5, 6))]
    lines += [f"missing: {line}" for line in card.missing]
    lines.append(card.verdict())
    return "\n".join(lines)


def _row(pool: str, side: str, s: Side, u: Unserved | None) -> tuple[str, ...]:
    return (
        pool,
        side,
        f"{s.gpu_hours:.1f}",
        f"{s.cost:,.2f}",
        str(s.changes),
        "-" if u is None else f"{u.gpu_hours:.1f}",
        "-" if u is None else _pct(u),
    )


def _step(step_s: float) -> str:
    return f"{step_s / 60:g} min" if step_s % 60 == 0 else f"{step_s:g} s"


# --------------------------------------------------------------------------- run records


def _rounded(x: Any) -> float | None:
    v = float(x)
    return round(v, 6) if math.isfinite(v) else None


def observed_capacity(provider: object, pools: Sequence[PoolConfig]) -> dict[str, dict[str, int]]:
    """Per pool the provider reads from a cluster: its nodes, Ready nodes and the GPUs the
    Ready nodes advertise (allocatable ``nvidia.com/gpu`` as devices, time-slicing replicas
    divided out; a MIG pool's Ready nodes count ``gpus_per_node`` each).

    The provider's node listing is read once (``nodes()`` and the ``pools`` it reads, as
    :class:`scaler.actuation.kube.providers.KubeProvider` has them). A provider without a
    listing (recording, ``tiercast report``) or one that cannot be read gives an empty dict:
    the capacity is missing, not made up.
    """
    read = getattr(provider, "nodes", None)
    from_cluster = getattr(provider, "pools", None)
    if not callable(read) or not isinstance(from_cluster, Mapping):
        return {}
    try:
        nodes = list(read())
    except (TiercastError, OSError) as exc:
        log.warning("nodes unreadable for the shadow record (%s): capacity left missing", exc)
        return {}
    out: dict[str, dict[str, int]] = {}
    for p in pools:
        if p.name not in from_cluster:
            continue
        mine = [n for n in nodes if getattr(n, "pool", None) == p.name]
        ready = [n for n in mine if getattr(n, "ready", False)]
        gpus = (
            len(ready) * p.gpus_per_node
            if p.mig_layouts is not None
            else sum(int(getattr(n, "devices", 0)) for n in ready)
        )
        out[p.name] = {"nodes": len(mine), "ready_nodes": len(ready), "ready_gpus": gpus}
    return out


def shadow_summary(
    plan: CapacityPlan,
    fleet: Fleet,
    forecasts: Mapping[str, SeriesForecast],
    capacity: Mapping[str, Mapping[str, int]],
    now: pd.Timestamp,
    currency: str | None = None,
    cycle_s: int | None = None,
) -> dict[str, Any]:
    """The cycle's ``shadow`` section: per pool the plan's nodes now beside the capacity
    read before acting (``capacity``: :func:`observed_capacity`; ``None`` where not read),
    the pool's node size, price and lead time; and the demand in GPUs per GPU model of the
    newest observations (no margin), where the signals have a forecast."""
    planned = {p.pool: p.target_nodes[0] if p.target_nodes else p.current_nodes for p in plan.pools}
    pools: dict[str, Any] = {}
    for p in fleet.pools:
        seen = capacity.get(p.name, {})
        pools[p.name] = {
            "gpu_model": gpu_model(p.gpu_model).name,
            "tier": p.tier,
            "gpus_per_node": p.gpus_per_node,
            "price_per_gpu_hour": p.price_per_gpu_hour,
            "lead_time_s": int(p.lead_time_s),
            "planned_nodes": planned.get(p.name),
            "nodes": seen.get("nodes"),
            "ready_nodes": seen.get("ready_nodes"),
            "ready_gpus": seen.get("ready_gpus"),
        }
    demand = newest_demand_by_model(fleet.served(), dict(forecasts))
    return {
        "at": iso(now),
        "cycle_s": cycle_s,
        "currency": currency,
        "demand_gpus": {k: _rounded(v) for k, v in sorted(demand.items())},
        "pools": pools,
    }


def _shadow_of(record: Any) -> dict[str, Any] | None:
    """A cycle record's ``shadow`` section, where it is of the expected shape."""
    shadow = getattr(record, "shadow", None)
    if getattr(record, "job", None) != "cycle" or not isinstance(shadow, dict):
        return None
    if not isinstance(shadow.get("at"), str) or not isinstance(shadow.get("pools"), dict):
        return None
    return shadow


def _utc(text: Any) -> pd.Timestamp:
    """A recorded time as a naive UTC timestamp."""
    t = pd.Timestamp(text)
    return t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t


def _number(value: Any) -> float:
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(float(value)) else math.nan


def _grid_step(sections: list[dict[str, Any]], at: pd.DatetimeIndex) -> float:
    """The grid's step: the cycle the newest record names, else the median interval."""
    cycle = _number(sections[-1].get("cycle_s"))
    if cycle > 0:
        return cycle
    if len(at) > 1:
        return max(1.0, float(np.median(np.diff((at - at[0]).total_seconds()))))
    return 300.0


def shadow_input_from_records(records: Sequence[Any], source: str = "") -> ShadowInput | None:
    """The cycles' ``shadow`` sections on one grid; None when no record has one.

    The grid steps by the cycle (``policy.cycle_s``) from the oldest record; each record
    falls on the step nearest its time (a later record on the same step wins). A step no
    cycle recorded has no capacity and no demand (it is not scored); tiercast's request
    stands over it, as a request does until the next cycle. The pools' node size, price
    and lead time are the newest record's.
    """
    sections = []
    for s in (_shadow_of(r) for r in records):
        try:
            if s is not None and _utc(s["at"]) is not pd.NaT:
                sections.append(s)
        except (ValueError, TypeError):
            continue
    if not sections:
        return None
    stamps = [_utc(s["at"]) for s in sections]
    order = np.argsort([t.value for t in stamps], kind="stable")
    sections = [sections[i] for i in order]
    at = pd.DatetimeIndex([stamps[i] for i in order])
    step_s = _grid_step(sections, at)
    slots = np.round(np.asarray((at - at[0]).total_seconds()) / step_s).astype(int)
    n = int(slots[-1]) + 1
    index = pd.DatetimeIndex([at[0] + pd.Timedelta(seconds=k * step_s) for k in range(n)])
    shapes: dict[str, dict[str, Any]] = {}
    columns: dict[str, dict[str, np.ndarray]] = {}
    demand: dict[str, np.ndarray] = {}
    for slot, s in zip(slots, sections, strict=True):
        for name, p in s["pools"].items():
            if not isinstance(p, dict):
                continue
            shapes[name] = p
            cols = columns.setdefault(
                name, {k: np.full(n, np.nan) for k in ("planned", "nodes", "ready_gpus")}
            )
            cols["planned"][slot] = _number(p.get("planned_nodes"))
            cols["nodes"][slot] = _number(p.get("nodes"))
            cols["ready_gpus"][slot] = _number(p.get("ready_gpus"))
        for model, v in (s.get("demand_gpus") or {}).items():
            demand.setdefault(model, np.full(n, np.nan))[slot] = _number(v)
    tracks = tuple(
        t for name, cols in columns.items() if (t := _track(name, shapes[name], cols)) is not None
    )
    currency = next((str(s["currency"]) for s in reversed(sections) if s.get("currency")), "")
    return ShadowInput(index, step_s, tracks, demand, currency, source)


def _track(name: str, shape: dict[str, Any], cols: dict[str, np.ndarray]) -> PoolTrack | None:
    """One pool's track from the records; None where its shape does not read."""
    gpus = _number(shape.get("gpus_per_node"))
    price = _number(shape.get("price_per_gpu_hour"))
    lead = _number(shape.get("lead_time_s"))
    model = shape.get("gpu_model")
    if not (gpus > 0 and price >= 0 and lead >= 0 and isinstance(model, str)):
        return None
    # A request stands until the next cycle changes it.
    planned = pd.Series(cols["planned"]).ffill().bfill().fillna(0.0).to_numpy()
    return PoolTrack(
        name, model, int(gpus), price, int(lead), planned, cols["nodes"], cols["ready_gpus"]
    )


# --------------------------------------------------------------------------- the period


def period(
    since: str | None, until: str | None, default_end: pd.Timestamp, default_since: str = "14d"
) -> tuple[pd.Timestamp, pd.Timestamp]:
    """``--since`` (a duration before the end, ``14d``, or a UTC time) and ``--until`` (a UTC
    time; default ``default_end``) as naive UTC timestamps; one line naming the flag when
    either does not read or the period is empty."""
    end = _when(until, "--until") if until else pd.Timestamp(default_end)
    end = end.tz_convert("UTC").tz_localize(None) if end.tzinfo is not None else end
    text = str(since if since is not None else default_since).strip()
    try:
        start = end - parse_duration(text)
    except DataError:
        start = _when(text, "--since")
    if start >= end:
        raise BadInputError(f"--since: {text!r} is not before the end of the period ({end})")
    return start, end


def _when(text: str, flag: str) -> pd.Timestamp:
    try:
        t = pd.Timestamp(str(text)[:64])
    except (ValueError, TypeError, OverflowError):
        raise BadInputError(
            f"{flag}: {str(text)[:64]!r} is neither a duration (14d) nor a time "
            "(2026-12-05T00:00:00Z)"
        ) from None
    if t is pd.NaT:
        raise BadInputError(f"{flag}: {str(text)[:64]!r} is not a time")
    return t.tz_convert("UTC").tz_localize(None) if t.tzinfo is not None else t


def within(records: Sequence[Any], start: pd.Timestamp, end: pd.Timestamp) -> list[Any]:
    """The cycle records whose ``shadow`` section is dated in ``[start, end]``."""
    out = []
    for r in records:
        s = _shadow_of(r)
        if s is None:
            continue
        try:
            at = _utc(s["at"])
        except (ValueError, TypeError):
            continue
        if start <= at <= end:
            out.append(r)
    return out


def newest_at(records: Sequence[Any]) -> pd.Timestamp | None:
    """The time of the newest cycle record with a ``shadow`` section; None without one."""
    stamps = []
    for r in records:
        s = _shadow_of(r)
        try:
            if s is not None:
                stamps.append(_utc(s["at"]))
        except (ValueError, TypeError):
            continue
    return max(stamps) if stamps else None


# --------------------------------------------------------------------------- the review


_WORDS = {
    "en": {
        "title": "Shadow scorecard: the cluster against tiercast's plan",
        "intro": (
            "What the cluster ran, as each cycle read it, against what tiercast planned "
            "(each plan serving after its pool's lead time), over the review period. "
            "`tiercast shadow` prints the same table."
        ),
        "none": (
            "No cycle in the review period recorded the cluster's capacity; there is nothing "
            "to compare (cycles record it, dry-run or not, where the provider reads the "
            "cluster's nodes)."
        ),
        "pool": "Pool",
        "side": "Side",
        "gpu_hours": "GPU-hours",
        "cost": "Cost",
        "changes": "Changes",
        "unserved": "Unserved GPU-hours",
        "short": "Steps short",
        "table": "The cluster and tiercast's plan",
        "cluster": "cluster",
        "total": "TOTAL",
    },
    "ru": {
        "title": "Теневая оценка: кластер против плана tiercast",
        "intro": (
            "Что работало в кластере по данным каждого цикла, против плана tiercast "
            "(каждый план действует после времени запуска узлов пула), за период обзора. "
            "`tiercast shadow` печатает ту же таблицу."
        ),
        "none": (
            "Ни один цикл за период обзора не записал мощность кластера; сравнивать не с "
            "чем (циклы записывают её, в том числе в режиме dry-run, когда провайдер читает "
            "узлы кластера)."
        ),
        "pool": "Пул",
        "side": "Сторона",
        "gpu_hours": "GPU-часы",
        "cost": "Стоимость",
        "changes": "Изменения",
        "unserved": "Необслуженные GPU-часы",
        "short": "Доля шагов с нехваткой",
        "table": "Кластер и план tiercast",
        "cluster": "кластер",
        "total": "ИТОГО",
    },
}


def review_section(card: Scorecard | None, lang: str = "en") -> Any:
    """The capacity review's section (:class:`scaler.reports.document.Section`): the
    scorecard as a table with its verdict and what is missing, or why there is none."""
    from scaler.reports.document import Column, Section, Table

    words = _WORDS.get(lang, _WORDS["en"])
    section = Section("shadow", words["title"])
    if card is None or not card.scored_steps:
        section.paragraphs.append(words["none"])
        section.paragraphs += [g.line(lang) for g in (card.gaps if card else [])]
        return section
    section.paragraphs.append(words["intro"])
    rows = []
    alone = {m.gpu_model: m for m in card.models if len(m.pools) == 1}
    for p in card.pools:
        m = alone.get(p.gpu_model)
        rows.append(_table_row(p.pool, words["cluster"], p.ran, m.ran if m else None))
        rows.append(_table_row(p.pool, "tiercast", p.plan, m.plan if m else None))
    rows.append(_table_row(words["total"], words["cluster"], card.ran, card.ran_unserved))
    rows.append(_table_row(words["total"], "tiercast", card.plan, card.plan_unserved))
    cur = card.currency or "$"
    columns = [
        Column("pool", words["pool"]),
        Column("side", words["side"]),
        Column("gpu_hours", words["gpu_hours"], 1),
        Column("cost", f"{words['cost']} ({cur})", 2),
        Column("changes", words["changes"], 0),
        Column("unserved_gpu_hours", words["unserved"], 1),
        Column("steps_short", words["short"], 1, percent=True),
    ]
    section.tables.append(Table("shadow", words["table"], columns, rows))
    section.paragraphs += [g.line(lang) for g in card.gaps]
    section.paragraphs.append(card.verdict(lang))
    return section


def _table_row(pool: str, side: str, s: Side, u: Unserved | None) -> dict[str, Any]:
    return {
        "pool": pool,
        "side": side,
        "gpu_hours": s.gpu_hours,
        "cost": s.cost,
        "changes": s.changes,
        "unserved_gpu_hours": None if u is None else u.gpu_hours,
        "steps_short": None if u is None else u.share_short,
    }


def records_scorecard(path: str | Any, start: pd.Timestamp, end: pd.Timestamp) -> Scorecard | None:
    """The scorecard of the cycles recorded in ``path`` between ``start`` and ``end``; None
    when the file does not exist or no cycle there recorded the cluster's capacity."""
    from pathlib import Path

    from scaler.records import RunStore

    if not Path(path).is_file():
        return None
    records = RunStore(path).recent(limit=100_000, job="cycle")
    data = shadow_input_from_records(within(records, start, end), source=f"run records {path}")
    return score_shadow(data) if data is not None else None
