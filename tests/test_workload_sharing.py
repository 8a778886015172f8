"""Per-workload ``sharing`` and ``isolation``: what the config admits (docs/mig.md#sharing-modes)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from scaler.config import ConfigError, WorkloadConfig, parse_config
from scaler.inputs.demo import DEMO_CONFIG


def _with(**workload: Any) -> dict[str, Any]:
    data = copy.deepcopy(DEMO_CONFIG)
    data["workloads"][0].update(workload)
    return data


def _refused(**workload: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(_with(**workload), "cfg.yaml")
    msg = str(info.value)
    assert "\n" not in msg and msg.startswith("cfg.yaml: workloads[0].")
    return msg


def test_defaults() -> None:
    w = WorkloadConfig(name="w", signal="s", gpu_model="H100", units_per_replica=1)
    assert (w.sharing, w.isolation) == ("auto", "preferred")


@pytest.mark.parametrize("sharing", ["time-slicing", "mps"])
def test_isolation_required_admits_no_time_slicing_or_mps(sharing: str) -> None:
    msg = _refused(sharing=sharing, isolation="required")
    assert f"workloads[0].sharing: {sharing!r}" in msg
    assert "isolation: required admits only whole, mig or auto" in msg


@pytest.mark.parametrize("sharing", ["auto", "whole", "time-slicing", "mps"])
@pytest.mark.parametrize("isolation", ["preferred", "none"])
def test_modes_without_required_isolation_load(sharing: str, isolation: str) -> None:
    # One GPU per replica: a shared GPU serves one device per request.
    config = parse_config(_with(sharing=sharing, isolation=isolation, gpus_per_replica=1))
    assert (config.workloads[0].sharing, config.workloads[0].isolation) == (sharing, isolation)


@pytest.mark.parametrize("sharing", ["auto", "whole"])
def test_required_isolation_with_whole_gpus_loads(sharing: str) -> None:
    assert (
        parse_config(_with(sharing=sharing, isolation="required")).workloads[0].sharing == sharing
    )


def test_mig_sharing_needs_a_profile_and_a_profile_needs_mig() -> None:
    assert "'mig' needs mig_profile" in _refused(sharing="mig")
    msg = _refused(sharing="time-slicing", mig_profile="1g.10gb")
    assert "workloads[0].mig_profile: '1g.10gb' runs replicas on MIG slices" in msg


def test_unknown_modes_name_the_choices() -> None:
    assert "'auto', 'whole', 'mig', 'time-slicing' or 'mps'" in _refused(sharing="vgpu")
    assert "'required', 'preferred' or 'none'" in _refused(isolation="strict")


def test_a_config_asking_time_slicing_with_required_isolation_exits_2(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "c.yaml").write_text(
        yaml.safe_dump(_with(sharing="time-slicing", isolation="required"))
    )
    assert main(["run", "--dry-run", "--config", "c.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert "workloads[0].sharing: 'time-slicing'" in err and len(err.splitlines()) == 1
