"""The plan's schema is generated from its typed models (``scaler/plan_schema.py``): the
committed ``scaler/plan.schema.json`` is what they generate, the models agree with the code
that fills each section, and real plans fit both.

Every plan a test exports is checked against the models (``tests/plan_checks.py``), and
the demo's (MIG layouts, spot spares, margins with their growth calibration, workload
classes) against the committed schema too, by ``tests/test_cli.py``'s dry run and
``tests/test_mig_planning.py``'s demo cycle; a third forecast of the demo here would add
a minute and a half to the run for nothing new."""

from __future__ import annotations

import copy
import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest

from scaler import config as config_module
from scaler import plan_schema, plans
from scaler.actuation.kube.kueue import KIND as KUEUE_KIND
from scaler.plan_schema import (
    REGENERATE,
    SCHEMA_PATH,
    PlanFormError,
    check_plan,
    main,
    schema_text,
)
from scaler.planning.power import PowerReading
from scaler.planning.sharing_actions import ACTION_KIND as SHARING_KIND
from scaler.planning.starvation import ModelWaiting, Starvation
from tests.plan_checks import validate_plan
from tests.planning_inputs import plan_for
from tests.test_planning import NOW, _one_pool, forecast

SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())


def _valid(plan: dict[str, Any]) -> None:
    """``plan`` fits the committed JSON Schema and the models."""
    validate_plan(plan)
    check_plan(plan)


def _invalid(plan: dict[str, Any]) -> None:
    """``plan`` fits neither the committed JSON Schema nor the models."""
    with pytest.raises(jsonschema.ValidationError):
        validate_plan(plan)
    with pytest.raises(PlanFormError):
        check_plan(plan)


def _small_plan() -> plans.CapacityPlan:
    """One H100 on-demand pool growing from 1 node for 30 units of demand."""
    fc = forecast(np.full(300, 30.0), 0.1, 30.0, 30.0)
    return plan_for(_one_pool(), {"rps": fc}, {"on-demand": 1}, NOW)


def test_the_committed_schema_is_the_generated_one() -> None:
    committed = SCHEMA_PATH.read_text()
    assert committed == schema_text(), f"{SCHEMA_PATH.name} is out of date: run {REGENERATE}"


def test_the_schema_is_deterministic_and_a_valid_draft_2020_12_schema() -> None:
    assert schema_text() == schema_text()
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert schema_text().endswith("}\n") and '\n  "$defs": {' in schema_text()


def test_the_check_command_says_how_to_regenerate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--check"]) == 0
    stale = tmp_path / "plan.schema.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(plan_schema, "SCHEMA_PATH", stale)
    assert main(["--check"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and REGENERATE in err
    assert main(["--write"]) == 0
    assert stale.read_text() == schema_text()


def test_the_models_agree_with_the_plan_code() -> None:
    assert plan_schema.SCHEMA_VERSION == plans.SCHEMA_VERSION
    assert SCHEMA["properties"]["schema_version"]["const"] == plans.SCHEMA_VERSION
    decision = plan_schema.Action.model_fields["decision"].annotation
    assert typing.get_args(decision) == plans.DECISIONS
    assert typing.get_args(plan_schema.Tier) == typing.get_args(config_module.Tier)
    kinds = set(typing.get_args(plan_schema.ActionKind))
    assert (
        kinds
        == {"nodes", "mig-layout", KUEUE_KIND, SHARING_KIND}
        == set(plan_schema.DETAILS_OF_KIND)
    )
    # Every field of the plan's dataclasses is described, and nothing else.
    for cls, model in (
        (plans.CapacityPlan, plan_schema.Plan),
        (plans.Action, plan_schema.Action),
        (plans.SignalSummary, plan_schema.SignalSummary),
        (plans.PoolPlan, plan_schema.PoolPlan),
    ):
        assert {f.name for f in dataclasses.fields(cls)} == set(model.model_fields), cls


def test_a_small_plan_fits_the_schema_and_the_models() -> None:
    plan = _small_plan()
    data = plan.to_dict()
    _valid(data)
    _valid(json.loads(plan.to_json()))
    parsed = check_plan(data)
    assert parsed.actions[0].decision == "scale-up"
    assert parsed.actions[0].reason.text == data["actions"][0]["reason"]["text"]
    assert set(parsed.risk.margins) == {"rps"}
    # A reason's references point at evidence the plan holds (stated there once).
    refs = [r for a in data["actions"] for r in a["reason"]["refs"]]
    assert refs == ["risk.margins.rps"]
    for ref in refs:
        node: Any = data
        for part in ref.split("."):
            node = node[part]
        assert node["source"] == "policy.headroom_fraction"


def test_the_optional_risk_entries_fit() -> None:
    plan = _small_plan()
    reading = PowerReading("2026-03-02T00:00:00Z")
    starvation = Starvation(
        "2026-03-02T00:00:00Z", 300, {"H100-80GB": ModelWaiting(16.0, 8.0, pods=2, workloads=1)}
    )
    drift = {"rps": {"coverage": 0.52, "error": 0.31, "points": 24, "band": "q0.1-q0.9"}}
    plan = dataclasses.replace(
        plan,
        risk={
            **plan.risk,
            "power": reading.to_dict(),
            "starvation": starvation.to_dict(),
            "drift": drift,
        },
    )
    _valid(plan.to_dict())


def test_an_undescribed_key_a_sentence_reason_or_a_wrong_type_does_not_fit() -> None:
    good = _small_plan().to_dict()
    _valid(good)
    for change in (
        lambda d: d["risk"].update(surprise=1),
        lambda d: d["cost"].update(per_hour_later=1.0),
        lambda d: d["actions"][0].update(reason="a sentence"),
        lambda d: d["actions"][0]["reason"].pop("refs"),
        lambda d: d["pools"][0].update(current_nodes="2"),
        lambda d: d["pools"][0]["binding"].append("a-bound-no-one-knows"),
        lambda d: d.update(created_at="2026-03-02 00:00"),
        lambda d: d.update(schema_version=1),
    ):
        bad = copy.deepcopy(good)
        change(bad)
        _invalid(bad)


def test_an_action_s_details_follow_its_kind() -> None:
    data = _small_plan().to_dict()
    data["actions"][0]["details"] = {"layout": "unchanged", "nodes": ["n-0"]}
    with pytest.raises(PlanFormError, match="details of a nodes action"):
        check_plan(data)
    data["actions"][0]["kind"] = "mig-layout"
    _valid(data)


def test_the_tests_check_every_plan_they_export() -> None:
    assert check_plan in plans.EXPORT_CHECKS
    plan = _small_plan()
    broken = dataclasses.replace(plan, cost={**plan.cost, "per_hour_now": -1.0})
    with pytest.raises(PlanFormError, match=r"cost\.per_hour_now"):
        broken.to_dict()
