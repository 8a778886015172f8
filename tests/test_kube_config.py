"""Provider and ``kubernetes`` config: documented defaults pinned, bad shapes get one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.actuation.kube.inventory import pool_selectors
from scaler.actuation.kube.transport import equality_terms, selector_matches
from scaler.config import (
    ConfigError,
    KarpenterProviderConfig,
    KubernetesConfig,
    PlaceholderProviderConfig,
    parse_config,
)


def config_with(provider: dict[str, Any] | None = None, **kube: Any) -> dict[str, Any]:
    pool: dict[str, Any] = {
        "name": "gpu",
        "tier": "on-demand",
        "gpu_model": "H100",
        "gpus_per_node": 8,
        "price_per_gpu_hour": 4.0,
    }
    if provider is not None:
        pool["provider"] = provider
    return {
        "signals": [{"name": "s"}],
        "workloads": [{"name": "w", "signal": "s", "gpu_model": "H100", "units_per_replica": 1}],
        "pools": [pool],
        **({"kubernetes": kube} if kube else {}),
    }


def error(data: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cfg.yaml")
    return message


def test_documented_defaults_are_pinned() -> None:
    k = KubernetesConfig()
    assert (k.pool_label, k.tier_label, k.max_changes_per_cycle) == (
        "tiercast.io/pool",
        "karpenter.sh/capacity-type",
        10,
    )
    assert (k.request_timeout_s, k.retries, k.backoff_base_s, k.backoff_max_s) == (10, 4, 0.5, 8)
    assert (k.conflict_retries, k.drain_timeout_s, k.mig_timeout_s, k.poll_interval_s) == (
        5,
        600,
        900,
        5,
    )
    assert (k.gpu_operator_namespace, k.cluster_policy, k.mig_config_sync_s, k.events) == (
        "gpu-operator",
        "cluster-policy",
        120,
        True,
    )
    p = PlaceholderProviderConfig(kind="placeholder")
    assert (p.namespace, p.priority_class, p.priority, p.gpus_per_pod, p.image) == (
        "tiercast-system",
        "tiercast-placeholder",
        -10,
        None,
        "registry.k8s.io/pause:3.10",
    )
    assert KarpenterProviderConfig(kind="karpenter", node_pool="x").mode == "limits"
    assert parse_config(config_with()).pools[0].provider.kind == "recording"


def test_provider_errors_name_the_field_and_value() -> None:
    msg = error(config_with({"kind": "autoscaler"}))
    assert "pools[0].provider" in msg and "'autoscaler'" in msg and "cluster-api" in msg
    msg = error(config_with({"kind": "cluster-api"}))
    assert "machine_deployment" in msg and "required" in msg
    msg = error(config_with({"kind": "placeholder", "priority": 100}))
    assert "priority" in msg and "100" in msg
    msg = error(config_with({"kind": "karpenter", "node_pool": "Bad_Name"}))
    assert "node_pool" in msg and "Bad_Name" in msg
    msg = error(config_with({"kind": "karpenter", "node_pool": "x", "replicas": 3}))
    assert "replicas" in msg and "unknown field" in msg
    msg = error(config_with(max_changes_per_cycle=-1))
    assert "kubernetes.max_changes_per_cycle" in msg


def test_pool_selectors_and_label_selector_semantics() -> None:
    config = parse_config(config_with({"kind": "karpenter", "node_pool": "gpu-np"}), "cfg.yaml")
    assert pool_selectors(config.pools[0], "tiercast.io/pool") == [
        "tiercast.io/pool=gpu",
        "karpenter.sh/nodepool=gpu-np",
    ]
    labels = {"a": "1", "b": "2"}
    assert selector_matches("a=1,b in (2,3),!c", labels)
    assert not selector_matches("a!=1", labels)
    assert selector_matches("b notin (3)", labels) and not selector_matches("c", labels)
    assert equality_terms("a=1, b==2") == {"a": "1", "b": "2"}
    with pytest.raises(ValueError, match="key=value"):
        equality_terms("a in (1)")


def test_bad_kubeconfig_or_context_is_one_line_of_bad_input(tmp_path: Path) -> None:
    from forecaster.errors import BadInputError
    from scaler.actuation.kube.transport import connect
    from tests.fake_kube import kubeconfig_for

    with pytest.raises(BadInputError) as info:
        connect(str(tmp_path / "missing"))
    assert "missing" in str(info.value) and "\n" not in str(info.value)
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig_for("http://127.0.0.1:9")))
    with pytest.raises(BadInputError) as info:
        connect(str(path), context="nope")
    assert "--context nope" in str(info.value)
    transport = connect(str(path), context="fake")
    assert transport.api_client.configuration.host == "http://127.0.0.1:9"
