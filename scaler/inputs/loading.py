"""Config, history and 'now' for one cycle, from the command line's flags or the service's.

``load_inputs`` is what ``run``, ``plan``, ``report`` and ``serve`` share: the built-in demo
when nothing is given, else the config (or a one-pool config for a bare CSV), its signals'
history (files, or Prometheus through ``scaler.inputs.collecting``) bound to the signals,
and today's fleet from ``--current-nodes``.

It is also where the paths tiercast writes are resolved (:func:`with_state_paths`): a path
the config or a flag gives is used as given; every other one lies in the state directory
(:func:`state_dir`), never in the working folder, so a dry-run in any folder leaves it as
it was.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from forecaster.errors import BadInputError, DataError

if TYPE_CHECKING:
    import pandas as pd

    from forecaster.history_store import HistoryStore
    from forecaster.series import History
    from scaler.config import (
        Config,
        ForecastConfig,
        ModelStoreConfig,
        PolicyConfig,
        PoolConfig,
        PrometheusConfig,
        ServiceConfig,
        SignalConfig,
    )


IN_CLUSTER_CONFIG = Path("/etc/tiercast/config.yaml")
"""Where deploy/ mounts the config; used when neither --config nor $TIERCAST_CONFIG is set."""

IN_CLUSTER_STATE = Path("/var/lib/tiercast")
"""Where deploy/ mounts the state volume; the state directory in a pod that has it."""

STATE_DIR_ENV = "TIERCAST_STATE_DIR"
"""Environment variable naming the state directory (below the flag and the config)."""

DEFAULT_PLAN_FILE = "tiercast-plan.json"
"""The plan JSON ``run`` and ``plan`` write in the state directory when no path is given."""


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """The state directory when neither the flag nor the config names one.

    ``$TIERCAST_STATE_DIR``; else, in a pod (``$KUBERNETES_SERVICE_HOST``) that mounts
    :data:`IN_CLUSTER_STATE`, that volume; else ``$XDG_STATE_HOME/tiercast`` (an absolute
    path, as the XDG base directory spec requires; a relative one is ignored); else
    ``~/.local/state/tiercast``.
    """
    env = os.environ if env is None else env
    if env.get(STATE_DIR_ENV):
        return Path(env[STATE_DIR_ENV]).expanduser()
    if env.get("KUBERNETES_SERVICE_HOST") and IN_CLUSTER_STATE.is_dir():
        return IN_CLUSTER_STATE
    xdg = env.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "tiercast"
    home = env.get("HOME") or None
    try:
        base = Path(home) if home else Path.home()
    except RuntimeError:  # no $HOME and no passwd entry (a container's arbitrary user)
        raise BadInputError(
            "no state directory: $HOME is unset; give --state-dir, service.state_dir or "
            f"${STATE_DIR_ENV}"
        ) from None
    return base / ".local" / "state" / "tiercast"


def state_dir(service: ServiceConfig, args: argparse.Namespace | None = None) -> Path:
    """``--state-dir``, else ``service.state_dir``, else :func:`default_state_dir`."""
    given = getattr(args, "state_dir", None) or service.state_dir
    return Path(given).expanduser() if given else default_state_dir()


def service_with_state_paths(
    service: ServiceConfig, args: argparse.Namespace | None = None
) -> ServiceConfig:
    """``service`` with the run records and the scheduled reports in the state directory
    unless it sets their paths."""
    unset = [f for f in ("records_path", "report_out") if f not in service.model_fields_set]
    if not unset:
        return service  # both given (or resolved already: model_copy marks them set)
    base = state_dir(service, args)
    return service.model_copy(update={f: str(base / getattr(service, f)) for f in unset})


def with_state_paths(config: Config, args: argparse.Namespace | None = None) -> Config:
    """``config`` with every path it does not set placed in the state directory.

    The run records (``service.records_path``), the model store (``model_store.path``)
    and the scheduled reports (``service.report_out``) keep their default names, under
    :func:`state_dir`; a path the config sets is kept as written (relative to the working
    folder). Nothing is created here: each writer creates its folder when it first writes.
    """
    from forecaster.files import warn_world_writable

    store = config.model_store
    warn_world_writable(state_dir(config.service, args), "state folder")
    if "path" not in store.model_fields_set:
        base = state_dir(config.service, args)
        store = store.model_copy(update={"path": str(base / store.path)})
    warn_world_writable(store.path, "models folder (model_store.path)")
    service = service_with_state_paths(config.service, args)
    if service is config.service and store is config.model_store:
        return config
    return config.model_copy(update={"service": service, "model_store": store})


def plan_path(config: Config, args: argparse.Namespace | None = None) -> str:
    """Where ``run`` and ``plan`` write the plan JSON: ``--plan-out``, else
    ``service.plan_out``, else ``tiercast-plan.json`` in the state directory."""
    given = getattr(args, "plan_out", None) or config.service.plan_out
    return str(given) if given else str(state_dir(config.service, args) / DEFAULT_PLAN_FILE)


def plan_flag(config: Config, args: argparse.Namespace | None = None) -> tuple[str, bool]:
    """What named :func:`plan_path`'s path, for its error line, and whether tiercast chose
    it itself (the default file in the state directory: a link planted there is refused)."""
    if getattr(args, "plan_out", None):
        return "--plan-out", False
    if config.service.plan_out:
        return "service.plan_out", False
    return "the default plan file (--plan-out)", True


def shown_path(path: str | Path) -> str:
    """``path`` as printed: as given when relative, ``~/...`` under the home folder,
    relative to the working folder when inside it, else absolute (so the messages read
    the same on every machine)."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    home = os.environ.get("HOME") or ""
    for base, prefix in ((Path(home) if home.strip("/") else None, "~/"), (Path.cwd(), "")):
        if base is None:
            continue
        try:
            rest = p.relative_to(base)
        except ValueError:
            continue
        if str(rest) != ".":
            return prefix + str(rest)
    return str(p)


def check_forecast_method(forecast: ForecastConfig, source: str) -> None:
    """Refuse an unknown ``forecast.method`` at load (one line naming the field).

    Caught here rather than per signal during the cycle, where an unknown estimator would
    hold every pool as "no data" and exit 1 instead of naming the setting.
    """
    from forecaster.estimators import make

    try:
        make(forecast.method)
    except BadInputError as exc:
        raise BadInputError(f"{source}: forecast.method: {exc}") from None


def load_cycle_config(path: str, args: argparse.Namespace | None = None) -> Config:
    """The config file a cycle runs with: validated (the forecast method too), its paths
    resolved (:func:`with_state_paths`)."""
    from scaler.config import load_config

    config = load_config(path)
    check_forecast_method(config.forecast, str(path))
    url = getattr(args, "prometheus_url", None)
    if url:
        config = with_prometheus_url(config, url, str(path), getattr(args, "history", None))
    return with_state_paths(config, args)


def with_prometheus_url(
    config: Config, url: str, source: str, history: str | None = None
) -> Config:
    """``config`` reading its PromQL signals from ``url`` (``--prometheus-url``): its
    ``prometheus.url`` replaced, or a ``prometheus`` section added with the defaults.

    Refused in one line where the URL could not be used: a ``--history`` file replaces the
    queries, and a config with no signal that has a ``query`` never reads Prometheus.
    """
    from pydantic import ValidationError

    from scaler.config import PrometheusConfig

    if history is not None:
        raise BadInputError(
            "--prometheus-url: --history replaces the config's queries; give one of the two"
        )
    if not any(s.query is not None for s in config.signals):
        raise BadInputError(
            f"--prometheus-url: no signal of {source} has a 'query', so Prometheus is never "
            "read; give each signal a PromQL query (see data/example-config.yaml)"
        )
    given = config.prometheus.model_dump(exclude_unset=True) if config.prometheus else {}
    try:
        prometheus = PrometheusConfig.model_validate({**given, "url": url})
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BadInputError(f"--prometheus-url: {url[:200]!r}: {first['msg']}") from None
    return config.model_copy(update={"prometheus": prometheus})


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
    from scaler.inputs.demo import demo_inputs

    config_path = resolve_config_path(args)
    history_path = getattr(args, "history", None)
    if config_path is None and getattr(args, "prometheus_url", None):
        raise BadInputError(
            "--prometheus-url needs --config: the built-in demo's signals are synthetic and "
            "have no PromQL queries; pass --config FILE whose signals have a 'query' "
            "(see data/example-config.yaml)"
        )
    if config_path is None and history_path is None:
        config, history, now = demo_inputs()
        label = "built-in demo fleet"
    else:
        history = {}
        if history_path is not None:
            history = read_history_csv(history_path)
        config = (
            load_cycle_config(config_path, args)
            if config_path
            else _config_from_history(history, args)
        )
        collected_at: pd.Timestamp | None = None
        if not history:
            if any(s.query is not None for s in config.signals):
                # Prometheus windows end at the collection time, and 'now' is that time,
                # so a signal whose newest sample is old reads as stale (no scale-down).
                collected_at = _explicit_now(args) or pd.Timestamp.now(tz="UTC").tz_localize(None)
            history = _history_from_config(
                config, Path(config_path).parent if config_path else Path("."), collected_at
            )
        history = bind_history(config.signals, history, source=str(history_path or config_path))
        if collected_at is None:
            check_file_history(history, config.pools, config.policy)
        now = collected_at if collected_at is not None else _default_now(history)
        label = str(history_path or config_path)
    explicit = _explicit_now(args)
    if explicit is not None:
        now = explicit
    return with_state_paths(apply_fleet_flags(config, args), args), history, now, label


def check_file_history(history: History, pools: Sequence[PoolConfig], policy: PolicyConfig) -> None:
    """Refuse, in one line, a history file too large or too fine to forecast.

    The cycle holds the pools of a signal it cannot forecast, which suits a Prometheus
    series that may be back to normal next cycle; a file given on the command line
    stays what it is, so its problem is named once here (exit 2) rather than held as
    "no data" every run.
    """
    import pandas as pd

    from forecaster.series import check_forecast_size

    lead = max(p.lead_time_s for p in pools)
    horizon = pd.Timedelta(seconds=policy.horizon_s + lead + policy.cycle_s)
    for y in history.values():
        check_forecast_size(y, horizon)


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
    """The signal from Prometheus, with what tiercast's own store keeps from before the
    window Prometheus answered in front of it; what was read is added to the store."""
    # Imported here: the Prometheus client is only needed by configs that query it.
    from scaler.inputs.collecting import collect_signal

    history = dict(collect_signal(config, signal, now=now))
    answered = signal in history and not history[signal].dropna().empty
    store = history_store(config.prometheus, config.model_store, config.signal(signal))
    if store is not None and signal in history:
        fresh = history[signal]
        store.append({signal: fresh}, now=now)
        history[signal] = store.extend({signal: fresh})[signal]
    if signal in history and not answered:
        # The cycle says what it did with this signal's pools: planned from the store's
        # data, or held (scaler.service.cycle.said_as_planned), never one for the other.
        history[signal] = history[signal].copy()
        history[signal].attrs[NO_PROMETHEUS_DATA] = True
    return history


NO_PROMETHEUS_DATA = "tiercast.no_prometheus_data"
"""A series' ``attrs`` key: Prometheus returned no data for the signal's query this cycle
(what the series holds, if anything, came from tiercast's history store)."""


def history_store(
    prometheus: PrometheusConfig | None, store: ModelStoreConfig, signal: SignalConfig
) -> HistoryStore | None:
    """The store of ``signal``'s history (``history/`` in the model store's folder, as the
    growth backtests are), or None when ``prometheus.keep_history_days`` is 0."""
    import pandas as pd

    from forecaster.history_store import HistoryStore

    keep = prometheus.keep_history_days if prometheus is not None else 0
    if keep <= 0:
        return None
    root = Path(store.path) / "history"
    return HistoryStore(root, pd.Timedelta(seconds=signal.step_s), keep)


def bind_history(
    signals: Sequence[SignalConfig], history: History, source: str = "history"
) -> History:
    """Map history series to the config's signals by name (one series binds to one signal)."""
    names = [s.name for s in signals]
    if all(n in history for n in names):
        return {n: history[n] for n in names}
    if len(history) == 1 and len(names) == 1:
        return {names[0]: next(iter(history.values())).rename(names[0])}
    missing = [n for n in names if n not in history]
    raise BadInputError(
        f"{source}: no series for signal(s) {', '.join(missing)}; the file has "
        f"{', '.join(sorted(history)) or 'none'}"
    )


def parse_current_nodes(specs: Sequence[str], pools: Sequence[PoolConfig]) -> dict[str, int]:
    """``--current-nodes POOL=N`` (repeatable) -> pool -> nodes, checked against the
    config's ``pools``."""
    out: dict[str, int] = {}
    names = [p.name for p in pools]
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
    nodes = parse_current_nodes(getattr(args, "current_nodes", None) or [], config.pools)
    if not nodes:
        return config
    pools = tuple(
        p.model_copy(update={"current_nodes": nodes[p.name]}) if p.name in nodes else p
        for p in config.pools
    )
    return config.model_copy(update={"pools": pools})
