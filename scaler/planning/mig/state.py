"""The nodes of MIG-managed pools and their ``nvidia.com/mig.config`` names.

Values the planner and the actuators share: :class:`MigNodeState` (a node as the
cluster shows it, read by ``scaler.actuation.kube.inventory``), :class:`MigNode` (a node
as the planner works on it, nodes still to come included), the nodes the config's
``mig_layouts`` describe (the dry-run without a cluster), the name of a node's
layouts in the mig-parted config the MIG manager reads, and :class:`Relayout`, the step a
relayout tiercast started on a node has reached (kept on the node, so the next run
finishes it whatever stopped the last one).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, fields, replace
from typing import Any, TypeVar

from forecaster.errors import BadInputError
from scaler.catalog.mig import Layout, config_name, parse_layout, parse_mig_parted_entry
from scaler.config import PoolConfig

RELAYOUT_ANNOTATION = "tiercast.io/mig-relayout"
"""Node annotation holding the :class:`Relayout` tiercast has in progress there (JSON)."""

RELAYOUT_STEPS = ("draining", "relabelled")
"""``draining``: cordoned, pods being evicted, label unchanged; ``relabelled``:
``nvidia.com/mig.config`` set to the target, waiting for the MIG manager."""


def utc_text(t: datetime.datetime) -> str:
    """``t`` as the UTC ISO 8601 text tiercast's annotations hold."""
    return t.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_utc(text: str | None) -> datetime.datetime | None:
    """The time :func:`utc_text` wrote (a naive one read as UTC); None when absent or unreadable."""
    if not text:
        return None
    try:
        t = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=datetime.UTC)


R = TypeVar("R")

_FIELD_READERS: dict[str, Callable[[Any], Any]] = {
    "str": str,
    "str | None": lambda v: None if v is None else str(v),
    "int": int,
    "bool": bool,
}
"""How a field of each type is read back from a record's JSON."""


def record_annotation(record: Any) -> str:
    """A change record (:class:`Relayout` and the like) as the compact JSON a node annotation holds."""
    return json.dumps(asdict(record), sort_keys=True, separators=(",", ":"))


def read_record(
    cls: type[R], annotations: Mapping[str, str] | None, key: str, steps: tuple[str, ...]
) -> R | None:
    """The record of ``cls`` that ``annotations`` hold under ``key``; None when there is none,
    it is unreadable, a required text field is missing or its ``step`` is not in ``steps``.
    A missing optional text is None; fields with a default may be missing (records written
    before they existed)."""
    raw = (annotations or {}).get(key)
    if not raw:
        return None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            return None
        values = {}
        for f in fields(cls):  # type: ignore[arg-type]
            kind = str(f.type)
            if f.name in data or kind == "str | None":
                values[f.name] = _FIELD_READERS[kind](data.get(f.name))
            elif f.default is MISSING:
                return None
        out = cls(**values)
    except (ValueError, KeyError, TypeError):
        return None
    return out if getattr(out, "step", None) in steps else None


@dataclass(frozen=True)
class Relayout:
    """A relayout tiercast started on a node, as its :data:`RELAYOUT_ANNOTATION` records it.

    Written in the same patch as the cordon and moved on in the same patch as the
    relabel, so the node always says how far the change got; removed in the patch that
    uncordons. Times are UTC ISO 8601 (``2026-12-02T10:00:00Z``), wall clock, since the
    run that resumes is another process.
    """

    step: str
    """One of :data:`RELAYOUT_STEPS`."""
    target: str
    """The ``nvidia.com/mig.config`` tiercast is moving the node to."""
    previous: str | None
    """The label before the change, restored on ``failed`` or a timeout."""
    since: str
    """When ``step`` began: the drain and the MIG manager's wait are timed from here."""
    do_not_disrupt: bool = False
    """Whether tiercast set ``karpenter.sh/do-not-disrupt`` (and alone removes it)."""

    def to_annotation(self) -> str:
        return record_annotation(self)

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str] | None) -> Relayout | None:
        """The relayout a node's annotations record; None when there is none or it is unreadable."""
        return read_record(cls, annotations, RELAYOUT_ANNOTATION, RELAYOUT_STEPS)


@dataclass(frozen=True)
class MigNodeState:
    """One node of a MIG-managed pool as the cluster shows it (see ``scaler.actuation.kube.inventory``)."""

    name: str
    current: tuple[Layout, ...]
    """The layout of each GPU now."""
    mig_config: str | None = None
    """Its ``nvidia.com/mig.config`` label."""
    strategy: str | None = None
    """The GPU Operator's MIG strategy on the node (``single``, ``mixed``); None: unknown."""
    held: str | None = None
    """Why its layout must not change now (a change in progress, a layout not understood)."""
    relayout: Relayout | None = None
    """A relayout tiercast started on the node and has not finished (the planner asks
    the actuator to finish it before anything else)."""


def with_relayout(state: MigNodeState, annotations: Mapping[str, str] | None) -> MigNodeState:
    """``state`` with the relayout the node's annotations record, held while it is unfinished.

    The node is held (no new layout is planned for it) and carries the record, so the
    plan finishes the relayout first (``actions.resume_action``).
    """
    record = Relayout.from_annotations(annotations)
    if record is None:
        return state
    why = (
        f"tiercast's relayout {record.previous} -> {record.target} is in progress "
        f"({record.step} since {record.since})"
    )
    return replace(state, held=why, relayout=record)


@dataclass
class MigNode:
    """One node of a MIG-managed pool as the planner works on it: read, configured or to come."""

    pool: PoolConfig
    name: str
    current: list[Layout]
    new: bool
    """Still to come (the tier plan adds it): labelled on arrival, no drain."""
    label: str | None = None
    """Its ``nvidia.com/mig.config`` label, where the cluster showed one."""
    strategy: str | None = None
    held: str | None = None
    """Why its layout must not change this cycle."""


def configured_nodes(pool: PoolConfig, count: int) -> list[MigNodeState]:
    """The pool's nodes as the config's ``mig_layouts`` describe them (dry-run without a cluster).

    Named ``<pool>-<i>`` like the in-memory cluster the offline dry-run seeds.
    """
    specs = list(pool.mig_layouts or ())
    out = []
    for i in range(count):
        spec = specs[i] if i < len(specs) else "whole"
        lay = parse_layout(pool.gpu_model, spec, f"pools[{pool.name}].mig_layouts[{i}]")
        out.append(MigNodeState(f"{pool.name}-{i}", (lay,) * pool.gpus_per_node))
    return out


def resolve_config_name(
    model: str, per_device: list[Layout], known: Mapping[str, Any] | None
) -> tuple[str, bool]:
    """The ``nvidia.com/mig.config`` name for ``per_device``, and whether ``known`` has it.

    An entry of ``known`` (the mig-parted config the MIG manager reads, operator entries
    included, ``device-filter`` read for ``model``) that gives exactly these layouts is
    reused by name. Otherwise the name is ``tiercast-`` and a stable name of the layouts,
    so tiercast's entries never shadow one of the operator's; MIG off everywhere is
    ``all-disabled``, which every config the operator ships has.
    """
    for name in sorted(known or {}):
        try:
            got = parse_mig_parted_entry(model, known[name], len(per_device), name)  # type: ignore[index]
        except BadInputError:
            continue
        if [got.get(i) for i in range(len(per_device))] == list(per_device):
            return name, True
    base = config_name(per_device)
    if base == "all-disabled":
        return base, False  # in every mig-parted config the operator ships
    name = base if base.startswith("tiercast-") else f"tiercast-{base}"
    if len(name) > 63:
        name = config_name([*per_device, Layout()])  # the hashed form
    return name, False
