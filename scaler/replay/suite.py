"""Suites of traces the replay is judged on: their definitions (``replay_suite.yaml``, the dev
suite; ``replay_holdout.yaml``, the hold-out suite) and the figures of one series' replay that
a suite's summary needs."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from forecaster.errors import BadInputError
from scaler.replay.frontier import Matched
from scaler.replay.protocol import STEP_H, STEPS_PER_DAY
from scaler.replay.scoring import Score
from scaler.replay.simulating import Replay
from scaler.replay.tiers import clairvoyant_tier_saving

SUITE_FILE = Path(__file__).with_name("replay_suite.yaml")
"""The dev suite: which files, in which units and groups (documented in the file)."""


@dataclass(frozen=True)
class SuiteSeries:
    """One series of a suite: its file under the suite folder, units and group."""

    path: str
    units_per_gpu: float
    group: str


@dataclass(frozen=True)
class Suite:
    """A suite: its series and the groups its replay parameters were tuned on."""

    name: str
    series: tuple[SuiteSeries, ...]
    tuned_on: tuple[str, ...] = ()
    """Groups the replay policy's parameters were chosen on; the rest confirm them."""


def load_suite(path: str | Path = SUITE_FILE) -> Suite:
    """Read a suite definition (YAML: ``name``, ``tuned_on``, ``series`` of path/units/group)."""
    import yaml

    where = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise BadInputError(f"suite {where!r}: cannot read: {str(exc)[:200]}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("series"), list):
        raise BadInputError(f"suite {where!r}: expected a mapping with a 'series' list")
    series = tuple(_suite_series(where, i, item) for i, item in enumerate(data["series"]))
    tuned = data.get("tuned_on") or []
    if not isinstance(tuned, list) or not all(isinstance(g, str) for g in tuned):
        raise BadInputError(f"suite {where!r}: tuned_on must be a list of group names")
    return Suite(str(data.get("name", Path(path).stem)), series, tuple(tuned))


def _suite_series(where: str, i: int, item: object) -> SuiteSeries:
    """Entry ``i`` of the ``series`` list of suite ``where``, checked."""
    if not isinstance(item, dict):
        raise BadInputError(f"suite {where!r}: series[{i}] must be a mapping; got {item!r:.80}")
    path, units, group = item.get("path"), item.get("units_per_gpu"), item.get("group")
    if not isinstance(path, str) or not path:
        raise BadInputError(f"suite {where!r}: series[{i}].path must be a file path")
    if (
        isinstance(units, bool)
        or not isinstance(units, int | float)
        or not math.isfinite(units)
        or units <= 0
    ):
        raise BadInputError(
            f"suite {where!r}: series[{i}].units_per_gpu must be a number > 0; got {units!r:.40}"
        )
    if not isinstance(group, str) or not group:
        raise BadInputError(f"suite {where!r}: series[{i}].group must be a name")
    return SuiteSeries(path, float(units), group)


@dataclass(frozen=True)
class SuiteResult:
    """The figures of one suite series that the summary needs."""

    entry: SuiteSeries
    name: str
    scores: dict[str, Score]
    tiers_gpu_hours: dict[str, float] = field(default_factory=dict)
    margin: str = ""
    tiers_clairvoyant: float = math.nan
    """:func:`clairvoyant_tier_saving` of the series: what clairvoyant tiers save on its test period."""
    matched: dict[str, Matched] = field(default_factory=dict)
    """Each real policy at matched service against the reactive frontier."""
    lead_time_s: int = 600
    """The lead time the series was replayed at."""
    test_days: float = 7.0
    """Days in the test period."""
    tier_matched: dict[str, Matched] = field(default_factory=dict)
    """The tiered planner at matched service against the tiered reactive baseline, by how
    its commitment is sized (``rule``, ``hindsight``: scaler.replay.tiers)."""
    draws: dict[str, np.ndarray] = field(default_factory=dict)
    """The planner's saving at matched service on each bootstrap draw of the test days
    (:attr:`scaler.replay.simulating.Replay.draws`)."""
    tier_draws: dict[str, np.ndarray] = field(default_factory=dict)
    """The same for each of :attr:`tier_matched`."""


def suite_result(entry: SuiteSeries, replay: Replay) -> SuiteResult:
    """The summary's figures of ``replay``, the replay of suite series ``entry``."""
    tiered = replay.runs.get("predictive-tiers")
    gpu_h = (
        {
            p: float(n.sum()) * replay.setup.gpus_per_node * STEP_H
            for p, n in tiered.requested.items()
        }
        if tiered is not None
        else {}
    )
    pred = replay.runs.get("predictive")
    margin = pred.margin.describe() if pred is not None and pred.margin is not None else ""
    clairvoyant = (
        clairvoyant_tier_saving(replay.trace, replay.setup) if tiered is not None else math.nan
    )
    return SuiteResult(
        entry,
        replay.trace.name,
        dict(replay.scores),
        gpu_h,
        margin,
        clairvoyant,
        dict(replay.matched),
        replay.setup.lead_time_s,
        len(replay.trace.test_index) / STEPS_PER_DAY,
        dict(replay.tier_matched),
        dict(replay.draws),
        dict(replay.tier_draws),
    )
