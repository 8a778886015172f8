"""Finance dry-run: projection by tier and month, scenarios, commitment advice, the CLI.

The projection tests use hand-built forecasts with known quantiles on small
fleets, so every expected number can be worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.errors import BadInputError
from forecaster.forecasting import SeriesForecast
from scaler.cli import main
from scaler.config import Config, ConfigError, parse_config
from scaler.reports import finance
from tests.conftest import trace_path

START = pd.Timestamp("2027-01-30T00:00:00")


def fake_forecast(levels: dict[float, Any], hours: int = 96, name: str = "rps") -> SeriesForecast:
    """A forecast at a 30-minute step whose quantile columns are the given levels."""
    index = pd.date_range(START, periods=hours * 2, freq="30min", name="timestamp")
    frame = pd.DataFrame(
        {
            f"q{q:g}": np.broadcast_to(np.asarray(v, dtype=float), len(index))
            for q, v in levels.items()
        },
        index=index,
    )
    return SeriesForecast(
        name=name,
        frame=frame,
        estimator="fake",
        reason="test",
        step=pd.Timedelta(minutes=30),
        last_timestamp=START - pd.Timedelta(minutes=30),
        last_value=float(next(iter(levels.values())) if np.isscalar(levels[0.5]) else 0.0),
        recent_max=0.0,
        n_observed=100,
    )


_FLEET_DATA: dict[str, Any] = {
    "signals": [{"name": "rps"}],
    "workloads": [{"name": "svc", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}],
    "pools": [
        {
            "name": "od",
            "tier": "on-demand",
            "gpu_model": "H100",
            "gpus_per_node": 1,
            "price_per_gpu_hour": 2.0,
        }
    ],
}


def fleet(pools: list[dict[str, Any]], units_per_replica: float = 1.0) -> Config:
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {
                    "name": "svc",
                    "signal": "rps",
                    "gpu_model": "H100-80GB",
                    "units_per_replica": units_per_replica,
                }
            ],
            "pools": [
                {"gpu_model": "H100-80GB", "gpus_per_node": 1, "max_nodes": 1000, **p}
                for p in pools
            ],
        },
        "test fleet",
    )


ON_DEMAND = {"name": "od", "tier": "on-demand", "price_per_gpu_hour": 2.0}
LEVELS = {0.1: 2.0, 0.5: 4.0, 0.9: 6.0}


def test_constant_demand_costs_gpus_times_price_per_month_and_band() -> None:
    config = fleet([ON_DEMAND])
    proj = finance.project(config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=72))
    m = proj.baseline.monthly
    # 72 hours from Jan 30: 48 in January, 24 in February.
    assert list(dict.fromkeys(m["period"])) == ["2027-01", "2027-02"]
    jan = m[(m["period"] == "2027-01") & (m["tier"] == "on-demand")].set_index("band")
    assert jan.loc["expected", "hours"] == 48
    assert jan.loc["expected", "gpu_hours"] == 4 * 48
    assert jan.loc["low", "cost"] == pytest.approx(2 * 48 * 2.0)
    assert jan.loc["high", "cost"] == pytest.approx(6 * 48 * 2.0)
    assert proj.baseline.total_cost("expected") == pytest.approx(4 * 72 * 2.0)
    daily = proj.baseline.daily
    assert len(set(daily["period"])) == 3
    demand = proj.baseline.demand.set_index("band")
    assert demand.loc["expected", "demand_gpu_hours"] == 4 * 72
    assert demand.loc["expected", "idle_gpu_hours"] == 0
    assert proj.to_dict()["scenarios"][0]["totals"]["high"]["cost"] == 6 * 72 * 2.0


def test_scenarios_change_inputs_not_the_method() -> None:
    config = fleet([ON_DEMAND])
    forecasts = {"rps": fake_forecast(LEVELS)}
    scenarios = [
        finance.parse_scenario("pricey:on-demand-price=+50%"),
        finance.parse_scenario("double:growth=100%"),
        finance.parse_scenario("new:workload=H100:3@2027-02-01"),
        finance.parse_scenario("fixed:on-demand-price=3"),
    ]
    proj = finance.project(config, forecasts, START, pd.Timedelta(hours=72), scenarios)
    base, pricey, double, new, fixed = (s.total_cost("expected") for s in proj.scenarios)
    assert pricey == pytest.approx(base * 1.5)
    assert fixed == pytest.approx(base * 1.5)
    # Linear growth to 2x at the end: demand ceil(4 * factor) rises through 5..8 GPUs.
    assert base < double < 2 * base
    # 3 GPUs from Feb 1 (the last 24 of 72 hours) at 2.0 per GPU-hour.
    assert new == pytest.approx(base + 3 * 24 * 2.0)


def test_projection_reports_one_progress_unit_per_scenario_and_for_the_advice() -> None:
    from forecaster.progress import Progress

    config = fleet([ON_DEMAND, {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.2}])
    scenarios = [finance.parse_scenario(f"s{k}:growth={10 * k}%") for k in range(1, 4)]
    bar = Progress(False, total=1)  # a caller's own unit before the projection
    finance.project(
        config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=72), scenarios, bar
    )
    assert (bar.n, bar.total) == (4 + 1, 1 + 4 + 1)  # the caller's unit is not done here
    bar.update()
    assert bar.n == bar.total


def test_scenario_deltas_are_shown_for_every_band() -> None:
    # 10 committed GPUs absorb +2 GPUs in the low and expected bands; only the high band
    # (9 -> 11 GPUs) spills onto on-demand: +1 GPU x 24 h x 2.0.
    from scaler.reports.finance_report import build_finance_report

    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.0, "min_nodes": 10}
    config = fleet([reserved, ON_DEMAND])
    proj = finance.project(
        config,
        {"rps": fake_forecast({0.1: 2.0, 0.5: 4.0, 0.9: 9.0})},
        START,
        pd.Timedelta(hours=24),
        [finance.parse_scenario("more:workload=H100:2")],
    )
    report = build_finance_report(proj, config, "test", charts=False)
    table = next(tb for s in report.sections for tb in s.tables if tb.key == "scenarios")
    row = next(r for r in table.rows if r["scenario"] == "more")
    assert row["delta_low"] == 0 and row["delta_expected"] == 0
    assert row["delta_high"] == pytest.approx(1 * 24 * 2.0)
    assert row["delta_fraction_high"] == pytest.approx(48.0 / (10 * 24 * 1.0))
    # Per-pool and per-model lines add up to the tier lines.
    lines = {tb.key: tb.rows for s in report.sections for tb in s.tables}
    for band in finance.BANDS:
        total = sum(r[f"cost_{band}"] for r in lines["monthly_by_tier"])
        assert sum(r[f"cost_{band}"] for r in lines["monthly_by_pool"]) == pytest.approx(total)
        assert sum(r[f"cost_{band}"] for r in lines["monthly_by_model"]) == pytest.approx(total)
    assert {r["pool"] for r in lines["monthly_by_pool"]} == {"res", "od"}


def test_currency_label_from_the_config() -> None:
    from scaler.reports.finance_report import build_finance_report

    config = fleet([ON_DEMAND])
    config = config.model_copy(
        update={"finance": config.finance.model_copy(update={"currency": "EUR"})}
    )
    proj = finance.project(config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=24))
    report = build_finance_report(proj, config, "test", charts=False)
    assert report.figure("cost_expected").unit == "EUR"
    monthly = next(tb for s in report.sections for tb in s.tables if tb.key == "monthly_by_tier")
    assert [c.label for c in monthly.columns if c.key == "cost_high"] == ["Cost, high, EUR"]
    with pytest.raises(ConfigError, match="currency"):
        parse_config({**_FLEET_DATA, "finance": {"currency": "US D"}}, "cfg")


def test_spot_interruption_moves_demand_to_on_demand() -> None:
    spot = {
        "name": "spot",
        "tier": "spot",
        "price_per_gpu_hour": 1.0,
        "max_nodes": 10,
        "lead_time_s": 3300,
        "spot_interruption_rate_per_hour": 0.01,
    }
    config = fleet([ON_DEMAND, spot])
    forecasts = {"rps": fake_forecast(LEVELS)}
    risky = finance.parse_scenario("risky:spot-interruption=0.6")
    proj = finance.project(config, forecasts, START, pd.Timedelta(hours=24), [risky])
    tiers = {
        s.scenario.name: s.monthly[s.monthly["band"] == "expected"]
        .groupby("tier")["gpu_hours"]
        .sum()
        for s in proj.scenarios
    }
    assert tiers["baseline"].get("on-demand", 0) == 0
    # At 0.6/h over a one-hour exposure a spot GPU counts for half: on-demand is cheaper.
    assert tiers["risky"].get("spot", 0) == 0
    assert tiers["risky"]["on-demand"] == 4 * 24


def test_commitment_advice_commits_the_base_load_that_pays() -> None:
    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.0, "min_nodes": 0}
    config = fleet([reserved, ON_DEMAND])
    # 10 GPUs always, 16 in the high band half of the day: commit 10, not 16
    # (the 6 extra would be busy 50% of hours, exactly break-even at 1.0 / 2.0).
    hours = 96
    high = np.where((np.arange(hours * 2) // 24) % 2 == 0, 16.0, 10.0)
    forecasts = {"rps": fake_forecast({0.1: 10.0, 0.5: 10.0, 0.9: high}, hours=hours)}
    proj = finance.project(config, forecasts, START, pd.Timedelta(hours=hours))
    [advice] = proj.commitments
    assert advice.pool == "res" and advice.current_nodes == 0
    assert advice.recommended_nodes == 10 and advice.change_nodes == 10
    assert advice.break_even_utilization == pytest.approx(0.5)
    assert advice.base_load_gpus == 10
    assert advice.utilization == pytest.approx(1.0)
    months = hours / finance.HOURS_PER_MONTH
    assert advice.monthly_saving == pytest.approx(10 * (2.0 - 1.0) * hours / months)


def test_commitment_advice_releases_unused_reserved_capacity() -> None:
    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.5, "min_nodes": 8}
    config = fleet([reserved, ON_DEMAND])
    proj = finance.project(config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=48))
    [advice] = proj.commitments
    # Expected demand is 4 GPUs. The high band's 5th and 6th GPUs cost 2.0 on on-demand
    # when needed, less than 8 committed GPUs at 1.5 always: keep 4.
    assert advice.recommended_nodes == 4 and advice.change_nodes == -4
    months = 48 / finance.HOURS_PER_MONTH
    assert advice.monthly_saving == pytest.approx(4 * 1.5 * 48 / months)
    assert advice.monthly_saving_high == pytest.approx(
        (8 * 1.5 - (4 * 1.5 + 2 * 2.0)) * 48 / months
    )


def _advice(
    pools: list[dict[str, Any]],
    levels: dict[float, Any],
    hours: int = 48,
    unserved_price: float | None = None,
) -> finance.CommitmentAdvice:
    config = fleet(pools)
    if unserved_price is not None:
        config = config.model_copy(
            update={
                "finance": config.finance.model_copy(
                    update={"unserved_price_per_gpu_hour": unserved_price}
                )
            }
        )
    proj = finance.project(
        config, {"rps": fake_forecast(levels, hours=hours)}, START, pd.Timedelta(hours=hours)
    )
    [advice] = proj.commitments
    return advice


def test_capped_fallback_never_advises_a_release_that_leaves_demand_unserved() -> None:
    # 10 committed GPUs always busy; on-demand is capped at 8 nodes. Releasing all 10
    # "saves" money in every band only because the demand nothing serves is free
    # (8 x 2.0 < 10 x 1.9): it must be refused.
    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.9, "min_nodes": 10}
    capped = {**ON_DEMAND, "max_nodes": 8}
    levels = {0.1: 9.0, 0.5: 10.0, 0.9: 14.0}
    advice = _advice([reserved, capped], levels)
    assert advice.kind == "keep" and advice.recommended_nodes == 10
    assert advice.reason == "keep_busy"
    none = next(o for o in advice.options if o.nodes == 0)
    keep = next(o for o in advice.options if o.nodes == 10)
    assert none.refused and all(none.cost[b] < keep.cost[b] for b in finance.BANDS)
    assert none.unserved_gpu_hours["expected"] == pytest.approx((10 - 8) * 48)
    assert keep.unserved_gpu_hours == {"low": 0.0, "expected": 0.0, "high": 0.0}
    # Priced, the unserved GPU-hours count against the release the same way.
    priced = _advice([reserved, capped], levels, unserved_price=3.0)
    assert priced.recommended_nodes == 10
    assert not next(o for o in priced.options if o.nodes == 0).refused
    # The releases that stay served lose money (committed GPUs are busy above break-even).
    assert all(
        o.cost["expected"] > keep.cost["expected"]
        for o in advice.options
        if 0 < o.nodes < 10 and not o.refused
    )


def test_capped_fallback_with_base_load_above_the_commitment_commits_it() -> None:
    # The low band needs 10 GPUs every hour, 4 are committed, on-demand stops at 2:
    # 4 GPUs of base load go unserved; adding costs money but serves them.
    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.0, "min_nodes": 4}
    capped = {**ON_DEMAND, "max_nodes": 2}
    advice = _advice([reserved, capped], {0.1: 10.0, 0.5: 10.0, 0.9: 12.0})
    assert advice.kind == "commit" and advice.reason == "commit_unserved"
    assert advice.recommended_nodes == 10 and advice.base_load_gpus == 10
    assert advice.current_unserved_gpu_hours["expected"] == pytest.approx(4 * 48)
    assert advice.unserved_gpu_hours["expected"] == 0
    assert advice.monthly_saving < 0  # it costs more, and the sentence says so


def test_base_load_above_the_commitment_advises_adding_on_the_cheapest_term() -> None:
    reserved = {
        "name": "res",
        "tier": "reserved",
        "price_per_gpu_hour": 1.0,
        "min_nodes": 4,
        "commitment_price_per_gpu_hour": {"1y": 1.2, "3y": 0.9},
    }
    advice = _advice([reserved, ON_DEMAND], {0.1: 10.0, 0.5: 10.0, 0.9: 12.0})
    assert advice.kind == "commit" and advice.reason == "commit"
    assert advice.recommended_nodes == 10 and advice.term == "3y"
    assert advice.term_price == 0.9
    assert advice.break_even_utilization == pytest.approx(0.9 / 2.0)
    assert advice.changed_utilization == pytest.approx(1.0)
    months = 48 / finance.HOURS_PER_MONTH
    assert advice.monthly_saving == pytest.approx(6 * (2.0 - 0.9) * 48 / months)
    assert {o.term for o in advice.options if o.nodes > 4} == {"1y", "3y"}


def test_below_break_even_keep_states_why() -> None:
    # 4 committed GPUs, expected demand 2 (50% busy, break-even 60%), but the high band
    # needs 5 every hour: releasing one node costs 2.0 - 1.2 more per hour in that case.
    reserved = {"name": "res", "tier": "reserved", "price_per_gpu_hour": 1.2, "min_nodes": 4}
    advice = _advice([reserved, ON_DEMAND], {0.1: 2.0, 0.5: 2.0, 0.9: 5.0})
    assert advice.kind == "keep" and advice.reason == "keep_release_loses"
    assert advice.utilization == pytest.approx(0.5)
    assert advice.break_even_utilization == pytest.approx(0.6)
    assert advice.detail_band == "high"
    months = 48 / finance.HOURS_PER_MONTH
    assert advice.detail_value == pytest.approx((2.0 - 1.2) * 48 / months)
    from scaler.reports.commitments import _advice_sentence

    sentence = _advice_sentence(advice, "en")
    assert "50% busy" in sentence and "break-even 60%" in sentence
    assert f"{advice.detail_value:,.2f} more per month if demand comes in high" in sentence


def test_projection_never_grows_a_reserved_pool_by_the_hour() -> None:
    # A reserved pool allowed up to 20 nodes still costs its commitment (4), no more:
    # the rest of the demand goes to on-demand.
    reserved = {
        "name": "res",
        "tier": "reserved",
        "price_per_gpu_hour": 1.0,
        "min_nodes": 4,
        "max_nodes": 20,
    }
    config = fleet([reserved, ON_DEMAND])
    proj = finance.project(config, {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=24))
    by_pool = proj.baseline.monthly_pools
    exp = by_pool[by_pool["band"] == "high"].set_index("pool")
    assert exp.loc["res", "gpu_hours"] == 4 * 24
    assert exp.loc["od", "gpu_hours"] == 2 * 24


def test_no_reserved_pool_is_a_note_not_advice() -> None:
    proj = finance.project(
        fleet([ON_DEMAND]), {"rps": fake_forecast(LEVELS)}, START, pd.Timedelta(hours=24)
    )
    assert proj.commitments == []
    assert [n.key for n in proj.notes] == ["no_reserved_pool"]


@settings(max_examples=25, deadline=None)
@given(
    low=st.floats(0, 50),
    spread=st.tuples(st.floats(0, 50), st.floats(0, 50)),
    growth=st.floats(-0.5, 2.0),
)
@pytest.mark.slow
def test_bands_are_ordered_for_any_demand(
    low: float, spread: tuple[float, float], growth: float
) -> None:
    levels = {0.1: low, 0.5: low + spread[0], 0.9: low + spread[0] + spread[1]}
    config = fleet(
        [ON_DEMAND, {"name": "sp", "tier": "spot", "price_per_gpu_hour": 1.0, "max_nodes": 5}]
    )
    sc = finance.Scenario("g", growth=growth, text=f"growth={growth}")
    proj = finance.project(
        config, {"rps": fake_forecast(levels, hours=30)}, START, pd.Timedelta(hours=30), [sc]
    )
    for s in proj.scenarios:
        assert s.total_cost("low") <= s.total_cost("expected") <= s.total_cost("high")
        assert s.total_gpu_hours("low") <= s.total_gpu_hours("high")


@pytest.mark.parametrize(
    ("text", "check"),
    [
        ("growth=20%", lambda s: s.growth == pytest.approx(0.2) and s.name == "growth=20%"),
        (
            "g:growth=5%/month",
            lambda s: s.growth_per_month == pytest.approx(0.05) and s.name == "g",
        ),
        (
            "x:spot-price=-20%,on_demand_price=4.5",
            lambda s: (
                s.price_factor == {"spot": pytest.approx(0.8)} and s.price_set == {"on-demand": 4.5}
            ),
        ),
        (
            "x:spot-interruption=10%",
            lambda s: s.spot_interruption_rate_per_hour == pytest.approx(0.1),
        ),
        (
            "x:workload=H100:16@2027-03-01,workload=L40S:2",
            lambda s: (
                [(a.gpu_model, a.gpus, a.start) for a in s.added]
                == [("H100-80GB", 16.0, pd.Timestamp("2027-03-01")), ("L40S-48GB", 2.0, None)]
            ),
        ),
    ],
)
def test_scenario_syntax(text: str, check: Any) -> None:
    assert check(finance.parse_scenario(text))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("speed=2", "known key"),
        ("growth=20", "needs a percentage"),
        ("growth=-150%", "above -100%"),
        ("spot-price=cheap", "not a number"),
        ("spot-interruption=1.5", "[0, 1)"),
        ("workload=H100", "MODEL:GPUS"),
        ("workload=Z9000:8", "not in the catalog"),
        ("workload=H100:8@someday", "not a date"),
        ("", "empty"),
    ],
)
def test_bad_scenarios_are_one_line_errors(text: str, fragment: str) -> None:
    with pytest.raises(BadInputError) as err:
        finance.parse_scenario(text)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_scenario_errors_found_against_the_config() -> None:
    config = fleet([ON_DEMAND])
    forecasts = {"rps": fake_forecast(LEVELS)}
    with pytest.raises(BadInputError, match="has no pool"):
        finance.project(
            config,
            forecasts,
            START,
            pd.Timedelta(hours=24),
            [finance.parse_scenario("workload=L40S:2")],
        )
    with pytest.raises(BadInputError, match="positive price"):
        finance.project(
            config,
            forecasts,
            START,
            pd.Timedelta(hours=24),
            [finance.parse_scenario("on-demand-price=-100%")],
        )
    with pytest.raises(BadInputError, match="unique"):
        finance.project(
            config,
            forecasts,
            START,
            pd.Timedelta(hours=24),
            [finance.parse_scenario("baseline:growth=1%")],
        )
    with pytest.raises(BadInputError, match="1h to 366d"):
        finance.check_horizon(pd.Timedelta(days=400))


def test_short_forecast_is_noted() -> None:
    proj = finance.project(
        fleet([ON_DEMAND]), {"rps": fake_forecast(LEVELS, hours=10)}, START, pd.Timedelta(hours=24)
    )
    assert "short_forecast" in [n.key for n in proj.notes]
    # Hours past the forecast repeat its last value rather than dropping to zero.
    assert proj.baseline.total_gpu_hours("expected") == 4 * 24


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_rejects_bad_finance_flags_before_planning(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(["plan", "--scenario", "growth=lots"], capsys)
    assert code == 2 and "growth='lots'" in err and len(err.strip().splitlines()) == 1
    code, _, err = run(["plan", "--lang", "fr"], capsys)
    assert code == 2 and "expected one of en, ru" in err
    code, _, err = run(["plan", "--horizon", "400d"], capsys)
    assert code == 2 and "366d" in err
    assert not (workdir / "tiercast-plan.json").exists()


@pytest.mark.slow
@pytest.mark.traces
def test_finance_dry_run_on_a_public_trace(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from forecaster.progress import Progress

    bars: list[Progress] = []

    def for_args(cls: type, args: object, desc: str, total: int = 0, unit: str = "") -> Progress:
        bars.append(Progress(False, desc, total))
        return bars[-1]

    monkeypatch.setattr(Progress, "for_args", classmethod(for_args))
    trace = trace_path("servegen/m_small_rps_10min.csv")
    code, out, _ = run(
        [
            "plan",
            "--history",
            str(trace),
            "--units-per-gpu",
            "2",
            "--horizon",
            "20d",
            "--scenario",
            "g:growth=20%",
            "--scenario",
            "cheap:on-demand-price=-25%",
            "--lang",
            "ru",
            "--out",
            "fin",
            "--format",
            "json,csv,md",
        ],
        capsys,
    )
    assert code == 0
    # The bar counted the one signal's forecast, the plan, three projections, the advice,
    # the report and the files.
    (bar,) = bars
    assert bar.n == bar.total == 1 + 1 + 3 + 1 + 1 + 1
    assert "финансовый прогноз" in out and "сценарии" in out
    data = json.loads((workdir / "fin" / "finance.json").read_text(encoding="utf-8"))
    scenarios = {s["name"]: s["totals"] for s in data["data"]["finance"]["scenarios"]}
    assert set(scenarios) == {"baseline", "g", "cheap"}
    assert scenarios["cheap"]["expected"]["cost"] == pytest.approx(
        0.75 * scenarios["baseline"]["expected"]["cost"], rel=1e-6
    )
    assert scenarios["g"]["expected"]["gpu_hours"] >= scenarios["baseline"]["expected"]["gpu_hours"]
    months = {r["period"] for r in data["data"]["finance"]["scenarios"][0]["monthly"]}
    assert len(months) == 2
    assert (workdir / "fin" / "csv" / "finance-monthly_by_tier.csv").is_file()
    md = (workdir / "fin" / "finance.md").read_text(encoding="utf-8")
    assert md.startswith("# Финансовый прогноз") and "![" in md


def test_russian_advice_keeps_every_number_for_every_reason() -> None:
    from scaler.reports.commitments import _advice_sentence
    from scaler.reports.i18n import numbers_in

    reserved = {"name": "res", "tier": "reserved", "min_nodes": 4}
    cases = [
        (
            [{**reserved, "price_per_gpu_hour": 1.0}, {**ON_DEMAND, "max_nodes": 2}],
            {0.1: 10.0, 0.5: 10.0, 0.9: 12.0},
        ),
        (
            [
                {
                    **reserved,
                    "price_per_gpu_hour": 1.0,
                    "commitment_price_per_gpu_hour": {"3y": 0.9},
                },
                ON_DEMAND,
            ],
            {0.1: 10.0, 0.5: 10.0, 0.9: 12.0},
        ),
        ([{**reserved, "price_per_gpu_hour": 1.2}, ON_DEMAND], {0.1: 2.0, 0.5: 2.0, 0.9: 5.0}),
        ([{**reserved, "price_per_gpu_hour": 1.5, "min_nodes": 8}, ON_DEMAND], LEVELS),
        (
            [
                {**reserved, "price_per_gpu_hour": 1.9, "min_nodes": 10},
                {**ON_DEMAND, "max_nodes": 8},
            ],
            {0.1: 9.0, 0.5: 10.0, 0.9: 14.0},
        ),
        (
            [
                {**reserved, "price_per_gpu_hour": 1.9, "min_nodes": 3},
                {**ON_DEMAND, "max_nodes": 2},
            ],
            {0.1: 1.0, 0.5: 1.0, 0.9: 5.0},
        ),
        (
            [{**reserved, "price_per_gpu_hour": 1.9, "min_nodes": 0}, ON_DEMAND],
            {0.1: 0.0, 0.5: 1.0, 0.9: 2.0},
        ),
    ]
    reasons = set()
    for pools, levels in cases:
        advice = _advice(pools, levels)
        reasons.add(advice.reason)
        en, ru = _advice_sentence(advice, "en"), _advice_sentence(advice, "ru")
        assert numbers_in(ru, "ru") == numbers_in(en, "en"), (en, ru)
    assert reasons == {
        "commit",
        "commit_unserved",
        "release",
        "keep_busy",
        "keep_release_loses",
        "keep_release_unserved",
        "keep_none",
    }


def test_finance_config_defaults_are_pinned_and_checked() -> None:
    from scaler.config import FinanceConfig, PoolConfig

    f = FinanceConfig()
    assert (f.currency, f.unserved_price_per_gpu_hour) == ("USD", None)
    pool = PoolConfig(
        name="r", tier="reserved", gpu_model="H100", gpus_per_node=8, price_per_gpu_hour=2.0
    )
    assert pool.commitment_price_per_gpu_hour == {} and pool.committed_nodes == 0
    assert pool.model_copy(update={"min_nodes": 2, "current_nodes": 5}).committed_nodes == 5
    with pytest.raises(ConfigError, match="applies to tier 'reserved' only"):
        parse_config(
            {
                **_FLEET_DATA,
                "pools": [{**_FLEET_DATA["pools"][0], "commitment_price_per_gpu_hour": {"1y": 1}}],
            },
            "cfg",
        )
    with pytest.raises(ConfigError, match="commitment_price_per_gpu_hour"):
        parse_config(
            {
                **_FLEET_DATA,
                "pools": [
                    {
                        **_FLEET_DATA["pools"][0],
                        "tier": "reserved",
                        "commitment_price_per_gpu_hour": {"5y": 1},
                    }
                ],
            },
            "cfg",
        )
    with pytest.raises(ConfigError, match="unserved_price_per_gpu_hour"):
        parse_config({**_FLEET_DATA, "finance": {"unserved_price_per_gpu_hour": 0}}, "cfg")
    # The capped-fallback example of the README loads.
    from scaler.config import load_config
    from tests.conftest import REPO

    capped = load_config(REPO / "data" / "finance-capped-config.yaml")
    assert capped.finance.currency == "USD" and capped.pools[0].committed_nodes == 350
