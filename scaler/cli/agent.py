"""``tiercast agent``: the node agent (``scaler.agent.node.run_agent``)."""

from __future__ import annotations

import argparse
from typing import Any


def cmd_agent(args: argparse.Namespace) -> int:
    """``tiercast agent``: serve the node's GPU and MIG state; apply a layout by hand."""
    from scaler.agent.node import run_agent

    return run_agent(args)


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "agent",
        help="node agent: GPU/MIG state and /metrics; applies a MIG layout by hand",
        description=(
            "Serve the node's GPU and MIG state (Prometheus /metrics, JSON /state); on a "
            "drained node, apply a MIG layout from a mig-parted file (--desired-file). In a "
            "cluster the GPU Operator's MIG manager applies layouts. Needs the NVIDIA driver."
        ),
    )
    p.add_argument("--listen", default="127.0.0.1:9402", help="HOST:PORT (default: %(default)s)")
    p.add_argument(
        "--token-file",
        help="file with a bearer token that /state requires "
        "(default: $TIERCAST_AGENT_TOKEN_FILE; unset: /state is open)",
    )
    p.add_argument("--node", help="this node's name (default: $NODE_NAME); enables cordon checks")
    p.add_argument("--desired-file", help="mig-parted config (or one entry) to apply")
    p.add_argument("--config-name", help="which entry of a mig-parted file to apply")
    p.add_argument(
        "--assume-cordoned",
        action="store_true",
        help="the node was drained by hand; skip the Kubernetes cordon check",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig file for the cordon check; default: in-cluster service account, "
        "else ~/.kube/config",
    )
    p.add_argument("--context", help="kubeconfig context; default: the current context")
    p.add_argument("--interval", type=float, default=30.0, help="seconds between reconciles")
    p.add_argument("--once", action="store_true", help="apply once, print the state JSON, exit")
    p.add_argument(
        "--fake-gpus",
        help="use the fake NVML backend with these GPU models (e.g. A100-80GB,A100-80GB): for trying the agent without GPUs",
    )
    p.set_defaults(func=cmd_agent)
