"""MIG geometry: GPU-instance profiles and placements per GPU model, and every valid layout.

A MIG-capable GPU has 7 compute slices (4 on A30 and RTX PRO 6000 Blackwell) and 8
memory slices (4 on those).
Each GPU-instance profile has a fixed set of legal placements ``(start, size)`` in
memory slices, as NVML reports through ``nvmlDeviceGetGpuInstancePossiblePlacements``
(``nvidia-smi mig -lgipp``). A layout is valid when its instances' placements do not
overlap, their compute slices fit the GPU, and no profile exceeds its instance limit.

The tables follow NVIDIA's MIG User Guide ("Supported MIG Profiles"): on the 7-slice
parts, 1g profiles start at 0..6 (size 1), the double-memory 1g profiles (1g.10gb on
A100-40GB, 1g.20gb on 80 GB parts, 1g.24gb on H100 NVL and H20, 1g.35gb on H200,
1g.45gb on B200, 1g.47gb on GB200) at 0, 2, 4, 6 (size 2), 2g at
0, 2, 4 (size 2), 3g at 0, 4 (size 4), 4g at 0 (size 4), 7g at 0 (size 8); on A30,
1g at 0..3, 2g at 0, 2 and 4g at 0 (RTX PRO 6000 alike). ``+me`` profiles (media engines) share their base
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
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from forecaster.errors import BadInputError
from scaler.catalog.gpus import GpuModel, gpu_model, set_user_models


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
    gib: tuple[float, ...],
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


def _four_slice(model: str, gb: tuple[int, int, int], gib: tuple[float, ...]) -> MigGeometry:
    """A 4-slice geometry without A30's ``2g+me`` (RTX PRO 6000 Blackwell): 1g, 2g, 4g."""
    one, two, four = gb
    g1, g2, g4 = gib
    return MigGeometry(
        model=model,
        compute_slices=4,
        memory_slices=4,
        profiles=(
            MigProfile(f"1g.{one}gb", 1, 1, one, 4, (0, 1, 2, 3), g1),
            MigProfile(f"1g.{one}gb+me", 1, 1, one, 1, (0, 1, 2, 3), g1, media=True),
            MigProfile(f"2g.{two}gb", 2, 2, two, 2, (0, 2), g2),
            MigProfile(f"4g.{four}gb", 4, 4, four, 1, (0,), g4),
        ),
    )


DERIVED_GIB_RATIO = 16.00 / 18
"""NVML-reported GiB per nominal GB of the tightest profile listed (H200 ``1g.18gb``:
16.00 GiB). Parts with no published ``nvidia-smi mig -lgip`` listing get this share
of the nominal size, rounded down to 0.25 GiB: a lower bound, so ``mig_profile: auto``
never picks a profile too small."""


def _derived(*gb: int) -> tuple[float, ...]:
    return tuple(math.floor(g * DERIVED_GIB_RATIO * 4) / 4 for g in gb)


# NVML's sizes (GiB) from ``nvidia-smi mig -lgip`` reports; "derived" marks a lower bound
# taken from a profile with the same memory slices where no report was found.
# Profiles and sizes per part: NVIDIA MIG User Guide, "Supported MIG Profiles" (tables
# for A30, A100, H100 80 GB, H100 94 GB, H100 96 GB, H200, B200, RTX PRO 6000 Blackwell);
# GB200 has no table there, its profiles are the GPU Operator's default mig-parted
# config's for device 0x294110DE (1g.23gb, 1g.47gb, 2g.47gb, 3g.93gb, 4g.93gb, 7g.186gb).
# Placements: the guide's ``nvidia-smi mig -lgipp`` listing for the 7-slice parts
# ({0..6}:1, {0,2,4,6}:2, {0,2,4}:2, {0,4}:4, {0}:4, {0}:8), the same fractions of
# memory on every 7-slice part; 4-slice parts aligned as on A30.
BUILTIN_GEOMETRIES: Mapping[str, MigGeometry] = {
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
        # The guide's H100 94GB table; H20 is the H100 96GB table (mig-parted's group
        # "H100-96GB, PG506-96GB, GH200, H20": 1g.12gb, 2g.24gb, 3g.48gb). Sizes derived.
        _seven_slice("H100-NVL-94GB", (12, 24, 24, 47, 47, 94), _derived(12, 24, 24, 47, 47, 94)),
        _seven_slice("H20-96GB", (12, 24, 24, 48, 48, 96), _derived(12, 24, 24, 48, 48, 96)),
        # 1g.35gb from 2g.35gb; 3g/4g.71gb derived as two 2g.35gb (4 memory slices)
        _seven_slice(
            "H200-141GB", (18, 35, 35, 71, 71, 141), (16.00, 32.50, 32.50, 65.00, 65.00, 140.00)
        ),
        # Blackwell: sizes derived (no -lgip listing found).
        _seven_slice("B200-180GB", (23, 45, 45, 90, 90, 180), _derived(23, 45, 45, 90, 90, 180)),
        _seven_slice("GB200-186GB", (23, 47, 47, 93, 93, 186), _derived(23, 47, 47, 93, 93, 186)),
        # The +gfx, +me.all and -me variants of the guide's table are not modelled: a node
        # laid out with them is held (its profile is unknown here), never planned.
        # nvidia-smi mig -lgip on an RTX PRO 6000 Blackwell: 1g.24gb 23.62, 2g.48gb 47.38,
        # 4g.96gb 95.00 GiB (the +gfx profiles, not modelled, report less: 23.12/46.50/93.38).
        _four_slice("RTX-PRO-6000-96GB", (24, 48, 96), (23.62, 47.38, 95.00)),
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

GEOMETRIES: dict[str, MigGeometry] = dict(BUILTIN_GEOMETRIES)
"""The MIG geometry of every MIG-capable model known now: the built-ins, then the loaded
config's own (:func:`set_user_catalog` updates it in place)."""


def set_user_catalog(models: Iterable[tuple[GpuModel, MigGeometry | None]]) -> None:
    """Make ``models`` (each with its MIG geometry, or None without MIG) the config's own.

    Replaces the previous config's models and geometries and empties the layout caches
    (a name may now mean another part); ``()`` restores the built-in catalog.
    """
    chosen = list(models)
    for m, geo in chosen:
        if geo is not None:
            problem = geometry_problem(geo)
            if problem is not None:
                raise ValueError(f"GPU model {m.name!r}: {problem}")
    set_user_models(m for m, _ in chosen)
    wanted = {**BUILTIN_GEOMETRIES, **{m.name: geo for m, geo in chosen if geo is not None}}
    if wanted != GEOMETRIES:
        for name in [k for k in GEOMETRIES if k not in wanted]:
            del GEOMETRIES[name]
        GEOMETRIES.update(wanted)
        _enumerate.cache_clear()
        layouts.cache_clear()


PROFILE_NAME = re.compile(r"^([1-8])g\.(\d{1,4})gb(\+me)?$")
"""A GPU-instance profile name tiercast can plan: ``<compute>g.<memory>gb``, ``+me`` for
the one with media engines."""


def geometry_problem(geo: MigGeometry) -> str | None:
    """The first rule ``geo`` breaks, as ``profiles[i].field: what``; None when valid.

    The rules NVML's own tables keep (every built-in geometry passes them): at most 8
    compute and 8 memory slices; each profile named ``<compute>g.<GB>gb`` (``+me``: the
    media profile, beside its base profile), its slices within the GPU's, every placement
    inside the memory slices, and an instance limit its placements and slices can hold.
    """
    if not 1 <= geo.compute_slices <= 8:
        return f"compute_slices: {geo.compute_slices} is not 1 to 8"
    if not 1 <= geo.memory_slices <= 8:
        return f"memory_slices: {geo.memory_slices} is not 1 to 8"
    if not geo.profiles:
        return "profiles: a MIG-capable model needs at least one profile"
    names = [p.name for p in geo.profiles]
    for i, p in enumerate(geo.profiles):
        at = f"profiles[{i}]"
        m = PROFILE_NAME.match(p.name)
        if m is None:
            return f"{at}.name: {p.name!r} is not <compute>g.<GB>gb (e.g. 1g.10gb, 1g.10gb+me)"
        if names.count(p.name) > 1:
            return f"{at}.name: {p.name!r} is declared twice"
        if int(m.group(1)) != p.compute_slices:
            return f"{at}.compute_slices: {p.compute_slices} disagrees with the name {p.name!r}"
        if int(m.group(2)) != p.memory_gb:
            return f"{at}: the name {p.name!r} says {m.group(2)} GB, memory_gb is {p.memory_gb}"
        if bool(m.group(3)) != p.media:
            return f"{at}.name: {p.name!r} and media={p.media} disagree (+me is the media profile)"
        if p.media and p.base not in names:
            return f"{at}.name: {p.name!r} has no base profile {p.base!r}"
        if not 1 <= p.compute_slices <= geo.compute_slices:
            return (
                f"{at}.compute_slices: {p.compute_slices} is not 1 to the GPU's "
                f"{geo.compute_slices}"
            )
        if not 1 <= p.memory_slices <= geo.memory_slices:
            return (
                f"{at}.memory_slices: {p.memory_slices} is not 1 to the GPU's {geo.memory_slices}"
            )
        if not p.starts:
            return f"{at}.placements: at least one start slice is needed"
        if len(set(p.starts)) != len(p.starts):
            return f"{at}.placements: {list(p.starts)} repeats a start slice"
        for start in p.starts:
            if start < 0 or start + p.memory_slices > geo.memory_slices:
                return (
                    f"{at}.placements: start {start} with {p.memory_slices} memory slice(s) "
                    f"is outside the GPU's slices 0 to {geo.memory_slices - 1}"
                )
        most = min(
            len(p.starts),
            geo.compute_slices // p.compute_slices,
            geo.memory_slices // p.memory_slices,
        )
        if not 1 <= p.max_count <= most:
            return (
                f"{at}.max_count: {p.max_count} is not 1 to {most} (its placements and the "
                "GPU's slices hold no more)"
            )
        if not 0 < p.memory_gib <= p.memory_gb:
            return (
                f"{at}.memory_gib: {p.memory_gib:g} is not above 0 and at most its {p.memory_gb} GB"
            )
    return None


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


MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
"""Prefix of the extended resources the device plugin advertises under ``mig.strategy=mixed``."""

_ATTRIBUTED = re.compile(r"^(\d+g\.\d+gb)([+.])(.+)$")


def mig_resource(profile: str) -> str:
    """The extended resource the device plugin advertises for ``profile`` (mixed strategy).

    NVIDIA's k8s-device-plugin names MIG resources ``mig-<profile>`` with every ``+``
    replaced by ``.`` (``internal/rm/rm.go``, ``AddDefaultResourcesToConfig``), since ``+``
    is not allowed in a resource name: ``1g.10gb+me`` is ``nvidia.com/mig-1g.10gb.me``.
    """
    return MIG_RESOURCE_PREFIX + profile.replace("+", ".")


def profile_of_resource(resource: str) -> str | None:
    """The MIG profile a ``nvidia.com/mig-*`` resource names, in NVIDIA's ``+`` form
    (``nvidia.com/mig-1g.10gb.me`` is ``1g.10gb+me``); None for any other resource."""
    if not resource.startswith(MIG_RESOURCE_PREFIX):
        return None
    return profile_of_device_name(resource.removeprefix(MIG_RESOURCE_PREFIX))


def profile_of_device_name(name: str) -> str:
    """A MIG device name as the device plugin and GPU feature discovery write it
    (``1g.10gb.me``, ``+`` replaced by ``.``: ``internal/resource/nvml-mig-device.go``
    ``GetName``) back in NVIDIA's profile form (``1g.10gb+me``)."""
    m = _ATTRIBUTED.match(name)
    return f"{m.group(1)}+{m.group(3)}" if m else name


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


def _device_id(text: str) -> tuple[int, int, int | None] | None:
    """mig-parted's ``NewDeviceIDFromString``: ``0xDDDDVVVV`` or ``0xDDDDVVVV:0xSSSSVVVV``
    (base from the prefix, as Go's ``strconv.ParseUint(s, 0, 32)``); None where it fails
    to parse (mig-parted then matches nothing with it)."""
    parts = text.split(":")
    if len(parts) > 2:
        return None
    try:
        raw = [int(x, 0) for x in parts]
    except ValueError:
        return None
    if any(not 0 <= r < 2**32 for r in raw):
        return None
    return raw[0] >> 16, raw[0] & 0xFFFF, raw[1] if len(raw) == 2 else None


def device_filter_matches(
    model: str,
    device_filter: object,
    where: str = "device-filter",
    device_ids: tuple[str, ...] | None = None,
) -> bool:
    """True when a mig-parted ``device-filter`` (one ID or a list) selects the GPUs.

    mig-parted matches each GPU by its own PCI device ID (NVIDIA/mig-parted, commit
    bd7160f: ``api/spec/v1/helpers.go`` ``MatchesDeviceFilter``, ``pkg/types/device.go``
    ``Matches``, walked per GPU by ``WalkSelectedMigConfigForEachGPU`` in
    ``cmd/nvidia-mig-parted/assert/assert.go``): device and vendor equal, and the
    subsystem too where the filter names one. ``device_ids`` are the IDs the GPUs may have
    (:func:`scaler.catalog.gpus.device_ids_for_product`; default every ID of ``model``). No
    filter selects every GPU; a filter that selects some of those IDs and not others
    cannot be told for this node (which board it is is not known): BadInputError, so the
    node is held rather than planned on a guess.
    """
    if device_filter is None or device_filter == "":
        return True
    ids = [device_filter] if isinstance(device_filter, str) else device_filter
    if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
        raise BadInputError(
            f"{where}: expected a PCI device ID such as '0x233010DE' or a list of them, "
            f"got {device_filter!r}"
        )
    if not ids:
        return True
    filters = [f for f in (_device_id(i) for i in ids) if f is not None]
    candidates = device_ids if device_ids is not None else gpu_model(model).pci_device_ids
    sure: set[str] = set()
    maybe: set[str] = set()
    for cand in candidates:
        gpu = _device_id(cand)
        if gpu is None:
            continue
        for dev, ven, sub in filters:
            if (dev, ven) == gpu[:2]:
                (maybe if sub is not None else sure).add(cand)
    if sure == set(candidates) and candidates:
        return True
    if not sure and not maybe:
        return False
    unsure = sorted(set(candidates) - sure)
    raise BadInputError(
        f"{where}: selects {model} boards {sorted(sure | maybe)} but not surely "
        f"{unsure}; mig-parted matches each GPU's own PCI device ID, and this node's "
        "is not known"
    )


def parse_mig_parted_entry(
    model: str,
    entry: object,
    device_count: int,
    source: str = "desired layout",
    device_ids: tuple[str, ...] | None = None,
) -> dict[int, Layout]:
    """Read one mig-parted config entry into a layout per device index; BadInputError if invalid.

    Groups whose ``device-filter`` does not select the node's GPUs (``device_ids``, the
    PCI device IDs they may have; default every ID of ``model``) are skipped (their
    profiles belong to other boards, as in NVIDIA's ``all-balanced``), so a device no
    group selects is absent from the result: mig-parted leaves such a GPU as it is. A
    filter that may or may not select them (:func:`device_filter_matches`) is an error.
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
        df = group.get("device-filter")
        if not device_filter_matches(model, df, f"{where}.device-filter", device_ids):
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
