"""The shadow scorecard: the capacity the cluster ran against tiercast's plan.

Hand-made tracks checked against figures worked out by hand (cost, GPU-hours, unserved
demand, changes, the lead-time rule, missing history); the run records' ``shadow``
section; and several dry-run cycles of the service against the fake API server with a
changing node count, scored by ``tiercast shadow`` and checked against a hand computation
from what the fake cluster had.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.cli import main
from scaler.config import parse_config
from scaler.records import RunRecord, RunStore
from scaler.reports.shadow import (
    PoolTrack,
    ShadowInput,
    format_scorecard,
    period,
    review_section,
    score_shadow,
    shadow_input_from_records,
)
from scaler.service.cycle_job import CycleJob
from scaler.service.runs import Inputs
from scaler.service.wiring import provider_factory
from tests.fake_kube import FakeKube, gpu_node, kubeconfig_for, node_pool, start_fake

STEP_H = 5 / 60


def _grid(n: int) -> pd.DatetimeIndex:
    return pd.date_range("2026-12-01", periods=n, freq="5min")


def _track(**kw: Any) -> PoolTrack:
    base: dict[str, Any] = {
        "pool": "h100",
        "gpu_model": "H100-80GB",
        "gpus_per_node": 8,
        "price_per_gpu_hour": 4.0,
        "lead_time_s": 600,
    }
    return PoolTrack(**{**base, **kw})


def test_scorecard_figures_equal_a_hand_computation() -> None:
    # 8 steps of 5 min; the cluster's count unknown at step 6 (left out of both sides).
    planned = np.array([2, 2, 3, 3, 3, 2, 2, 2])
    nodes = np.array([3, 3, 3, 3, 2, 2, np.nan, 3])
    ready = np.array([24, 24, 24, 24, 16, 16, np.nan, 24.0])
    demand = np.array([10, 12, 20, 22, 22, 14, 10, 10.0])
    data = ShadowInput(
        _grid(8),
        300,
        (_track(planned=planned, nodes=nodes, ready_gpus=ready),),
        {"H100-80GB": demand},
        "USD",
    )
    card = score_shadow(data)
    # The cluster: 19 node-steps of 8 GPUs; short 22 - 16 = 6 GPUs at step 4.
    assert card.ran.gpu_hours == pytest.approx(19 * 8 * STEP_H)
    assert card.ran.cost == pytest.approx(19 * 8 * STEP_H * 4.0)
    assert card.ran_unserved.gpu_hours == pytest.approx(6 * STEP_H)
    assert (card.ran_unserved.steps_short, card.ran_unserved.steps) == (1, 7)
    assert card.ran.changes == 2  # 3 -> 2 at step 4, 2 -> 3 at step 7 (step 6 unknown)
    # tiercast: 17 node-steps; its raise to 3 at step 2 serves from step 4 (lead 2 steps),
    # so 20 - 16 = 4 and 22 - 16 = 6 GPUs are short at steps 2 and 3.
    assert card.plan.gpu_hours == pytest.approx(17 * 8 * STEP_H)
    assert card.plan_unserved.gpu_hours == pytest.approx(10 * STEP_H)
    assert card.plan_unserved.steps_short == 2 and card.plan.changes == 2
    assert card.saving == pytest.approx(2 * 8 * STEP_H * 4.0)
    assert card.missing == [
        "pool h100: capacity history missing at 1 of 8 steps (first 2026-12-01 00:30Z); "
        "those steps are left out of both sides"
    ]
    text = format_scorecard(card)
    assert "verdict: over 0.6 hours, acting would have cost 5.33 USD less (10.5%) with " in text
    assert text.endswith("0.3 GPU-h more unserved")
    row = next(line for line in text.splitlines() if line.startswith("h100") and "cluster" in line)
    assert row.split()[2:] == ["12.7", "50.67", "2", "0.5", "14.3%"]
    # The review's section, in Russian: the same figures, no English line.
    section = review_section(card, "ru")
    assert section.paragraphs[-1] == (
        "вывод: за 0,6 ч действия tiercast обошлись бы на 5,33 USD дешевле (10,5%) "
        "при необслуженном спросе на 0,3 GPU-ч больше"
    )
    assert section.paragraphs[-2].startswith("пул h100: истории мощности нет на 1 из 8 шагов")
    rows = section.tables[0].rows
    assert rows[0]["side"] == "кластер" and rows[0]["cost"] == pytest.approx(card.ran.cost)


def test_the_lead_time_rule_is_the_replays() -> None:
    from scaler.replay.fleets import usable_nodes
    from scaler.reports.shadow import serving_nodes

    rng = np.random.default_rng(7)
    for lead in (0, 1, 2, 5):
        requested = rng.integers(0, 6, size=60)
        assert (serving_nodes(requested, lead) == usable_nodes(requested, lead)).all()


def test_pools_of_one_model_share_their_demand_and_missing_history_is_never_invented() -> None:
    n = 4
    od = _track(
        pool="od",
        planned=np.array([1, 1, 1, 1]),
        nodes=np.array([2, 2, 2, 2.0]),
        ready_gpus=np.array([16, 16, 16, 16.0]),
    )
    spot = _track(
        pool="spot",
        price_per_gpu_hour=1.5,
        lead_time_s=0,
        planned=np.array([1, 2, 2, 1]),
        nodes=np.array([1, 1, 1, 1.0]),
        ready_gpus=np.array([8, 8, 0, 8.0]),  # a node not Ready at step 2
    )
    other = _track(
        pool="a100",
        gpu_model="A100-80GB",
        planned=np.array([1, 1, 1, 1]),
        nodes=np.full(n, np.nan),
        ready_gpus=np.full(n, np.nan),
    )
    demand = {"H100-80GB": np.array([20, 24, 20, 20.0]), "A100-80GB": np.array([4, 4, 4, 4.0])}
    card = score_shadow(ShadowInput(_grid(n), 300, (od, spot, other), demand, "EUR"))
    h100 = next(m for m in card.models if m.gpu_model == "H100-80GB")
    # The cluster serves 24, 24, 16, 24: short 4 GPUs at step 2. tiercast: 16, 24, 24, 16.
    assert h100.ran.gpu_hours == pytest.approx(4 * STEP_H) and h100.ran.steps_short == 1
    assert h100.plan.gpu_hours == pytest.approx((4 + 4) * STEP_H) and h100.plan.steps_short == 2
    assert card.ran.cost == pytest.approx((8 * 8 * 4.0 + 4 * 8 * 1.5) * STEP_H)
    assert card.plan.cost == pytest.approx((4 * 8 * 4.0 + 6 * 8 * 1.5) * STEP_H)
    # The A100 pool has no capacity history: said, and nothing of it is scored.
    assert "pool a100: no capacity history at all; left out of both sides" in card.missing
    assert all(p.pool != "a100" or p.ran.gpu_hours == 0 == p.plan.gpu_hours for p in card.pools)
    text = format_scorecard(card)
    assert "H100-80GB (2 pools)" in text and "EUR" in text


def test_a_period_reads_durations_and_times_and_refuses_nonsense() -> None:
    end = pd.Timestamp("2026-12-05")
    assert period("14d", None, end) == (pd.Timestamp("2026-11-21"), end)
    assert period("2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z", end) == (
        pd.Timestamp("2026-12-01"),
        pd.Timestamp("2026-12-02"),
    )
    for since, until in (("soon", None), ("1d", "later"), ("2026-12-06", None)):
        with pytest.raises(Exception, match=r"--since|--until") as info:
            period(since, until, end)
        assert "\n" not in str(info.value)


def _record(k: int, shadow: dict[str, Any]) -> RunRecord:
    at = f"2026-12-01T00:{5 * k:02d}:00Z"
    return RunRecord(
        run_id=f"r{k}",
        job="cycle",
        started_at=at,
        finished_at=at,
        duration_s=1.0,
        status="ok",
        exit_code=0,
        shadow=shadow,
    )


def test_records_keep_the_shadow_section_and_a_gap_between_cycles_is_not_scored(
    tmp_path: Path,
) -> None:
    store = RunStore(tmp_path / "r.sqlite")
    pool = {
        "gpu_model": "H100-80GB",
        "tier": "on-demand",
        "gpus_per_node": 8,
        "price_per_gpu_hour": 4.0,
        "lead_time_s": 0,
    }
    # No cycle at 00:10: the service was down.
    for k, planned, nodes in ((0, 2, 2), (1, 2, 3), (3, 3, 3)):
        at = f"2026-12-01T00:{5 * k:02d}:00Z"
        store.add(
            _record(
                k,
                {
                    "at": at,
                    "cycle_s": 300,
                    "currency": "USD",
                    "demand_gpus": {"H100-80GB": 12.0},
                    "pools": {
                        "h100": {
                            **pool,
                            "planned_nodes": planned,
                            "nodes": nodes,
                            "ready_nodes": nodes,
                            "ready_gpus": 8 * nodes,
                        }
                    },
                },
            )
        )
    store.add(_record(9, {}))  # an older version's record: no shadow section
    data = shadow_input_from_records(store.recent(limit=10, job="cycle"))
    assert data is not None and len(data.index) == 4 and data.step_s == 300
    card = score_shadow(data)
    assert card.scored_steps == 3
    assert card.ran.gpu_hours == pytest.approx((2 + 3 + 3) * 8 * STEP_H)
    assert card.plan.gpu_hours == pytest.approx((2 + 2 + 3) * 8 * STEP_H)
    assert card.missing[0].startswith("pool h100: capacity history missing at 1 of 4 steps")


# --------------------------------------------------------------------------- the service


POOL = "/apis/karpenter.sh/v1/nodepools/gpu-h100"
NODES = "/api/v1/nodes"
T0 = pd.Timestamp("2026-12-03T00:00:00")


def _config(tmp_path: Path) -> dict[str, Any]:
    return {
        "signals": [{"name": "rps", "step_s": 300}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 10}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "lead_time_s": 600,
                "min_nodes": 0,
                "max_nodes": 10,
                "provider": {"kind": "karpenter", "node_pool": "gpu-h100"},
            }
        ],
        "policy": {"cycle_s": 300, "growth_backtest_s": 0},
        "forecast": {"method": "last_value"},
        "model_store": {"path": str(tmp_path / "models")},
        "service": {"records_path": str(tmp_path / "records.sqlite")},
    }


def _history(now: pd.Timestamp) -> dict[str, pd.Series]:
    """Two days of 5-minute demand: 100 rps at night, 300 by day (10 to 30 GPUs)."""
    index = pd.date_range(T0 - pd.Timedelta(days=2), now - pd.Timedelta(minutes=5), freq="5min")
    day = (index.hour >= 8) & (index.hour < 20)
    return {"rps": pd.Series(np.where(day, 300.0, 100.0), index=index, name="rps")}


@pytest.fixture
def cluster() -> Iterator[FakeKube]:
    fake = start_fake()
    fake.create("/apis/karpenter.sh/v1/nodepools", node_pool("gpu-h100"))
    yield fake
    fake.stop()


def _set_nodes(fake: FakeKube, ready: int, booting: int) -> None:
    """The pool's nodes: ``ready`` Ready ones and ``booting`` not Ready yet."""
    for i in range(10):
        if fake.exists(f"{NODES}/h100-{i}"):
            fake.delete_object(f"{NODES}/h100-{i}")
    labels = {"karpenter.sh/nodepool": "gpu-h100", "karpenter.sh/capacity-type": "on-demand"}
    for i in range(ready + booting):
        node = gpu_node(f"h100-{i}", labels)
        if i >= ready:
            node["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
        fake.create(NODES, node)


@pytest.mark.slow
def test_dry_run_cycles_record_the_cluster_and_shadow_scores_them(
    cluster: FakeKube, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(cluster.url)))
    raw = _config(tmp_path)
    config = parse_config(raw, "shadow test")
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    store = RunStore(raw["service"]["records_path"])
    # Per cycle (5 min apart): Ready nodes, booting nodes. The incumbent runs 2 nodes at
    # night, is caught short when the day's demand arrives, then boots a third node.
    counts = [(2, 0), (2, 0), (2, 1), (3, 0), (3, 0), (2, 0)]
    start = T0 + pd.Timedelta(hours=8)  # the day's demand has just arrived
    for k, (ready, booting) in enumerate(counts):
        _set_nodes(cluster, ready, booting)
        now = start + pd.Timedelta(minutes=5 * k)
        job = CycleJob(
            load=lambda now=now: Inputs(config, _history(now), now, "test"),
            make_provider=provider_factory(True, True, str(kubeconfig), "fake"),
            store=store,
            dry_run=True,
            clock=lambda now=now: now,
        )
        assert job().status in ("ok", "held")
    records = sorted(store.recent(limit=20, job="cycle"), key=lambda r: r.started_at)
    assert len(records) == len(counts)
    shadows = [r.shadow for r in records]
    # The capacity recorded is the fake cluster's, node by node.
    # Demand: the newest sample before each cycle, 07:55's night level at 08:00, then day.
    demand = [10, 30, 30, 30, 30, 30]
    for (ready, booting), want, s in zip(counts, demand, shadows, strict=True):
        pool = s["pools"]["h100"]
        assert (pool["nodes"], pool["ready_nodes"], pool["ready_gpus"]) == (
            ready + booting,
            ready,
            8 * ready,
        )
        assert s["demand_gpus"] == {"H100-80GB": want}
    planned = [s["pools"]["h100"]["planned_nodes"] for s in shadows]
    assert all(isinstance(p, int) for p in planned)
    # Hand computation: the lead time (600 s) is 2 cycles; tiercast's first request serves
    # from the start (warm), a raise 2 cycles after it is asked for, a cut at once.
    usable: list[int] = []
    for t, want in enumerate(planned):
        held = min(planned[max(0, t - 2) : t + 1]) if t >= 2 else min(planned[0], *planned[: t + 1])
        usable.append(min(want, max(usable[-1] if usable else want, held)))
    ran_gpu_h = sum(8 * (r + b) for r, b in counts) * STEP_H
    plan_gpu_h = sum(8 * p for p in planned) * STEP_H
    ran_short = [max(0, d - 8 * r) for d, (r, _) in zip(demand, counts, strict=True)]
    plan_short = [max(0, d - 8 * u) for d, u in zip(demand, usable, strict=True)]
    assert main(["shadow", "--config", str(tmp_path / "config.yaml"), "-o", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["scored_steps"] == len(counts)
    assert got["ran"]["gpu_hours"] == pytest.approx(ran_gpu_h)
    assert got["ran"]["cost"] == pytest.approx(ran_gpu_h * 4.0)
    assert got["plan"]["gpu_hours"] == pytest.approx(plan_gpu_h)
    assert got["plan"]["cost"] == pytest.approx(plan_gpu_h * 4.0)
    assert got["ran_unserved"]["gpu_hours"] == pytest.approx(sum(ran_short) * STEP_H)
    assert got["ran_unserved"]["steps_short"] == sum(s > 0 for s in ran_short)
    assert got["plan_unserved"]["gpu_hours"] == pytest.approx(sum(plan_short) * STEP_H)
    assert got["ran"]["changes"] == 2  # 2 -> 3 nodes, 3 -> 2
    assert got["missing"] == []
    assert main(["shadow", "--records", raw["service"]["records_path"]]) == 0
    text = capsys.readouterr().out
    assert f"{ran_gpu_h:.1f}" in text and f"{plan_gpu_h:.1f}" in text
    saving = ran_gpu_h * 4.0 - plan_gpu_h * 4.0
    assert f"acting would have cost {abs(saving):,.2f} USD " in text
    assert math.isfinite(saving)
    # The capacity review has the same scorecard as a section (its table in the JSON).
    csv = tmp_path / "rps.csv"
    last = start + pd.Timedelta(minutes=5 * len(counts))
    _history(last)["rps"].rename("value").rename_axis("timestamp").to_csv(csv)
    out = tmp_path / "review"
    review = ["report", "-c", str(tmp_path / "config.yaml"), "--history", str(csv)]
    assert main([*review, "--out-dir", str(out), "-o", "json", "--backtest-origins", "0"]) == 0
    doc = json.loads((out / "report.json").read_text())
    section = next(x for x in doc["sections"] if x["key"] == "shadow")
    rows = {(r["pool"], r["side"]): r for r in section["tables"][0]["rows"]}
    assert rows["h100", "cluster"]["gpu_hours"] == pytest.approx(ran_gpu_h)
    assert rows["TOTAL", "tiercast"]["cost"] == pytest.approx(plan_gpu_h * 4.0)
    assert rows["TOTAL", "cluster"]["unserved_gpu_hours"] == pytest.approx(sum(ran_short) * STEP_H)
    assert section["paragraphs"][-1].startswith("verdict: over 0.5 hours")


@pytest.mark.slow  # the completion script builds every command's parser
def test_shadow_has_help_completion_and_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["shadow", "--help"])
    assert done.value.code == 0 and "--since" in capsys.readouterr().out
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "shadow" in script and "--prometheus-url" in script and "--until" in script
    store = RunStore(tmp_path / "r.sqlite")
    store.add(_record(0, {}))  # a cycle of an older version: no capacity recorded
    records = str(tmp_path / "r.sqlite")
    assert main(["shadow", "--records", records]) == 1
    err = capsys.readouterr().err
    assert "recorded the cluster's capacity; nothing to compare" in err
    assert main(["shadow", "--records", records, "--since", "soon"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--since: 'soon'" in err and "\n" not in err
    assert main(["simulate", "--prometheus-url", "http://127.0.0.1:9", "--since", "1d"]) == 2
    assert "give --config FILE" in capsys.readouterr().err
