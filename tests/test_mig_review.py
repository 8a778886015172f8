"""The review reconciles MIG slice occupancy with GPU utilization (scaler.reports.mig_review)."""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd
import pytest

from scaler.reports.mig_review import mig_use


def test_instances_in_use_and_the_compute_they_take_are_told_apart() -> None:
    grid = pd.date_range("2026-03-02", periods=3, freq="5min")
    # Two A100s: one cut into 7 x 1g.10gb, one whole.
    m = {
        "capacity_instances": {"1g.10gb": 7, "whole": 1},
        "demand_instances": {"1g.10gb": [7, 0, 9], "whole": [0, 1, 0]},
        "gpus": 2,
    }
    use = mig_use("A100-80GB", m, grid)
    assert use is not None
    # Seven small instances fill 7 of 8 instances but only one GPU's compute of two; the
    # whole GPU alone is 1 instance of 8 and half the compute; demand above the layouts
    # counts only what they hold.
    assert use.slices == pytest.approx([7 / 8, 1 / 8, 7 / 8])
    assert use.compute == pytest.approx([0.5, 0.5, 0.5])
    assert use.peak_at == 0 and use.peak_used == 7 and use.peak_gpus == pytest.approx(1.0)
    assert mig_use("A100-80GB", {**m, "gpus": 0}, grid) is None


@pytest.mark.slow
def test_the_demo_review_says_both_measures_in_one_sentence_and_one_chart() -> None:
    from scaler.cli.plan import plan_without_acting
    from scaler.reports.capacity import build_capacity_report

    args = argparse.Namespace(config=None, history=None, now=None, horizon="6h", current_nodes=[])
    config, history, _, label, result = plan_without_acting(args)
    review = build_capacity_report(
        config, history, result.plan, result.forecasts, label, "en", backtest_origins=0
    )
    text = [p for s in review.sections for p in s.paragraphs if "instances are in use" in p]
    assert len(text) == 1 and text[0].startswith("A100-80GB: at the q0.9 peak")
    charts = [c for s in review.sections for c in s.charts if c.key == "mig-use-A100-80GB"]
    assert len(charts) == 1
    m = result.plan.mig["models"]["A100-80GB"]
    use = mig_use("A100-80GB", m, pd.DatetimeIndex(result.plan.timeline))
    assert use is not None and f"of the layouts' {use.instances} instances" in text[0]
    assert np.all(use.slices <= 1) and np.all(use.compute <= 1)
