"""Config, history and 'now' for one cycle, from the command line's flags or the service's.

``load_inputs`` is what ``run``, ``plan``, ``report`` and ``serve`` share: the built-in demo
when nothing is given, else the config (or a one-pool config for a bare CSV), its signals'
history (files, or Prometheus through ``scaler.inputs.collecting``) bound to the signals,
and today's fleet from ``--current-nodes``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forecaster.errors import BadInputError, DataError

if TYPE_CHECKING:
    import pandas as pd

    from forecaster.series import History
    from scaler.config import Config


IN_CLUSTER_CONFIG = Path("/etc/tiercast/config.yaml")
"""Where deploy/ mounts the config; used when neither --config nor $TIERCAST_CONFIG is set."""


def _config_from_history(history: History, args: argparse.Namespace) -> Config:
    """A one-pool config for a bare CSV: each series is a workload on an on-demand pool."""
    from scaler.config import parse_config

    signals = [{"name": n, "unit": getattr(args, "signal_unit", None) or "1"} for n in history]
    workloads = [
        {
            "name": n,
            "signal": n,
            "gpu_model": args.gpu_model,
            "units_per_replica": args.units_per_gpu,
        }
        for n in history
    ]
    pools = [
        {
            "name": "default-on-demand",
            "tier": "on-demand",
            "gpu_model": args.gpu_model,
            "gpus_per_node": args.gpus_per_node,
            "price_per_gpu_hour": args.price_per_gpu_hour,
            "lead_time_s": 600,
            "max_nodes": 10_000,
        }
    ]
    return parse_config(
        {"signals": signals, "workloads": workloads, "pools": pools}, "command-line defaults"
    )


def _default_now(history: History) -> pd.Timestamp:
    """Just after the newest sample, so a plan on an export starts where the data ends."""
    import pandas as pd

    observed = [y.dropna().index[-1] for y in history.values() if y.notna().any()]
    if not observed:
        raise DataError("history: no series has a finite, non-negative value; nothing to plan from")
    last = max(observed)
    steps = [y.index[1] - y.index[0] for y in history.values() if len(y) > 1]
    return pd.Timestamp(last) + (min(steps) if steps else pd.Timedelta(minutes=5))


def resolve_config_path(args: argparse.Namespace) -> str | None:
    """``--config``, else ``$TIERCAST_CONFIG``, else the in-cluster path when it exists.

    The in-cluster default is skipped for ``--history`` runs, which build their config
    from the flags; with none of the three, commands use the built-in demo.
    """
    given = getattr(args, "config", None) or os.environ.get("TIERCAST_CONFIG")
    if given:
        return str(given)
    if getattr(args, "history", None) is None and IN_CLUSTER_CONFIG.is_file():
        return str(IN_CLUSTER_CONFIG)
    return None


def load_inputs(args: argparse.Namespace) -> tuple[Config, History, pd.Timestamp, str]:
    """Config, history and 'now' from the flags; the demo when nothing is given."""
    import pandas as pd

    from forecaster.series import read_history_csv
    from scaler.config import load_config
    from scaler.inputs.demo import demo_inputs

    config_path = resolve_config_path(args)
    history_path = getattr(args, "history", None)
    if config_path is None and history_path is None:
        config, history, now = demo_inputs()
        label = "built-in demo fleet"
    else:
        history = {}
        if history_path is not None:
            history = read_history_csv(history_path)
        config = load_config(config_path) if config_path else _config_from_history(history, args)
        collected_at: pd.Timestamp | None = None
        if not history:
            if any(s.query is not None for s in config.signals):
                # Prometheus windows end at the collection time, and 'now' is that time,
                # so a signal whose newest sample is old reads as stale (no scale-down).
                collected_at = _explicit_now(args) or pd.Timestamp.now(tz="UTC").tz_localize(None)
            history = _history_from_config(
                config, Path(config_path).parent if config_path else Path("."), collected_at
            )
        history = bind_history(config, history, source=str(history_path or config_path))
        now = collected_at if collected_at is not None else _default_now(history)
        label = str(history_path or config_path)
    explicit = _explicit_now(args)
    if explicit is not None:
        now = explicit
    return apply_fleet_flags(config, args), history, now, label


def _explicit_now(args: argparse.Namespace) -> pd.Timestamp | None:
    """``--now`` as a naive UTC timestamp, or None when not given."""
    import pandas as pd

    if not getattr(args, "now", None):
        return None
    try:
        given = pd.Timestamp(args.now)
    except ValueError as exc:
        raise BadInputError(f"--now: {args.now!r} is not an ISO-8601 timestamp") from exc
    return given.tz_localize(None) if given.tzinfo is None else given.tz_convert(None)


def _history_from_config(config: Config, base: Path, now: pd.Timestamp | None = None) -> History:
    """Read each signal's ``file``; signals with a PromQL query need a metric source."""
    from forecaster.series import read_history_csv

    history: History = {}
    for s in config.signals:
        if s.file is not None:
            path = Path(s.file) if Path(s.file).is_absolute() else base / s.file
            data = read_history_csv(path)
            key = s.series or (s.name if s.name in data else next(iter(data)))
            if key not in data:
                raise BadInputError(f"signal {s.name!r}: file {str(path)!r} has no series {key!r}")
            history[s.name] = data[key].rename(s.name)
        elif s.query is not None:
            history.update(_collect_prometheus(config, s.name, now))
        else:
            raise BadInputError(
                f"signal {s.name!r} has neither 'file' nor 'query'; give one, or pass --history"
            )
    return history


def _collect_prometheus(config: Config, signal: str, now: pd.Timestamp | None = None) -> History:
    # Imported here: the Prometheus client is only needed by configs that query it.
    from scaler.inputs.collecting import collect_signal

    return dict(collect_signal(config, signal, now=now))


def bind_history(config: Config, history: History, source: str = "history") -> History:
    """Map history series to the config's signals by name (one series binds to one signal)."""
    names = [s.name for s in config.signals]
    if all(n in history for n in names):
        return {n: history[n] for n in names}
    if len(history) == 1 and len(names) == 1:
        return {names[0]: next(iter(history.values())).rename(names[0])}
    missing = [n for n in names if n not in history]
    raise BadInputError(
        f"{source}: no series for signal(s) {', '.join(missing)}; the file has "
        f"{', '.join(sorted(history)) or 'none'}"
    )


def parse_current_nodes(specs: Sequence[str], config: Config) -> dict[str, int]:
    """``--current-nodes POOL=N`` (repeatable) -> pool -> nodes, checked against the config."""
    out: dict[str, int] = {}
    names = [p.name for p in config.pools]
    for spec in specs:
        pool, eq, value = str(spec).partition("=")
        pool = pool.strip()
        if not eq or pool not in names:
            raise BadInputError(
                f"--current-nodes: {spec!r} does not name a pool; expected POOL=N with POOL one of "
                f"{', '.join(names)}"
            )
        try:
            n = int(value.strip())
        except ValueError:
            n = -1
        if n < 0:
            raise BadInputError(
                f"--current-nodes: {spec!r} has {value.strip()!r} nodes; expected a whole number "
                "0 or more"
            )
        out[pool] = n
    return out


def apply_fleet_flags(config: Config, args: argparse.Namespace) -> Config:
    """Today's fleet from ``--current-nodes``: a review from a history file starts from what runs."""
    nodes = parse_current_nodes(getattr(args, "current_nodes", None) or [], config)
    if not nodes:
        return config
    pools = tuple(
        p.model_copy(update={"current_nodes": nodes[p.name]}) if p.name in nodes else p
        for p in config.pools
    )
    return config.model_copy(update={"pools": pools})
