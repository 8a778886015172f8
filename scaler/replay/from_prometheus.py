"""``tiercast simulate --prometheus-url URL --config FILE --since 14d``: the replay straight
from the cluster's Prometheus, and the shadow scorecard against what the cluster ran.

What is read, at the replay's 5-minute step over ``[since, until]``:

* **the signal** the config's workloads are driven by, with its own PromQL ``query``
  (:func:`scaler.inputs.collecting.collect`: the same hygiene as a cycle), averaged to
  5 minutes where the signal's step is finer; the user-fleet replay
  (:mod:`scaler.replay.user_fleet`) then runs on it as on an exported CSV;
* **the nodes each pool ran**, from kube-state-metrics (v2):

  - ``kube_node_labels``, one series per node with its labels as ``label_<name>``
    (``karpenter.sh/nodepool`` becomes ``label_karpenter_sh_nodepool``). kube-state-metrics
    exports only the labels it is allowed: run it with
    ``--metric-labels-allowlist=nodes=[tiercast.io/pool,karpenter.sh/nodepool]`` (or the
    labels of your pools' ``node_selector``);
  - ``kube_node_status_condition{condition="Ready",status="true"}``: 1 while the node is
    Ready, 0 otherwise;
  - ``kube_node_status_allocatable{resource="nvidia.com/gpu"}``: the GPUs the device
    plugin advertises on the node.

  A node belongs to a pool where its labels match one of the pool's selectors, as the
  cycle's inventory places it: the provider's ``node_selector`` where given, else
  ``<kubernetes.pool_label>=<pool>`` and, for Karpenter, ``karpenter.sh/nodepool=<node_pool>``
  (equality only). Per pool and step: the nodes (billed), the Ready ones, and the
  allocatable GPUs of the Ready ones (serving), all joined ``on(node)``.

A step where kube-state-metrics reported no node at all (``count(kube_node_labels)``
absent) has no capacity history: the scorecard leaves it out of both sides and says so;
it is never read as zero nodes. ``tiercast simulate`` (:mod:`scaler.cli.shadow`) scores
tiercast's replayed plans against these series with :mod:`scaler.reports.shadow`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.prometheus import PrometheusSettings, PrometheusSource, redact_url
from forecaster.sources import MetricSource
from scaler.config import Config, PoolConfig, PrometheusConfig, load_config
from scaler.inputs.collecting import collect, settings_from_config
from scaler.replay.protocol import STEP
from scaler.replay.user_fleet import UserFleet

KARPENTER_NODEPOOL = "karpenter.sh/nodepool"
GPU_RESOURCE = "nvidia.com/gpu"
NODES_SEEN = "count(kube_node_labels)"
"""Nodes kube-state-metrics reported at a step: absent where it reported none."""


@dataclass(frozen=True)
class ClusterHistory:
    """What was read from Prometheus: the signal, and per pool the nodes it ran."""

    url: str
    start: pd.Timestamp
    end: pd.Timestamp
    signal: str
    history: dict[str, pd.Series]
    """``{signal: series}`` on the 5-minute grid, as ``simulate --history`` reads a CSV."""
    nodes: dict[str, pd.DataFrame]
    """Per pool: ``nodes``, ``ready_nodes``, ``ready_gpus`` per 5-minute step (NaN where
    kube-state-metrics reported no node)."""


def pool_selectors(pool: PoolConfig, pool_label: str) -> list[str]:
    """The label selectors that place a node in ``pool``, as the cycle's inventory reads them
    (:func:`scaler.actuation.kube.inventory.pool_selectors`, not imported: the Kubernetes
    client is slow to import and the replay needs none of it)."""
    selector = getattr(pool.provider, "node_selector", None)
    if selector:
        return [str(selector)]
    out = [f"{pool_label}={pool.name}"]
    node_pool = getattr(pool.provider, "node_pool", None)
    if getattr(pool.provider, "kind", None) == "karpenter" and node_pool:
        out.append(f"{KARPENTER_NODEPOOL}={node_pool}")
    return out


def label_matchers(selector: str, pool: str) -> str:
    """A Kubernetes equality selector (``a=b,c!=d``) as kube-state-metrics label matchers
    (``label_a="b",label_c!="d"``); one line naming the pool for any other operator."""
    out = []
    for part in (p.strip() for p in selector.split(",") if p.strip()):
        m = re.fullmatch(r"([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)", part)
        if m is None:
            raise BadInputError(
                f"pool {pool}: node selector {selector!r} is not key=value pairs; the node "
                "series of kube-state-metrics are matched on equality only"
            )
        key, op, value = m.groups()
        name = "label_" + re.sub(r"[^A-Za-z0-9_]", "_", key)
        out.append(f'{name}{"!=" if op == "!=" else "="}"{value}"')
    return ",".join(out)


def node_queries(pool: PoolConfig, pool_label: str) -> dict[str, str]:
    """The three PromQL queries of one pool: nodes, Ready nodes, GPUs of the Ready nodes."""
    members = " or ".join(
        f"kube_node_labels{{{label_matchers(s, pool.name)}}}"
        for s in pool_selectors(pool, pool_label)
    )
    member = f"count by (node) ({members})"
    ready = 'max by (node) (kube_node_status_condition{condition="Ready",status="true"})'
    gpus = f'max by (node) (kube_node_status_allocatable{{resource="{GPU_RESOURCE}"}})'
    return {
        "nodes": f"count({member})",
        "ready_nodes": f"sum(({ready}) and on(node) ({member}))",
        "ready_gpus": f"sum(({gpus}) * on(node) ({ready}) and on(node) ({member}))",
    }


def _one(source: MetricSource, query: str, start: pd.Timestamp, end: pd.Timestamp) -> pd.Series:
    """An aggregated query's one series on the 5-minute grid (empty where none came back)."""
    found = source.range(query, start, end, STEP)
    if not found:
        return pd.Series(dtype=float)
    return found[0].values.astype(float)


def read_nodes(
    source: MetricSource,
    config: Config,
    pools: list[PoolConfig],
    start: pd.Timestamp,
    end: pd.Timestamp,
) -> dict[str, pd.DataFrame]:
    """Per pool, the nodes it ran on the 5-minute grid of ``[start, end)`` (the module
    docstring says which series); NaN where kube-state-metrics reported no node."""
    grid = pd.date_range(start, end - STEP, freq=STEP, name="timestamp")
    seen = _one(source, NODES_SEEN, start, end).reindex(grid)
    known = seen.notna().to_numpy()
    out: dict[str, pd.DataFrame] = {}
    label = config.kubernetes.pool_label
    for p in pools:
        columns = {}
        for name, query in node_queries(p, label).items():
            values = _one(source, query, start, end).reindex(grid).to_numpy(dtype=float)
            # kube-state-metrics up, no sample for the pool: it had no node (of this kind).
            columns[name] = np.where(known, np.nan_to_num(values, nan=0.0), np.nan)
        out[p.name] = pd.DataFrame(columns, index=grid)
    return out


def _source(config: Config, url: str) -> tuple[Config, PrometheusSource]:
    """The config with its ``prometheus`` section pointed at ``url`` (its credentials and
    TLS settings kept), and the source for it."""
    section = config.prometheus
    if section is None:
        section = PrometheusConfig(url=url)
    else:
        section = section.model_copy(update={"url": url, "history_url": None})
    settings: PrometheusSettings = settings_from_config(section)
    return config.model_copy(update={"prometheus": section}), PrometheusSource(settings)


def read_cluster_history(
    config_path: str, fleet: UserFleet, url: str, start: pd.Timestamp, end: pd.Timestamp
) -> ClusterHistory:
    """The fleet's signal and its pools' nodes from the Prometheus at ``url``."""
    user = load_config(config_path)
    signal = user.signal(fleet.signal)
    if signal.query is None:
        raise BadInputError(
            f"--config {config_path}: signal {fleet.signal!r} has no 'query' to read from "
            "--prometheus-url"
        )
    lookback = max(3600, int((end - start).total_seconds()))
    config, source = _source(user, url)
    assert config.prometheus is not None
    config = config.model_copy(
        update={"prometheus": config.prometheus.model_copy(update={"lookback_s": lookback})}
    )
    got = collect(config, fleet.signal, now=end, source=source)
    series = got.series[(got.series.index >= start) & (got.series.index < end)]
    if series.notna().sum() < 2:
        raise BadInputError(
            f"--prometheus-url: signal {fleet.signal!r} ({signal.query[:120]!r}) has no data "
            f"between {start} and {end}"
        )
    on_grid = series.resample(STEP, origin="epoch").mean().rename(fleet.signal)
    pools = [p for p in user.pools if p.name in {q.name for q in fleet.config.pools}]
    nodes = read_nodes(source, config, pools, start, end)
    shown = redact_url(url)
    return ClusterHistory(shown, start, end, fleet.signal, {fleet.signal: on_grid}, nodes)
