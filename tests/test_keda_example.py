"""The KEDA example sets only what KEDA acts on.

KEDA's ``cooldownPeriod`` is the wait after the last active trigger before the target is
scaled to 0; between ``minReplicaCount`` and ``maxReplicaCount`` the HPA scales, paced by
``advanced.horizontalPodAutoscalerConfig.behavior`` (keda.sh, ScaledObject specification,
KEDA 2.10 and later).
"""

from __future__ import annotations

from pathlib import Path

import yaml

EXAMPLE = Path(__file__).resolve().parents[1] / "deploy/examples/keda-scaledobject.yaml"


def test_cooldown_is_set_only_where_the_target_can_scale_to_zero() -> None:
    spec = yaml.safe_load(EXAMPLE.read_text())["spec"]
    if "cooldownPeriod" in spec:
        assert spec.get("minReplicaCount", 0) == 0 or "idleReplicaCount" in spec
    behavior = spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1800
