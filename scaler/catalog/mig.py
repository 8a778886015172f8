"""MIG geometry: GPU-instance profiles and placements per GPU model, and every valid layout.

A MIG-capable GPU has 7 compute slices (4 on A30) and 8 memory slices (4 on A30).
Each GPU-instance profile has a fixed set of legal placements ``(start, size)`` in
memory slices, as NVML reports through ``nvmlDeviceGetGpuInstancePossiblePlacements``
(``nvidia-smi mig -lgipp``). A layout is valid when its instances' placements do not
overlap, their compute slices fit the GPU, and no profile exceeds its instance limit.

The tables follow NVIDIA's MIG User Guide ("Supported MIG Profiles"): on the 7-slice
parts, 1g profiles start at 0..6 (size 1), the double-memory 1g profiles (1g.10gb on
A100-40GB, 1g.20gb on 80 GB parts, 1g.35gb on H200) at 0, 2, 4, 6 (size 2), 2g at
0, 2, 4 (size 2), 3g at 0, 4 (size 4), 4g at 0 (size 4), 7g at 0 (size 8); on A30,
1g at 0..3, 2g at 0, 2 and 4g at 0. ``+me`` profiles (media engines) share their base
profile's placements, one per GPU.

Validity is exactly NVML's rule: placements must not overlap. A 4g instance at
slice 0 beside a 3g instance at slice 4 is legal (NVML's possible placements list
both, creation fails only on overlap, and mig-parted accepts the pair), although
NVIDIA's combination diagram does not draw it.

Memory: ``memory_gb`` is the nominal size in the profile's name; ``memory_gib`` is
what NVML reports for an instance of the profile (``nvidia-smi mig -lgip``, GiB),
which is smaller (H200 ``1g.18gb`` is 16.00 GiB). Workloads are matched on
``memory_gib``. Sizes move by up to about 0.5 GiB between drivers; the table keeps
the lowest reported value seen, and where no report was found (H200 3g/4g.71gb,
A100-40GB 1g.10gb) a lower bound derived from a profile with the same memory
slices, marked below.

:func:`enumerate_layouts` gives every valid positional layout; :class:`Layout` is the
placement-free form (profile counts) that mig-parted configs and the planner use,
and :func:`place` finds placements for one.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from forecaster.errors import BadInputError
from scaler.catalog.gpus import gpu_model


@dataclass(frozen=True)
class MigProfile:
    """One GPU-instance profile of one GPU model."""

    name: str
    """NVIDIA's name, e.g. ``1g.10gb`` or ``1g.10gb+me``."""
    compute_slices: int
    memory_slices: int
    memory_gb: int
    max_count: int
    """Most instances of this profile on one GPU."""
    starts: tuple[int, ...]
    """Legal start memory slices; each placement spans ``memory_slices``."""
    memory_gib: float = 0.0
    """Memory NVML reports for one instance, GiB (below the nominal ``memory_gb``)."""
    media: bool = False
    """A ``+me`` profile (adds decoders, JPEG and OFA units)."""

    @property
    def placements(self) -> tuple[tuple[int, int], ...]:
        """``(start, size)`` pairs, as NVML reports them."""
        return tuple((s, self.memory_slices) for s in self.starts)

    @property
    def base(self) -> str:
        return self.name.removesuffix("+me")


@dataclass(frozen=True)
class MigGeometry:
    """The MIG geometry of one GPU model."""

    model: str
    compute_slices: int
    memory_slices: int
    profiles: tuple[MigProfile, ...]

    def profile(self, name: str) -> MigProfile:
        for p in self.profiles:
            if p.name == name:
                return p
        raise BadInputError(
            f"MIG profile {name!r} does not exist on {self.model}; expected one of "
            f"{', '.join(p.name for p in self.profiles)}"
        )

    @property
    def base_profiles(self) -> tuple[MigProfile, ...]:
        return tuple(p for p in self.profiles if not p.media)


def _seven_slice(
    model: str,
    gb: tuple[int, int, int, int, int, int],
    gib: tuple[float, float, float, float, float, float],
) -> MigGeometry:
    """A100/H100/H200 geometry; ``gb`` (nominal) and ``gib`` (NVML) = 1g, 1g(double), 2g, 3g, 4g, 7g."""
    one, one_double, two, three, four, seven = gb
    g1, g1d, g2, g3, g4, g7 = gib
    return MigGeometry(
        model=model,
        compute_slices=7,
        memory_slices=8,
        profiles=(
            MigProfile(f"1g.{one}gb", 1, 1, one, 7, (0, 1, 2, 3, 4, 5, 6), g1),
            MigProfile(f"1g.{one}gb+me", 1, 1, one, 1, (0, 1, 2, 3, 4, 5, 6), g1, media=True),
            MigProfile(f"1g.{one_double}gb", 1, 2, one_double, 4, (0, 2, 4, 6), g1d),
            MigProfile(f"2g.{two}gb", 2, 2, two, 3, (0, 2, 4), g2),
            MigProfile(f"3g.{three}gb", 3, 4, three, 2, (0, 4), g3),
            MigProfile(f"4g.{four}gb", 4, 4, four, 1, (0,), g4),
            MigProfile(f"7g.{seven}gb", 7, 8, seven, 1, (0,), g7),
        ),
    )


# NVML's sizes (GiB) from ``nvidia-smi mig -lgip`` reports; "derived" marks a lower bound
# taken from a profile with the same memory slices where no report was found.
GEOMETRIES: dict[str, MigGeometry] = {
    g.model: g
    for g in (
        # 1g.10gb derived from 2g.10gb (2 memory slices each)
        _seven_slice("A100-40GB", (5, 10, 10, 20, 20, 40), (4.75, 9.62, 9.62, 19.50, 19.50, 39.25)),
        _seven_slice(
            "A100-80GB", (10, 20, 20, 40, 40, 80), (9.50, 19.50, 19.50, 39.25, 39.25, 78.50)
        ),
        _seven_slice(
            "H100-80GB", (10, 20, 20, 40, 40, 80), (9.75, 19.62, 19.62, 39.50, 39.50, 79.25)
        ),
        # 1g.35gb from 2g.35gb; 3g/4g.71gb derived as two 2g.35gb (4 memory slices)
        _seven_slice(
            "H200-141GB", (18, 35, 35, 71, 71, 141), (16.00, 32.50, 32.50, 65.00, 65.00, 140.00)
        ),
        MigGeometry(
            model="A30-24GB",
            compute_slices=4,
            memory_slices=4,
            profiles=(
                MigProfile("1g.6gb", 1, 1, 6, 4, (0, 1, 2, 3), 5.75),
                MigProfile("1g.6gb+me", 1, 1, 6, 1, (0, 1, 2, 3), 5.75, media=True),
                MigProfile("2g.12gb", 2, 2, 12, 2, (0, 2), 11.62),
                MigProfile("2g.12gb+me", 2, 2, 12, 1, (0, 2), 11.62, media=True),
                MigProfile("4g.24gb", 4, 4, 24, 1, (0,), 23.37),
            ),
        ),
    )
}


def geometry(model: str) -> MigGeometry:
    """The MIG geometry of a GPU model (catalog name or alias); BadInputError if it has none."""
    try:
        key = gpu_model(model).name
    except KeyError:
        raise BadInputError(f"unknown GPU model {model!r}") from None
    if key not in GEOMETRIES:
        raise BadInputError(
            f"GPU model {key!r} does not support MIG; MIG models are {', '.join(GEOMETRIES)}"
        )
    return GEOMETRIES[key]


@dataclass(frozen=True, order=True)
class Placed:
    """One GPU instance at a placement."""

    start: int
    profile: str


def is_valid(geo: MigGeometry, instances: Iterable[Placed]) -> bool:
    """True when the placed instances form a layout NVML accepts on ``geo``."""
    used = [False] * geo.memory_slices
    compute = 0
    counts: dict[str, int] = {}
    media = 0
    for inst in instances:
        try:
            p = geo.profile(inst.profile)
        except BadInputError:
            return False
        if inst.start not in p.starts:
            return False
        for s in range(inst.start, inst.start + p.memory_slices):
            if used[s]:
                return False
            used[s] = True
        compute += p.compute_slices
        counts[p.name] = counts.get(p.name, 0) + 1
        if counts[p.name] > p.max_count:
            return False
        media += p.media
    return compute <= geo.compute_slices and media <= 1


def enumerate_layouts(
    model: str, include_media: bool = False, maximal_only: bool = False
) -> list[tuple[Placed, ...]]:
    """Every valid positional layout of ``model`` (the empty one included unless maximal_only).

    ``maximal_only`` keeps the layouts to which no further instance can be added.
    """
    return list(_enumerate(geometry(model).model, include_media, maximal_only))


@functools.cache
def _enumerate(
    model: str, include_media: bool, maximal_only: bool
) -> tuple[tuple[Placed, ...], ...]:
    geo = GEOMETRIES[model]
    profiles = geo.profiles if include_media else geo.base_profiles
    candidates = sorted(Placed(s, p.name) for p in profiles for s in p.starts)
    out: list[tuple[Placed, ...]] = []

    def extend(chosen: list[Placed], i: int) -> None:
        # Depth-first over candidates in a fixed order, so each set is built once.
        out.append(tuple(chosen))
        for j in range(i, len(candidates)):
            c = candidates[j]
            if is_valid(geo, [*chosen, c]):
                chosen.append(c)
                extend(chosen, j + 1)
                chosen.pop()

    extend([], 0)
    if maximal_only:
        out = [
            lay
            for lay in out
            if not any(c not in lay and is_valid(geo, [*lay, c]) for c in candidates)
        ]
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """A placement-free layout: how many instances of each profile (mig-parted's form).

    ``whole`` is a GPU with MIG disabled (one full GPU for a training job or a
    whole-GPU service); an empty, non-whole layout is MIG on with no instances.
    """

    counts: tuple[tuple[str, int], ...] = ()
    whole: bool = False

    @staticmethod
    def of(counts: Mapping[str, int] | None = None, whole: bool = False) -> Layout:
        items = tuple(sorted((k, int(v)) for k, v in (counts or {}).items() if int(v) > 0))
        return Layout(items, whole)

    @staticmethod
    def from_placed(instances: Iterable[Placed]) -> Layout:
        counts: dict[str, int] = {}
        for i in instances:
            counts[i.profile] = counts.get(i.profile, 0) + 1
        return Layout.of(counts)

    def count(self, profile: str) -> int:
        return dict(self.counts).get(profile, 0)

    def as_dict(self) -> dict[str, int]:
        return dict(self.counts)

    @property
    def name(self) -> str:
        """A stable, readable name: ``whole``, ``all-1g.10gb`` or ``3g.40gb-2x2g.20gb``."""
        if self.whole:
            return "whole"
        if not self.counts:
            return "mig-empty"
        parts = sorted(self.counts, key=lambda kv: (-_compute_of(kv[0]), kv[0]))
        return "-".join(f"{n}x{p}" if n > 1 else p for p, n in parts)

    def spec(self) -> str:
        """The config form ``whole`` or ``3g.40gb:1,2g.20gb:2``, which :func:`parse_layout` reads."""
        if self.whole:
            return "whole"
        return ",".join(f"{p}:{n}" for p, n in self.counts) or "none"


def _compute_of(profile: str) -> int:
    m = re.match(r"^(\d+)g\.", profile)
    return int(m.group(1)) if m else 0


def parse_layout(model: str, text: str, field: str = "layout") -> Layout:
    """Read ``whole``, ``none`` or ``1g.10gb:7`` / ``3g.40gb:1,2g.20gb:2``; check it fits ``model``."""
    geo = geometry(model)
    t = text.strip()
    if t == "whole":
        return Layout(whole=True)
    counts: dict[str, int] = {}
    if t not in ("none", ""):
        for part in t.split(","):
            name, _, n = part.strip().partition(":")
            try:
                k = int(n) if n else 1
            except ValueError:
                raise BadInputError(
                    f"{field}: {part.strip()!r} is not PROFILE:COUNT (e.g. 1g.10gb:7)"
                ) from None
            geo.profile(name)
            counts[name] = counts.get(name, 0) + k
    layout = Layout.of(counts)
    if place(model, layout) is None:
        raise BadInputError(
            f"{field}: {text!r} is not a valid MIG layout on {geo.model} "
            "(instances overlap or exceed the GPU's slices)"
        )
    return layout


def place(model: str, layout: Layout) -> tuple[Placed, ...] | None:
    """Placements realising ``layout`` on ``model``, or None if no valid placement exists.

    Largest profiles are placed first and every legal start is tried (backtracking),
    since first-fit alone fails on layouts such as ``3g + 4 x 1g`` that need the 3g
    instance at the far end.
    """
    if layout.whole:
        return ()
    geo = geometry(model)
    wanted: list[str] = []
    for name, n in layout.counts:
        geo.profile(name)
        wanted += [name] * n
    wanted.sort(key=lambda n: (-geo.profile(n).memory_slices, -geo.profile(n).compute_slices, n))
    chosen: list[Placed] = []

    def go(i: int) -> bool:
        if i == len(wanted):
            return True
        p = geo.profile(wanted[i])
        for s in p.starts:
            # Same profile twice: keep starts increasing, so permutations are not retried.
            if i > 0 and wanted[i - 1] == p.name and s <= chosen[-1].start:
                continue
            cand = Placed(s, p.name)
            if is_valid(geo, [*chosen, cand]):
                chosen.append(cand)
                if go(i + 1):
                    return True
                chosen.pop()
        return False

    return tuple(sorted(chosen)) if go(0) else None


@functools.cache
def layouts(model: str, maximal_only: bool = True) -> tuple[Layout, ...]:
    """Distinct placement-free layouts of ``model`` (base profiles), whole GPU excluded."""
    key = geometry(model).model
    seen = {Layout.from_placed(lay) for lay in _enumerate(key, False, maximal_only)}
    if maximal_only:
        # A count-layout is maximal when no other valid one contains it.
        seen = {
            a
            for a in seen
            if not any(
                b != a and all(b.count(p) >= n for p, n in a.counts)
                for b in {Layout.from_placed(x) for x in _enumerate(key, False, False)}
            )
        }
    return tuple(sorted(seen, key=lambda lay: lay.name))


def gpu_fraction(model: str, profile: str) -> float:
    """Share of a GPU one instance of ``profile`` takes: the larger of its compute and memory shares."""
    geo = geometry(model)
    p = geo.profile(profile)
    return max(p.compute_slices / geo.compute_slices, p.memory_slices / geo.memory_slices)


def profile_for_memory(model: str, memory_gb: float) -> str:
    """The smallest base profile of ``model`` whose NVML-reported memory holds ``memory_gb``.

    ``memory_gb`` is compared with the GiB NVML reports (``memory_gib``), not with the
    nominal size in the name: a workload needing 17 on an H200 gets ``1g.35gb``, since
    ``1g.18gb`` holds 16.00 GiB.
    """
    geo = geometry(model)
    fits = [p for p in geo.base_profiles if p.memory_gib >= memory_gb]
    if not fits:
        raise BadInputError(
            f"memory_gb: {memory_gb:g} GB does not fit any MIG profile of {geo.model} "
            f"(largest {max(p.memory_gib for p in geo.profiles):g} GiB as NVML reports it)"
        )
    return min(fits, key=lambda p: (p.compute_slices, p.memory_gib)).name


def config_name(per_device: list[Layout]) -> str:
    """The ``nvidia.com/mig.config`` value for a node whose GPUs get ``per_device`` layouts.

    Uniform nodes get readable names (``all-disabled``, ``all-7x1g.10gb``); mixed nodes a
    stable hash of their layouts, since label values are limited to 63 characters.
    """
    distinct = {lay for lay in per_device}
    if len(distinct) == 1:
        lay = next(iter(distinct))
        name = "all-disabled" if lay.whole else f"all-{lay.name}"
        name = name.replace("+me", "me")
        if len(name) <= 63:
            return name
    digest = hashlib.sha1("|".join(lay.spec() for lay in per_device).encode()).hexdigest()
    return f"tiercast-mixed-{digest[:10]}"


def mig_parted_entry(per_device: list[Layout]) -> list[dict]:
    """The mig-parted config entry (a list of device groups) giving ``per_device`` layouts."""
    groups: dict[Layout, list[int]] = {}
    for i, lay in enumerate(per_device):
        groups.setdefault(lay, []).append(i)
    out: list[dict] = []
    for lay, devices in sorted(groups.items(), key=lambda kv: kv[1][0]):
        dev: str | list[int] = "all" if len(groups) == 1 else devices
        if lay.whole:
            out.append({"devices": dev, "mig-enabled": False})
        else:
            out.append({"devices": dev, "mig-enabled": True, "mig-devices": lay.as_dict()})
    return out


def device_filter_matches(model: str, device_filter: object, where: str = "device-filter") -> bool:
    """True when a mig-parted ``device-filter`` (one ID or a list) selects ``model``'s boards.

    No filter selects every GPU. IDs are PCI device and vendor IDs (``0x233010DE``),
    compared without regard to case, against :attr:`scaler.catalog.gpus.GpuModel.pci_device_ids`.
    """
    if device_filter is None:
        return True
    ids = [device_filter] if isinstance(device_filter, str) else device_filter
    if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
        raise BadInputError(
            f"{where}: expected a PCI device ID such as '0x233010DE' or a list of them, "
            f"got {device_filter!r}"
        )
    ours = {d.upper() for d in gpu_model(model).pci_device_ids}
    return any(i.upper() in ours for i in ids)


def parse_mig_parted_entry(
    model: str, entry: object, device_count: int, source: str = "desired layout"
) -> dict[int, Layout]:
    """Read one mig-parted config entry into a layout per device index; BadInputError if invalid.

    Groups whose ``device-filter`` does not select ``model`` are skipped (their profiles
    belong to other GPU models, as in NVIDIA's ``all-balanced``), so a device no group
    selects is absent from the result: mig-parted leaves such a GPU as it is.
    """
    if not isinstance(entry, list) or not entry:
        raise BadInputError(
            f"{source}: expected a non-empty list of device groups "
            "({devices: all | [0,1], mig-enabled: true, mig-devices: {...}})"
        )
    out: dict[int, Layout] = {}
    for k, group in enumerate(entry):
        where = f"{source}[{k}]"
        if not isinstance(group, dict) or "devices" not in group:
            raise BadInputError(f"{where}: expected a mapping with 'devices' and 'mig-enabled'")
        if not device_filter_matches(model, group.get("device-filter"), f"{where}.device-filter"):
            continue
        devices = group["devices"]
        if devices == "all":
            idx = list(range(device_count))
        elif isinstance(devices, list) and all(isinstance(d, int) for d in devices):
            idx = list(devices)
        else:
            raise BadInputError(f"{where}.devices: expected 'all' or a list of GPU indexes")
        for d in idx:
            if not 0 <= d < device_count:
                raise BadInputError(
                    f"{where}.devices: GPU {d} does not exist (this node has {device_count})"
                )
        enabled = group.get("mig-enabled", False)
        if not isinstance(enabled, bool):
            raise BadInputError(f"{where}.mig-enabled: expected true or false, got {enabled!r}")
        if not enabled:
            layout = Layout(whole=True)
        else:
            devs = group.get("mig-devices") or {}
            if not isinstance(devs, dict):
                raise BadInputError(f"{where}.mig-devices: expected a mapping profile -> count")
            for name, n in devs.items():
                geometry(model).profile(str(name))
                if not isinstance(n, int) or n < 0:
                    raise BadInputError(
                        f"{where}.mig-devices.{name}: expected a count >= 0, got {n!r}"
                    )
            layout = Layout.of({str(k2): v for k2, v in devs.items()})
            if place(model, layout) is None:
                raise BadInputError(
                    f"{where}.mig-devices: {layout.spec()} does not fit one {geometry(model).model}"
                )
        for d in idx:
            out[d] = layout
    return out


def needs_mixed_strategy(per_device: list[Layout]) -> bool:
    """True when a node with these layouts needs the GPU Operator's ``mig.strategy=mixed``.

    With ``single`` the device plugin advertises MIG devices as ``nvidia.com/gpu`` and
    requires every GPU of the node to carry instances of one profile only, all alike
    (or MIG off everywhere).
    """
    kinds = {lay for lay in per_device}
    if len(kinds) > 1:
        return True
    lay = next(iter(kinds), Layout(whole=True))
    return not lay.whole and len(lay.counts) > 1


def resolve_profile(model: str, mig_profile: str, memory_gb: float | None) -> str:
    """A workload's profile: ``mig_profile`` itself, or for ``auto`` the smallest fitting ``memory_gb``."""
    if mig_profile != "auto":
        geometry(model).profile(mig_profile)
        return mig_profile
    if memory_gb is None:
        raise BadInputError("mig_profile 'auto' needs memory_gb to choose a profile")
    return profile_for_memory(model, memory_gb)
