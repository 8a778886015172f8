"""The built-in demo: a small GPU inference fleet with a deterministic history.

Three services (chat on H100, code completion on H100, image generation on
L40S), pools on every tier acting through each Kubernetes provider kind (Cluster API,
Karpenter, placeholder headroom; the dry-run lists their exact calls), and 21 days of
5-minute history from
:mod:`forecaster.synthetic`. ``tiercast run --dry-run`` with no config runs this.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from forecaster.series import History
from forecaster.synthetic import DEMO_END, demo_history, seasonal_series
from scaler.config import Config, parse_config

DEMO_CONFIG: dict[str, Any] = {
    "signals": [
        {"name": "chat_rps", "unit": "requests/s", "step_s": 300},
        {"name": "code_rps", "unit": "requests/s", "step_s": 300},
        {"name": "image_rps", "unit": "requests/s", "step_s": 300},
        {"name": "embed_rps", "unit": "requests/s", "step_s": 300},
    ],
    "workloads": [
        {
            "name": "chat",
            "signal": "chat_rps",
            "gpu_model": "H100-80GB",
            "units_per_replica": 12.0,
            "gpus_per_replica": 2,
            "min_replicas": 2,
        },
        {
            "name": "code",
            "signal": "code_rps",
            "gpu_model": "H100-80GB",
            "units_per_replica": 10.0,
            "gpus_per_replica": 1,
            "min_replicas": 1,
        },
        {
            "name": "image",
            "signal": "image_rps",
            "gpu_model": "L40S-48GB",
            "units_per_replica": 1.5,
            "gpus_per_replica": 1,
            "min_replicas": 1,
        },
        # MIG workloads on the A100 pool: embeddings on 1g slices, a reranker sized by memory.
        {
            "name": "embed",
            "signal": "embed_rps",
            "gpu_model": "A100-80GB",
            "units_per_replica": 25.0,
            "min_replicas": 2,
            "memory_gb": 8,
            "mig_profile": "1g.10gb",
        },
        {
            "name": "rerank",
            "signal": "embed_rps",
            "gpu_model": "A100-80GB",
            "units_per_replica": 120.0,
            "min_replicas": 1,
            "memory_gb": 30,
            "mig_profile": "auto",
        },
    ],
    "pools": [
        {
            "name": "h100-reserved",
            "tier": "reserved",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 2.40,
            "lead_time_s": 600,
            "min_nodes": 6,
            "max_nodes": 6,
            "current_nodes": 6,
            "provider": {"kind": "cluster-api", "machine_deployment": "h100-reserved"},
        },
        {
            "name": "h100-on-demand",
            "tier": "on-demand",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 4.00,
            "lead_time_s": 600,
            "min_nodes": 0,
            "max_nodes": 20,
            "current_nodes": 4,
            "provider": {"kind": "karpenter", "node_pool": "h100-on-demand", "mode": "replicas"},
        },
        {
            "name": "h100-spot",
            "tier": "spot",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 1.40,
            "lead_time_s": 900,
            "min_nodes": 0,
            "max_nodes": 6,
            "current_nodes": 2,
            "spot_interruption_rate_per_hour": 0.05,
            "provider": {"kind": "karpenter", "node_pool": "h100-spot"},
        },
        {
            "name": "l40s-on-demand",
            "tier": "on-demand",
            "gpu_model": "L40S-48GB",
            "gpus_per_node": 4,
            "price_per_gpu_hour": 1.10,
            "lead_time_s": 480,
            "min_nodes": 1,
            "max_nodes": 12,
            "current_nodes": 4,
            "provider": {"kind": "placeholder"},
        },
        {
            # MIG-managed: node 0 is carved into 1g.10gb slices, node 1 is whole today.
            "name": "a100-mig",
            "tier": "reserved",
            "gpu_model": "A100-80GB",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 1.80,
            "lead_time_s": 900,
            "min_nodes": 2,
            "max_nodes": 2,
            "current_nodes": 2,
            "mig_layouts": ["1g.10gb:7", "whole"],
            "mig_whole_gpus": 2,
            "mig_change_s": 900,
        },
    ],
    "policy": {
        "quantile": 0.9,
        "headroom_fraction": 0.1,
        "scale_down_stabilization_s": 1800,
        "max_step_nodes": 4,
        "horizon_s": 86400,
        "cycle_s": 300,
    },
}


def demo_config() -> Config:
    return parse_config(DEMO_CONFIG, source="built-in demo config")


def demo_now() -> pd.Timestamp:
    """The demo's 'now': just after the last sample of its history."""
    return DEMO_END


def demo_inputs() -> tuple[Config, History, pd.Timestamp]:
    history = demo_history()
    # The MIG workloads' signal: an embedding service with an afternoon peak.
    history["embed_rps"] = seasonal_series(
        "embed_rps", end=DEMO_END, base=300.0, daily_amplitude=0.6, peak_hour=16.0, seed=41
    )
    return demo_config(), history, demo_now()
