"""The shipped alert rules against the promtool unit tests in ``tests/alert_rules/``.

Each file there is a ``promtool test rules`` file over ``rules.yaml``: the groups of
``deploy/monitoring/prometheusrule.yaml`` without their annotations (``promtool check
rules`` checks those templates in ``tests/test_operations.py``). Skipped with a message
where promtool (Debian's ``prometheus`` package) is not installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO

RULES = REPO / "deploy" / "monitoring" / "prometheusrule.yaml"
TESTS = sorted((Path(__file__).parent / "alert_rules").glob("*.yaml"))


def alerts_under_test() -> set[str]:
    """The alerts the files in ``tests/alert_rules/`` test."""
    return {name for f in TESTS for name in re.findall(r"alertname: (\w+)", f.read_text())}


@pytest.mark.parametrize("tests", TESTS, ids=[f.stem for f in TESTS])
def test_alert_rules_fire_on_their_fault_and_stay_quiet_otherwise(
    tests: Path, tmp_path: Path
) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package): rules not tested")
    groups = yaml.safe_load(RULES.read_text())["spec"]["groups"]
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    shutil.copy(tests, tmp_path / "tests.yaml")
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
