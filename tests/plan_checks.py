"""Every plan a test exports (:meth:`scaler.plans.CapacityPlan.to_dict`) is checked against
the plan's typed models (:func:`scaler.plan_schema.check_plan`): a section whose code and
model drift apart fails the test that made the plan, naming the field. The product runs
no check (``scaler.plans.EXPORT_CHECKS`` is empty outside the tests)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
import pytest

from scaler import plans
from scaler.plan_schema import SCHEMA_PATH, check_plan


@functools.cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads(SCHEMA_PATH.read_text()))


def validate_plan(plan: Mapping[str, Any]) -> None:
    """``plan`` (a plan's JSON form) fits the committed ``scaler/plan.schema.json``.

    The validator is built once: ``jsonschema.validate`` checks the schema itself on every
    call, about half a second for the plan's schema."""
    _validator().validate(plan)


def pytest_configure(config: pytest.Config) -> None:
    if check_plan not in plans.EXPORT_CHECKS:
        plans.EXPORT_CHECKS.append(check_plan)


def pytest_unconfigure(config: pytest.Config) -> None:
    if check_plan in plans.EXPORT_CHECKS:
        plans.EXPORT_CHECKS.remove(check_plan)
