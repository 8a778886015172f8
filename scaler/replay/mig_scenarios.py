"""The MIG replay's scenarios: which public traces drive which MIG workloads, and their demand.

A scenario is one MIG-managed pool of one GPU model fed by several signals of the public
traces folder, each declared as a workload with a MIG profile (or a memory footprint the
profile is chosen from, as ``mig_profile: auto`` does). The signals of a scenario share
one clock (the ServeGen and Azure 2019 traces are both anchored at 2000-01-01, the
Helios tenants are one cluster in May 2020), so the profile mix moves as the real
workloads did. Why each signal got its profile is in ``docs/replay.md`` ("MIG replay").

:func:`load_demand` puts the signals on the replay's 5-minute grid over their common span
and splits off the test period with the replay's own rule (:func:`prepare_trace`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, DataError
from forecaster.series import read_history_csv
from scaler.catalog.mig import resolve_profile
from scaler.replay.protocol import ReplaySetup, Trace, prepare_trace


@dataclass(frozen=True)
class MigWorkload:
    """One signal of the traces folder as a MIG workload: one instance per replica."""

    name: str
    path: str
    """The CSV under the traces folder."""
    units_per_replica: float
    """Signal units one replica serves: replicas = ceil(value / this)."""
    mig_profile: str
    """The profile one replica runs on, or ``auto`` (the smallest holding ``memory_gb``)."""
    memory_gb: float | None = None


@dataclass(frozen=True)
class MigScenario:
    """One MIG-managed pool and the workloads that share it."""

    name: str
    about: str
    workloads: tuple[MigWorkload, ...]
    gpu_model: str = "H100-80GB"
    gpus_per_node: int = 8


_HELIOS = "helios_earth/helios_earth_{}_gpus_running_5min.csv"

SCENARIOS: dict[str, MigScenario] = {
    s.name: s
    for s in (
        MigScenario(
            "llm-api",
            "ServeGen M-small requests as a small LLM (18 GB: 1g.20gb), the Azure 2019 VM "
            "fleet as a larger model (3g.40gb)",
            (
                MigWorkload(
                    "m-small",
                    "servegen/m_small_rps_10min.csv",
                    40.0,
                    "auto",
                    memory_gb=18.0,
                ),
                MigWorkload(
                    "vm-fleet", "azure_vm2019/vm_cpu_cores_used_5min.csv", 300_000, "3g.40gb"
                ),
            ),
        ),
        MigScenario(
            "helios-small",
            "three Helios tenants' GPUs as right-sized jobs on 1g, 2g and 3g slices",
            (
                MigWorkload("vc6YE", _HELIOS.format("vc6YE"), 2.0, "1g.10gb"),
                MigWorkload("vcvlY", _HELIOS.format("vcvlY"), 2.0, "2g.20gb"),
                MigWorkload("vc8Sj", _HELIOS.format("vc8Sj"), 2.0, "3g.40gb"),
            ),
        ),
        MigScenario(
            "helios-large",
            "three other Helios tenants: two larger models on 4g and 3g slices beside 1g jobs",
            (
                MigWorkload("vchbv", _HELIOS.format("vchbv"), 2.0, "4g.40gb"),
                MigWorkload("vc3sl", _HELIOS.format("vc3sl"), 2.0, "3g.40gb"),
                MigWorkload("vcMod", _HELIOS.format("vcMod"), 1.0, "1g.10gb"),
            ),
        ),
    )
}
"""The scenarios built from the dev suite's traces (``docs/replay.md``, "MIG replay")."""


def scenario_names(text: str) -> list[MigScenario]:
    """``--mig``: scenario names separated by commas, or ``all``."""
    names = [n.strip() for n in str(text).split(",") if n.strip()]
    if names == ["all"]:
        return list(SCENARIOS.values())
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown or not names:
        raise BadInputError(
            f"--mig: unknown scenario {', '.join(unknown) or repr(text)}; expected "
            f"{', '.join(SCENARIOS)} or all"
        )
    return [SCENARIOS[n] for n in dict.fromkeys(names)]


@dataclass(frozen=True)
class MigDemand:
    """A scenario's signals on the 5-minute replay grid, one trace each, same test period."""

    scenario: MigScenario
    traces: dict[str, Trace]
    """By workload name; every trace has the same grid and ``test_start``."""
    profiles: dict[str, str]
    """The MIG profile of each workload."""

    @property
    def index(self) -> pd.DatetimeIndex:
        return next(iter(self.traces.values())).index

    @property
    def test_start(self) -> int:
        return next(iter(self.traces.values())).test_start

    def instances(self) -> dict[str, np.ndarray]:
        """Instances needed per profile at every step (gaps hold the last value)."""
        out: dict[str, np.ndarray] = {}
        for w in self.scenario.workloads:
            values = self.traces[w.name].signal.ffill().fillna(0.0).to_numpy()
            n = replicas(values, w.units_per_replica)
            p = self.profiles[w.name]
            out[p] = out.get(p, np.zeros(len(n))) + n
        return out

    def visible_instances(self, t: int, steps: int = 1) -> dict[str, int]:
        """Instances per profile the decision at step ``t`` sees: each workload's peak over
        its newest ``steps`` visible observations (gaps hold the last value)."""
        out: dict[str, int] = {}
        for w in self.scenario.workloads:
            trace = self.traces[w.name]
            seen = trace.signal.iloc[: trace.visible_end(t)].ffill().dropna()
            values = seen.to_numpy(dtype=float)[-max(1, steps) :]
            peak = int(replicas(values, w.units_per_replica).max()) if len(values) else 0
            p = self.profiles[w.name]
            out[p] = out.get(p, 0) + peak
        return out


def replicas(values: np.ndarray, units_per_replica: float) -> np.ndarray:
    """Replicas a signal needs, as the MIG planner counts them (``replicas_for``, no minimum)."""
    x = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
    return np.ceil(np.maximum(x, 0.0) / units_per_replica - 1e-9)


def load_demand(folder: Path, scenario: MigScenario, setup: ReplaySetup) -> MigDemand:
    """The scenario's signals from ``folder`` over their common span, on the replay grid."""
    series = {w.name: _read(folder, w) for w in scenario.workloads}
    start = max(s.index[0] for s in series.values())
    end = min(s.index[-1] for s in series.values())
    if end <= start:
        raise BadInputError(f"scenario {scenario.name!r}: its signals share no time span")
    traces = _common_grid(
        scenario.name,
        {
            name: prepare_trace(s[(s.index >= start) & (s.index <= end)].rename(name), 1.0, setup)
            for name, s in series.items()
        },
    )
    profiles = {
        w.name: resolve_profile(scenario.gpu_model, w.mig_profile, w.memory_gb)
        for w in scenario.workloads
    }
    return MigDemand(scenario, traces, profiles)


def _read(folder: Path, w: MigWorkload) -> pd.Series:
    path = folder / w.path
    if not path.is_file():
        raise BadInputError(f"--traces: {str(path)!r} is missing (workload {w.name!r})")
    try:
        history = read_history_csv(str(path))
    except DataError as exc:
        raise BadInputError(f"--traces: {path}: {exc}") from exc
    return next(iter(history.values()))


def _common_grid(name: str, traces: Mapping[str, Trace]) -> dict[str, Trace]:
    """The traces cut to their shortest grid (a coarser source's last value is held a step
    longer), with that grid's test period; an error where their grids differ."""
    shortest = min(traces.values(), key=lambda t: len(t.index))
    n = len(shortest.index)
    grid = shortest.index
    out: dict[str, Trace] = {}
    for key, t in traces.items():
        if not t.index[:n].equals(grid):
            raise BadInputError(f"scenario {name!r}: its signals do not share one 5-minute grid")
        out[key] = replace(
            t, signal=t.signal.iloc[:n], demand=t.demand[:n], test_start=shortest.test_start
        )
    return out
