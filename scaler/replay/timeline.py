"""A replay step by step: the timeline frame (demand and every policy's nodes per test step,
for ``--timeline-out``) and the chart of demand against each policy's usable GPUs."""

from __future__ import annotations

import pandas as pd

from scaler.replay.simulating import Replay


def timeline_frame(replay: Replay) -> pd.DataFrame:
    """Long form: ``timestamp,policy,demand_gpus,requested_nodes,usable_nodes`` per step and policy."""
    idx = replay.trace.test_index
    demand = replay.trace.demand[replay.trace.test_start :]
    frames = []
    for name, run in replay.runs.items():
        frames.append(
            pd.DataFrame(
                {
                    "timestamp": [t.strftime("%Y-%m-%dT%H:%M:%S") for t in idx],
                    "policy": name,
                    "demand_gpus": demand.astype(int),
                    "requested_nodes": run.requested_total.astype(int),
                    "usable_nodes": run.usable_total.astype(int),
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def write_chart(replay: Replay, path: str, flag: str = "--chart-out") -> None:
    """Demand against each policy's usable GPUs over the test period, as PNG at ``path``
    exactly (no ``.png`` added); a failure is one line naming ``flag``."""
    from forecaster.files import write_output

    write_output(path, chart_png(replay), flag)


def chart_png(replay: Replay) -> bytes:
    """Demand against each policy's usable GPUs over the test period (PNG bytes)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    idx = replay.trace.test_index
    demand = replay.trace.demand[replay.trace.test_start :]
    fig, ax = plt.subplots(figsize=(14, 5), dpi=100)
    ax.fill_between(idx, demand, step="post", color="0.8", label="demand (GPUs)")
    for name, run in replay.runs.items():
        if name == "oracle":
            continue
        ax.step(
            idx,
            run.usable_total * replay.setup.gpus_per_node,
            where="post",
            lw=0.9,
            label=f"{name} usable GPUs",
        )
    ax.set_title(f"tiercast simulate: {replay.trace.name} (test period)")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()
