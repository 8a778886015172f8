"""Finance dry-run: GPU-hours and money by tier and month, what-if scenarios, commitment advice.

The planner answers "how many nodes now"; finance asks "what will the fleet cost
over the next quarter or year, what if traffic grows or spot prices move, and how
much should we commit to". This module answers from the same forecasts, pure
functions of values (no I/O, ``now`` is an argument):

* **Projection.** Each signal's forecast is put on an hourly grid by its largest
  value in each hour (the planner re-plans every cycle and keeps capacity through
  lead time plus the stabilization window, so capacity follows the hourly peak
  rather than the mean). Three bands come from the forecast quantiles: *low* (the
  lowest configured quantile), *expected* (the median) and *high* (the highest).
  Demand is translated to GPUs per GPU model with the planner's own translation
  and filled into pools with the planner's own cheapest-first allocation, so a
  projection is what the planner would run if demand followed that band.
* **Scenarios.** A scenario changes the inputs, never the method: traffic growth
  (applied to the signals before translation, because replicas round up), added
  workloads (GPUs of a model from a date), price changes per tier, and the spot
  interruption rate (which shifts allocation away from spot). The baseline is
  always projected first so scenarios compare side by side.
* **Commitments are fixed.** A reserved pool is a node count paid whether used or
  not (:attr:`PoolConfig.committed_nodes`), so every projection pins it there
  (:func:`pin_commitments`): nothing above it comes at the reserved price within
  the horizon, and commitments change only through the advice.
* **Commitment advice.** For each GPU model with a reserved pool, every level from
  0 nodes to the high band's peak, and for added nodes every term priced in
  ``commitment_price_per_gpu_hour`` (1 and 3 years), is costed in each band with
  the other pools filled by the planner's allocation for what the commitment leaves
  (:func:`advise_commitments`). Demand that no pool serves (the others at
  ``max_nodes``) is priced at ``finance.unserved_price_per_gpu_hour`` or, without a
  price, an option that leaves more of it than keeping is refused: a release never
  "saves" by dropping demand. A level qualifies when no band comes out worse than
  keeping; the advice is the qualifying level that gains most in the expected band,
  or, when the low band's base load exceeds the commitment and nothing else can
  serve it, the base load. Each advice carries one reason (``advice_<reason>`` in
  :mod:`scaler.reports.i18n`) with its break-even (price of the changed nodes over the
  on-demand price) and the utilization of the committed and the changed GPUs.

Prices come from the config (per pool, per GPU-hour, in the config's currency);
nothing here knows a price. A pool with ``billing`` is priced in whole billed periods
(:func:`scaler.planning.billing.billed_node_seconds`): on the hourly grid, a daily
period or a minimum above an hour costs more than the hours its nodes run.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.forecasting import SeriesForecast
from forecaster.progress import Progress
from scaler.catalog.gpus import gpu_model
from scaler.config import (
    TIER_ORDER,
    Config,
    ForecastConfig,
    PoolConfig,
    SignalConfig,
    WorkloadConfig,
)
from scaler.planning.billing import billed_node_seconds
from scaler.planning.coverage import allocate, effective_gpus
from scaler.planning.demand import gpus_for
from scaler.planning.power import energy_kwh

STEP = pd.Timedelta(hours=1)
"""Projection step: capacity is costed hour by hour."""
MAX_HORIZON = pd.Timedelta(days=366)
"""Longest projection: a year (a leap year included)."""
HOURS_PER_MONTH = 365.25 * 24 / 12
"""Average month, for 'per month' figures over horizons that are not whole months."""
BANDS: tuple[str, ...] = ("low", "expected", "high")
BASE_LOAD_COVERAGE = 0.95
"""Share of hours the low band must reach a level for it to count as base load."""
IDLE_RESERVED_SHARE = 0.30
"""Idle share of a GPU model's reserved GPU-hours (expected band) above which the reports
head with it: committed capacity paid for and unused is money a reviewer can act on."""

_SCENARIO_KEYS = (
    "growth",
    "workload",
    "on-demand-price",
    "spot-price",
    "reserved-price",
    "spot-interruption",
)


@dataclass(frozen=True)
class Note:
    """A remark for the reader, as an i18n key and its parameters (rendered per language)."""

    key: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AddedWorkload:
    """GPUs of one model added to demand from ``start`` (the projection start when None)."""

    gpu_model: str
    gpus: float
    start: pd.Timestamp | None = None


@dataclass(frozen=True)
class Scenario:
    """A what-if on the projection's inputs. The baseline is ``Scenario('baseline')``."""

    name: str
    growth: float = 0.0
    """Traffic change reached by the end of the horizon, linearly (0.2 = +20%)."""
    growth_per_month: float = 0.0
    """Traffic change compounding every month (0.05 = +5% a month)."""
    price_factor: Mapping[str, float] = field(default_factory=dict)
    """Tier -> multiplier on its pools' price per GPU-hour (1.1 = +10%)."""
    price_set: Mapping[str, float] = field(default_factory=dict)
    """Tier -> absolute price per GPU-hour for its pools (config currency)."""
    spot_interruption_rate_per_hour: float | None = None
    """Replaces every spot pool's interruption rate; None keeps the config's."""
    added: tuple[AddedWorkload, ...] = ()
    text: str = ""
    """The scenario as written on the command line."""

    @property
    def is_baseline(self) -> bool:
        return not (
            self.growth
            or self.growth_per_month
            or self.price_factor
            or self.price_set
            or self.spot_interruption_rate_per_hour is not None
            or self.added
        )

    def factor(self, grid: pd.DatetimeIndex, start: pd.Timestamp, end: pd.Timestamp) -> np.ndarray:
        """Traffic multiplier at each grid time."""
        span_h = max(1.0, (end - start) / pd.Timedelta(hours=1))
        elapsed_h = np.asarray((grid - start) / pd.Timedelta(hours=1), dtype=float)
        linear = 1.0 + self.growth * elapsed_h / span_h
        compound = (1.0 + self.growth_per_month) ** (elapsed_h / HOURS_PER_MONTH)
        return np.maximum(0.0, linear * compound)

    def apply(self, fleet: Sequence[PoolConfig]) -> tuple[PoolConfig, ...]:
        """The pools of ``fleet`` with this scenario's prices and spot rate; validated one
        line per error."""
        pools = []
        for p in fleet:
            update: dict[str, Any] = {}
            price = self.price_set.get(p.tier, p.price_per_gpu_hour) * self.price_factor.get(
                p.tier, 1.0
            )
            if price <= 0:
                raise BadInputError(
                    f"--scenario {self.name!r}: pool {p.name!r} would cost {price:g} per GPU-hour; "
                    "expected a positive price"
                )
            update["price_per_gpu_hour"] = price
            if p.tier == "spot" and self.spot_interruption_rate_per_hour is not None:
                update["spot_interruption_rate_per_hour"] = self.spot_interruption_rate_per_hour
            pools.append(p.model_copy(update=update))
        models = {gpu_model(p.gpu_model).name for p in fleet}
        for a in self.added:
            if a.gpu_model not in models:
                raise BadInputError(
                    f"--scenario {self.name!r}: workload GPU model {a.gpu_model!r} has no pool; "
                    f"expected one of {', '.join(sorted(models))}"
                )
        return tuple(pools)


def _percent_or_number(value: str, what: str) -> tuple[float, bool]:
    """``'+20%'`` -> (0.2, True); ``'2.5'`` -> (2.5, False)."""
    v = value.strip()
    relative = v.endswith("%")
    try:
        x = float(v[:-1] if relative else v)
    except ValueError:
        raise BadInputError(
            f"--scenario: {what}={value!r} is not a number; expected e.g. {what}=+20% or {what}=2.5"
        ) from None
    if not math.isfinite(x):
        raise BadInputError(f"--scenario: {what}={value!r} must be finite")
    return (x / 100.0 if relative else x), relative


def parse_scenario(text: str) -> Scenario:
    """Parse ``[NAME:]KEY=VALUE[,KEY=VALUE...]`` (the ``--scenario`` syntax, see the README).

    Keys: ``growth=20%`` (linear to the end of the horizon) or ``growth=5%/month``
    (compounding); ``workload=MODEL:GPUS[@YYYY-MM-DD]`` (repeatable);
    ``on-demand-price``, ``spot-price``, ``reserved-price`` as ``+10%``/``-20%``
    (relative) or a plain number (absolute per GPU-hour); ``spot-interruption=0.1``
    (per hour).
    """
    raw = text.strip()
    if not raw:
        raise BadInputError("--scenario: empty; expected e.g. 'growth20:growth=20%'")
    name = ""
    head, sep, rest = raw.partition(":")
    if sep and "=" not in head:
        name, raw = head.strip(), rest.strip()
    growth = growth_month = 0.0
    factors: dict[str, float] = {}
    absolute: dict[str, float] = {}
    spot_rate: float | None = None
    added: list[AddedWorkload] = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        key, eq, value = part.partition("=")
        key = key.strip().lower().replace("_", "-").replace("ondemand", "on-demand")
        if not eq or key not in _SCENARIO_KEYS:
            raise BadInputError(
                f"--scenario {text!r}: {part!r} is not KEY=VALUE with a known key; "
                f"expected one of {', '.join(_SCENARIO_KEYS)}"
            )
        if key == "growth":
            per_month = value.strip().lower().endswith(("/month", "/mo"))
            amount, relative = _percent_or_number(value.strip().split("/")[0], key)
            if not relative:
                raise BadInputError(
                    f"--scenario {text!r}: growth={value!r} needs a percentage, e.g. 20% or 5%/month"
                )
            if amount <= -1.0:
                raise BadInputError(f"--scenario {text!r}: growth={value!r} must be above -100%")
            if per_month:
                growth_month = amount
            else:
                growth = amount
        elif key.endswith("-price"):
            tier = key.removesuffix("-price")
            amount, relative = _percent_or_number(value, key)
            if relative:
                factors[tier] = 1.0 + amount
            else:
                absolute[tier] = amount
        elif key == "spot-interruption":
            amount, relative = _percent_or_number(value, key)
            if not 0.0 <= amount < 1.0:
                raise BadInputError(
                    f"--scenario {text!r}: spot-interruption={value!r} must be a probability per "
                    "hour in [0, 1), e.g. 0.1 or 10%"
                )
            spot_rate = amount
        else:
            added.append(_parse_workload(text, value))
    if not name:
        name = re.sub(r"[^A-Za-z0-9%+.=-]+", "_", raw)[:40] or "scenario"
    return Scenario(
        name=name,
        growth=growth,
        growth_per_month=growth_month,
        price_factor=factors,
        price_set=absolute,
        spot_interruption_rate_per_hour=spot_rate,
        added=tuple(added),
        text=text.strip(),
    )


def _parse_workload(text: str, value: str) -> AddedWorkload:
    spec, _, start = value.partition("@")
    model, colon, gpus = spec.rpartition(":")
    if not colon:
        raise BadInputError(
            f"--scenario {text!r}: workload={value!r}; expected MODEL:GPUS[@YYYY-MM-DD], "
            "e.g. workload=H100-80GB:16@2027-01-01"
        )
    try:
        canonical = gpu_model(model.strip()).name
    except KeyError:
        raise BadInputError(
            f"--scenario {text!r}: workload GPU model {model.strip()!r} is not in the catalog"
        ) from None
    try:
        n = float(gpus)
    except ValueError:
        raise BadInputError(
            f"--scenario {text!r}: workload GPUs {gpus!r} is not a number; expected e.g. H100-80GB:16"
        ) from None
    if not math.isfinite(n) or n <= 0:
        raise BadInputError(f"--scenario {text!r}: workload GPUs {gpus!r} must be positive")
    when = None
    if start.strip():
        try:
            when = pd.Timestamp(start.strip())
        except ValueError as exc:
            raise BadInputError(
                f"--scenario {text!r}: workload start {start!r} is not a date; expected YYYY-MM-DD"
            ) from exc
        if when.tzinfo is not None:
            when = when.tz_convert("UTC").tz_localize(None)
    return AddedWorkload(gpu_model=canonical, gpus=n, start=when)


def check_horizon(horizon: pd.Timedelta) -> pd.Timedelta:
    if horizon < STEP or horizon > MAX_HORIZON:
        raise BadInputError(
            f"--horizon: {horizon} is outside the finance range; expected 1h to 366d"
        )
    return horizon


@dataclass(frozen=True)
class Bands:
    """Quantile levels behind the low / expected / high bands."""

    low: float
    expected: float
    high: float

    def level(self, band: str) -> float:
        return float(getattr(self, band))


def bands_for(forecast: ForecastConfig) -> Bands:
    qs = sorted(set(forecast.quantiles))
    low = qs[0] if qs[0] < 0.5 else 0.1
    high = qs[-1] if qs[-1] > 0.5 else 0.9
    return Bands(low=low, expected=0.5, high=high)


@dataclass
class ScenarioProjection:
    """One scenario's projection; frames are tidy (one row per period, tier or model, band)."""

    scenario: Scenario
    monthly: pd.DataFrame
    """Columns: period (YYYY-MM), tier, band, hours, gpu_hours, cost."""
    daily: pd.DataFrame
    """Columns: period (YYYY-MM-DD), tier, band, hours, gpu_hours, cost."""
    demand: pd.DataFrame
    """Columns: gpu_model, band, demand_gpu_hours, capacity_gpu_hours, idle_gpu_hours, short_gpu_hours."""
    monthly_pools: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Columns: period, pool, tier, gpu_model, band, hours, gpu_hours, cost (and, where a
    pool has ``price_per_kwh``, energy_kwh and energy_cost in every frame but demand)."""

    def total_cost(self, band: str) -> float:
        return float(self.monthly.loc[self.monthly["band"] == band, "cost"].sum())

    @property
    def priced_energy(self) -> bool:
        """Whether some pool's energy is priced (the frames carry energy_cost)."""
        return "energy_cost" in self.monthly.columns

    def total_energy_cost(self, band: str) -> float:
        """Energy cost over the horizon in ``band`` (0 where no pool prices energy)."""
        if not self.priced_energy:
            return 0.0
        return float(self.monthly.loc[self.monthly["band"] == band, "energy_cost"].sum())

    def total_gpu_hours(self, band: str) -> float:
        return float(self.monthly.loc[self.monthly["band"] == band, "gpu_hours"].sum())


@dataclass(frozen=True)
class CommitmentOption:
    """One commitment level evaluated with the same projection as the baseline."""

    nodes: int
    """Reserved nodes held over the horizon."""
    term: str
    """``1y``/``3y`` for added nodes bought on that term; ``""`` when nothing is added (or the
    pool prices no term)."""
    price_per_gpu_hour: float
    """Price of the added nodes (the current reserved price when nothing is added)."""
    cost: Mapping[str, float]
    """Band -> money paid over the horizon by every pool of the GPU model."""
    unserved_gpu_hours: Mapping[str, float]
    """Band -> demand no pool serves (the others are at ``max_nodes``)."""
    objective: Mapping[str, float]
    """Band -> cost plus unserved GPU-hours at the configured unserved price (cost when unpriced)."""
    utilization: float
    """Share of committed GPU-hours busy in the expected band."""
    refused: bool = False
    """True when unserved demand has no price and this option leaves more of it than keeping."""


@dataclass(frozen=True)
class TradeOff:
    """A level next to the advised one, against it: what the reader gives up or gains."""

    nodes: int
    term: str
    """Term of the added nodes (``""`` when nothing is added or no term is priced)."""
    saving: Mapping[str, float]
    """Band -> money this level saves over the horizon against the advised one (negative: it
    costs more), unserved demand at its price included where one is configured."""
    unserved_added: Mapping[str, float]
    """Band -> GPU-hours of demand this level leaves unserved beyond the advised one."""
    refused: bool
    """True when it leaves more demand unserved than keeping and unserved demand has no price."""
    deciding_band: str
    """The band that rules it out: where it leaves most demand unserved (refused) or saves
    least (loses most) against the advised level."""


@dataclass(frozen=True)
class ReservedIdle:
    """Committed GPU-hours of one GPU model that expected demand leaves unused."""

    gpu_model: str
    pools: tuple[str, ...]
    reserved_gpu_hours: float
    """GPU-hours committed over the horizon."""
    idle_gpu_hours: float
    """Those the expected band does not use."""
    idle_cost: float
    """What the idle GPU-hours cost at their pools' reserved price."""

    @property
    def share(self) -> float:
        return self.idle_gpu_hours / self.reserved_gpu_hours if self.reserved_gpu_hours else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu_model": self.gpu_model,
            "pools": list(self.pools),
            "reserved_gpu_hours": round(self.reserved_gpu_hours, 2),
            "idle_gpu_hours": round(self.idle_gpu_hours, 2),
            "idle_cost": round(self.idle_cost, 2),
            "idle_share": round(self.share, 4),
        }


@dataclass(frozen=True)
class CommitmentAdvice:
    """How many nodes to hold on a reserved pool, why, and what it is worth."""

    gpu_model: str
    pool: str
    gpus_per_node: int
    current_nodes: int
    recommended_nodes: int
    term: str
    """Term of the added nodes (``1y``/``3y``; ``""`` when none are added or no term is priced)."""
    kind: str
    """``commit``, ``release`` or ``keep``."""
    reason: str
    """Why, as an i18n key (``advice_<reason>``) whose parameters are this advice's fields."""
    base_load_gpus: float
    """GPUs the low band needs in at least ``BASE_LOAD_COVERAGE`` of hours."""
    reserved_price: float
    """Price per GPU-hour of the current commitment."""
    term_price: float
    """Price per GPU-hour of the added nodes (``reserved_price`` when none are added)."""
    alternative_price: float
    """Price per GPU-hour of the on-demand capacity a commitment replaces."""
    break_even_utilization: float
    """Price of the changed nodes over the on-demand price."""
    utilization: float
    """Share of committed GPU-hours busy in the expected band at the recommended level."""
    current_utilization: float
    """The same at the current level."""
    changed_utilization: float
    """Share of the added (or released) GPUs' hours busy in the expected band; compare with
    ``break_even_utilization``."""
    monthly_saving: float
    """Expected-band money saved per average month against the current commitment."""
    monthly_saving_low: float
    monthly_saving_high: float
    unserved_gpu_hours: Mapping[str, float]
    """Band -> unserved GPU-hours at the recommended level."""
    current_unserved_gpu_hours: Mapping[str, float]
    """Band -> unserved GPU-hours keeping the current commitment."""
    unserved_price: float | None
    """Price of an unserved GPU-hour from the config; None: options adding unserved are refused."""
    detail_band: str = ""
    """The band a keep reason refers to (where the next option loses or leaves demand unserved)."""
    detail_value: float = 0.0
    """That band's loss per month, or unserved GPU-hours added, for the keep reason."""
    options: tuple[CommitmentOption, ...] = ()

    @property
    def change_nodes(self) -> int:
        return self.recommended_nodes - self.current_nodes

    def recommended_option(self) -> CommitmentOption | None:
        """The option the advice chose (None for an advice built without its options)."""
        return next(
            (o for o in self.options if (o.nodes, o.term) == (self.recommended_nodes, self.term)),
            None,
        )

    def current_option(self) -> CommitmentOption | None:
        """Keeping the current commitment."""
        return next((o for o in self.options if o.nodes == self.current_nodes), None)

    def trade_offs(self) -> list[TradeOff]:
        """One node more and one fewer than advised (for added nodes, the term that does best
        in the expected band), each against the advised level in every band."""
        best = self.recommended_option()
        if best is None:
            return []
        out = []
        for n in (self.recommended_nodes + 1, self.recommended_nodes - 1):
            at_n = [o for o in self.options if o.nodes == n]
            if not at_n:
                continue
            o = min(at_n, key=lambda o: (o.objective["expected"], o.price_per_gpu_hour))
            saving = {b: best.objective[b] - o.objective[b] for b in BANDS}
            added = {b: o.unserved_gpu_hours[b] - best.unserved_gpu_hours[b] for b in BANDS}
            band = (
                max(BANDS, key=lambda b: added[b])
                if o.refused
                else min(BANDS, key=lambda b: saving[b])
            )
            out.append(
                TradeOff(
                    nodes=n,
                    term=o.term,
                    saving=saving,
                    unserved_added=added,
                    refused=o.refused,
                    deciding_band=band,
                )
            )
        return out

    def key_options(self) -> list[CommitmentOption]:
        """The options a reader needs to check the advice: none, one either side of the current
        and the recommended level, the base load, and as many as the high band's peak needs."""
        levels = sorted({o.nodes for o in self.options})
        if not levels:
            return []
        base_nodes = math.ceil(self.base_load_gpus / self.gpus_per_node - 1e-6)
        wanted = {0, levels[-1], base_nodes}
        for n in (self.current_nodes, self.recommended_nodes):
            wanted |= {n - 1, n, n + 1}
        return [o for o in self.options if o.nodes in wanted]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in self.__dict__.items():
            if k == "options":
                continue
            if isinstance(v, Mapping):
                v = {b: round(float(x), 4) for b, x in v.items()}
            out[k] = round(v, 4) if isinstance(v, float) else v
        out["change_nodes"] = self.change_nodes
        out["options"] = [
            {
                "nodes": o.nodes,
                "term": o.term,
                "price_per_gpu_hour": o.price_per_gpu_hour,
                "cost": {b: round(float(x), 2) for b, x in o.cost.items()},
                "unserved_gpu_hours": {
                    b: round(float(x), 2) for b, x in o.unserved_gpu_hours.items()
                },
                "utilization": round(o.utilization, 4),
                "refused": o.refused,
            }
            for o in self.key_options()
        ]
        out["options_evaluated"] = len(self.options)
        out["trade_offs"] = [
            {
                "nodes": x.nodes,
                "term": x.term,
                "saving": {b: round(float(v), 2) for b, v in x.saving.items()},
                "unserved_added": {b: round(float(v), 2) for b, v in x.unserved_added.items()},
                "refused": x.refused,
                "deciding_band": x.deciding_band,
            }
            for x in self.trade_offs()
        ]
        return out


@dataclass
class FinanceProjection:
    start: pd.Timestamp
    end: pd.Timestamp
    bands: Bands
    scenarios: list[ScenarioProjection]
    commitments: list[CommitmentAdvice]
    notes: list[Note] = field(default_factory=list)
    reserved_idle: list[ReservedIdle] = field(default_factory=list)
    """Per GPU model with a commitment, the committed GPU-hours expected demand leaves unused."""

    @property
    def hours(self) -> int:
        return round((self.end - self.start) / STEP)

    @property
    def baseline(self) -> ScenarioProjection:
        return self.scenarios[0]

    def to_dict(self) -> dict[str, Any]:
        def frame(df: pd.DataFrame) -> list[dict[str, Any]]:
            return [
                {str(k): (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
                for row in df.to_dict(orient="records")
            ]

        return {
            "start": _iso(self.start),
            "end": _iso(self.end),
            "hours": self.hours,
            "bands": {"low": self.bands.low, "expected": 0.5, "high": self.bands.high},
            "scenarios": [
                {
                    "name": s.scenario.name,
                    "text": s.scenario.text,
                    "totals": {
                        b: {
                            "cost": round(s.total_cost(b), 2),
                            "gpu_hours": round(s.total_gpu_hours(b), 2),
                        }
                        | (
                            {"energy_cost": round(s.total_energy_cost(b), 2)}
                            if s.priced_energy
                            else {}
                        )
                        for b in BANDS
                    },
                    "monthly": frame(s.monthly),
                    "daily": frame(s.daily),
                    "demand": frame(s.demand),
                }
                for s in self.scenarios
            ],
            "commitments": [c.to_dict() for c in self.commitments],
            "reserved_idle": [r.to_dict() for r in self.reserved_idle],
            "notes": [{"key": n.key, "params": dict(n.params)} for n in self.notes],
        }


def _iso(ts: pd.Timestamp) -> str:
    return pd.Timestamp(ts).strftime("%Y-%m-%dT%H:%M:%SZ")


def hourly_grid(now: pd.Timestamp, horizon: pd.Timedelta) -> pd.DatetimeIndex:
    n = max(1, math.ceil(horizon / STEP))
    return pd.date_range(pd.Timestamp(now), periods=n, freq=STEP, name="timestamp")


def _hourly_peak(series: pd.Series, grid: pd.DatetimeIndex) -> np.ndarray:
    """Largest value of ``series`` in each hour of ``grid``; the latest value before it if none."""
    s = series.dropna().astype(float)
    if s.empty:
        return np.zeros(len(grid))
    peaks = s.resample(STEP, origin=grid[0]).max()
    out = peaks.reindex(grid).ffill().bfill()
    return np.nan_to_num(out.to_numpy(dtype=float), nan=0.0)


def signal_bands(
    forecasts: Mapping[str, SeriesForecast], grid: pd.DatetimeIndex, bands: Bands
) -> dict[str, dict[str, np.ndarray]]:
    """Signal -> band -> hourly peak of that band's forecast quantile."""
    return {
        name: {b: _hourly_peak(fc.quantile(bands.level(b)), grid) for b in BANDS}
        for name, fc in forecasts.items()
    }


def gpu_demand(
    workloads: Sequence[WorkloadConfig],
    signals: Mapping[str, np.ndarray],
    factor: np.ndarray,
    added: Sequence[AddedWorkload],
    grid: pd.DatetimeIndex,
) -> dict[str, np.ndarray]:
    """GPUs ``workloads`` need per GPU model on ``grid`` for one band of the signals."""
    out: dict[str, np.ndarray] = {}
    for w in workloads:
        if w.signal not in signals:
            continue
        key = gpu_model(w.gpu_model).name
        need = gpus_for(w, signals[w.signal] * factor)
        out[key] = out.get(key, np.zeros(len(grid))) + need
    for a in added:
        on = grid >= a.start if a.start is not None else np.ones(len(grid), dtype=bool)
        out[a.gpu_model] = out.get(a.gpu_model, np.zeros(len(grid))) + np.where(on, a.gpus, 0.0)
    return out


def fill_pools(pools: Sequence[PoolConfig], demand: np.ndarray, cycle_s: int) -> np.ndarray:
    """Nodes per pool (columns, in ``pools`` order) at each hour, by the planner's allocation."""
    values, inverse = np.unique(np.round(demand, 6), return_inverse=True)
    table = np.array(
        [[allocate(list(pools), float(v), cycle_s)[p.name] for p in pools] for v in values],
        dtype=float,
    ).reshape(len(values), len(pools))
    return table[inverse.reshape(-1)]


@dataclass(frozen=True)
class PricedFleet:
    """What a projection or a review fills and prices: the pools, the workloads whose
    demand they serve, the planning cycle (spot discounted as the planner does) and the
    price of an unserved GPU-hour (``finance.unserved_price_per_gpu_hour``; None refuses
    commitment options that leave more unserved)."""

    pools: tuple[PoolConfig, ...]
    workloads: tuple[WorkloadConfig, ...]
    cycle_s: int
    unserved_price: float | None

    @classmethod
    def of(cls, config: Config) -> PricedFleet:
        return cls(
            pools=config.pools,
            workloads=config.workloads,
            cycle_s=config.policy.cycle_s,
            unserved_price=config.finance.unserved_price_per_gpu_hour,
        )

    def pools_for(self, model: str) -> list[PoolConfig]:
        """The pools of GPU model ``model``, in config order."""
        return _pools_for(self.pools, model)

    def pinned(self) -> PricedFleet:
        """This fleet with every reserved pool fixed at its committed nodes
        (:func:`pin_commitments`)."""
        return replace(self, pools=pin_commitments(self.pools))


@dataclass
class _Filled:
    nodes: dict[str, np.ndarray]
    """Pool -> nodes at each hour."""
    demand: dict[str, np.ndarray]
    """GPU model -> GPUs needed at each hour."""


def pin_commitments(fleet: Sequence[PoolConfig]) -> tuple[PoolConfig, ...]:
    """The pools of ``fleet`` with every reserved pool fixed at its committed nodes.

    A commitment is a node count paid whether used or not, bought for a term: nothing
    above it comes at the reserved price within the horizon, so a projection never
    grows a reserved pool by the hour. Commitments change only through the advice.
    """
    pools = tuple(
        p.model_copy(update={"min_nodes": p.committed_nodes, "max_nodes": p.committed_nodes})
        if p.tier == "reserved"
        else p
        for p in fleet
    )
    return pools


def _pools_for(pools: Sequence[PoolConfig], model: str) -> list[PoolConfig]:
    """The pools of GPU model ``model``, in config order (:meth:`Config.pools_for`)."""
    key = gpu_model(model).name
    return [p for p in pools if gpu_model(p.gpu_model).name == key]


def _fill(
    fleet: Sequence[PoolConfig],
    cycle_s: int,
    demand: Mapping[str, np.ndarray],
    grid: pd.DatetimeIndex,
) -> _Filled:
    nodes: dict[str, np.ndarray] = {}
    models = sorted({gpu_model(p.gpu_model).name for p in fleet})
    for model in models:
        pools = _pools_for(fleet, model)
        d = demand.get(model, np.zeros(len(grid)))
        filled = fill_pools(pools, d, cycle_s)
        for i, p in enumerate(pools):
            nodes[p.name] = filled[:, i]
    return _Filled(nodes=nodes, demand={m: demand.get(m, np.zeros(len(grid))) for m in models})


def _periods(grid: pd.DatetimeIndex, fmt: str) -> np.ndarray:
    return np.asarray(grid.strftime(fmt))


def _pool_rows(
    pools: Sequence[PoolConfig], filled: _Filled, grid: pd.DatetimeIndex, band: str, fmt: str
) -> list[dict[str, Any]]:
    """GPU-hours and cost per period and pool, in config order; where any pool prices its
    energy (``price_per_kwh``), its kWh at ``watts_per_gpu`` and their cost (0 elsewhere),
    beside the node cost, which does not include it."""
    step_h = STEP / pd.Timedelta(hours=1)
    energy = any(p.price_per_kwh is not None for p in pools)
    periods = _periods(grid, fmt)
    # A pool with billing pays whole periods (scaler.planning.billing): each node's time
    # rounded up, charged in the period it is released (or the last, still running).
    billed_h = {
        p.name: billed_node_seconds(
            np.ceil(np.asarray(filled.nodes[p.name], dtype=float) - 1e-9),
            STEP.total_seconds(),
            p.billing,
        )
        / 3600.0
        for p in pools
        if p.billing is not None
    }
    rows = []
    for period in dict.fromkeys(periods):
        mask = periods == period
        for p in pools:
            node_h = float(filled.nodes[p.name][mask].sum()) * step_h
            paid_h = float(billed_h[p.name][mask].sum()) if p.name in billed_h else node_h
            rows.append(
                {
                    "period": str(period),
                    "pool": p.name,
                    "tier": p.tier,
                    "gpu_model": gpu_model(p.gpu_model).name,
                    "band": band,
                    "hours": float(mask.sum() * step_h),
                    "gpu_hours": node_h * p.gpus_per_node,
                    "cost": paid_h * p.price_per_node_hour,
                }
            )
            if energy:
                # Energy is drawn while a node runs, not while it is billed.
                kwh = energy_kwh(p, node_h) if p.price_per_kwh is not None else 0.0
                rows[-1]["energy_kwh"] = kwh
                rows[-1]["energy_cost"] = kwh * (p.price_per_kwh or 0.0)
    return rows


def _tier_rows(pool_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pool rows summed per period and tier (tiers in reserved, on-demand, spot order)."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    summed = ["gpu_hours", "cost"] + (
        ["energy_kwh", "energy_cost"] if pool_rows and "energy_cost" in pool_rows[0] else []
    )
    for r in sorted(pool_rows, key=lambda r: TIER_ORDER[r["tier"]]):
        key = (r["period"], r["tier"])
        if key not in out:
            out[key] = {k: r[k] for k in ("period", "tier", "band", "hours")} | dict.fromkeys(
                summed, 0.0
            )
        for k in summed:
            out[key][k] += r[k]
    order = list(dict.fromkeys(r["period"] for r in pool_rows))
    return sorted(out.values(), key=lambda r: (order.index(r["period"]), TIER_ORDER[r["tier"]]))


def _demand_rows(
    pools: Sequence[PoolConfig], cycle_s: int, filled: _Filled, band: str
) -> list[dict[str, Any]]:
    step_h = STEP / pd.Timedelta(hours=1)
    rows = []
    for model, d in filled.demand.items():
        cap = np.zeros(len(d))
        paid = np.zeros(len(d))
        for p in _pools_for(pools, model):
            cap += effective_gpus(p, 1, cycle_s) * filled.nodes[p.name]
            paid += p.gpus_per_node * filled.nodes[p.name]
        rows.append(
            {
                "gpu_model": model,
                "band": band,
                "demand_gpu_hours": float(d.sum() * step_h),
                "capacity_gpu_hours": float(paid.sum() * step_h),
                "idle_gpu_hours": float(np.maximum(0.0, cap - d).sum() * step_h),
                "short_gpu_hours": float(np.maximum(0.0, d - cap).sum() * step_h),
            }
        )
    return rows


def project_scenario(
    fleet: PricedFleet,
    signals: Mapping[str, Mapping[str, np.ndarray]],
    grid: pd.DatetimeIndex,
    end: pd.Timestamp,
    scenario: Scenario,
) -> tuple[ScenarioProjection, dict[str, _Filled]]:
    pools = pin_commitments(scenario.apply(fleet.pools))
    factor = scenario.factor(grid, grid[0], end)
    monthly: list[dict[str, Any]] = []
    monthly_pools: list[dict[str, Any]] = []
    daily: list[dict[str, Any]] = []
    demand_rows: list[dict[str, Any]] = []
    fills: dict[str, _Filled] = {}
    for band in BANDS:
        band_signals = {name: b[band] for name, b in signals.items()}
        demand = gpu_demand(fleet.workloads, band_signals, factor, scenario.added, grid)
        filled = _fill(pools, fleet.cycle_s, demand, grid)
        fills[band] = filled
        pools_m = _pool_rows(pools, filled, grid, band, "%Y-%m")
        monthly_pools += pools_m
        monthly += _tier_rows(pools_m)
        daily += _tier_rows(_pool_rows(pools, filled, grid, band, "%Y-%m-%d"))
        demand_rows += _demand_rows(pools, fleet.cycle_s, filled, band)
    return (
        ScenarioProjection(
            scenario=scenario,
            monthly=pd.DataFrame(monthly),
            daily=pd.DataFrame(daily),
            demand=pd.DataFrame(demand_rows),
            monthly_pools=pd.DataFrame(monthly_pools),
        ),
        fills,
    )


_EPS = 1e-6


class _Residual:
    """The other pools of a GPU model filled for what the commitment leaves, memoized by value.

    Demand is whole GPUs except for MIG shares and added workloads, so a table indexed by
    the GPU count answers most options with array lookups; other values go one by one.
    """

    def __init__(self, pools: Sequence[PoolConfig], cycle_s: int) -> None:
        self.pools = list(pools)
        self.cycle_s = cycle_s
        self.memo: dict[float, tuple[float, float]] = {}
        self.cost_h = np.zeros(0)
        self.eff = np.zeros(0)

    def _one(self, gpus: float) -> tuple[float, float]:
        """(cost per hour, effective GPUs) of the cheapest fill of ``gpus``."""
        if gpus not in self.memo:
            alloc = allocate(self.pools, gpus, self.cycle_s) if self.pools else {}
            self.memo[gpus] = (
                sum(alloc[p.name] * p.price_per_node_hour for p in self.pools),
                sum(effective_gpus(p, alloc[p.name], self.cycle_s) for p in self.pools),
            )
        return self.memo[gpus]

    def _grow_to(self, top: int) -> None:
        """Extend the lookup table of whole GPU counts to ``top``."""
        start = len(self.cost_h)
        if top < start:
            return
        extra = [self._one(float(v)) for v in range(start, top + 1)]
        self.cost_h = np.concatenate([self.cost_h, [c for c, _ in extra]])
        self.eff = np.concatenate([self.eff, [e for _, e in extra]])

    def __call__(self, residual: np.ndarray) -> tuple[float, float]:
        """Money over the hours and GPU-hours left unserved, for a residual demand per hour."""
        r = np.round(np.maximum(residual, 0.0), 6)
        whole = np.round(r)
        if np.all(np.abs(r - whole) < 1e-6):
            idx = whole.astype(int)
            self._grow_to(int(idx.max(initial=0)))
            return (
                float(self.cost_h[idx].sum()),
                float(np.maximum(0.0, idx - self.eff[idx]).sum()),
            )
        values, counts = np.unique(r, return_counts=True)
        cost = unserved = 0.0
        for v, c in zip(values, counts, strict=True):
            per_h, eff = self._one(float(v))
            cost += per_h * c
            unserved += max(0.0, float(v) - eff) * c
        return cost, unserved


def commitment_options(
    fleet: PricedFleet,
    pool: PoolConfig,
    demand: Mapping[str, np.ndarray],
) -> list[CommitmentOption]:
    """Every commitment level of ``pool`` from 0 to enough for the high band's peak, per
    priced term, costed on ``demand`` (band -> GPUs of the pool's model at each hour) with
    the model's other pools filled for what the commitment leaves."""
    step_h = STEP / pd.Timedelta(hours=1)
    unserved_price = fleet.unserved_price
    others = [p for p in fleet.pools_for(pool.gpu_model) if p.name != pool.name]
    residual = _Residual(others, fleet.cycle_s)
    g = pool.gpus_per_node
    current = pool.committed_nodes
    top = max(current, math.ceil(float(demand["high"].max()) / g) + 1)
    terms: dict[str, float] = {
        str(k): v for k, v in pool.commitment_price_per_gpu_hour.items()
    } or {"": pool.price_per_gpu_hour}
    out: list[CommitmentOption] = []
    for n in range(0, top + 1):
        for term, price in terms.items() if n > current else [("", pool.price_per_gpu_hour)]:
            reserved_h = (
                min(n, current) * pool.price_per_gpu_hour + max(0, n - current) * price
            ) * g
            cost: dict[str, float] = {}
            short: dict[str, float] = {}
            for b in BANDS:
                other_cost, other_short = residual(demand[b] - n * g)
                cost[b] = (reserved_h * len(demand[b]) + other_cost) * step_h
                short[b] = other_short * step_h
            busy = float(np.minimum(demand["expected"], n * g).sum())
            hours = len(demand["expected"])
            out.append(
                CommitmentOption(
                    nodes=n,
                    term=term,
                    price_per_gpu_hour=price,
                    cost=cost,
                    unserved_gpu_hours=short,
                    objective={b: cost[b] + (unserved_price or 0.0) * short[b] for b in BANDS},
                    utilization=busy / (n * g * hours) if n else 0.0,
                )
            )
    keep = next(o for o in out if o.nodes == current)
    if unserved_price is None:
        out = [
            o
            if all(o.unserved_gpu_hours[b] <= keep.unserved_gpu_hours[b] + _EPS for b in BANDS)
            else CommitmentOption(**{**o.__dict__, "refused": True})
            for o in out
        ]
    return out


def _no_worse(o: CommitmentOption, keep: CommitmentOption, band: str) -> bool:
    return not o.refused and o.objective[band] <= keep.objective[band] + _EPS


def _busy_share(demand: np.ndarray, lo_gpus: float, hi_gpus: float) -> float:
    """Share of the hours of the GPUs between ``lo_gpus`` and ``hi_gpus`` that demand keeps busy."""
    width = hi_gpus - lo_gpus
    if width <= 0:
        return 0.0
    busy = np.clip(demand - lo_gpus, 0.0, width).sum()
    return float(busy / (width * len(demand)))


def advise_commitments(
    fleet: PricedFleet, baseline: Mapping[str, _Filled], grid: pd.DatetimeIndex
) -> tuple[list[CommitmentAdvice], list[Note]]:
    """Reserved nodes per GPU model: each option projected the same way, one reason each.

    Every level from 0 nodes to the high band's peak (and, for added nodes, every term
    priced in ``commitment_price_per_gpu_hour``) is costed in each band with the other
    pools filled by the planner's allocation for what the commitment leaves. Unserved
    demand (the other pools at ``max_nodes``) is priced at ``finance.unserved_price_per_gpu_hour``
    or, without a price, an option that leaves more of it than keeping is refused. An option
    qualifies when no band comes out worse than keeping (committing risks low demand,
    releasing risks high demand); the advice is the qualifying option that gains most in the
    expected band. Without an unserved price, when the low band's base load exceeds the
    commitment and the other pools cannot take it, the base load is committed: money alone
    would never pick serving demand over leaving it unserved.
    """
    advice: list[CommitmentAdvice] = []
    notes: list[Note] = []
    months = len(grid) * (STEP / pd.Timedelta(hours=1)) / HOURS_PER_MONTH
    for model in sorted({gpu_model(p.gpu_model).name for p in fleet.pools}):
        pools = fleet.pools_for(model)
        reserved = sorted(
            (p for p in pools if p.tier == "reserved"), key=lambda p: p.price_per_gpu_hour
        )
        others = [p for p in pools if p.tier != "reserved"]
        if not reserved:
            notes.append(Note("no_reserved_pool", {"model": model}))
            continue
        on_demand = [p for p in others if p.tier == "on-demand"] or others
        if not on_demand:
            notes.append(Note("no_alternative_pool", {"model": model}))
            continue
        alt = min(p.price_per_gpu_hour for p in on_demand)
        demand = {b: baseline[b].demand[model] for b in BANDS}
        advice.append(advise_pool(fleet, model, reserved[0], alt, demand, months))
    return advice, notes


def advise_pool(
    fleet: PricedFleet,
    model: str,
    pool: PoolConfig,
    alt: float,
    demand: Mapping[str, np.ndarray],
    months: float,
) -> CommitmentAdvice:
    """The advice for one GPU model's cheapest reserved ``pool`` against the on-demand price
    ``alt``, on ``demand`` (band -> GPUs at each hour) over ``months``: the option chosen
    from the pool's committed nodes, its reason, and what it is worth per month."""
    unserved_price = fleet.unserved_price
    current = pool.committed_nodes
    g = pool.gpus_per_node
    options = commitment_options(fleet, pool, demand)
    keep = next(o for o in options if o.nodes == current)
    base = float(np.quantile(demand["low"], 1.0 - BASE_LOAD_COVERAGE))
    best, reason = _choose(options, keep, current, math.ceil(base / g - _EPS), unserved_price)
    kind = "commit" if best.nodes > current else "release" if best.nodes < current else "keep"
    lo, hi = sorted((best.nodes * g, current * g))
    changed = _busy_share(demand["expected"], lo, hi)
    detail_band, detail_value = "", 0.0
    if not reason:
        reason = kind
        if kind == "keep":
            reason, detail_band, detail_value = _keep_reason(
                options, keep, current, demand, g, alt, pool, months
            )
            # The nodes a keep is about: the last committed one when releasing was the
            # question, the next one to add otherwise.
            lo, hi = (current * g - g, current * g) if current else (0, g)
            changed = _busy_share(demand["expected"], lo, hi)
    term_price = best.price_per_gpu_hour if best.nodes > current else pool.price_per_gpu_hour
    if kind == "keep" and current == 0:
        term_price = min(o.price_per_gpu_hour for o in options if o.nodes == 1)
    return CommitmentAdvice(
        gpu_model=model,
        pool=pool.name,
        gpus_per_node=g,
        current_nodes=current,
        recommended_nodes=best.nodes,
        term=best.term,
        kind=kind,
        reason=reason,
        base_load_gpus=base,
        reserved_price=pool.price_per_gpu_hour,
        term_price=term_price,
        alternative_price=alt,
        break_even_utilization=term_price / alt,
        utilization=best.utilization,
        current_utilization=keep.utilization,
        changed_utilization=changed,
        monthly_saving=(keep.cost["expected"] - best.cost["expected"]) / months,
        monthly_saving_low=(keep.cost["low"] - best.cost["low"]) / months,
        monthly_saving_high=(keep.cost["high"] - best.cost["high"]) / months,
        unserved_gpu_hours=dict(best.unserved_gpu_hours),
        current_unserved_gpu_hours=dict(keep.unserved_gpu_hours),
        unserved_price=unserved_price,
        detail_band=detail_band,
        detail_value=detail_value,
        options=tuple(options),
    )


def _choose(
    options: Sequence[CommitmentOption],
    keep: CommitmentOption,
    current: int,
    base_nodes: int,
    unserved_price: float | None,
) -> tuple[CommitmentOption, str]:
    """The qualifying option that gains most in the expected band, and ``""``; or, without an
    unserved price, the base load's ``base_nodes`` and ``commit_unserved`` when that serves
    low-band demand that keeping leaves unserved."""
    safe = [o for o in options if all(_no_worse(o, keep, b) for b in BANDS)]
    best = max(
        safe,
        key=lambda o: (
            round(keep.objective["expected"] - o.objective["expected"], 6),
            -abs(o.nodes - current),
            -o.price_per_gpu_hour,
        ),
    )
    if unserved_price is None and best.nodes <= current and base_nodes > current:
        at_base = min(
            (o for o in options if o.nodes == base_nodes),
            key=lambda o: o.price_per_gpu_hour,
        )
        if at_base.unserved_gpu_hours["low"] < keep.unserved_gpu_hours["low"] - _EPS:
            return at_base, "commit_unserved"
    return best, ""


def _keep_reason(
    options: Sequence[CommitmentOption],
    keep: CommitmentOption,
    current: int,
    demand: Mapping[str, np.ndarray],
    g: int,
    alt: float,
    pool: PoolConfig,
    months: float,
) -> tuple[str, str, float]:
    """Why keeping wins: (reason, band, value) from the neighbouring options."""
    if current > 0:
        fewer = next(o for o in options if o.nodes == current - 1)
        if fewer.refused:
            band = max(
                BANDS, key=lambda b: fewer.unserved_gpu_hours[b] - keep.unserved_gpu_hours[b]
            )
            added = fewer.unserved_gpu_hours[band] - keep.unserved_gpu_hours[band]
            return "keep_release_unserved", band, added
        busy = _busy_share(demand["expected"], current * g - g, current * g)
        if busy >= pool.price_per_gpu_hour / alt - _EPS:
            return "keep_busy", "", 0.0
        band = max(BANDS, key=lambda b: fewer.objective[b] - keep.objective[b])
        return "keep_release_loses", band, (fewer.objective[band] - keep.objective[band]) / months
    more = min((o for o in options if o.nodes == 1), key=lambda o: o.objective["low"])
    band = max(BANDS, key=lambda b: more.objective[b] - keep.objective[b])
    return "keep_none", band, (more.objective[band] - keep.objective[band]) / months


def reserved_idle(fleet: Sequence[PoolConfig], filled: _Filled) -> list[ReservedIdle]:
    """Per GPU model with reserved pools of ``fleet``, the committed GPU-hours ``filled``'s
    demand leaves unused (reserved pools serve first) and what they cost at the reserved
    price."""
    step_h = STEP / pd.Timedelta(hours=1)
    out = []
    for model, demand in filled.demand.items():
        reserved = [p for p in _pools_for(fleet, model) if p.tier == "reserved"]
        if not reserved:
            continue
        gpus = sum(
            (filled.nodes[p.name] * p.gpus_per_node for p in reserved), np.zeros(len(demand))
        )
        paid = sum(
            (filled.nodes[p.name] * p.price_per_node_hour for p in reserved), np.zeros(len(demand))
        )
        total = float(gpus.sum() * step_h)
        if total <= 0:
            continue
        idle = float(np.maximum(0.0, gpus - demand).sum() * step_h)
        out.append(
            ReservedIdle(
                gpu_model=model,
                pools=tuple(p.name for p in reserved),
                reserved_gpu_hours=total,
                idle_gpu_hours=idle,
                idle_cost=idle * float(paid.sum() * step_h) / total,
            )
        )
    return out


def project(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    now: pd.Timestamp,
    horizon: pd.Timedelta,
    scenarios: Sequence[Scenario] = (),
    progress: Progress | None = None,
) -> FinanceProjection:
    """Project the baseline and each scenario over ``horizon`` from ``now``; advise commitments.

    ``progress`` counts one unit per scenario (the baseline included) and one for the advice.
    """
    return project_fleet(
        PricedFleet.of(config),
        config.signals,
        config.forecast,
        forecasts,
        now,
        horizon,
        scenarios,
        progress,
    )


def project_fleet(
    fleet: PricedFleet,
    signals: Sequence[SignalConfig],
    settings: ForecastConfig,
    forecasts: Mapping[str, SeriesForecast],
    now: pd.Timestamp,
    horizon: pd.Timedelta,
    scenarios: Sequence[Scenario] = (),
    progress: Progress | None = None,
) -> FinanceProjection:
    """:func:`project` for ``fleet``: the ``signals`` it forecasts (one without a forecast, or
    with a short one, gets a note) and the ``forecast`` section's quantiles for the bands."""
    horizon = check_horizon(horizon)
    now = pd.Timestamp(now)
    grid = hourly_grid(now, horizon)
    end = now + horizon
    bands = bands_for(settings)
    banded = signal_bands(forecasts, grid, bands)
    notes: list[Note] = []
    for s in signals:
        if s.name not in forecasts:
            notes.append(Note("no_forecast", {"signal": s.name}))
        else:
            covered = forecasts[s.name].frame.index.max()
            if covered < end - STEP:
                notes.append(Note("short_forecast", {"signal": s.name, "until": _iso(covered)}))
    names = ["baseline"] + [s.name for s in scenarios]
    if len(set(names)) != len(names):
        raise BadInputError(
            f"--scenario: names must be unique and not 'baseline'; got {', '.join(names[1:])}"
        )
    results = []
    base_fills: dict[str, _Filled] = {}
    bar = progress or Progress(False)
    bar.add_total(len(names) + 1)
    for i, sc in enumerate([Scenario("baseline", text="baseline"), *scenarios]):
        bar.describe(f"scenario {sc.name}")
        proj, fills = project_scenario(fleet, banded, grid, end, sc)
        results.append(proj)
        if i == 0:
            base_fills = fills
        bar.update()
    bar.describe("commitment advice")
    pinned = fleet.pinned()
    commitments, advice_notes = advise_commitments(pinned, base_fills, grid)
    bar.update()
    return FinanceProjection(
        start=now,
        end=end,
        bands=bands,
        scenarios=results,
        commitments=commitments,
        notes=notes + advice_notes,
        reserved_idle=reserved_idle(pinned.pools, base_fills["expected"]),
    )
