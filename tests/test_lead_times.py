"""``lead_time_s: auto``: the config, the node starts measured from each kind of API object
(plain dicts and the fake API server), the run records, q0.9 and the 5-observation rule,
and a dry-run whose plan says which lead time it used."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.readiness import (
    machine_start,
    node_claim_start,
    node_start,
    observe_lead_times,
)
from scaler.actuation.kube.transport import MemoryTransport, RetryPolicy, Session
from scaler.actuation.protocol import RecordingProvider, capabilities_of
from scaler.cli import main
from scaler.config import ConfigError, PoolConfig, load_config, parse_config
from scaler.inputs.demo import DEMO_CONFIG
from scaler.records import LeadTimeObservation, RunRecord, RunStore
from scaler.reports import capacity
from scaler.reports.i18n import numbers_in
from scaler.service.lead_times import (
    LeadTime,
    lead_time_notes,
    learn_lead_times,
    planned_seconds,
    quantile,
    resolve_lead_times,
)
from scaler.wording import Reason
from tests import fuzz_corpus
from tests.fake_kube import FakeKube, connect_to, gpu_node, start_fake
from tests.test_kube_deploy import DISCOVERY, manifest_grants, required_grant

T0 = "2026-11-30T00:00:00Z"
"""When the fake API server creates every object (its ``creationTimestamp``)."""


def at(seconds: float, base: str = T0) -> str:
    t = pd.Timestamp(base) + pd.Timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def observation(pool: str, name: str, seconds: float, ready_s: float = 0.0) -> LeadTimeObservation:
    """A node start of ``seconds`` that became ready ``ready_s`` after T0."""
    return LeadTimeObservation(pool, f"Node/{name}", at(ready_s - seconds), at(ready_s), seconds)


# ---- config ------------------------------------------------------------------------------


def _pools(**pool0: Any) -> dict[str, Any]:
    data = copy.deepcopy(DEMO_CONFIG)
    data["pools"][0].update(pool0)
    return data


def _bad(**pool0: Any) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(_pools(**pool0), "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("cfg.yaml")
    return message


def test_auto_reads_as_its_fallback_in_whole_seconds_until_resolved() -> None:
    pool = parse_config(_pools(lead_time_s="auto"), "cfg.yaml").pools[0]
    assert pool.lead_time_auto and pool.lead_time_s == 600 and pool.lead_time_fallback_s == 600
    pool = parse_config(_pools(lead_time_s="auto", lead_time_fallback_s=1200), "c").pools[0]
    assert pool.lead_time_auto and pool.lead_time_s == 1200
    fixed = parse_config(_pools(lead_time_s=900), "cfg.yaml").pools[0]
    assert not fixed.lead_time_auto and fixed.lead_time_s == 900


def test_fallback_default_is_pinned() -> None:
    pool = PoolConfig(
        name="x", tier="on-demand", gpu_model="H100", gpus_per_node=8, price_per_gpu_hour=1.0
    )
    assert (pool.lead_time_s, pool.lead_time_fallback_s, pool.lead_time_auto) == (600, 600, False)


@pytest.mark.parametrize(
    ("value", "shown"), [("fast", "'fast'"), ("Auto", "'Auto'"), (-5, "-5"), (86401, "86401")]
)
def test_bad_lead_time_is_one_line_naming_the_field(value: Any, shown: str) -> None:
    msg = _bad(lead_time_s=value)
    assert "pools[0].lead_time_s" in msg and shown in msg
    if isinstance(value, str):
        assert "'auto'" in msg


@pytest.mark.parametrize("value", ["fast", -1, 86401, True])
def test_bad_fallback_is_named_as_the_fallback(value: Any) -> None:
    msg = _bad(lead_time_s="auto", lead_time_fallback_s=value)
    assert "pools[0].lead_time_fallback_s" in msg, msg


def test_auto_survives_a_yaml_file_a_copy_and_a_dump(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_pools(lead_time_s="auto", lead_time_fallback_s=700)))
    config = load_config(path)
    pool = config.pools[0]
    assert pool.lead_time_auto and pool.lead_time_s == 700
    assert pool.model_copy(update={"current_nodes": 3}).lead_time_auto
    dumped = config.model_dump(mode="json")
    assert dumped["pools"][0]["lead_time_s"] == "auto"
    assert parse_config(dumped, "dump") == config


@pytest.mark.parametrize("value", ["auto", "Auto", " auto", "auto ", "AUTO", "automatic"])
def test_the_fuzz_oracle_takes_exactly_the_strings_the_config_takes(value: str) -> None:
    data = fuzz_corpus.base_config()
    data["pools"][0]["lead_time_s"] = value
    try:
        parse_config(data, "cfg.yaml")
        accepted = True
    except ConfigError as exc:
        accepted = False
        assert "lead_time_s" in str(exc)
    assert accepted == (value == "auto")
    assert fuzz_corpus.is_absurd("pools.0.lead_time_s", value) == (not accepted)
    assert fuzz_corpus.is_absurd("pools.0.min_nodes", value)


# ---- measurement from API objects ----------------------------------------------------------


def cond(kind: str, seconds: float, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "lastTransitionTime": at(seconds)}


def node_obj(name: str, ready_s: float | None, status: str = "True") -> dict[str, Any]:
    conditions = [] if ready_s is None else [cond("Ready", ready_s, status)]
    return {
        "metadata": {"name": name, "creationTimestamp": T0},
        "status": {"conditions": conditions},
    }


def claim_obj(name: str, launched_s: float, initialized_s: float | None) -> dict[str, Any]:
    conditions = [cond("Launched", launched_s), cond("Registered", initialized_s or 0)]
    if initialized_s is None:
        conditions.append({"type": "Initialized", "status": "Unknown", "reason": "NodeNotReady"})
    else:
        conditions.append(cond("Initialized", initialized_s))
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "creationTimestamp": T0,
            "labels": {"karpenter.sh/nodepool": "gpu-spot"},
        },
        "status": {"nodeName": f"node-{name}", "conditions": conditions},
    }


def machine_obj(
    name: str,
    node: str | None,
    conditions: list[dict[str, Any]],
    v1beta2: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": conditions}
    if node is not None:
        status["nodeRef"] = {"kind": "Node", "name": node}
    if v1beta2 is not None:
        status["v1beta2"] = {"conditions": v1beta2}
    return {
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "creationTimestamp": T0,
            "labels": {"cluster.x-k8s.io/deployment-name": "gpu-md"},
        },
        "spec": {"clusterName": "c1"},
        "status": status,
    }


def test_a_node_is_timed_from_creation_to_ready_true() -> None:
    got = node_start(node_obj("n1", 720), "p")
    assert got == LeadTimeObservation("p", "Node/n1", T0, at(720), 720.0)
    assert node_start(node_obj("n2", 720, status="False"), "p") is None
    assert node_start(node_obj("n3", None), "p") is None
    # Ready again two days after creation: a recovery, not a start.
    assert node_start(node_obj("n4", 2 * 86400), "p") is None


def test_a_node_claim_is_timed_from_launched_to_initialized() -> None:
    got = node_claim_start(claim_obj("c1", 60, 660), "spot")
    assert got is not None and (got.object, got.started, got.seconds) == (
        "NodeClaim/c1",
        at(60),
        600,
    )
    assert node_claim_start(claim_obj("c2", 60, None), "spot") is None


def test_a_machine_is_timed_to_node_healthy_before_ready_and_only_with_a_node_ref() -> None:
    both = [cond("Ready", 1500), cond("NodeHealthy", 900), cond("BootstrapReady", 100)]
    got = machine_start(machine_obj("m1", "node-1", both), "capi")
    assert got is not None and (got.object, got.seconds) == ("Machine/m1", 900)
    only_ready = machine_start(machine_obj("m2", "node-2", [cond("Ready", 1000)]), "capi")
    assert only_ready is not None and only_ready.seconds == 1000
    # NodeHealthy only among the v1beta2 conditions is still preferred over a v1beta1 Ready.
    v2 = machine_start(
        machine_obj("m3", "node-3", [cond("Ready", 1000)], v1beta2=[cond("NodeHealthy", 800)]),
        "capi",
    )
    assert v2 is not None and v2.seconds == 800
    assert machine_start(machine_obj("m4", None, [cond("NodeHealthy", 900)]), "capi") is None
    waiting = [{"type": "NodeHealthy", "status": "False", "reason": "WaitingForNodeRef"}]
    assert machine_start(machine_obj("m5", "node-5", waiting), "capi") is None


def auto_config(**pool: Any) -> Any:
    base = {"tier": "on-demand", "gpu_model": "H100-80GB", "gpus_per_node": 8}
    return parse_config(
        {
            "signals": [{"name": "s"}],
            "workloads": [
                {"name": "w", "signal": "s", "gpu_model": "H100-80GB", "units_per_replica": 1}
            ],
            "pools": [
                {
                    **base,
                    "name": "capi",
                    "price_per_gpu_hour": 3.0,
                    "lead_time_s": "auto",
                    "provider": {"kind": "cluster-api", "machine_deployment": "gpu-md"},
                },
                {
                    **base,
                    "name": "spot",
                    "tier": "spot",
                    "price_per_gpu_hour": 1.5,
                    "lead_time_s": "auto",
                    "provider": {"kind": "karpenter", "node_pool": "gpu-spot"},
                },
                {
                    **base,
                    "name": "hold",
                    "price_per_gpu_hour": 4.5,
                    "lead_time_s": "auto",
                    "lead_time_fallback_s": 900,
                    "provider": {"kind": "placeholder"},
                },
                {**base, "name": "fixed", "price_per_gpu_hour": 4.0, "lead_time_s": 300, **pool},
            ],
            "kubernetes": {"request_timeout_s": 2},
        },
        "test config",
    )


def seed_starts(fake: FakeKube) -> None:
    """Six NodeClaims (one not initialized yet), two Machines, three Nodes of 'hold'."""
    for i, seconds in enumerate([600, 620, 640, 660, 700]):
        fake.create("/apis/karpenter.sh/v1/nodeclaims", claim_obj(f"spot-{i}", 30, 30 + seconds))
    fake.create("/apis/karpenter.sh/v1/nodeclaims", claim_obj("spot-new", 30, None))
    machines = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines"
    fake.create(machines, machine_obj("gpu-md-a", "md-a", [cond("NodeHealthy", 900)]))
    fake.create(machines, machine_obj("gpu-md-b", "md-b", [cond("Ready", 1100)]))
    fake.create(machines, machine_obj("gpu-md-c", None, []))
    for name, labels, ready in (
        ("hold-a", {"tiercast.io/pool": "hold"}, 1000),
        ("hold-b", {"tiercast.io/pool": "hold"}, 1200),
        ("md-a", {}, 100),  # a Cluster API node: timed through its Machine, not here
        ("cpu-a", {"kubernetes.io/os": "linux"}, 50),
    ):
        node = gpu_node(name, labels)
        node["status"]["conditions"] = [cond("Ready", ready)]
        fake.create("/api/v1/nodes", node)


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed_starts(f)
    yield f
    f.stop()


def session_to(fake: FakeKube, folder: Path) -> Session:
    return Session(connect_to(fake, folder, RetryPolicy(0, 0.01, 0.01), timeout_s=2))


def _fleet(config: Any) -> tuple[Any, Any]:
    """What the node starts are read for: the pools, and how nodes are told to them."""
    return config.pools, config.kubernetes


def test_each_pool_is_timed_from_its_own_objects_through_the_api(
    fake: FakeKube, tmp_path: Path
) -> None:
    config = auto_config()
    got = observe_lead_times(session_to(fake, tmp_path), config.pools, config.kubernetes)
    by_pool: dict[str, dict[str, float]] = {}
    for o in got:
        by_pool.setdefault(o.pool, {})[o.object] = o.seconds
    assert by_pool == {
        "spot": {f"NodeClaim/spot-{i}": s for i, s in enumerate([600, 620, 640, 660, 700])},
        "capi": {"Machine/gpu-md-a": 900, "Machine/gpu-md-b": 1100},
        "hold": {"Node/hold-a": 1000, "Node/hold-b": 1200},
    }
    listed = {(r.path, r.query.get("labelSelector")) for r in fake.requests}
    assert ("/apis/karpenter.sh/v1/nodeclaims", "karpenter.sh/nodepool=gpu-spot") in listed
    assert (
        "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines",
        "cluster.x-k8s.io/deployment-name=gpu-md",
    ) in listed


def test_every_call_timing_starts_makes_is_granted_by_the_shipped_rbac(
    fake: FakeKube, tmp_path: Path
) -> None:
    grants = {g for g in manifest_grants() if g[0] == "tiercast"}
    observe_lead_times(session_to(fake, tmp_path), *_fleet(auto_config()))
    needed = set()
    for r in fake.requests:
        if r.method == "GET" and DISCOVERY.match(r.path):
            continue  # API discovery needs no rule
        ns, group, resource, verb = required_grant(r.method, r.path)
        cluster = ("tiercast", "cluster", group, resource, verb)
        assert cluster in grants or ("tiercast", ns or "", group, resource, verb) in grants, (
            f"{r.method} {r.path} needs {verb} on {group or 'core'}/{resource}: not granted"
        )
        needed.add((group, resource, verb))
    assert ("karpenter.sh", "nodeclaims", "list") in needed
    assert {v for g, res, v in needed} == {"list"}  # starts are only ever listed


def test_a_pool_whose_objects_cannot_be_read_gives_none_and_fails_nothing(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.inject("500", times=5, path="/nodeclaims")
    got = observe_lead_times(session_to(fake, tmp_path), *_fleet(auto_config()))
    assert {o.pool for o in got} == {"capi", "hold"}


def test_the_provider_times_only_auto_pools_it_acts_on(fake: FakeKube, tmp_path: Path) -> None:
    config = auto_config()
    provider = KubeProvider(config, session_to(fake, tmp_path), dry_run=True)
    assert {o.pool for o in provider.lead_time_observations()} == {"capi", "spot", "hold"}
    assert {o.pool for o in provider.lead_time_observations(["spot"])} == {"spot"}
    # 'fixed' is a recording pool: no cluster objects to time.
    assert provider.lead_time_observations(["fixed"]) == []
    # The offline dry-run's seeded cluster has no times: nothing is observed.
    store = MemoryTransport()
    offline = KubeProvider(config, Session(store), dry_run=True)
    offline.seed(store)
    assert offline.lead_time_observations() == []


# ---- run records -----------------------------------------------------------------------------


def test_records_keep_each_object_once_and_read_the_newest_30_per_pool(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite")
    assert store.recent_lead_times() == {}  # no file yet: no observations, no error
    first = [observation("a", f"n{i}", 600 + i, ready_s=i * 60) for i in range(40)]
    assert store.add_lead_times(first, at(3600)) == 40
    again = [*first[:10], observation("a", "n0", 9999, ready_s=0), observation("b", "x", 700)]
    assert store.add_lead_times(again, at(3600)) == 1  # only b's is new; n0 keeps its first
    got = store.recent_lead_times()
    assert sorted(got) == ["a", "b"]
    assert [o.object for o in got["a"]] == [f"Node/n{i}" for i in range(39, 9, -1)]
    assert got["a"][0] == first[39] and got["b"] == [observation("b", "x", 700)]
    assert store.recent_lead_times(limit=2, pools=["b"]) == {"b": got["b"]}


def test_records_prune_observations_with_their_retention(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "runs.sqlite", keep_days=7)
    old = observation("a", "old", 600, ready_s=0)
    new = observation("a", "new", 600, ready_s=6 * 86400)
    assert store.add_lead_times([old, new], at(6 * 86400)) == 2
    # A run record written 8 days later prunes what became ready before its retention.
    store.add(
        RunRecord(
            run_id="r",
            job="cycle",
            started_at=at(8 * 86400),
            finished_at=at(8 * 86400),
            duration_s=1.0,
            status="ok",
            exit_code=0,
        )
    )
    assert [o.object for o in store.recent_lead_times()["a"]] == ["Node/new"]
    # Starts older than the retention are not added at all.
    assert store.add_lead_times([old], at(8 * 86400)) == 0


# ---- q0.9 and the 5-observation rule ---------------------------------------------------------


@pytest.mark.parametrize("values", [[600.0], [1, 2], [5, 1, 4, 2, 3], list(range(30, 0, -1))])
def test_quantile_is_numpys_linear_default(values: list[float]) -> None:
    assert quantile(values, 0.9) == pytest.approx(float(np.quantile(values, 0.9)))


def starts(pool: str, seconds: list[float]) -> list[LeadTimeObservation]:
    """Observations newest first, as the records give them."""
    return [observation(pool, f"{pool}-{i}", s, ready_s=-i) for i, s in enumerate(seconds)]


def test_five_starts_learn_the_q09_fewer_keep_the_fallback() -> None:
    config = auto_config()
    twelve = [300, 500, 600, 700, 800, 900, 1000, 1100, 1500, 1200, 1400, 400]
    chosen = resolve_lead_times(
        config.pools,
        {"spot": starts("spot", twelve), "hold": starts("hold", [600, 700]), "fixed": []},
    )
    assert chosen == {
        "capi": LeadTime("capi", 600, False, 0),
        "spot": LeadTime("spot", 1380, True, 12),
        "hold": LeadTime("hold", 900, False, 2),
    }
    assert [str(n) for n in lead_time_notes(chosen)] == [
        "pool 'capi': lead time 600 s fallback (0 of 5 observations needed)",
        "pool 'spot': lead time 1,380 s learned (q0.9 of 12 node starts)",
        "pool 'hold': lead time 900 s fallback (2 of 5 observations needed)",
    ]
    # The planner's fleet sees whole seconds and no auto; the loaded config is left as it was.
    resolved = config.fleet.with_lead_times(planned_seconds(chosen))
    assert [(p.lead_time_s, p.lead_time_auto) for p in resolved.pools] == [
        (600, False),
        (1380, False),
        (900, False),
        (300, False),
    ]
    assert all(type(p.lead_time_s) is int for p in resolved.pools)
    assert [p.lead_time_auto for p in config.pools] == [True, True, True, False]
    demo = parse_config(DEMO_CONFIG, "demo")
    assert resolve_lead_times(demo.pools, {}) == {}
    assert demo.fleet.with_lead_times({}) == demo.fleet


def test_the_window_is_the_newest_30_and_rounds_up() -> None:
    newest = [1000.5] * 30
    chosen = resolve_lead_times(
        auto_config().pools, {"spot": starts("spot", [*newest, 9000, 9000])}
    )
    assert chosen["spot"] == LeadTime("spot", math.ceil(1000.5), True, 30)
    five = resolve_lead_times(
        auto_config().pools, {"spot": starts("spot", [100, 200, 300, 400, 500])}
    )
    assert five["spot"].learned and five["spot"].seconds == 460


def test_learning_keeps_the_cycle_starts_and_reads_them_back(
    fake: FakeKube, tmp_path: Path
) -> None:
    config = auto_config()
    store = RunStore(tmp_path / "runs.sqlite")
    provider = KubeProvider(config, session_to(fake, tmp_path), dry_run=True)
    reader = capabilities_of(provider).lead_times
    chosen = learn_lead_times(config.pools, reader, store, pd.Timestamp(T0))
    assert chosen["spot"] == LeadTime("spot", 684, True, 5)  # q0.9 of 600..700
    assert chosen["capi"] == LeadTime("capi", 600, False, 2)
    assert config.fleet.with_lead_times(planned_seconds(chosen)).pools[1].lead_time_s == 684
    # The next cycle sees the same objects: nothing is counted twice.
    again = learn_lead_times(config.pools, reader, store, pd.Timestamp(T0))
    assert again == chosen
    # Without a cluster the records still know what earlier cycles saw.
    recording = capabilities_of(RecordingProvider({})).lead_times
    assert recording is None
    offline = learn_lead_times(config.pools, recording, store)
    assert offline == chosen


# ---- end to end ------------------------------------------------------------------------------


def write_inputs(folder: Path, *, auto_pool: dict[str, Any]) -> None:
    """A three-day CSV of one signal and a config whose pool 'od' has ``lead_time_s: auto``."""
    index = pd.date_range("2026-11-27", periods=3 * 144, freq="10min")
    hours = np.asarray(index.hour + index.minute / 60.0, dtype=float)
    values = 400 + 200 * np.sin(2 * np.pi * hours / 24)
    pd.DataFrame({"timestamp": index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values}).to_csv(
        folder / "rps.csv", index=False
    )
    config = {
        "signals": [{"name": "rps", "file": "rps.csv", "step_s": 600}],
        "workloads": [
            {"name": "llm", "signal": "rps", "gpu_model": "H100", "units_per_replica": 20}
        ],
        "pools": [
            {
                "name": "od",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "current_nodes": 3,
                "lead_time_s": "auto",
                **auto_pool,
            },
        ],
        "forecast": {"method": "seasonal_naive_1d"},
    }
    (folder / "c.yaml").write_text(yaml.safe_dump(config))


@pytest.mark.slow
def test_a_dry_run_without_a_cluster_plans_with_the_fallback_and_says_so(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    write_inputs(workdir, auto_pool={"lead_time_fallback_s": 720})
    code = main(["run", "--dry-run", "--config", "c.yaml", "--plan-out", "plan.json"])
    out = capsys.readouterr().out
    assert code == 0, out
    note = "pool 'od': lead time 720 s fallback (0 of 5 observations needed)"
    assert f"note: {note}" in out
    plan = json.loads((workdir / "plan.json").read_text())
    assert note in texts(plan["notes"]) and plan["pools"][0]["lead_time_s"] == 720
    record = RunStore(state_dir / "tiercast-records.sqlite").recent(limit=1)[0]
    assert note in record.notes
    # Starts an earlier cycle kept in the same records are learned from.
    RunStore(state_dir / "tiercast-records.sqlite").add_lead_times(
        starts("od", [300, 500, 600, 700, 800, 900, 1000, 1100, 1500, 1200, 1400, 400]),
        at(0),
    )
    assert main(["run", "--dry-run", "--config", "c.yaml", "--plan-out", "plan.json"]) == 0
    out = capsys.readouterr().out
    assert "note: pool 'od': lead time 1,380 s learned (q0.9 of 12 node starts)" in out
    learned = json.loads((workdir / "plan.json").read_text())
    assert learned["pools"][0]["lead_time_s"] == 1380
    # The pool's action says where its lead time comes from, too.
    reason = next(a["reason"] for a in learned["actions"] if a["pool"] == "od")
    assert (reason["params"]["lead_from"], reason["params"]["lead_starts"]) == ("learned", 12)
    assert "lead time learned (12 node starts)" in reason["text"]


@pytest.mark.slow
def test_plan_and_report_learn_from_existing_records_and_never_create_them(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    state_dir: Path,
) -> None:
    write_inputs(workdir, auto_pool={"lead_time_fallback_s": 720})
    records = state_dir / "tiercast-records.sqlite"
    assert main(["plan", "--config", "c.yaml", "--plan-out", "plan.json"]) == 0
    assert "lead time 720 s fallback (0 of 5 observations needed)" in capsys.readouterr().out
    assert not records.exists()  # a command that never acts creates no records file
    RunStore(records).add_lead_times(
        starts("od", [300, 500, 600, 700, 800, 900, 1000, 1100, 1500, 1200, 1400, 400]), at(0)
    )
    learned = "pool 'od': lead time 1,380 s learned (q0.9 of 12 node starts)"
    assert main(["plan", "--config", "c.yaml", "--plan-out", "plan.json"]) == 0
    assert learned in capsys.readouterr().out
    assert json.loads((workdir / "plan.json").read_text())["pools"][0]["lead_time_s"] == 1380
    # The review is built from the config as planned, the auto pool in whole seconds.
    reviewed: list[int] = []
    build = capacity.build_capacity_report

    def spy(config: Any, *args: Any, **kwargs: Any) -> Any:
        reviewed.append(config.pools[0].lead_time_s)
        return build(config, *args, **kwargs)

    monkeypatch.setattr(capacity, "build_capacity_report", spy)
    report = ["report", "--config", "c.yaml", "--out-dir", "rep", "-o", "json"]
    assert main([*report, "--backtest-origins", "0"]) == 0
    assert reviewed == [1380]
    assert learned in texts(json.loads((workdir / "rep" / "plan.json").read_text())["notes"])
    assert learned in (workdir / "rep" / "report.json").read_text()


@pytest.mark.parametrize(
    ("note", "russian"),
    [
        (
            LeadTime("h100-spot", 1380, True, 12).note,
            "пул 'h100-spot': время подготовки 1\u00a0380 с по наблюдениям"
            " (q0.9 по 12 запускам узлов)",
        ),
        (
            LeadTime("h100-spot", 600, False, 2).note,
            "пул 'h100-spot': время подготовки 600 с, резервное значение"
            " (есть 2 из 5 нужных наблюдений)",
        ),
    ],
)
def test_the_lead_time_notes_read_in_russian_with_every_number(note: Reason, russian: str) -> None:
    assert note.text("ru") == russian
    assert numbers_in(russian, "ru") == numbers_in(note.text("en"), "en")


def texts(notes: list[Any]) -> list[str]:
    """A plan JSON's notes as text: a typed note's rendering, a sentence as it is."""
    return [n["text"] if isinstance(n, dict) else n for n in notes]
