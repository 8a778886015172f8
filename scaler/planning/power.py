"""Power and heat: throttled GPUs count for less capacity, and pools under a power cap.

Two rules the tier planner applies (:mod:`scaler.planning.tiers`):

* **Throttled GPUs count by their clock.** A GPU whose DCGM clock-event reasons
  (``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``, formerly ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``,
  NVML's ``nvmlClocksEventReasons`` bits) report a slowdown (SW power cap ``0x4``, HW
  slowdown ``0x8``, SW thermal ``0x20``, HW thermal ``0x40``, HW power brake ``0x80``)
  serves at its SM clock over its model's highest clock (:func:`clock_ratio`). The GPUs
  it no longer serves (``1 - ratio`` each) are added to its GPU model's need wherever
  there is any (:func:`lost_gpus`), so the plan keeps the nodes that make up for them.
  Unknown is unthrottled: no reasons, no clock, no highest clock, a ratio that is not a
  number in ``[MIN_CLOCK_RATIO, 1)``, or an unknown GPU model count as whole GPUs. The
  rule only ever adds to a need, so no reading of DCGM lowers a plan.
* **A power cap is a ceiling on nodes.** ``max_power_kw`` of a pool allows
  ``floor(max_power_kw x 1000 / (gpus_per_node x watts_per_gpu))`` nodes
  (:attr:`scaler.config.PoolConfig.power_cap_nodes`); :func:`power_capped` lowers the
  pools' ``max_nodes`` to it for planning, and :func:`name_power_bounds` names the bound
  ``max_power_kw`` where it is the ceiling a pool reaches.

The energy a pool draws (:func:`energy_kwh`) prices the finance projection's energy cost.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaler.config import PoolConfig
from scaler.wording import NOTE_THROTTLED, NOTE_THROTTLED_UNKNOWN, Reason

SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
SLOWDOWN_MASK = (
    SW_POWER_CAP | HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN
)
"""The clock-event reasons that mean heat or power holds the clock down. Idle (``0x1``),
application clock settings (``0x2``), sync boost (``0x10``) and display settings
(``0x100``) are not slowdowns of work."""
THERMAL_MASK = SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN
MAX_REASONS = 2**40
"""Above any bit NVML defines: a larger value is no bitmask of reasons."""
MIN_CLOCK_RATIO = 0.05
"""A throttled GPU at under 5% of its highest clock is a reading error, not a slowdown
(HW power brake halves the clock or more, never to nothing): counted unthrottled."""


@dataclass(frozen=True)
class GpuPower:
    """One GPU's DCGM readings at the cycle's ``now`` (None: not reported)."""

    node: str
    gpu: str
    model: str | None
    """Catalog GPU model (from ``modelName``), None where it cannot be told."""
    reasons: int | None = None
    clock_mhz: float | None = None
    max_clock_mhz: float | None = None
    power_w: float | None = None
    temp_c: float | None = None

    @property
    def slowdown(self) -> int:
        """The slowdown bits of its reasons (0 where none or unknown)."""
        r = self.reasons
        if r is None or r < 0 or r >= MAX_REASONS:
            return 0
        return r & SLOWDOWN_MASK

    @property
    def why(self) -> str:
        """``thermal``, ``power`` or ``slowdown`` for a throttled GPU ('' otherwise)."""
        bits = self.slowdown
        if bits & THERMAL_MASK:
            return "thermal"
        if bits & (SW_POWER_CAP | HW_POWER_BRAKE_SLOWDOWN):
            return "power"
        return "slowdown" if bits else ""


def clock_ratio(gpu: GpuPower) -> float:
    """What share of a GPU serves: its clock over its model's highest clock while a
    slowdown bit is set, else 1 (unknown is unthrottled)."""
    if not gpu.slowdown or gpu.model is None:
        return 1.0
    clock, top = gpu.clock_mhz, gpu.max_clock_mhz
    if clock is None or top is None or not (math.isfinite(clock) and math.isfinite(top)):
        return 1.0
    if top <= 0:
        return 1.0
    ratio = clock / top
    return ratio if MIN_CLOCK_RATIO <= ratio < 1.0 else 1.0


@dataclass(frozen=True)
class PowerReading:
    """The fleet's GPUs as the DCGM exporter reports them at ``at``."""

    at: str
    gpus: tuple[GpuPower, ...] = ()
    unattributed: int = 0
    """Throttled GPUs of no known GPU model: reported, never planned on."""

    def lost_gpus(self) -> dict[str, float]:
        """Per GPU model, the GPUs throttled GPUs no longer serve (sum of ``1 - ratio``)."""
        out: dict[str, float] = {}
        for g in self.gpus:
            ratio = clock_ratio(g)
            if ratio < 1.0 and g.model is not None:
                out[g.model] = out.get(g.model, 0.0) + (1.0 - ratio)
        return {m: round(v, 6) for m, v in sorted(out.items()) if v > 0}

    def throttled_nodes(self) -> dict[str, dict[str, Any]]:
        """Per node with a throttled GPU: its model, GPUs, what they count for, and why."""
        out: dict[str, dict[str, Any]] = {}
        for g in self.gpus:
            ratio = clock_ratio(g)
            if ratio >= 1.0:
                continue
            row = out.setdefault(
                g.node, {"gpu_model": g.model, "gpus": 0, "counted_gpus": 0.0, "why": []}
            )
            row["gpus"] += 1
            row["counted_gpus"] = round(row["counted_gpus"] + ratio, 4)
            if g.why not in row["why"]:
                row["why"].append(g.why)
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        """The plan's ``risk.power`` entry."""
        watts = [g.power_w for g in self.gpus if g.power_w is not None]
        temps = [g.temp_c for g in self.gpus if g.temp_c is not None]
        return {
            "at": self.at,
            "gpus": len(self.gpus),
            "lost_gpus": self.lost_gpus(),
            "throttled_nodes": self.throttled_nodes(),
            "power_kw": round(sum(watts) / 1000.0, 4) if watts else None,
            "max_temp_c": max(temps) if temps else None,
            "unattributed": self.unattributed,
        }

    def notes(self) -> list[Reason]:
        """One note per GPU model with throttled GPUs, one for those of no known model."""
        nodes = self.throttled_nodes()
        out = []
        for model, lost in self.lost_gpus().items():
            mine = {n: r for n, r in nodes.items() if r["gpu_model"] == model}
            gpus = sum(r["gpus"] for r in mine.values())
            params = {
                "model": model,
                "gpus": gpus,
                "nodes": len(mine),
                "causes": tuple(sorted({w for r in mine.values() for w in r["why"]})),
                "counted_gpus": gpus - lost,
                "lost_gpus": lost,
            }
            out.append(Reason(NOTE_THROTTLED, params, ("risk.power.throttled_nodes",)))
        if self.unattributed:
            out.append(Reason(NOTE_THROTTLED_UNKNOWN, {"gpus": self.unattributed}, ("risk.power",)))
        return out


def derated_need(need: np.ndarray, lost: float, held_gpus: float) -> np.ndarray:
    """``need`` with ``lost`` GPUs (at most ``held_gpus``, what the nodes held now count
    for) added at every step that needs any: the throttled GPUs' share made up for."""
    need = np.asarray(need, dtype=float)
    extra = max(0.0, min(float(lost), float(held_gpus)))
    if not extra or not math.isfinite(extra):
        return need
    return np.where(need > 0, need + extra, need)


def power_capped(pools: Sequence[PoolConfig]) -> tuple[tuple[PoolConfig, ...], dict[str, int]]:
    """The pools with ``max_nodes`` lowered to what ``max_power_kw`` allows, and per pool
    whose cap is below its ``max_nodes``, that cap in nodes."""
    caps: dict[str, int] = {}
    out = []
    for p in pools:
        cap = p.power_cap_nodes
        if cap is not None and cap < p.max_nodes:
            caps[p.name] = cap
            p = p.model_copy(update={"max_nodes": max(cap, p.min_nodes)})
        out.append(p)
    return tuple(out), caps


def name_power_bounds(
    caps: Mapping[str, int],
    targets: Mapping[str, Sequence[int]],
    binding: MutableMapping[str, list[str]],
    shortfalls: Sequence[MutableMapping[str, Any]] = (),
    models: Mapping[str, str] | None = None,
) -> None:
    """Name ``max_power_kw`` where a capped pool's bound is its power cap: ``max_nodes`` it
    reaches is the cap's, and a first step at the cap is bound by it. A shortfall of the
    model of such a pool says so too (``models``: pool -> GPU model)."""
    bound_models = set()
    for name, cap in caps.items():
        tl = targets.get(name) or [0]
        names = binding.setdefault(name, [])
        if "max_nodes" in names or tl[0] >= cap:
            names[:] = [b for b in names if b != "max_nodes"]
            if "max_power_kw" not in names:
                names.append("max_power_kw")
        if max(tl) >= cap and models is not None and name in models:
            bound_models.add(models[name])
    for s in shortfalls:
        because = s.get("because")
        if (
            s.get("gpu_model") in bound_models
            and isinstance(because, list)
            and "max_power_kw" not in because
        ):
            because.append("max_power_kw")


def energy_kwh(pool: PoolConfig, node_hours: float) -> float:
    """kWh ``node_hours`` of ``pool`` draw at ``watts_per_gpu`` (0 where unknown)."""
    watts = pool.gpu_watts
    if watts is None or node_hours <= 0:
        return 0.0
    return node_hours * pool.gpus_per_node * watts / 1000.0
