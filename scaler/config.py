"""Configuration: one YAML file declared once as pydantic models, validated at load.

Every field carries its unit in its name or docstring. A bad file raises
:class:`ConfigError` with one line naming the field, the value and what was
expected; the CLI prints it and exits 2. ``data/example-config.yaml`` is the
commented reference; ``tests/test_config.py`` pins the documented defaults.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from forecaster.bounded_yaml import BoundedLoader
from forecaster.errors import BadInputError
from forecaster.files import read_bounded
from scaler.catalog.gpus import GPU_MODELS, GpuModel, gpu_model, reserved_names, user_models
from scaler.catalog.mig import (
    DERIVED_GIB_RATIO,
    GEOMETRIES,
    PROFILE_NAME,
    MigGeometry,
    MigProfile,
    geometry_problem,
    set_user_catalog,
)

Tier = Literal["reserved", "on-demand", "spot"]
TIER_ORDER: dict[str, int] = {"reserved": 0, "on-demand": 1, "spot": 2}
CommitmentTerm = Literal["1y", "3y"]


MAX_SIGNALS = 2000
MAX_WORKLOADS = 2000
MAX_POOLS = 500
MAX_CONFIG_BYTES = 1024 * 1024
"""A config file larger than this is refused before parsing (a real one is kilobytes)."""
MAX_YAML_DEPTH = 32
"""Deepest nesting of mappings and lists read from YAML (the schema needs 5)."""
MAX_YAML_ALIASES = 100
"""Most ``*alias`` references in one file: anchors are for sharing, not for multiplying."""
MAX_YAML_NODES = 200_000
"""Most values in the parsed document, aliases expanded (a billion-laughs file stops here)."""


class ConfigError(BadInputError):
    """The configuration file is missing, unreadable or invalid."""


class _Model(BaseModel):
    # allow_inf_nan=False: ``.inf`` or ``.nan`` is never a price, a rate or a duration.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        # Pydantic's lax mode reads ``true`` as 1 for an int field: ``max_nodes: true`` is a typo.
        if isinstance(data, dict):
            for name, value in data.items():
                field = cls.model_fields.get(name) if isinstance(name, str) else None
                if (
                    isinstance(value, bool)
                    and field is not None
                    and "bool" not in str(field.annotation)
                ):
                    raise ValueError(f".{name}: expected a number, got {str(value).lower()}")
        return data


class SignalConfig(_Model):
    """A demand signal: where its history comes from and what it measures."""

    name: str = Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_.:-]+$")
    """Identifier workloads refer to."""
    unit: str = "1"
    """Unit of the values, for reports (``requests/s``, ``%``, ``GiB``)."""
    query: str | None = None
    """PromQL returning the signal (counters through ``rate()``)."""
    file: str | None = None
    """CSV export (``timestamp,value`` or long format) instead of Prometheus."""
    series: str | None = None
    """Series name inside a long-format ``file``; default: the signal name."""
    step_s: int = Field(default=300, ge=1, le=86400)
    """Sampling step of the history in seconds. Default 300 (5 minutes)."""

    @model_validator(mode="after")
    def _one_source(self) -> SignalConfig:
        if self.query is not None and self.file is not None:
            raise ValueError("give either 'query' or 'file', not both")
        return self


WorkloadClass = Literal["inference", "training", "batch"]
DEFAULT_PRIORITY: dict[str, int] = {"inference": 1000, "training": 100, "batch": 50}
"""Priority of each workload class where ``priority`` is unset; a critical workload gets
the inference value, so inference never preempts it."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_DURATION_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def deadline_value(text: str) -> tuple[str, float]:
    """``("at", epoch seconds)`` for an ISO-8601 time with a zone, ``("in", seconds)`` for a
    duration (``12h``, ``2d``: due that long after each cycle's now); ``ValueError`` else."""
    import datetime

    m = _DURATION.match(text)
    if m is not None:
        seconds = float(m.group(1)) * _DURATION_S[m.group(2)]
        if not 0 < seconds <= 366 * 86400:
            raise ValueError(f"duration {shown(text)} must be positive and at most 366 days")
        return "in", seconds
    try:
        at = datetime.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{shown(text)} is neither an ISO-8601 time with a zone "
            "('2026-12-05T00:00:00Z') nor a duration ('12h', '2d')"
        ) from None
    if at.tzinfo is None:
        raise ValueError(f"{shown(text)} has no time zone; add 'Z' for UTC")
    return "at", at.timestamp()


class DeferrableConfig(_Model):
    """Training or batch work that may wait: GPU-hours to be done by a deadline.

    The planner places it into capacity the plan holds and inference leaves idle (the
    forecast's troughs, reserved nodes), never buys capacity for it, and reports what the
    deadline would need where that does not suffice (``scaler.planning.deferrable``)."""

    gpu_hours: float | None = Field(default=None, gt=0, le=1e9)
    """GPU-hours left to do. Unset: the workload's ``signal`` is a queue signal whose
    newest value is the pending GPU-hours (e.g. the sum of queued jobs' GPUs x hours)."""
    deadline: str = Field(min_length=1, max_length=64)
    """When the work must be done: an ISO-8601 time with a zone (``2026-12-05T00:00:00Z``),
    or a duration (``12h``, ``2d``) after each cycle's now, for a queue whose pending work
    must be done that long after it is seen."""
    max_gpus: int | None = Field(default=None, ge=1, le=1_000_000)
    """Most GPUs the work can use at once (its parallelism). Default: no limit."""

    @field_validator("deadline")
    @classmethod
    def _deadline(cls, value: str) -> str:
        deadline_value(value)
        return value


class WorkloadConfig(_Model):
    """A service whose demand is driven by one signal and served on one GPU model."""

    # ``class`` is a Python keyword: the attribute is ``workload_class``; either name is read.
    model_config = ConfigDict(populate_by_name=True)

    name: str = Field(min_length=1, max_length=200)
    signal: str = Field(default="", max_length=200)
    """Name of the signal that drives this workload. Required, except for deferrable work
    given as ``deferrable.gpu_hours`` (empty: no signal)."""
    gpu_model: str
    """Catalog name (``H100-80GB``) or alias (``H100``); pools of this model serve it."""
    units_per_replica: float = Field(ge=1e-6, le=1e9)
    """Signal units one replica serves at its latency target (e.g. requests/s per replica);
    finite, from 1e-6 to 1e9: beyond that every demand rounds to zero replicas, which would
    release capacity on a typo, and below it any demand asks for millions of GPUs."""
    gpus_per_replica: int = Field(default=1, ge=1, le=64)
    """Whole GPUs one replica needs. Default 1."""
    min_replicas: int = Field(default=0, ge=0, le=1_000_000)
    """Replicas kept whatever the forecast says. Default 0; at most 1,000,000."""
    memory_gb: float | None = Field(default=None, gt=0, le=4096)
    """GPU memory one replica needs, GB, for MIG profile choice and time-slicing/MPS packing;
    optional (unset: a shared replica counts as the whole GPU's memory)."""
    mig_profile: str | None = None
    """MIG profile one replica runs on (``1g.10gb``); replicas then use slices, not GPUs."""
    sharing: Literal["auto", "whole", "mig", "time-slicing", "mps"] = "auto"
    """How this workload's replicas may share a GPU: ``whole`` GPUs, ``mig`` slices (with
    ``mig_profile``), the device plugin's ``time-slicing`` or ``mps``, or ``auto`` (the
    planner's choice within ``isolation``). Default ``auto``: MIG where ``mig_profile`` is
    set, MPS (or, for ``isolation: none``, time-slicing) where a footprint of less than a
    GPU is declared and isolation admits it, else whole GPUs. Shared replicas are packed by
    memory and ``compute_share`` (``scaler.planning.sharing``, docs/mig.md#sharing-modes)."""
    isolation: Literal["required", "preferred", "none"] = "preferred"
    """What isolation between workloads on one GPU this one needs: ``required`` admits only
    whole GPUs or MIG (hardware isolation of memory and faults); time-slicing gives none,
    MPS limited isolation. Default ``preferred``."""
    compute_share: float | None = Field(default=None, gt=0, le=1)
    """Share of one GPU's compute one replica uses at ``units_per_replica``, 0 to 1, for
    time-slicing and MPS packing. Default: ``1 / replicas_per_gpu``, else 1 (a whole GPU:
    nothing is packed on a footprint not declared)."""
    replicas_per_gpu: int | None = Field(default=None, ge=1, le=1024)
    """Most replicas of this workload one shared GPU may hold (time-slicing, MPS); optional.
    The planner packs fewer where memory or compute do not fit (docs/mig.md#sharing-modes)."""
    memory_signal: str | None = None
    """A declared signal of the GPU memory one replica uses, GB (e.g. the mean over its pods
    of ``DCGM_FI_DEV_FB_USED / 1024``), for the review's right-sizing table and, where
    ``memory_gb`` is not declared, the footprint time-slicing and MPS pack by
    (``scaler.planning.footprints``); optional."""
    utilization_signal: str | None = None
    """A declared signal of how busy one replica keeps its GPU, percent (e.g. the mean over
    its pods of ``DCGM_FI_DEV_GPU_UTIL``), for the right-sizing table and, where no
    ``compute_share`` or ``replicas_per_gpu`` is declared, the compute share time-slicing
    and MPS pack by (``scaler.planning.footprints``); optional."""
    model_params_b: float | None = Field(default=None, gt=0, le=100_000)
    """Parameters of the model the workload serves, billions: the right-sizing table then
    also says what fits its weights at FP8 and INT4; optional."""
    token_signal: str | None = None
    """A declared signal of the tokens per second this workload serves (vLLM:
    ``sum(rate(vllm:generation_tokens_total[5m])) + sum(rate(vllm:prompt_tokens_total[5m]))``),
    for its cost per 1M tokens in the review and the finance report; optional."""
    leading_signal: str | None = None
    """A declared signal of demand that waits now and becomes this workload's ``signal`` after
    a delay, in the same units (Kueue pending GPU-hours, pending GPU pods, vLLM's
    ``vllm:num_requests_waiting``, running plus queued jobs): the near-term rule tries it on
    the signal's own history and uses it where it serves as well for less
    (``scaler.planning.leading``); optional."""

    workload_class: WorkloadClass = Field(default="inference", alias="class")
    """``inference`` (latency-bound, planned from its signal's forecast), ``training`` or
    ``batch``. Default ``inference``. Non-critical training and batch are deferrable demand
    (``deferrable``): placed into idle capacity and preempted first."""
    priority: int | None = Field(default=None, ge=0, le=1_000_000_000)
    """Scheduling priority, a Kubernetes PriorityClass value (0 to 1e9; placeholders sit
    below zero). Default by class: inference 1000, training 100, batch 50; a critical
    workload defaults to the inference value. Deferrable work must stay below every
    inference workload, since it is what gives way when inference rises."""
    critical: bool = False
    """A training or batch run that must not be interrupted: planned like inference from
    its signal (dedicated capacity, e.g. ``min_replicas``) and never preempted. Default false."""
    deferrable: DeferrableConfig | None = None
    """For non-critical training and batch: GPU-hours and a deadline (required for them)."""

    @model_validator(mode="before")
    @classmethod
    def _deferrable_defaults(cls, data: Any) -> Any:
        # Deferrable work is not translated from a signal into replicas: units_per_replica
        # means nothing for it, and with gpu_hours it needs no signal either.
        if (
            isinstance(data, dict)
            and data.get("class", data.get("workload_class", "inference")) != "inference"
            and not data.get("critical")
        ):
            data = {**data}
            data.setdefault("units_per_replica", 1.0)
        return data

    @property
    def is_deferrable(self) -> bool:
        """Whether this is deferrable demand (non-critical training or batch)."""
        return self.workload_class != "inference" and not self.critical

    @property
    def effective_priority(self) -> int:
        """``priority``, or its class default (a critical workload: the inference default)."""
        if self.priority is not None:
            return self.priority
        return DEFAULT_PRIORITY["inference" if self.critical else self.workload_class]

    @model_validator(mode="after")
    def _classes(self) -> WorkloadConfig:
        if self.workload_class == "inference" and self.critical:
            raise ValueError(
                ".critical: applies to training and batch; inference is never preempted anyway"
            )
        if self.deferrable is not None and not self.is_deferrable:
            why = (
                "critical work is planned like inference"
                if self.critical
                else ("class is 'inference'")
            )
            raise ValueError(
                f".deferrable: only non-critical training and batch are deferrable ({why}); "
                "drop deferrable"
            )
        if self.is_deferrable:
            if self.deferrable is None:
                raise ValueError(
                    f".deferrable: a non-critical {self.workload_class} workload needs "
                    "deferrable: {gpu_hours, deadline} (or a queue signal and a deadline), "
                    "or critical: true"
                )
            if self.deferrable.gpu_hours is None and not self.signal:
                raise ValueError(
                    ".deferrable.gpu_hours: give gpu_hours, or a signal giving pending GPU-hours"
                )
            if self.mig_profile is not None:
                raise ValueError(
                    f".mig_profile: deferrable {self.workload_class} work is placed in whole "
                    "GPUs; drop mig_profile"
                )
        elif not self.signal:
            raise ValueError(".signal: required field is missing")
        return self

    @model_validator(mode="after")
    def _sharing(self) -> WorkloadConfig:
        if self.isolation == "required" and self.sharing in ("time-slicing", "mps"):
            kind = "no" if self.sharing == "time-slicing" else "only limited"
            raise ValueError(
                f".sharing: {self.sharing!r} gives {kind} memory and fault isolation; "
                "isolation: required admits only whole, mig or auto"
            )
        if self.sharing == "mig" and self.mig_profile is None:
            raise ValueError(
                ".sharing: 'mig' needs mig_profile (a profile, or auto with memory_gb)"
            )
        if self.mig_profile is not None and self.sharing in ("whole", "time-slicing", "mps"):
            raise ValueError(
                f".mig_profile: {self.mig_profile!r} runs replicas on MIG slices, but sharing "
                f"is {self.sharing!r}; drop one, or set sharing: mig"
            )
        if self.sharing in ("time-slicing", "mps") and self.gpus_per_replica > 1:
            raise ValueError(
                f".gpus_per_replica: {self.gpus_per_replica} GPUs per replica cannot be "
                f"shared by {self.sharing!r} (one shared GPU per request); set sharing: whole"
            )
        return self


_K8S_NAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


class RecordingProviderConfig(_Model):
    """No cluster: actions are recorded against the pool's ``current_nodes``."""

    kind: Literal["recording"] = "recording"


class ClusterApiProviderConfig(_Model):
    """Cluster API: the pool is one MachineDeployment, sized through its ``scale`` subresource."""

    kind: Literal["cluster-api"]
    machine_deployment: str = Field(min_length=1, max_length=253, pattern=_K8S_NAME)
    """Name of the MachineDeployment."""
    namespace: str = Field(default="default", min_length=1, max_length=63, pattern=_K8S_NAME)
    api_version: str | None = Field(default=None, pattern=r"^[a-z0-9.-]+/v[0-9a-z]+$")
    """Group/version serving MachineDeployments. Default: the newest the cluster serves,
    ``cluster.x-k8s.io/v1beta2`` (Cluster API v1.11+) where discovery lists it, else the
    deprecated ``cluster.x-k8s.io/v1beta1``."""
    node_selector: str | None = None
    """Label selector of the pool's nodes; default ``cluster.x-k8s.io/deployment-name=<name>``
    (set it on the nodes) or the pool label ``tiercast.io/pool=<pool>``."""


class KarpenterProviderConfig(_Model):
    """Karpenter: the pool is one NodePool; tiercast sets its GPU limit or static replicas."""

    kind: Literal["karpenter"]
    node_pool: str = Field(min_length=1, max_length=253, pattern=_K8S_NAME)
    """Name of the NodePool (cluster-scoped)."""
    mode: Literal["limits", "replicas"] = "limits"
    """``limits``: ``spec.limits["nvidia.com/gpu"]`` = target nodes x GPUs per node (a ceiling
    that pending pods, e.g. placeholders, fill); ``replicas``: ``spec.replicas`` of a static
    NodePool. Default ``limits``."""
    api_version: str = Field(default="karpenter.sh/v1", pattern=r"^[a-z0-9.-]+/v[0-9a-z]+$")
    node_selector: str | None = None
    """Label selector of the pool's nodes; default ``karpenter.sh/nodepool=<node_pool>``."""


class PlaceholderProviderConfig(_Model):
    """Headroom pods: a Deployment of pause pods at a negative priority that any cluster
    autoscaler provisions nodes for and real pods preempt."""

    kind: Literal["placeholder"]
    namespace: str = Field(
        default="tiercast-system", min_length=1, max_length=63, pattern=_K8S_NAME
    )
    priority_class: str = Field(
        default="tiercast-placeholder", min_length=1, max_length=253, pattern=_K8S_NAME
    )
    priority: int = Field(default=-10, lt=0, ge=-10)
    """PriorityClass value, -10 to -1. Below zero so every real pod preempts a placeholder;
    not below -10, the cluster autoscaler's default ``--expendable-pods-priority-cutoff``,
    under which it never adds a node for a pod (its FAQ). Default -10."""
    gpus_per_pod: int | None = Field(default=None, ge=1, le=16)
    """GPUs one placeholder requests; default the pool's ``gpus_per_node`` (one pod holds a node)."""
    image: str = Field(default="registry.k8s.io/pause:3.10", min_length=1)
    node_selector: str | None = None
    """Label selector of the pool's nodes and the placeholders' node affinity (equality terms
    only); default ``tiercast.io/pool=<pool>``."""


class CapacityBufferProviderConfig(PlaceholderProviderConfig):
    """Headroom through the upstream ``CapacityBuffer`` API (``autoscaling.x-k8s.io/v1beta1``,
    served where the cluster autoscaler's CRD is installed): a PodTemplate of one chunk and a
    buffer of ``replicas`` chunks; where the API is not served, the placeholder Deployment
    of ``placeholder`` (the same fields) instead. ``gpus_per_pod`` is the GPUs of one chunk."""

    kind: Literal["capacity-buffer"]  # type: ignore[assignment]


ProviderConfig = Annotated[
    RecordingProviderConfig
    | ClusterApiProviderConfig
    | KarpenterProviderConfig
    | CapacityBufferProviderConfig
    | PlaceholderProviderConfig,
    Field(discriminator="kind"),
]
KUBERNETES_PROVIDER_KINDS: tuple[str, ...] = (
    "cluster-api",
    "karpenter",
    "placeholder",
    "capacity-buffer",
)


class BillingConfig(_Model):
    """How a pool's provider bills a node: in whole periods, with a minimum.

    Hourly billing is ``{granularity_s: 3600, minimum_s: 3600}``; per-second billing with a
    one-minute minimum ``{granularity_s: 1, minimum_s: 60}``. A node up for ``u`` seconds is
    billed ``max(minimum_s, ceil(u / granularity_s) * granularity_s)`` (scaler.planning.billing).
    """

    granularity_s: int = Field(ge=1, le=31 * 86400)
    """Length of one billed period, seconds (3600 hourly, 1 per second); at most 31 days."""
    minimum_s: int = Field(default=0, ge=0, le=366 * 86400)
    """Least billed for a node however briefly it runs, seconds. Default 0; at most a year."""


class PoolConfig(_Model):
    """A group of identical GPU nodes bought on one tier."""

    name: str = Field(min_length=1, max_length=63, pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    """Kubernetes-style name (lower case, digits, '-')."""
    tier: Tier
    gpu_model: str
    gpus_per_node: int = Field(ge=1, le=16)
    price_per_gpu_hour: float = Field(gt=0, le=10_000)
    """Price of one GPU-hour on this pool, in the config's currency; finite, at most 10,000
    (no GPU rents for more: a larger number is a unit mistake, and it would overflow costs)."""
    # Declared before lead_time_s: with ``auto``, lead_time_s is validated as this value,
    # and a bad fallback must be reported under its own name, which comes first.
    lead_time_fallback_s: int = Field(default=600, ge=0, le=86400)
    """With ``lead_time_s: auto``: the seconds planned with until 5 node starts have been
    observed (a new pool, a dry-run without a cluster). Default 600, bounds as ``lead_time_s``;
    ignored otherwise."""
    lead_time_s: int = Field(default=600, ge=0, le=86400)
    """Seconds from asking for a node to it serving (boot, driver, image, model load). Default 600.
    ``auto``: learned from the cluster, the q0.9 of the pool's last 30 observed node starts
    (``scaler.service.lead_times``); until 5 are observed, ``lead_time_fallback_s``. The
    attribute is always whole seconds: on an ``auto`` pool it reads as the fallback until
    the cycle's fleet carries the learned value (:meth:`Fleet.with_lead_times`, from
    :func:`scaler.service.lead_times.resolve_lead_times`); :attr:`lead_time_auto` says
    which pools are ``auto``."""
    _lead_time_auto: bool = PrivateAttr(default=False)
    min_nodes: int = Field(default=0, ge=0, le=100_000)
    """Nodes kept whatever the forecast says. Default 0; at most 100,000 (any real pool)."""
    max_nodes: int = Field(default=100, ge=0, le=100_000)
    """Most nodes the pool may have. Default 100; at most 100,000."""
    current_nodes: int | None = Field(default=None, ge=0, le=100_000)
    """Nodes running now, for file-based inventories (dry-run without a cluster)."""
    spot_interruption_rate_per_hour: float = Field(default=0.0, ge=0, lt=1)
    """Probability that a node is reclaimed within an hour (spot tiers). Default 0."""
    provider: ProviderConfig = RecordingProviderConfig()
    """How capacity is changed: ``{kind: recording | cluster-api | karpenter | placeholder, ...}``
    (the models above; ``scaler.actuation.kube`` acts on the Kubernetes kinds)."""
    mig_layouts: tuple[str, ...] | None = None
    """MIG-managed pool: the current layout of each node's GPUs, one entry per node (``whole``,
    or profile counts such as ``1g.10gb:7`` or ``3g.40gb:1,2g.20gb:2``); nodes past the list
    are whole. None (default): the MIG planner leaves the pool alone. See ``scaler.planning.mig``."""
    mig_whole_gpus: int = Field(default=0, ge=0, le=1_600_000)
    """GPUs of a MIG-managed pool kept whole (MIG off) for jobs needing a full GPU. Default 0."""
    mig_change_s: int = Field(default=900, ge=60, le=86400)
    """Seconds to drain a node and re-partition its GPUs. Default 900."""
    commitment_price_per_gpu_hour: dict[CommitmentTerm, Annotated[float, Field(gt=0)]] = Field(
        default_factory=dict
    )
    """Reserved pools: price per GPU-hour of a *new* commitment by term, e.g. ``{1y: 2.6, 3y: 1.9}``
    (config currency). Empty (default): new commitments cost ``price_per_gpu_hour``, term unnamed.
    The finance dry-run's commitment advice prices added nodes with these."""
    billing: BillingConfig | None = None
    """How the provider bills a node, ``{granularity_s, minimum_s}`` (hourly: 3600/3600).
    With it a node is released at the end of a period already paid for, not in its middle,
    and the replay and the finance projection price whole periods. None (default): billed
    by the second, released at once, priced per planning step."""
    price_per_kwh: float | None = Field(default=None, gt=0, le=100)
    """Price of one kWh of electricity drawn by this pool's GPUs, in the config's currency
    (colocation or on-premises fleets pay it beside the node price). None (default): no
    energy cost; with it the finance projection adds one per pool and tier."""
    watts_per_gpu: float | None = Field(default=None, gt=0, le=5000)
    """Power one GPU draws, W, for the energy cost and ``max_power_kw``. Default: the GPU
    model's TDP where the catalog knows it (``scaler.catalog.gpus.TDP_WATTS``, the SXM
    board's; set it for PCIe boards), else required with ``price_per_kwh`` or
    ``max_power_kw``."""
    max_power_kw: float | None = Field(default=None, gt=0, le=1_000_000)
    """Most power the pool's GPUs may draw, kW (a rack's or a hall's power budget): the
    planner never requests more nodes than ``max_power_kw x 1000 / (gpus_per_node x
    watts_per_gpu)`` and names the bound ``max_power_kw``. None (default): no cap."""

    @model_validator(mode="wrap")
    @classmethod
    def _auto_lead_time(
        cls, data: Any, handler: ModelWrapValidatorHandler[PoolConfig]
    ) -> PoolConfig:
        # ``auto`` is kept beside the field, not in it: planning, replay and reports do
        # arithmetic on ``lead_time_s`` and must always find whole seconds there.
        auto = isinstance(data, dict) and data.get("lead_time_s") == "auto"
        if auto:
            fallback = data.get("lead_time_fallback_s", 600)
            # A boolean fallback is left to the bool check, which then names the fallback.
            data = {**data, "lead_time_s": 600 if isinstance(fallback, bool) else fallback}
        pool = handler(data)
        if auto:
            pool._lead_time_auto = True
        return pool

    @field_validator("lead_time_s", mode="before")
    @classmethod
    def _lead_time_value(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip().lstrip("+-").isdigit():
            raise ValueError(f"expected whole seconds (0 to 86400) or 'auto', got {shown(value)}")
        return value

    @field_serializer("lead_time_s")
    def _lead_time_out(self, value: int) -> int | str:
        # A dumped config reads back the same: ``auto`` stays ``auto``.
        return "auto" if self._lead_time_auto else value

    @model_validator(mode="after")
    def _bounds(self) -> PoolConfig:
        if self.max_nodes < self.min_nodes:
            raise ValueError(f"max_nodes ({self.max_nodes}) is below min_nodes ({self.min_nodes})")
        if self.current_nodes is not None and self.current_nodes > self.max_nodes:
            # A file inventory above the ceiling would be cut to max_nodes in one cycle.
            raise ValueError(
                f".current_nodes: {self.current_nodes} is above max_nodes ({self.max_nodes}); "
                "raise max_nodes (the planner steps down by at most max_step_nodes a cycle)"
            )
        if (self.price_per_kwh is not None or self.max_power_kw is not None) and (
            self.gpu_watts is None
        ):
            field = "price_per_kwh" if self.price_per_kwh is not None else "max_power_kw"
            raise ValueError(
                f".watts_per_gpu: required with {field}: the catalog has no TDP for "
                f"{self.gpu_model!r}"
            )
        cap = self.power_cap_nodes
        if self.max_power_kw is not None and cap is not None and cap < self.min_nodes:
            raise ValueError(
                f".max_power_kw: {self.max_power_kw:g} kW holds {cap} node(s) of "
                f"{self.gpus_per_node} x {self.gpu_watts:g} W, below min_nodes "
                f"({self.min_nodes}); raise max_power_kw or lower min_nodes"
            )
        if self.tier != "spot" and self.spot_interruption_rate_per_hour > 0:
            raise ValueError("spot_interruption_rate_per_hour applies to tier 'spot' only")
        if self.tier != "reserved" and self.commitment_price_per_gpu_hour:
            raise ValueError(
                f"commitment_price_per_gpu_hour applies to tier 'reserved' only; pool "
                f"{self.name!r} is {self.tier!r}"
            )
        return self

    @property
    def lead_time_auto(self) -> bool:
        """Whether the config says ``lead_time_s: auto`` (the lead time is learned)."""
        return self._lead_time_auto

    def with_lead_time(self, seconds: int) -> PoolConfig:
        """A copy planned with ``seconds`` of lead time, no longer ``auto`` (what the
        planner gets once the lead time is resolved)."""
        pool = self.model_copy(update={"lead_time_s": seconds})
        pool._lead_time_auto = False
        return pool

    @property
    def committed_nodes(self) -> int:
        """Reserved nodes paid for whether used or not: what runs now, at least ``min_nodes``."""
        return max(self.min_nodes, self.current_nodes or 0)

    @property
    def price_per_node_hour(self) -> float:
        return self.price_per_gpu_hour * self.gpus_per_node

    @property
    def gpu_watts(self) -> float | None:
        """``watts_per_gpu``, else the catalog's TDP of the GPU model, else None."""
        if self.watts_per_gpu is not None:
            return self.watts_per_gpu
        from scaler.catalog.gpus import tdp_watts

        return tdp_watts(self.gpu_model)

    @property
    def power_cap_nodes(self) -> int | None:
        """Most nodes ``max_power_kw`` allows (None: no cap, or no wattage known)."""
        watts = self.gpu_watts
        if self.max_power_kw is None or watts is None:
            return None
        return math.floor(self.max_power_kw * 1000.0 / (self.gpus_per_node * watts) + 1e-9)


class PolicyConfig(_Model):
    """How cautious the planner is."""

    quantile: float = Field(default=0.9, ge=0.5, lt=1.0)
    """Forecast quantile capacity is sized to. Default 0.9."""
    headroom_fraction: float = Field(default=0.1, ge=0, le=2)
    """Extra capacity over current observed demand, the reactive floor. Default 0.1 (10%)."""
    scale_down_stabilization_s: int = Field(default=1800, ge=0, le=7 * 86400)
    """Capacity is only released if it is not needed again within this window. Default 1800;
    at most 7 days (the forecast must reach that far)."""
    max_step_nodes: int = Field(default=8, ge=1, le=100_000)
    """Most nodes one pool may gain or lose in one cycle. Default 8."""
    budget_per_hour: float | None = Field(default=None, gt=0, le=1e9)
    """Cap on the fleet's spend per hour; none by default. Finite, at most 1e9."""
    horizon_s: int = Field(default=86400, ge=300, le=366 * 86400)
    """How far ahead to forecast and plan, in seconds. Default 86400 (24 h); at most 366
    days, the longest finance projection (memory grows with horizon x signals)."""
    cycle_s: int = Field(default=300, ge=60, le=86400)
    """How often the cycle runs, in seconds. Default 300; at most a day (a plan older than
    that acts on a stale forecast)."""
    staleness_limit_s: int = Field(default=900, ge=60, le=30 * 86400)
    """A signal whose newest sample is older than this is stale: no scale-down. Default 900;
    at most 30 days."""
    unserved_budget: float = Field(default=0.005, ge=0, le=0.5)
    """Share of demand GPU-hours a signal's learned margin may leave unserved in the
    walk-forward replay of its own history (scaler.planning.margins). Default 0.005 (0.5%)."""
    growth_backtest_s: int = Field(default=3 * 86400, ge=0, le=90 * 86400)
    """Span of each signal's newest history over which the forecaster is walked forward to
    calibrate its growth quantile (scaler.planning.growth); 0: the near-term rule never uses
    the forecast. Default 3 days; at most 90."""
    growth_refresh_s: int = Field(default=86400, ge=300, le=7 * 86400)
    """How often that backtest refreshes its forecast (one forecast per refresh). Default
    1 day (3 forecasts per signal and cycle at the default span); shorter calibrates closer
    to a forecast refreshed every cycle, at one forecast per refresh and signal each cycle."""


class ForecastConfig(_Model):
    method: str = "auto"
    """Estimator name from the registry, or ``auto`` (chosen per series by backtest); scalar
    settings in parentheses, ``auto(budget_s=3)`` (``forecaster.estimators.make``)."""
    quantiles: tuple[float, ...] = Field(default=(0.1, 0.5, 0.9), min_length=1, max_length=99)
    """Quantiles computed and reported, each strictly between 0 and 1; the policy quantile
    is added if missing."""
    jobs: int = Field(default=1, ge=-1, le=1024)
    """Worker processes forecasting series in parallel (``-1``: every core; ``dask``: LocalCluster
    workers). Default 1: in the cycle's own process; at most 1024 (each is a process). See
    ``forecaster/parallel.py``."""
    backend: Literal["joblib", "dask"] = "joblib"
    """``joblib`` (processes on this machine) or ``dask`` (``pip install 'tiercast[distributed]'``).
    Default joblib."""
    scheduler: str | None = None
    """Dask scheduler address (``tcp://host:8786``); unset with ``dask``: a LocalCluster per cycle."""
    batch_size: int = Field(default=8, ge=1, le=10_000)
    """Series sent to a worker at a time; about ``2 * jobs`` batches are in flight. Default 8."""

    @field_validator("quantiles")
    @classmethod
    def _quantiles_in_range(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        # Refused at load: a quantile out of range would otherwise fail every signal's
        # forecast and hold the whole fleet as "no data" every cycle.
        for q in value:
            if not 0.0 < q < 1.0:
                raise ValueError(
                    f"forecast.quantiles: {q!r} is not strictly between 0 and 1; "
                    "expected e.g. [0.1, 0.5, 0.9]"
                )
        return value

    @model_validator(mode="after")
    def _parallel(self) -> ForecastConfig:
        if self.jobs == 0:
            raise ValueError("forecast.jobs must be >= 1 or -1 (every core); got 0")
        if self.scheduler is not None and self.backend != "dask":
            raise ValueError("forecast.scheduler needs forecast.backend: dask")
        return self


class PrometheusConfig(_Model):
    """Where signals with a ``query`` are read; see ``forecaster/prometheus.py``."""

    url: str = Field(pattern=r"^https?://", max_length=2048)
    """Base URL, e.g. ``https://prometheus.monitoring:9090``."""
    allow_insecure: bool = False
    """Send ``bearer_token_file`` or the password over plain ``http://`` anyway (anyone on
    the network path can read them). Default false: such a config is refused at load."""
    bearer_token_file: str | None = None
    """File holding a bearer token (a Kubernetes secret mount); read each cycle, never logged."""
    username: str | None = None
    """Basic-auth user; the password comes from ``password_file``."""
    password_file: str | None = None
    ca_file: str | None = None
    """CA bundle (PEM) that signed the server's certificate; default: the system's."""
    verify_tls: bool = True
    """Verify the server's TLS certificate. Default true."""
    timeout_s: float = Field(default=30.0, gt=0, le=600)
    """Deadline of one whole HTTP request (connect, headers and body), in seconds; at most
    600 so one slow chunk cannot hold a cycle for longer than ten minutes. Default 30."""
    retries: int = Field(default=3, ge=0, le=10)
    """Retries of a request after a connection error, timeout, 429 or 5xx. Default 3."""
    retry_backoff_s: float = Field(default=1.0, ge=0, le=30)
    """First wait before a retry, doubled each time (capped at 30 s). Default 1."""
    lookback_s: int = Field(default=14 * 86400, ge=3600, le=400 * 86400)
    """History window read each cycle. Default 14 days; at most 400 days (a year and its
    seasons is the most any estimator uses, and each cycle reads the whole window)."""
    max_response_bytes: int = Field(default=256 * 1024 * 1024, ge=1024, le=4 * 1024**3)
    """Largest decoded answer read from one request; a larger one is a one-line error,
    not an out-of-memory pod. Default 256 MiB (11,000 points x ~1,000 series)."""
    max_series: int = Field(default=10_000, ge=1, le=1_000_000)
    """Most series one query may return; more means the query lost its aggregation.
    Default 10,000."""
    max_fill_gap_s: int = Field(default=900, ge=0, le=86400)
    """Gaps up to this long are interpolated; longer ones stay missing and are reported. Default 900."""
    history_url: str | None = Field(default=None, pattern=r"^https?://", max_length=2048)
    """Where the range queries of signal history go, when a long-term store answers PromQL
    beyond Prometheus' retention (Thanos Query, Mimir, VictoriaMetrics), with the same
    credentials and TLS settings. Default: ``url``."""
    keep_history_days: int = Field(default=400, ge=0, le=3650)
    """Days of each signal's history tiercast keeps in its own store beyond what Prometheus
    returns (daily Parquet files in ``history/`` of the model store's folder, at the signal's
    step; forecaster/history_store.py), so forecasts see more than Prometheus' 15-day
    default retention. Default 400; 0 keeps none."""

    @model_validator(mode="after")
    def _one_auth(self) -> PrometheusConfig:
        if self.bearer_token_file is not None and self.username is not None:
            raise ValueError("prometheus: give either bearer_token_file or username, not both")
        if self.password_file is not None and self.username is None:
            raise ValueError("prometheus: password_file needs username")
        credentials = self.bearer_token_file is not None or self.username is not None
        plain = self.url.startswith("http://") or (self.history_url or "").startswith("http://")
        if credentials and plain and not self.allow_insecure:
            # Worded so that redaction (which masks the word after "token") keeps it readable.
            kind = "bearer_token_file" if self.bearer_token_file is not None else "password_file"
            raise ValueError(
                f"prometheus.url: {self.url[:200]!r} is plain http:// and the credential in "
                f"{kind} would be sent in clear; use https:// or set prometheus.allow_insecure: true"
            )
        return self


class ModelStoreConfig(_Model):
    path: str = "models"
    """Folder with one fitted model per series. Default ``models`` in the state directory
    (``service.state_dir``); a path given here is used as given (relative to the working
    folder). A path that is not a folder turns the store off with one warning: every
    cycle refits, none fails."""
    max_age_s: int = Field(default=86400, ge=0, le=366 * 86400)
    """Refit a stored model older than this. Default 86400 (daily)."""
    signing_key_file: str | None = None
    """File (a mounted Secret) holding the HMAC key that signs the pickled parts of
    stored models (scikit-learn's trees, which have no code-free form). Default None:
    ``$TIERCAST_MODEL_SIGNING_KEY_FILE``, else such models are refitted every cycle and
    never written. Every other model is stored in a format that cannot run code."""


_DOW_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _cron_day_of_week(field: str) -> str:
    """Cron numbers days 0-7 from Sunday; APScheduler 3 numbers them from Monday: use names."""
    parts = []
    for part in field.split(","):
        base, _, step = part.partition("/")
        if (base == "*" and not step) or (base != "*" and not any(c.isdigit() for c in base)):
            parts.append(part)
            continue
        lo, _, hi = ("0-7" if base == "*" else base).partition("-")
        days = range(int(lo), int(hi or lo) + 1, int(step or 1))
        if not days or max(days) > 7:
            raise ValueError(f"day of week {part!r} is outside 0-7")
        parts.extend(_DOW_NAMES[d] for d in days)
    return ",".join(dict.fromkeys(parts))


def parse_schedule(text: str) -> Any:
    """An APScheduler trigger from a schedule string (always UTC).

    ``m h dom mon dow`` is standard cron; a sixth leading field adds seconds
    (``*/10 * * * * *``); ``@every 30s`` is a fixed interval (any duration
    ``parse_duration`` reads). Raises ``ValueError`` naming what was expected.
    """
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.interval import IntervalTrigger

    from forecaster.series import parse_duration

    words = text.split()
    if words and words[0] == "@every":
        if len(words) != 2:
            raise ValueError(f"{text!r}: expected '@every <duration>', e.g. '@every 30s'")
        seconds = parse_duration(words[1]).total_seconds()
        if seconds <= 0:
            raise ValueError(f"{text!r}: the interval must be positive")
        return IntervalTrigger(seconds=seconds, timezone="UTC")
    if len(words) not in (5, 6):
        raise ValueError(
            f"{text!r}: expected 5 cron fields (minute hour day month weekday), "
            f"6 with leading seconds, or '@every <duration>'"
        )
    second = words[0] if len(words) == 6 else "0"
    minute, hour, day, month, dow = words[-5:]
    try:
        return CronTrigger(
            second=second,
            minute=minute,
            hour=hour,
            day=day,
            month=month,
            day_of_week=_cron_day_of_week(dow),
            timezone="UTC",
        )
    except ValueError as exc:
        raise ValueError(f"{text!r}: {exc}") from exc


class ServiceConfig(_Model):
    """``tiercast serve`` and ``tiercast run`` in production: schedules, records, metrics, lease."""

    cycle_schedule: str = "*/5 * * * *"
    """When the plan-and-act cycle runs (cron, UTC). Default every 5 minutes."""
    refit_schedule: str = "17 3 * * *"
    """When stored models are refitted (cron, UTC). Default daily at 03:17, a quiet hour."""
    report_schedule: str = "0 6 * * 1"
    """When the capacity report is written (cron, UTC). Default Mondays 06:00."""
    misfire_grace_s: int = Field(default=120, ge=1, le=86400)
    """A run that starts late by up to this many seconds still runs; later ones are
    dropped, and missed runs are coalesced into one. Default 120."""
    shutdown_grace_s: float = Field(default=25.0, ge=0, le=3600)
    """After SIGTERM, seconds to let a running job finish before exiting; keep it below
    the pod's terminationGracePeriodSeconds (30). Default 25."""
    state_dir: str | None = Field(default=None, min_length=1, max_length=4096)
    """Folder of what tiercast keeps between runs when no path below is given: the run
    records, the model store, ``run``'s plan JSON, the scheduled reports. Default: the
    ``--state-dir`` flag, else ``$TIERCAST_STATE_DIR``, else ``/var/lib/tiercast`` in a pod
    that mounts it (deploy/), else ``$XDG_STATE_HOME/tiercast``, else
    ``~/.local/state/tiercast``. Nothing is written to the working folder unless a path
    says so."""
    records_path: str = "tiercast-records.sqlite"
    """SQLite file of run records (``tiercast history`` reads it). Default
    ``tiercast-records.sqlite`` in the state directory; a path given here is used as given."""
    records_keep_days: int = Field(default=30, ge=1, le=3650)
    """Run records older than this are deleted. Default 30 days; at most 3650 (ten years;
    the cut-off date must stay a representable timestamp)."""
    plan_out: str | None = None
    """Where each cycle writes its plan JSON; none by default in ``serve``; ``run`` writes
    ``tiercast-plan.json`` in the state directory unless ``--plan-out`` or this says where."""
    report_out: str = "reports"
    """Folder the scheduled report job writes to. Default ``reports`` in the state directory."""
    metrics_port: int = Field(default=9108, ge=0, le=65535)
    """Port of ``/metrics``, ``/healthz`` and ``/readyz``; 0 turns the endpoint off."""
    metrics_host: str = "127.0.0.1"
    """Address the metrics endpoint listens on. Default loopback only; a pod scraped by
    Prometheus sets ``0.0.0.0`` (deploy/base/configmap.yaml does, behind its NetworkPolicy)."""
    log_format: Literal["text", "json"] = "text"
    """``json`` writes one JSON object per log line (secrets redacted)."""
    leader_election: bool = False
    """Only the holder of the Lease below actuates; other replicas plan and record."""
    lease_name: str = "tiercast-leader"
    lease_namespace: str | None = None
    """Namespace of the Lease; default: the pod's namespace (service-account file) or ``default``."""
    lease_duration_s: int = Field(default=15, ge=2, le=3600)
    """A leader that has not renewed for this long loses the Lease. Default 15."""
    lease_renew_s: float = Field(default=5.0, gt=0, le=3600)
    """How often the leader renews and candidates retry. Default 5; below lease_duration_s."""
    action_retries: int = Field(default=2, ge=0, le=10)
    """Retries of an action that failed temporarily (429, 500, timeout); each re-reads the
    pool first, so an action that did land is not sent again. Default 2."""

    @field_validator("cycle_schedule", "refit_schedule", "report_schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        parse_schedule(value)
        return value

    @model_validator(mode="after")
    def _lease_timing(self) -> ServiceConfig:
        if self.lease_renew_s >= self.lease_duration_s:
            raise ValueError(
                f"lease_renew_s ({self.lease_renew_s}) must be below lease_duration_s "
                f"({self.lease_duration_s})"
            )
        return self


class KueueQuotaConfig(_Model):
    """The Kueue ClusterQueue of deferrable training whose GPU quota follows the spare
    capacity the plan forecasts (``scaler.actuation.kube.kueue``)."""

    cluster_queue: str = Field(default="training", min_length=1, max_length=253, pattern=_K8S_NAME)
    """Name of the ClusterQueue (cluster-scoped). Default ``training``."""
    resource: str = Field(
        default="nvidia.com/gpu", min_length=1, max_length=253, pattern=r"^[A-Za-z0-9./_-]+$"
    )
    """The covered resource whose quota is set. Default ``nvidia.com/gpu``."""
    flavors: dict[str, Annotated[str, Field(min_length=1, max_length=253, pattern=_K8S_NAME)]] = (
        Field(default_factory=dict)
    )
    """GPU model -> the ResourceFlavor of the ClusterQueue that stands for it, e.g.
    ``{H100-80GB: h100}``. Default: the ClusterQueue's one flavor covering ``resource``,
    where the deferrable work runs on one GPU model."""
    borrowing: bool = True
    """In a cohort, also set ``borrowingLimit`` to the spare capacity's peak over the next
    hour less ``nominalQuota`` (Kueue refuses a borrowingLimit without a cohort). Default true."""


class KubernetesConfig(_Model):
    """How tiercast talks to the cluster: node labels it reads, retries, caps and timeouts."""

    kueue: KueueQuotaConfig | None = None
    """Where Kueue admits training: the ClusterQueue whose GPU ``nominalQuota`` is set each
    cycle to the spare capacity forecast for the next hour. None (default): no quota is set."""

    pool_label: str = "tiercast.io/pool"
    """Node label whose value names the pool; checked before each provider's own label."""
    tier_label: str = "karpenter.sh/capacity-type"
    """Node label giving the tier (``spot``, ``on-demand``, ``reserved``), for the inventory."""
    max_changes_per_cycle: int = Field(default=10, ge=0, le=10_000)
    """Most actions one cycle may apply; the rest wait for the next cycle. Default 10."""
    request_timeout_s: float = Field(default=10.0, gt=0, le=600)
    """Timeout of one API request in seconds. Default 10."""
    retries: int = Field(default=4, ge=0, le=10)
    """Retries of a request answered 429, 5xx or timed out. Default 4."""
    backoff_base_s: float = Field(default=0.5, ge=0, le=600)
    """First retry delay; doubles each retry (or the server's Retry-After). Default 0.5."""
    backoff_max_s: float = Field(default=8.0, ge=0, le=3600)
    """Longest delay between retries. Default 8."""
    conflict_retries: int = Field(default=5, ge=0, le=20)
    """Re-reads after a 409 Conflict (someone else changed the object). Default 5."""
    drain_timeout_s: int = Field(default=600, ge=0, le=86400)
    """How long evictions may be refused (PodDisruptionBudgets) before a MIG change aborts. Default 600."""
    mig_timeout_s: int = Field(default=900, ge=0, le=86400)
    """How long to wait for ``nvidia.com/mig.config.state=success`` after relabelling. Default 900."""
    poll_interval_s: float = Field(default=5.0, gt=0, le=3600)
    """Delay between polls while draining or waiting for the MIG manager. Default 5."""
    gpu_operator_namespace: str = Field(
        default="gpu-operator", min_length=1, max_length=63, pattern=_K8S_NAME
    )
    """Namespace of NVIDIA's GPU Operator, where its mig-parted ConfigMap lives. Default
    ``gpu-operator``."""
    cluster_policy: str = Field(default="cluster-policy", min_length=1, pattern=_K8S_NAME)
    """The GPU Operator's ClusterPolicy, read for ``migManager.config.name`` (the mig-parted
    ConfigMap tiercast adds its layouts to) and ``mig.strategy``. Default ``cluster-policy``."""
    events: bool = True
    """Record a Kubernetes Event (``events.k8s.io/v1``) on every object an action changes,
    with the action's reason. Default true."""
    mig_config_sync_s: float = Field(default=120.0, ge=0)
    """Seconds from adding a layout to the mig-parted ConfigMap until a node is relabelled
    to it, so the kubelet has refreshed the MIG manager's mounted copy: it does so at its
    next sync of the pod, ``wait.Jitter(1m, 0.5)`` after the last (up to 90 s), then reads
    the ConfigMap and writes the volume, so the wait sits above 90 s rather than on it.
    Timed from the addition, kept on the ConfigMap, so a later run waits out the rest.
    Default 120."""


class FinanceConfig(_Model):
    """Money in the finance dry-run and the capacity review."""

    currency: str = Field(default="USD", max_length=12, pattern=r"^[^\s{}]*$")
    """Label after money figures and in every money column (``USD``, ``EUR``, ``₽``); every price
    is in it. Default ``USD``, so a report never shows an amount without its currency; ``""``
    leaves money unlabelled."""
    unserved_price_per_gpu_hour: float | None = Field(default=None, gt=0)
    """What one GPU-hour of demand that no capacity serves costs (lost revenue, SLO credit), in
    the currency. None (default): commitment options that leave more demand unserved than keeping
    the current commitment are refused rather than priced."""


class DriftConfig(_Model):
    """Forecasts that notice drift: forecast against actual per signal from the run records.

    Each cycle compares what the recorded cycles forecast one lead time ahead with what
    happened (``scaler.service.drift``); a signal whose error or band coverage stays out of
    its band for ``for_s`` is refitted ahead of schedule and its margin re-learned.
    """

    enabled: bool = True
    """Judge drift each cycle that has run records. Default true."""
    window_s: int = Field(default=6 * 3600, ge=600, le=30 * 86400)
    """Rolling window of forecasts judged against what happened. Default 6 h."""
    for_s: int = Field(default=1800, ge=0, le=7 * 86400)
    """How long the window must stay out of band before the model is refitted. Default
    1800 (30 min): one bad hour of a calibrated q0.9 is chance, not drift."""
    min_coverage: float = Field(default=0.5, ge=0, le=1)
    """Share of actuals inside the lowest-highest forecast quantiles under which the band
    is left (a calibrated q0.1-q0.9 covers about 0.8). Default 0.5."""
    max_error: float = Field(default=0.5, gt=0, le=100)
    """Mean absolute error of the median over the mean actual above which the error is out
    of band. Default 0.5 (50%)."""
    min_points: int = Field(default=12, ge=2, le=100_000)
    """Least forecast-actual pairs a window needs to be judged. Default 12 (an hour of
    5-minute cycles)."""


class KueueQueueConfig(_Model):
    """A Kueue ClusterQueue whose pending workloads count as GPUs waiting for one GPU model."""

    cluster_queue: str = Field(min_length=1, max_length=253, pattern=_K8S_NAME)
    """The ClusterQueue's name (the ``cluster_queue`` label of ``kueue_pending_workloads``)."""
    gpu_model: str
    """Catalog name or alias of the GPUs its workloads wait for."""
    gpus_per_workload: int = Field(default=1, ge=1, le=100_000)
    """GPUs one pending workload asks for. Default 1."""


class StarvationConfig(_Model):
    """GPU pods and Kueue workloads that wait for capacity: observed unserved demand.

    Read each cycle from kube-state-metrics and Kueue through the ``prometheus`` section,
    wherever a signal is read from Prometheus (``scaler.inputs.pending``). What runs plus
    what waits is a floor under the next plan's need (docs/planning.md#starvation-floor).
    """

    enabled: bool = True
    """Read pending GPU pods and Kueue workloads each cycle. Default true; without a
    ``prometheus`` section, or with every signal from files, nothing is read."""
    pending_threshold_s: int = Field(default=300, ge=0, le=86400)
    """A GPU pod counts as waiting once it has been Pending this long (from
    ``kube_pod_created``); a Kueue workload once its queue has had it pending this long.
    Default 300: shorter waits are a scheduler's ordinary work. At most a day."""
    query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for the GPUs that wait, one series per pod (or per GPU model with
    ``gpu_model_label``). Default: Pending pods' ``nvidia_com_gpu`` requests from
    kube-state-metrics, created over ``pending_threshold_s`` ago, placeholders excluded."""
    running_query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for the GPUs that Running pods request (what runs). Default: from
    kube-state-metrics, placeholders excluded."""
    kueue_query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for Kueue's waiting workloads, one series per ``cluster_queue``.
    Default: ``kueue_pending_workloads{status="active"}`` pending throughout
    ``pending_threshold_s``."""
    gpu_model_label: str | None = Field(default=None, pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    """Label of the queries' series naming the GPU model (a catalog name or alias, or an
    ``nvidia.com/gpu.product`` value, e.g. ``nodeselector_nvidia_com_gpu_product`` from
    ``kube_pod_nodeselectors``). Default none: every series is ``gpu_model``'s."""
    gpu_model: str | None = None
    """GPU model of series without that label. Default: the pools' only GPU model; with
    several and none given, waiting GPUs are reported but raise no pool."""
    kueue_queues: tuple[KueueQueueConfig, ...] = Field(default=(), max_length=1000)
    """ClusterQueues with the GPU model and GPUs per workload they wait for; other queues
    count ``kueue_gpus_per_workload`` GPUs of ``gpu_model`` per workload."""
    kueue_gpus_per_workload: int = Field(default=1, ge=1, le=100_000)
    """GPUs one pending workload of an unlisted ClusterQueue asks for. Default 1."""


class PowerConfig(_Model):
    """GPU power and heat from NVIDIA's DCGM exporter: throttled GPUs count for less.

    Read each cycle at ``now`` through the ``prometheus`` section, wherever a signal is read
    from Prometheus (``scaler.inputs.power``). A GPU whose clock-event reasons report a
    thermal or power slowdown counts by its SM clock over its model's highest clock
    (``scaler.planning.power``, docs/planning.md#power-and-heat); unknown is unthrottled.
    """

    enabled: bool = True
    """Read the DCGM exporter each cycle. Default true; without a ``prometheus`` section,
    or with every signal from files, nothing is read."""
    throttle_query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for each GPU's clock-event reasons bitmask, one series per GPU.
    Default: ``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` (DCGM 3.3+), else its older name
    ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``, by ``node_label``, ``gpu`` and ``modelName``."""
    clock_query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for each GPU's SM clock, MHz. Default: ``DCGM_FI_DEV_SM_CLOCK``."""
    max_clock_query: str | None = Field(default=None, min_length=1, max_length=8192)
    """PromQL override for the highest SM clock of each GPU model (by ``modelName``), MHz.
    Default: the largest ``DCGM_FI_DEV_SM_CLOCK`` of the model over ``max_clock_window_s``."""
    max_clock_window_s: int = Field(default=7 * 86400, ge=3600, le=90 * 86400)
    """Window the highest clock is taken over. Default 7 days (every GPU of a model boosts
    to its maximum some time in a week of work)."""
    node_label: str = Field(default="Hostname", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    """Label naming the node on the exporter's series. Default ``Hostname`` (the exporter's
    own; ``node`` where a relabelling sets it)."""
    gpu_model: str | None = None
    """GPU model of series without a ``modelName`` the catalog knows. Default: the pools'
    only GPU model; with several and none given, such GPUs are reported, never planned on."""


class MigProfileConfig(_Model):
    """One GPU-instance profile of a config-declared GPU model, as ``nvidia-smi mig -lgip``
    (slices, instances) and ``nvidia-smi mig -lgipp`` (placements) list it."""

    name: str = Field(min_length=1, max_length=40)
    """NVIDIA's name, ``<compute>g.<GB>gb`` (``1g.10gb``), ``+me`` for the media profile."""
    compute_slices: int = Field(ge=1, le=8)
    memory_slices: int = Field(ge=1, le=8)
    placements: tuple[int, ...] = Field(min_length=1, max_length=8)
    """Start memory slices where an instance may sit (``-lgipp``'s ``{0,2,4,6}:2`` is
    ``[0, 2, 4, 6]`` with ``memory_slices: 2``); each must end inside the GPU's slices."""
    max_count: int | None = Field(default=None, ge=1, le=8)
    """Most instances on one GPU. Default: 1 for ``+me``, else as many as its placements
    and the GPU's slices hold."""
    memory_gib: float | None = Field(default=None, gt=0, le=4096)
    """Memory NVML reports for one instance, GiB (``-lgip``); ``mig_profile: auto`` matches
    on it. Default: the nominal size x 16/18 (the tightest ratio listed, H200 1g.18gb)."""


class MigGeometryConfig(_Model):
    """The MIG geometry of a config-declared GPU model."""

    compute_slices: int = Field(ge=1, le=8)
    """Compute slices (7 on A100/H100/B200, 4 on A30 and RTX PRO 6000)."""
    memory_slices: int = Field(ge=1, le=8)
    """Memory slices (8 on A100/H100/B200, 4 on A30 and RTX PRO 6000)."""
    profiles: tuple[MigProfileConfig, ...] = Field(min_length=1, max_length=32)


class GpuModelConfig(_Model):
    """A GPU model the built-in catalog lacks, declared in the config (``gpu_models:``).

    Pools and workloads then name it in ``gpu_model``, as a built-in one; its MIG geometry
    is checked by the rules the built-in ones keep (``scaler.catalog.mig.geometry_problem``).
    """

    name: str = Field(min_length=1, max_length=63, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    """The name pools and workloads use; not a built-in name or alias."""
    memory_gb: int = Field(ge=1, le=4096)
    """Framebuffer memory the part is sold with, GB."""
    product: tuple[str, ...] = Field(min_length=1, max_length=16)
    """Patterns of GPU feature discovery's ``nvidia.com/gpu.product`` for it (shell-style,
    case-insensitive, ``NVIDIA-X100*``), matched without the ``-MIG-<profile>`` and
    ``-SHARED`` suffixes; one pattern or a list. Nodes whose label matches none are held."""
    pci_device_ids: tuple[str, ...] = Field(default=(), max_length=16)
    """PCI device and vendor IDs (``0x233010DE``) mig-parted's ``device-filter`` selects it by."""
    mig: MigGeometryConfig | None = None
    """Its MIG geometry; none (default): no MIG."""

    @field_validator("product", mode="before")
    @classmethod
    def _one_or_more(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("product")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for p in value:
            if not p.strip() or len(p) > 200:
                raise ValueError(f"{shown(p)} is not a label pattern (e.g. 'NVIDIA-X100*')")
        return value

    @field_validator("pci_device_ids")
    @classmethod
    def _pci_ids(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for d in value:
            if not re.fullmatch(r"0x[0-9A-Fa-f]{8}", d):
                raise ValueError(f"{shown(d)} is not a device and vendor ID such as '0x233010DE'")
        return tuple(d.upper().replace("0X", "0x") for d in value)

    @model_validator(mode="after")
    def _geometry(self) -> GpuModelConfig:
        if self.name in reserved_names():
            raise ValueError(
                f".name: {self.name!r} is a built-in GPU model or alias; use it without "
                "declaring it, or choose another name"
            )
        if self.mig is not None:
            for i, p in enumerate(self.mig.profiles):
                if PROFILE_NAME.match(p.name) is None:
                    raise ValueError(
                        f".mig.profiles[{i}].name: {shown(p.name)} is not <compute>g.<GB>gb "
                        "(e.g. 1g.10gb, 1g.10gb+me)"
                    )
                if _profile_gb(p.name) > self.memory_gb:
                    raise ValueError(
                        f".mig.profiles[{i}].name: {p.name} holds more than the GPU's "
                        f"{self.memory_gb} GB"
                    )
            geo = self.catalog_entry()[1]
            problem = geometry_problem(geo) if geo is not None else None
            if problem is not None:
                raise ValueError(f".mig.{problem}")
        return self

    def catalog_entry(self) -> tuple[GpuModel, MigGeometry | None]:
        """This model as the catalog holds it: the model, and its MIG geometry or None."""
        model = GpuModel(
            self.name,
            self.memory_gb,
            self.mig.compute_slices if self.mig else 0,
            self.pci_device_ids,
            self.product,
        )
        if self.mig is None:
            return model, None
        geo = self.mig
        profiles = []
        for p in geo.profiles:
            gb = _profile_gb(p.name)
            media = p.name.endswith("+me")
            most = min(
                len(p.placements),
                geo.compute_slices // p.compute_slices,
                geo.memory_slices // p.memory_slices,
            )
            default_count = 1 if media else max(1, most)
            gib = p.memory_gib
            if gib is None:
                gib = math.floor(gb * DERIVED_GIB_RATIO * 4) / 4 or 0.25
            profiles.append(
                MigProfile(
                    p.name,
                    p.compute_slices,
                    p.memory_slices,
                    gb,
                    p.max_count or default_count,
                    tuple(p.placements),
                    gib,
                    media=media,
                )
            )
        return model, MigGeometry(self.name, geo.compute_slices, geo.memory_slices, tuple(profiles))


def _profile_gb(name: str) -> int:
    m = PROFILE_NAME.match(name)
    return int(m.group(2)) if m else 0


class Config(_Model):
    gpu_models: tuple[GpuModelConfig, ...] = Field(default=(), max_length=100)
    """GPU models the built-in catalog lacks (regional clouds' parts), named by pools and
    workloads like built-in ones. The catalog holds the models of the config validated
    last: validating a config replaces the previous one's (``scaler.catalog.gpus``)."""
    signals: tuple[SignalConfig, ...] = Field(min_length=1, max_length=MAX_SIGNALS)
    """Demand signals; at most 2,000 (each is a query and a model per cycle)."""
    workloads: tuple[WorkloadConfig, ...] = Field(min_length=1, max_length=MAX_WORKLOADS)
    """Workloads; at most 2,000."""
    pools: tuple[PoolConfig, ...] = Field(min_length=1, max_length=MAX_POOLS)
    """Node pools; at most 500 (the planner's work grows with pools x horizon steps)."""
    policy: PolicyConfig = PolicyConfig()
    forecast: ForecastConfig = ForecastConfig()
    kubernetes: KubernetesConfig = KubernetesConfig()
    prometheus: PrometheusConfig | None = None
    model_store: ModelStoreConfig = ModelStoreConfig()
    service: ServiceConfig = ServiceConfig()
    finance: FinanceConfig = FinanceConfig()
    starvation: StarvationConfig = StarvationConfig()
    """Pending GPU pods and Kueue workloads as a floor under the plan (``StarvationConfig``)."""
    drift: DriftConfig = DriftConfig()
    """When a signal's forecasts have drifted from what happens (``DriftConfig``)."""
    power: PowerConfig = PowerConfig()
    """Throttled GPUs from the DCGM exporter count for less capacity (``PowerConfig``)."""

    @model_validator(mode="after")
    def _references(self) -> Config:
        _unique("gpu_models", [g.name for g in self.gpu_models])
        # The config's own models join the catalog before the names below are checked;
        # a config that fails puts the previous config's models back.
        previous = [(m, GEOMETRIES.get(m.name)) for m in user_models()]
        set_user_catalog(g.catalog_entry() for g in self.gpu_models)
        try:
            self._check_references()
        except Exception:
            set_user_catalog(previous)
            raise
        return self

    def _check_references(self) -> None:
        _unique("signals", [s.name for s in self.signals])
        _unique("workloads", [w.name for w in self.workloads])
        _unique("pools", [p.name for p in self.pools])
        signals = {s.name for s in self.signals}
        for i, p in enumerate(self.pools):
            _known_gpu(f"pools[{i}].gpu_model", p.gpu_model)
            for k, spec in enumerate(p.mig_layouts or ()):
                _known_mig_layout(f"pools[{i}].mig_layouts[{k}]", p.gpu_model, spec)
        pool_models = {gpu_model(p.gpu_model).name for p in self.pools}
        for i, w in enumerate(self.workloads):
            if (w.signal and w.signal not in signals) or (not w.signal and not w.is_deferrable):
                raise ValueError(
                    f"workloads[{i}].signal: {w.signal!r} is not a declared signal "
                    f"(declared: {', '.join(sorted(signals))})"
                )
            if w.leading_signal is not None and w.leading_signal == w.signal:
                raise ValueError(
                    f"workloads[{i}].leading_signal: {w.leading_signal!r} is the workload's own "
                    "signal; a leading signal is another series that runs ahead of it"
                )
            for key in ("token_signal", "memory_signal", "utilization_signal", "leading_signal"):
                named = getattr(w, key)
                if named is not None and named not in signals:
                    raise ValueError(
                        f"workloads[{i}].{key}: {named!r} is not a declared signal "
                        f"(declared: {', '.join(sorted(signals))})"
                    )
            _known_gpu(f"workloads[{i}].gpu_model", w.gpu_model)
            if w.mig_profile is not None:
                _known_mig_profile(f"workloads[{i}]", w.gpu_model, w.mig_profile, w.memory_gb)
            _check_sharing_fit(f"workloads[{i}]", w)
            if gpu_model(w.gpu_model).name not in pool_models:
                raise ValueError(f"workloads[{i}].gpu_model: no pool has GPU model {w.gpu_model!r}")
        _check_priorities(self.workloads)
        for name in self.kubernetes.kueue.flavors if self.kubernetes.kueue else ():
            _known_gpu(f"kubernetes.kueue.flavors.{name}", name)
        _check_starvation(self.starvation, pool_models)
        if self.power.gpu_model is not None:
            _known_gpu("power.gpu_model", self.power.gpu_model)
            if gpu_model(self.power.gpu_model).name not in pool_models:
                raise ValueError(f"power.gpu_model: no pool has GPU model {self.power.gpu_model!r}")

    def signal(self, name: str) -> SignalConfig:
        return next(s for s in self.signals if s.name == name)

    @property
    def served_workloads(self) -> tuple[WorkloadConfig, ...]:
        """Workloads planned as capacity from their signals: inference and critical runs
        (deferrable training and batch are placed into what they leave idle)."""
        return tuple(w for w in self.workloads if not w.is_deferrable)

    def pools_for(self, model: str) -> list[PoolConfig]:
        key = gpu_model(model).name
        return [p for p in self.pools if gpu_model(p.gpu_model).name == key]

    @property
    def fleet(self) -> Fleet:
        """The signals, workloads and pools as the planner reads them (:class:`Fleet`)."""
        return Fleet(self.signals, self.workloads, self.pools)


@dataclass(frozen=True)
class Fleet:
    """What is planned: the signals, the workloads they drive and the pools that serve them.

    The planning steps (:mod:`scaler.planning`) take this view of a :class:`Config`, not the
    whole config. A cycle builds it once at its edge (``config.fleet``), with the lead times
    learned for ``lead_time_s: auto`` pools (:meth:`with_lead_times`) and the footprints read
    off the replicas' signals (:meth:`with_workloads`): new values, the config is never
    rewritten. GPU models resolve through :mod:`scaler.catalog.gpus`, which the config's
    ``gpu_models`` extend when it is validated.
    """

    signals: tuple[SignalConfig, ...]
    workloads: tuple[WorkloadConfig, ...]
    pools: tuple[PoolConfig, ...]

    def signal(self, name: str) -> SignalConfig:
        return next(s for s in self.signals if s.name == name)

    @property
    def served_workloads(self) -> tuple[WorkloadConfig, ...]:
        """Workloads planned as capacity from their signals (:attr:`Config.served_workloads`)."""
        return tuple(w for w in self.workloads if not w.is_deferrable)

    def pools_for(self, model: str) -> list[PoolConfig]:
        key = gpu_model(model).name
        return [p for p in self.pools if gpu_model(p.gpu_model).name == key]

    def served(self) -> Fleet:
        """This fleet with only its served workloads (deferrable ones are placed apart)."""
        served = self.served_workloads
        return self if len(served) == len(self.workloads) else replace(self, workloads=served)

    def with_pools(self, pools: tuple[PoolConfig, ...]) -> Fleet:
        return replace(self, pools=pools)

    def with_workloads(self, filled: Mapping[str, WorkloadConfig]) -> Fleet:
        """This fleet with the workloads named in ``filled`` replaced (footprints read off
        their signals, :func:`scaler.planning.footprints.observed_footprints`)."""
        if not filled:
            return self
        return replace(self, workloads=tuple(filled.get(w.name, w) for w in self.workloads))

    def with_lead_times(self, seconds: Mapping[str, int]) -> Fleet:
        """This fleet with the pools named in ``seconds`` planned with that lead time (the
        ``lead_time_s: auto`` pools, :mod:`scaler.service.lead_times`)."""
        if not seconds:
            return self
        pools = tuple(
            p.with_lead_time(seconds[p.name]) if p.name in seconds else p for p in self.pools
        )
        return replace(self, pools=pools)


def _check_starvation(starvation: StarvationConfig, pool_models: set[str]) -> None:
    """The GPU models the starvation section names are pools' models; queues are unique."""
    named = [("starvation.gpu_model", starvation.gpu_model)] + [
        (f"starvation.kueue_queues[{i}].gpu_model", q.gpu_model)
        for i, q in enumerate(starvation.kueue_queues)
    ]
    for field, name in named:
        if name is None:
            continue
        _known_gpu(field, name)
        if gpu_model(name).name not in pool_models:
            raise ValueError(f"{field}: no pool has GPU model {name!r}")
    _unique("starvation.kueue_queues", [q.cluster_queue for q in starvation.kueue_queues])


def _check_priorities(workloads: tuple[WorkloadConfig, ...]) -> None:
    """Deferrable work gives way to inference: its priority is below every inference one."""
    served = [w for w in workloads if not w.is_deferrable]
    if not served:
        return
    lowest = min(served, key=lambda w: w.effective_priority)
    for i, w in enumerate(workloads):
        if w.is_deferrable and w.effective_priority >= lowest.effective_priority:
            raise ValueError(
                f"workloads[{i}].priority: {w.effective_priority} is not below "
                f"{lowest.workload_class} workload {lowest.name!r} ({lowest.effective_priority}); "
                "deferrable work is preempted first: lower it, or set critical: true"
            )


def _unique(what: str, names: list[str]) -> None:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise ValueError(f"{what}: name {n!r} is used twice")
        seen.add(n)


def _known_gpu(field: str, name: str) -> None:
    try:
        gpu_model(name)
    except KeyError:
        raise ValueError(
            f"{field}: unknown GPU model {name!r}; expected one of {', '.join(GPU_MODELS)}"
        ) from None


def _known_mig_profile(field: str, model: str, profile: str, memory_gb: float | None) -> None:
    # Imported here: scaler.catalog.mig is the MIG catalog, needed only when a config uses MIG.
    from scaler.catalog.mig import geometry, profile_for_memory

    if profile == "auto" and memory_gb is None:
        raise ValueError(f"{field}.mig_profile: 'auto' needs memory_gb to choose a profile")
    try:
        if profile == "auto":
            profile_for_memory(model, memory_gb or 0.0)
        else:
            geometry(model).profile(profile)
    except BadInputError as exc:
        raise ValueError(f"{field}.mig_profile: {exc}") from None


def _check_sharing_fit(field: str, w: WorkloadConfig) -> None:
    """A time-sliced or MPS workload's declared replicas per GPU fit the GPU's memory and
    compute: time-slicing limits neither, MPS gives each client memory / replicas."""
    if w.sharing not in ("time-slicing", "mps"):
        return
    memory = gpu_model(w.gpu_model).memory_gb
    if w.memory_gb is not None and w.memory_gb > memory:
        raise ValueError(
            f"{field}.memory_gb: {w.memory_gb:g} GB per replica does not fit one "
            f"{gpu_model(w.gpu_model).name} ({memory} GB)"
        )
    n = w.replicas_per_gpu
    if n is None or n < 2:
        return
    if w.memory_gb is not None and n * w.memory_gb > memory + 1e-9:
        raise ValueError(
            f"{field}.replicas_per_gpu: {n} co-located {w.sharing} replicas of "
            f"{w.memory_gb:g} GB need {n * w.memory_gb:g} GB; {gpu_model(w.gpu_model).name} "
            f"has {memory} GB"
        )
    if w.compute_share is not None and n * w.compute_share > 1 + 1e-9:
        raise ValueError(
            f"{field}.replicas_per_gpu: {n} co-located replicas of compute_share "
            f"{w.compute_share:g} need {n * w.compute_share:g} GPUs of compute; at most 1"
        )


def _known_mig_layout(field: str, model: str, spec: str) -> None:
    from scaler.catalog.mig import parse_layout

    try:
        parse_layout(model, spec, field)
    except BadInputError as exc:
        raise ValueError(str(exc)) from None


MAX_SHOWN = 80
"""Characters of an offending value shown in an error (a value may be megabytes)."""


def shown(value: Any, limit: int = MAX_SHOWN) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters, never built whole for big input."""
    if isinstance(value, str | bytes) and len(value) > limit:
        value = value[: limit + 1]
    elif isinstance(value, dict | list | tuple):
        return f"a {type(value).__name__} of {len(value)} item(s)"
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _format_error(source: str, exc: ValidationError) -> str:
    err = exc.errors(include_url=False, include_context=False, include_input=True)[0]
    loc = ""
    for part in err["loc"]:
        loc += f"[{part}]" if isinstance(part, int) else (f".{part}" if loc else str(part))
    msg = " ".join(str(err["msg"]).removeprefix("Value error, ").split())[:240]
    if err["type"] == "value_error":
        if msg.startswith(".") and loc:  # a check on one field of this model: '.name: ...'
            return f"{source}: {loc}{msg}"
        if msg.startswith("."):
            return f"{source}: {msg[1:]}"
        # Our own checks name the field and the value already.
        if not loc or msg.startswith(loc.split(".")[0]):
            return f"{source}: {msg}"
        return f"{source}: {loc}: {msg}"
    if err["type"] == "missing":
        return f"{source}: {loc}: required field is missing"
    if err["type"] == "extra_forbidden":
        return (
            f"{source}: {loc}: unknown field (check the spelling against data/example-config.yaml)"
        )
    return f"{source}: {loc or 'top level'}: {msg}; got {shown(err.get('input'))}"


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate a parsed mapping; raise :class:`ConfigError` with one line on failure."""
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: expected a mapping at the top level, got {type(data).__name__}"
        )
    nul = _nul_field(data)
    if nul is not None:
        # A path with a NUL byte fails deep in the cycle (os calls refuse it): say so here.
        raise ConfigError(f"{source}: {nul}: holds a NUL byte")
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_error(source, exc)) from None


def _nul_field(data: Any) -> str | None:
    """The dotted field of the first key or text value holding a NUL byte, if any."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return where or "the document"
        if isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))
        elif isinstance(item, dict):
            for key, value in item.items():
                if isinstance(key, str) and "\x00" in key:
                    return f"{where}.{key!r}".lstrip(".")
                stack.append((f"{where}.{key}".lstrip("."), value))
    return None


class _YamlLimit(yaml.YAMLError):
    """A YAML document over one of the limits above."""

    def __init__(self, problem: str, mark: Any = None) -> None:
        super().__init__(problem)
        self.problem = problem
        self.problem_mark = mark


class _StrictLoader(BoundedLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys and bounds nesting and aliases."""

    max_depth = MAX_YAML_DEPTH
    max_aliases = MAX_YAML_ALIASES

    def over_limit(self, problem: str) -> Exception:
        return _YamlLimit(problem, self.peek_event().start_mark)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge" or not isinstance(
                    key_node, yaml.ScalarNode
                ):
                    continue
                key = self.construct_object(key_node)
                if key in seen:
                    raise _YamlLimit(
                        f"duplicate key {shown(key)} (the later one would silently win)",
                        key_node.start_mark,
                    )
                seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _too_many_values(data: Any, budget: int = MAX_YAML_NODES) -> bool:
    """Whether ``data`` holds more than ``budget`` values with aliases expanded (stops early)."""
    stack = [data]
    while stack:
        item = stack.pop()
        budget -= 1
        if budget < 0:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_yaml(text: str, source: str) -> Any:
    """Parse config YAML with the limits above; one-line :class:`ConfigError` otherwise."""
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass: no tags run code
    except (yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(
            f"config file {source!r}{where}: {' '.join(str(problem).split())[:200]}"
        ) from None
    if _too_many_values(data):
        raise ConfigError(
            f"config file {source!r}: more than {MAX_YAML_NODES} values once aliases are expanded"
        )
    return data


def load_config(path: str | Path) -> Config:
    """Read and validate a YAML config file (a regular file of at most :data:`MAX_CONFIG_BYTES`)."""
    p = Path(path)
    # Only a regular file, bounded before parsing: /dev/zero or a FIFO would never end.
    raw = read_bounded(p, MAX_CONFIG_BYTES, "config file", ConfigError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {str(p)!r} cannot be read: {' '.join(str(exc).split())[:200]}"
        ) from exc
    return parse_config(parse_yaml(text, str(p)), source=str(p))
