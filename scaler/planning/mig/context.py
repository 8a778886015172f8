"""What one GPU model's MIG plan shares across its steps (timing, actions, the plan)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class MigContext:
    """What one GPU model's MIG plan shares across its steps."""

    model: str
    now: pd.Timestamp
    grid: pd.DatetimeIndex
    qname: str
    horizon_h: float
    step_s: int
    change_s: int
    """The longest drain and re-partition time of the model's pools."""
    lead_s: int
    """The longest lead time of the model's pools."""
    inventory: Mapping[str, int]
    known_configs: Mapping[str, Any] | None
    recent: tuple[str, ...] = ()
    """Profiles planned on their recent peak instead of the forecast
    (:mod:`scaler.planning.mig.persistence`)."""
