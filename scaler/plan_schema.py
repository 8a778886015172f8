"""The capacity plan's JSON form as typed models, and the JSON Schema generated from them.

:class:`Plan` describes every section of :meth:`scaler.plans.CapacityPlan.to_dict`: the
signals, pools and actions, and the ``cost``, ``risk``, ``mig``, ``workloads`` and
``sharing`` sections that the plan carries as plain dicts. ``scaler/plan.schema.json`` is
generated from these models, never edited by hand::

    python -m scaler.plan_schema --write    # regenerate scaler/plan.schema.json
    python -m scaler.plan_schema --check    # exit 1 when the committed file differs
    python -m scaler.plan_schema            # print the schema

:func:`check_plan` validates a plan's JSON form against the models (the tests run it on
every plan they export). Units are in the field names (``_s`` seconds, ``_gpu_hours``,
``_per_hour`` in the config's currency) or in the descriptions; timestamps are ISO-8601
UTC with a ``Z``. This module imports nothing of tiercast: it is a description, and
``scaler.plans`` stays free of it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema

SCHEMA_VERSION = 2
"""The plan form these models describe (``CapacityPlan.schema_version``)."""
SCHEMA_PATH = Path(__file__).with_name("plan.schema.json")
REGENERATE = "python -m scaler.plan_schema --write"
"""The command that rewrites ``scaler/plan.schema.json`` from the models."""

Timestamp = Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")]
"""ISO-8601 UTC with a ``Z``, to the second: the one timestamp form of plans."""
NonNegInt = Annotated[int, Field(ge=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
Tier = Literal["reserved", "on-demand", "spot"]
Bound = Literal[
    "max_nodes",
    "max_power_kw",
    "max_step",
    "budget",
    "stabilization",
    "bridging",
    "released-recently",
    "stale-data",
    "no-new-observation",
    "billing",
]
"""What can keep a pool's first step away from what its need alone would hold
(``scaler.planning.binding``): its ``max_nodes`` or power cap, ``max_step_nodes``, the
budget, the scale-down stabilization, bridging while a cheaper pool's nodes boot, a
release in an earlier cycle, stale data, no observation since the last cycle, or nodes
paid for until the end of their billing period."""
SharedMode = Literal["time-slicing", "mps"]
Scalar = str | int | float | bool | None


class _Part(BaseModel):
    """A closed JSON object: every key is described, no other is allowed."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


class Empty(_Part):
    """An empty object: the section has nothing in this plan."""


# --- actions ----------------------------------------------------------------------------


class Reason(_Part):
    """Why an action decides what it does, as a value: a code and its parameters, the plan
    entries it rests on, and a rendered one-line text for readers of the JSON."""

    code: str = Field(description="What kind of decision this is (a constant of the reason table).")
    params: dict[str, Scalar | list[Scalar]] = Field(
        description="The figures the reason cites, by name (quantile, GPUs, times, lead time, "
        "margin, the binding bound, the signal...); units in the names."
    )
    refs: list[str] = Field(
        description="Where the evidence sits in this plan (for instance a signal's learnt "
        "margin under risk.margins): stated there once, never repeated per pool."
    )
    text: str = Field(description="The reason rendered in English, one line.")


class MigPartedGroup(_Part):
    """One group of GPUs of a node in a mig-parted config entry."""

    devices: Literal["all"] | list[NonNegInt] = Field(
        description="GPU indexes of the node, or all."
    )
    mig_enabled: bool = Field(alias="mig-enabled")
    mig_devices: dict[str, NonNegInt] | None = Field(
        default=None,
        alias="mig-devices",
        description="MIG profile -> instances per GPU (only where mig-enabled).",
    )


class MigRelayoutDetails(_Part):
    """A ``mig-layout`` action that re-partitions one node (or labels one still to come)."""

    node: str
    layout: str = Field(description="The target nvidia.com/mig.config value.")
    from_: str | None = Field(alias="from", description="The node's current mig.config value.")
    label: dict[str, str] = Field(description="The node label to set.")
    mig_parted_entry: list[MigPartedGroup] = Field(description="The target's mig-parted entry.")
    in_mig_parted_config: bool = Field(
        description="Whether the MIG manager's mig-parted config has the entry already."
    )
    needs_mixed_strategy: bool
    gpus_changed: NonNegInt
    window_start: Timestamp = Field(description="Start of the lowest-demand window.")
    window_end: Timestamp
    new_node: bool = Field(description="A node still to come: labelled when it joins.")


class MigResumeDetails(_Part):
    """A ``mig-layout`` action that finishes a relayout an earlier run started."""

    node: str
    layout: str
    from_: str | None = Field(alias="from")
    label: dict[str, str]
    resume: Literal[True]
    step: str = Field(description="The step the relayout had reached.")


class MigUnchangedDetails(_Part):
    """A pool's ``mig-layout`` no-op for its nodes that keep their layouts."""

    layout: Literal["unchanged"]
    nodes: list[str]


class KueueFlavorQuota(_Part):
    gpu_model: str
    nominal_quota: NonNegInt = Field(description="GPUs.")
    borrowing_limit: NonNegInt | None = Field(description="GPUs; null: not set.")


class KueueQuotaDetails(_Part):
    """A ``kueue-quota`` action: the quota per ResourceFlavor to set."""

    resource: str
    flavors: dict[str, KueueFlavorQuota] = Field(description="ResourceFlavor -> quota.")


class DevicePluginResource(_Part):
    name: str
    replicas: Annotated[int, Field(ge=1)]


class DevicePluginResources(_Part):
    resources: list[DevicePluginResource]


class DevicePluginSharing(_Part):
    time_slicing: DevicePluginResources | None = Field(default=None, alias="timeSlicing")
    mps: DevicePluginResources | None = None


class DevicePluginConfig(_Part):
    """The NVIDIA device plugin's ``version: v1`` config that shares every GPU of a node."""

    version: Literal["v1"]
    sharing: DevicePluginSharing


class DevicePluginDetails(_Part):
    """A ``device-plugin-config`` action: one node's GPUs shared by time-slicing or MPS."""

    node: str
    mode: SharedMode
    replicas: Annotated[int, Field(ge=2)] = Field(description="Replicas per GPU.")
    layout: str = Field(description="The target nvidia.com/device-plugin.config value.")
    from_: str | None = Field(alias="from", description="The node's current value (null: unset).")
    label: dict[str, str]
    device_plugin_config: DevicePluginConfig
    workloads: list[str]
    group: str | None = Field(description="The pooling group; null for one workload.")
    gpus: NonNegInt = Field(description="Physical GPUs of the node.")


ActionKind = Literal["nodes", "mig-layout", "kueue-quota", "device-plugin-config"]
ActionDetails = (
    Empty
    | MigRelayoutDetails
    | MigResumeDetails
    | MigUnchangedDetails
    | KueueQuotaDetails
    | DevicePluginDetails
)
DETAILS_OF_KIND: dict[str, tuple[type[_Part], ...]] = {
    "nodes": (Empty,),
    "mig-layout": (MigRelayoutDetails, MigResumeDetails, MigUnchangedDetails),
    "kueue-quota": (KueueQuotaDetails,),
    "device-plugin-config": (DevicePluginDetails,),
}


class Action(_Part):
    """One change (or explicit non-change) to one pool, node or queue."""

    pool: str = Field(description="Pool the action changes (the ClusterQueue for kueue-quota).")
    decision: Literal["no-op", "scale-up", "scale-down", "relayout"]
    current_nodes: NonNegInt = Field(description="Nodes now (GPUs of quota for kueue-quota).")
    target_nodes: NonNegInt = Field(description="Nodes asked for (GPUs of quota for kueue-quota).")
    at: Timestamp = Field(description="When to act.")
    needed_at: Timestamp = Field(description="When the capacity must serve: at + lead time.")
    cost_delta_per_hour: float = Field(
        description="Change of spend per hour if applied; negative saves."
    )
    reason: Reason
    kind: ActionKind = Field(
        description="nodes: a pool's size; mig-layout: a node's MIG relabel; kueue-quota: the "
        "training ClusterQueue's GPU quota (current_nodes and target_nodes its nominalQuota in "
        "GPUs summed over the flavors set); device-plugin-config: one node's GPUs shared by "
        "time-slicing or MPS through the device plugin's config."
    )
    details: ActionDetails = Field(
        description="What the actuator needs beyond the node counts; its form follows kind "
        "(empty for nodes)."
    )

    @model_validator(mode="after")
    def _details_fit_kind(self) -> Action:
        allowed = DETAILS_OF_KIND[self.kind]
        if not isinstance(self.details, allowed):
            names = ", ".join(c.__name__ for c in allowed)
            raise ValueError(f"details of a {self.kind} action must be one of {names}")
        return self


# --- what the planner saw and wants ------------------------------------------------------


class SignalSummary(_Part):
    """One signal's forecast as the plan used it."""

    name: str
    unit: str
    estimator: str = Field(description="Model that produced the forecast.")
    reason: str = Field(description="Why that model was chosen.")
    last_timestamp: Timestamp = Field(description="The newest observation.")
    last_value: float = Field(description="The newest observation, in the signal's unit.")
    stale: bool = Field(
        description="Newest sample older than policy.staleness_limit_s: no scale-down on it."
    )
    peak_at_quantile: float = Field(
        description="Highest forecast value at the policy quantile over the horizon."
    )
    notes: list[str]


class PoolPlan(_Part):
    """One pool's planned timeline."""

    pool: str
    tier: Tier
    gpu_model: str = Field(description="Catalog GPU model name.")
    gpus_per_node: Annotated[int, Field(ge=1)]
    price_per_gpu_hour: Annotated[float, Field(gt=0)]
    lead_time_s: NonNegInt = Field(description="From asking for a node to it serving.")
    current_nodes: NonNegInt
    target_nodes: list[NonNegInt] = Field(
        description="Target nodes on each timeline step; the first is this cycle's target."
    )
    binding: list[Bound] = Field(description="The bounds that keep the target now where it is.")


# --- cost and risk --------------------------------------------------------------------------


class Cost(_Part):
    """Spend, in the config's currency."""

    per_hour_now: NonNegFloat = Field(description="Spend per hour once this cycle's actions apply.")
    per_hour_current: NonNegFloat = Field(description="Spend per hour of the current inventory.")
    horizon_total: NonNegFloat = Field(description="Spend over the horizon on the targets.")
    horizon_by_tier: dict[str, NonNegFloat] = Field(description="Tier -> spend over the horizon.")


class Shortfall(_Part):
    """Need one GPU model's pools cannot cover after the lead time, and why."""

    gpu_model: str
    first_at: Timestamp = Field(description="The first step short.")
    max_gpus_short: NonNegFloat = Field(description="GPUs short at the worst step.")
    because: list[Literal["max_nodes", "budget", "max_step", "max_power_kw"]]


class GrowthCalibration(_Part):
    """The calibrated growth quantile the planner applies to a signal near term
    (``scaler.planning.growth``)."""

    level: float = Field(description="Quantile of the growth over the lead time.")
    method: str = Field(description="Forecasting method the backtest walked forward.")
    samples: NonNegInt = Field(description="Backtest origins it was calibrated on.")
    overall_correction: float = Field(
        description="Correction of the forecast's growth over every origin (a factor)."
    )


class GrowthError(_Part):
    """Mean absolute log error of the growth over the lead time on the backtest."""

    forecast: float | None = Field(description="Of the forecast's predicted growth.")
    no_growth: float | None = Field(description="Of assuming none.")


class LeadingCalibration(_Part):
    """The leading signal's part in a signal's near-term rule (``scaler.planning.leading``):
    ``share`` of its arrival measure added to the newest observation."""

    signal: str = Field(description="The leading signal.")
    measure: Literal["excess", "rise"] = Field(
        description="excess: leading minus current; rise: what joined the leading signal "
        "over window_s."
    )
    window_s: NonNegInt = Field(description="Seconds the rise is taken over (0 for excess).")
    share: float = Field(description="Share of the measure provisioned within the lead time.")
    arrived_share: float | None = Field(
        description="On the history: the share of the measure demand rose by within the lead."
    )
    boost: float = Field(description="Signal units added to the newest observation now.")


class SignalMargin(_Part):
    """How far above the newest observation a signal is provisioned near term, and the
    evidence (``scaler.planning.margins.Margin``). Shares are fractions of demand, cost
    ratios multiples of demand held over the history."""

    source: Literal["learned", "policy.headroom_fraction"] = Field(
        description="learned from the signal's history, or the configured headroom."
    )
    margin: float = Field(description="Fraction over the newest observation provisioned.")
    unserved_share: float | None = Field(default=None, description="Left unserved at it.")
    smaller_unserved_share: float | None = Field(
        default=None, description="The same at the next smaller candidate (null at 0)."
    )
    budget: float | None = Field(default=None, description="policy.unserved_budget.")
    history_days: float | None = Field(default=None, description="Span of history replayed.")
    within_budget: bool | None = None
    forecast_shape: bool | None = Field(
        default=None, description="Whether the forecast's predicted change is applied near term."
    )
    cost_ratio: float | None = None
    reactive_cost_ratio: float | None = Field(
        default=None, description="The reactive reference rule's (newest value + 20%)."
    )
    reactive_unserved_share: float | None = None
    capped: bool | None = Field(
        default=None,
        description="No candidate served as well as the reactive rule at no more than its cost.",
    )
    target: float | None = Field(default=None, description="Unserved share aimed at.")
    near_term: str | None = Field(
        default=None, description="Where the near-term number comes from, in words."
    )
    growth_cost_ratio: float | None = None
    flat_cost_ratio: float | None = None
    growth_error: GrowthError | None = None
    growth: GrowthCalibration | None = None
    leading_signal: str | None = Field(
        default=None, description="The workload's leading signal the rule was tried with."
    )
    leading_cost_ratio: float | None = Field(
        default=None,
        description="The cheapest rule with the workload's leading signal at the same service "
        "(null: none served as well).",
    )
    leading: LeadingCalibration | None = Field(
        default=None, description="The leading signal's part, where its rule was chosen."
    )


class ThrottledNode(_Part):
    gpu_model: str | None
    gpus: NonNegInt = Field(description="Throttled GPUs on the node.")
    counted_gpus: NonNegFloat = Field(description="What they count for by their clocks.")
    why: list[Literal["thermal", "power", "slowdown"]]


class PowerReadingSection(_Part):
    """The DCGM exporter's GPUs when the plan was made; absent where nothing is read
    (signals from files, power.enabled false, no exporter)."""

    at: Timestamp
    gpus: NonNegInt = Field(description="GPUs read.")
    lost_gpus: dict[str, NonNegFloat] = Field(
        description="GPU model -> GPUs throttled GPUs no longer serve (added to its need)."
    )
    throttled_nodes: dict[str, ThrottledNode] = Field(description="Node -> its throttled GPUs.")
    power_kw: float | None = Field(description="Power drawn (null: not read).")
    max_temp_c: float | None = Field(description="The hottest GPU, degrees Celsius.")
    unattributed: NonNegInt = Field(description="Throttled GPUs of no known GPU model.")


class ModelWaiting(_Part):
    running_gpus: NonNegFloat
    waiting_gpus: NonNegFloat
    pods: NonNegInt = Field(description="Pending GPU pods counted.")
    workloads: NonNegInt = Field(description="Pending Kueue workloads counted.")


class StarvationSection(_Part):
    """What waited for GPUs when the plan was made (pending GPU pods past
    starvation.pending_threshold_s, Kueue workloads): per GPU model the GPUs running and
    waiting, which the need never goes under; absent where nothing is read."""

    at: Timestamp
    threshold_s: NonNegInt
    models: dict[str, ModelWaiting] = Field(description="GPU model -> what runs and waits.")
    unattributed_gpus: NonNegFloat = Field(description="Waiting GPUs of no known GPU model.")


class SignalDrift(_Part):
    """A signal whose forecasts left their band and was refitted ahead of schedule."""

    coverage: float = Field(description="Share of actuals inside the band.")
    error: float = Field(description="Mean absolute error of the median over the mean actual.")
    points: NonNegInt = Field(description="Forecast-actual pairs judged.")
    band: str = Field(description="The quantiles the coverage is of (q0.1-q0.9).")


class Risk(_Part):
    """What the plan risks and what bounds it."""

    expected_unserved_gpu_hours: NonNegFloat = Field(
        description="Expected GPU-hours of demand above planned capacity over the horizon, "
        "from the forecast quantiles."
    )
    binding: dict[str, list[Bound]] = Field(description="Pool -> its bounds, where it has any.")
    held_models: dict[str, str] = Field(
        description="GPU model -> why its pools are held (stale or missing data)."
    )
    shortfall: list[Shortfall]
    solver: str = Field(
        description="Which planner produced the targets: milp, greedy (the fallback), or both "
        "joined with +."
    )
    spot_spare_nodes: dict[str, NonNegInt] = Field(
        description="Spot pool -> spare nodes held above the need against reclaims during a "
        "replacement's lead time."
    )
    near_need_gpus: dict[str, NonNegFloat] = Field(
        description="GPU model -> the near-term need recorded for later cycles' hold rules."
    )
    observed_gpus: dict[str, NonNegFloat] = Field(
        description="GPU model -> the observed floor (newest demand with headroom)."
    )
    observed_at: dict[str, Timestamp] = Field(
        description="Signal -> the newest observation the plan used; a later cycle releases "
        "nothing until one of a GPU model's signals has a newer one."
    )
    margins: dict[str, SignalMargin] = Field(
        description="Signal -> its near-term margin and the evidence for it."
    )
    power: PowerReadingSection | None = None
    starvation: StarvationSection | None = None
    drift: dict[str, SignalDrift] | None = Field(
        default=None, description="Signal -> its drift, where a drifted signal was refitted."
    )


# --- MIG ---------------------------------------------------------------------------------------


class TimeWindow(_Part):
    start: Timestamp
    end: Timestamp


class MigNodeEntry(_Part):
    node: str
    pool: str
    new: bool = Field(description="A node still to come.")
    current: str | None = Field(description="Its nvidia.com/mig.config now.")
    target: str | None = Field(description="Its nvidia.com/mig.config after the plan.")
    gpus_changed: NonNegInt
    layouts: list[str] = Field(description="Target layout per GPU: whole, or 1g.10gb:7,...")
    strategy: str | None = Field(description="The node's mig.strategy (single, mixed).")
    held: str | None = Field(description="Why its layouts must not change now.")


class MigModel(_Part):
    """One GPU model's MIG plan. Instances are counted per profile (and whole GPUs)."""

    pools: list[str]
    demand_peak_instances: dict[str, NonNegInt]
    demand_instances: dict[str, list[float]] = Field(
        description="Profile -> instances at the policy quantile on each timeline step: the "
        "forecast's, also for a profile planned on its recent peak."
    )
    recent_peak_instances: dict[str, NonNegFloat] = Field(
        description="Profiles planned on the peak of their recent instances instead of the "
        "forecast (it predicted their peak better at past cycles), with that peak."
    )
    capacity_instances: dict[str, NonNegInt]
    shortfall_instances: dict[str, NonNegInt]
    gpus: NonNegInt
    gpus_used: NonNegInt
    gpus_changed: NonNegInt
    gpus_used_without_changes: NonNegInt
    decision: Literal["held", "fits", "cover", "save", "not-worth"]
    solver: str
    window: TimeWindow = Field(description="The lowest-demand window to change in.")
    saved_gpu_hours: float = Field(description="What the change saves (negative: it costs).")
    drain_gpu_hours: NonNegFloat
    covered_gpu_hours: float = Field(
        description="A change for coverage: the forecast shortfall it removes after its "
        "window (0 when none is needed)."
    )
    drain_shortfall_gpu_hours: NonNegFloat = Field(
        description="The forecast shortfall its drains make in the window; a change for "
        "coverage is made only when it removes more than this."
    )
    nodes: list[MigNodeEntry]


class MigPartedConfig(_Part):
    version: Literal["v1"]
    mig_configs: dict[str, list[MigPartedGroup]] = Field(alias="mig-configs")


class MigSection(_Part):
    """MIG layouts: per GPU model its plan, the nvidia.com/mig.config per node and the
    mig-parted config with one entry per distinct node layout."""

    quantile: float
    models: dict[str, MigModel]
    node_labels: dict[str, str] = Field(description="Node -> nvidia.com/mig.config.")
    mig_parted_config: MigPartedConfig


# --- workloads ----------------------------------------------------------------------------------


class WorkloadClassEntry(_Part):
    class_: Literal["inference", "training", "batch"] = Field(alias="class")
    priority: int
    priority_class: str
    critical: bool
    deferrable: bool


class PriorityClassEntry(_Part):
    name: str
    value: int
    for_: list[str] = Field(alias="for", description="The workloads (or placeholders) it is for.")
    preemption_policy: Literal["PreemptLowerPriority", "Never"]


class DeadlineNeeds(_Part):
    """What an unmet deadline would need beyond the idle GPUs (never bought by the plan)."""

    short_gpu_hours: NonNegFloat
    meets_deadline: bool
    binding: str | None = Field(default=None, description="Why it is still short.")
    pool: str | None = Field(default=None, description="The cheapest pool with room.")
    tier: Tier | None = None
    extra_gpus: NonNegInt | None = None
    extra_nodes: NonNegInt | None = None
    hours: NonNegFloat | None = None
    cost: NonNegFloat | None = Field(default=None, description="In the config's currency.")


class DeferrablePlacement(_Part):
    class_: Literal["training", "batch"] = Field(alias="class")
    gpu_model: str
    source: str = Field(description="config, or signal 'NAME'.")
    gpu_hours: NonNegFloat
    deadline: Timestamp
    due_in_horizon_gpu_hours: NonNegFloat
    placed_gpu_hours: NonNegFloat
    meets_deadline: bool
    gpus: list[NonNegFloat] = Field(description="GPUs given per timeline step.")
    deadline_needs: DeadlineNeeds | None


class HourlyUse(_Part):
    hour: Timestamp
    inference_gpu_hours: NonNegFloat = Field(description="Served (inference and critical).")
    deferrable_gpu_hours: NonNegFloat
    idle_gpu_hours: NonNegFloat


class SpareHour(_Part):
    hour: Timestamp
    spare_gpus: NonNegInt


class KueueFlavorPlan(_Part):
    flavor: str | None = Field(description="ResourceFlavor named in the config.")
    nominal_quota: NonNegInt = Field(description="The least spare GPUs of the next hour.")
    borrowing_limit: NonNegInt | None = Field(description="Their peak less that; null: off.")
    hold: str | None = Field(description="Why the quota is held.")
    hourly: list[SpareHour]


class KueueQuotaPlan(_Part):
    cluster_queue: str
    resource: str
    flavors: dict[str, KueueFlavorPlan] = Field(description="GPU model -> its quota.")


class WorkloadsSection(_Part):
    """Workload classes (``scaler.planning.deferrable``)."""

    classes: dict[str, WorkloadClassEntry] = Field(
        description="Workload -> its class, priority and PriorityClass."
    )
    priority_classes: list[PriorityClassEntry] = Field(description="Lowest first.")
    critical_gpus: dict[str, list[float]] | None = Field(
        default=None, description="GPU model -> GPUs of critical runs on each step."
    )
    deferrable: dict[str, DeferrablePlacement] | None = Field(
        default=None, description="Deferrable workload -> its placement into idle capacity."
    )
    hourly: dict[str, list[HourlyUse]] | None = Field(
        default=None, description="Pool -> GPU-hours per clock hour."
    )
    kueue: KueueQuotaPlan | None = Field(
        default=None, description="The training ClusterQueue's quota per GPU model."
    )


# --- sharing -------------------------------------------------------------------------------------


class SharedWorkload(_Part):
    mode: SharedMode
    replicas_per_gpu: NonNegInt


class NamedDevicePluginConfig(_Part):
    name: str
    config: DevicePluginConfig


class PoolingGroup(_Part):
    """One pooling group (<gpu model>/<mode>) and what pooling saves over the horizon."""

    gpu_model: str
    mode: SharedMode
    workloads: list[str]
    replicas_per_gpu: NonNegInt
    device_plugin_config: NamedDevicePluginConfig
    joint_quantile: Literal["estimated", "sum of quantiles"]
    dedicated_peak_gpus: NonNegFloat
    pooled_peak_gpus: NonNegFloat
    saved_peak_gpus: float
    saved_gpu_hours: float
    saved_cost: float
    price_per_gpu_hour: NonNegFloat


class SharedNeedEntry(_Part):
    """One pooling group, or one shared workload in no group, and the nodes it is given."""

    gpu_model: str
    config: Annotated[str, StringConstraints(pattern=r"^tiercast-(time-slicing|mps)-[0-9]+$")]
    mode: SharedMode
    replicas_per_gpu: Annotated[int, Field(ge=2)]
    workloads: list[str]
    group: str | None = Field(description="The pooling group; null for one workload.")
    gpus: NonNegInt = Field(
        description="GPUs it takes shared over the next lead time at the policy quantile."
    )
    gpus_labelled: NonNegInt
    gpus_short: NonNegInt | None = None
    nodes_labelled: list[str]
    nodes_to_label: list[str]
    held: str | None = Field(description="Why no action may come.")


class SharedNodeEntry(_Part):
    node: str
    pool: str
    gpus: NonNegInt
    current: str | None = Field(description="Its nvidia.com/device-plugin.config now.")
    target: str | None
    changed: bool
    gpu_pods: NonNegInt | None = Field(default=None, description="Running GPU pods; null: unknown.")
    held: str | None
    why: str


class SharingSection(_Part):
    """Time-slicing and MPS (``scaler.planning.pooling``, ``scaler.planning.sharing_actions``);
    empty when nothing is shared."""

    workloads: dict[str, SharedWorkload] | None = Field(
        default=None, description="Shared workload -> its mode and replicas per GPU."
    )
    pools: dict[str, PoolingGroup] | None = Field(
        default=None, description="Pooling group -> what pooling saves."
    )
    saved_gpu_hours: float | None = None
    saved_cost: float | None = None
    nodes_from: Literal["cluster", "config"] | None = Field(
        default=None,
        description="cluster: read now; config: the configured node counts, unlabelled; null: "
        "the nodes could not be read, so no device-plugin-config action.",
    )
    needs: list[SharedNeedEntry] | None = None
    device_plugin_configs: dict[str, DevicePluginConfig] | None = None
    node_labels: dict[str, str] | None = Field(
        default=None, description="Node -> the nvidia.com/device-plugin.config it ends with."
    )
    nodes: list[SharedNodeEntry] | None = None


# --- the plan -----------------------------------------------------------------------------------


class Plan(_Part):
    """One planning cycle's output: what the planner saw, the capacity it wants over the
    horizon, the actions it takes now, and their cost and risk. Timestamps are ISO-8601
    UTC with a Z; money is in the config's currency."""

    schema_version: Literal[2]
    created_at: Timestamp = Field(description="The cycle's now.")
    quantile: Annotated[float, Field(gt=0, lt=1)] = Field(
        description="Forecast quantile capacity is sized to."
    )
    horizon_s: Annotated[int, Field(ge=1)]
    step_s: Annotated[int, Field(ge=1)] = Field(
        description="Step of the planning timeline (the cycle length)."
    )
    timeline: Annotated[list[Timestamp], Field(min_length=1)]
    signals: list[SignalSummary]
    demand_gpus: dict[str, list[NonNegFloat]] = Field(
        description="GPU model -> GPUs needed at the plan quantile on each timeline step."
    )
    pools: list[PoolPlan]
    actions: list[Action]
    cost: Cost
    risk: Risk
    notes: list[Reason | str] = Field(
        description="What the planner wants a reader to know: typed notes as reasons, and "
        "sentences from steps without codes."
    )
    mig: MigSection | Empty
    workloads: WorkloadsSection
    sharing: SharingSection


# --- generation ----------------------------------------------------------------------------------


class _NoFieldTitles(GenerateJsonSchema):
    """Pydantic's schema without a title on every field (the names say it)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False


def _plain(node: Any, in_properties: bool = False) -> Any:
    """``node`` as a reader wants it: ``{"type": ["number", "null"]}`` for a nullable plain
    type (not an ``anyOf``), no ``"default": null`` (an optional key is simply not
    required), and each description on one line."""
    if isinstance(node, list):
        return [_plain(x) for x in node]
    if not isinstance(node, dict):
        return node
    if in_properties:
        return {k: _plain(v) for k, v in node.items()}
    out = {k: _plain(v, in_properties=k in ("properties", "$defs")) for k, v in node.items()}
    if out.get("default", 0) is None:
        del out["default"]
    if isinstance(out.get("description"), str):
        out["description"] = " ".join(out["description"].split())
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (inner,) = [o for o in options if o != {"type": "null"}]
        if isinstance(inner.get("type"), str) and "const" not in inner:
            del out["anyOf"]
            out = {**inner, **out, "type": [inner["type"], "null"]}
            if "enum" in inner:
                out["enum"] = [*inner["enum"], None]
    return out


def plan_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the plan's JSON form."""
    schema = _plain(Plan.model_json_schema(by_alias=True, schema_generator=_NoFieldTitles))
    schema["title"] = "tiercast capacity plan"
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://tiercast.invalid/plan.schema.json",
        **schema,
    }


def schema_text() -> str:
    """The schema as ``scaler/plan.schema.json`` holds it: sorted keys, 2-space indent."""
    return json.dumps(plan_schema(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


class PlanFormError(ValueError):
    """A plan's JSON form does not fit :class:`Plan`: the code that fills a section and the
    model here disagree (a bug in one of them, never bad input)."""


def check_plan(plan: dict[str, Any]) -> Plan:
    """``plan`` (a plan's ``to_dict()`` or parsed JSON) as :class:`Plan`; raises
    :class:`PlanFormError` naming every field that does not fit."""
    try:
        return Plan.model_validate_json(json.dumps(plan))
    except ValidationError as exc:
        raise PlanFormError(
            f"the plan's JSON form does not fit scaler/plan_schema.py (change the model "
            f"there, then run {REGENERATE}): {exc}"
        ) from exc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m scaler.plan_schema",
        description="Print, write or check scaler/plan.schema.json, generated from the models.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help=f"rewrite {SCHEMA_PATH.name}")
    group.add_argument(
        "--check", action="store_true", help=f"exit 1 when {SCHEMA_PATH.name} is out of date"
    )
    args = parser.parse_args(argv)
    text = schema_text()
    if args.write:
        SCHEMA_PATH.write_text(text)
    elif args.check:
        if not SCHEMA_PATH.is_file() or SCHEMA_PATH.read_text() != text:
            print(f"{SCHEMA_PATH} is out of date; regenerate it: {REGENERATE}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
