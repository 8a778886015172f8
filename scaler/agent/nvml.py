"""NVML backends for the node agent: the real one through ``pynvml``, and a fake for tests.

:class:`NvmlBackend` is the small interface the agent needs: read GPUs, MIG mode, GPU
and compute instances, utilization, memory and processes; switch MIG mode; create
and destroy instances at placements. Every NVML failure is raised as
:class:`NvmlError` carrying NVML's own return code and name, with the ``pynvml``
exception chained, so callers report ``NVML_ERROR_IN_USE`` and the like verbatim.

:class:`FakeNvml` models NVML's MIG rules from :mod:`scaler.catalog.mig`: profiles a GPU does
not have are ``NOT_SUPPORTED``, instances need MIG mode (``NOT_SUPPORTED`` without),
a placement outside the profile's legal starts is ``INVALID_ARGUMENT``, an overlap or
a full GPU is ``INSUFFICIENT_RESOURCES`` (so 4g at 0 beside 3g at 4 is created, as on a
real A100 or H100), possible placements are every legal one whether occupied or not, destroying an instance with compute
instances or processes on it is ``IN_USE``, and changes without root are
``NO_PERMISSION``. Like Karpenter's fake cloud provider it can be told to fail the
next call of a method.
"""

from __future__ import annotations

import contextlib
import ctypes
from dataclasses import dataclass, field
from typing import Any, Protocol

import pynvml

from forecaster.errors import TemporaryError, TiercastError
from scaler.catalog.gpus import GPU_MODELS, product_matches
from scaler.catalog.mig import GEOMETRIES, MigGeometry, Placed, geometry, is_valid

_ERROR_NAMES = {getattr(pynvml, n): n for n in dir(pynvml) if n.startswith("NVML_ERROR_")}


class NvmlError(TemporaryError):
    """An NVML call failed; ``code`` and ``name`` are NVML's (``NVML_ERROR_IN_USE``)."""

    def __init__(self, code: int, context: str) -> None:
        self.code = code
        self.name = _ERROR_NAMES.get(code, f"NVML_ERROR_{code}")
        super().__init__(f"{context}: {self.name}")


class NvmlUnavailableError(TiercastError):
    """No NVIDIA driver or NVML library on this machine: the agent cannot run here."""

    exit_code = 1


def nvml_error(code: int, context: str) -> NvmlError:
    """An :class:`NvmlError` whose cause is the exception pynvml raises for ``code``."""
    err = NvmlError(code, context)
    err.__cause__ = pynvml.NVMLError(code)
    return err


@dataclass(frozen=True)
class ComputeInstance:
    id: int
    slices: int


@dataclass(frozen=True)
class GpuInstance:
    id: int
    profile: str
    start: int
    size: int
    compute_instances: tuple[ComputeInstance, ...] = ()
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None


@dataclass(frozen=True)
class Process:
    pid: int
    used_memory_bytes: int | None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    uuid: str
    model: str | None
    """Catalog model (``A100-80GB``) when the GPU is MIG-capable and known, else None."""
    mig_current: bool
    mig_pending: bool
    memory_used_bytes: int
    memory_total_bytes: int
    utilization_percent: float | None
    """None where NVML does not report it (a GPU in MIG mode)."""


class NvmlBackend(Protocol):
    """Required: every method. Errors: :class:`NvmlError` with NVML's code."""

    def gpus(self) -> list[Gpu]: ...

    def gpu_instances(self, index: int) -> list[GpuInstance]: ...

    def processes(self, index: int) -> list[Process]: ...

    def set_mig_mode(self, index: int, enabled: bool) -> bool:
        """Request MIG on/off; True when it took effect, False when a GPU reset is pending."""
        ...

    def possible_placements(self, index: int, profile: str) -> list[tuple[int, int]]: ...

    def create_gpu_instance(self, index: int, profile: str, start: int) -> int:
        """Create a GPU instance at memory slice ``start``; returns its id."""
        ...

    def create_compute_instance(self, index: int, gpu_instance: int) -> int:
        """Create one compute instance spanning the whole GPU instance; returns its id."""
        ...

    def destroy_compute_instance(
        self, index: int, gpu_instance: int, compute_instance: int
    ) -> None: ...

    def destroy_gpu_instance(self, index: int, gpu_instance: int) -> None: ...

    def close(self) -> None: ...


def model_from_name(name: str, memory_total_bytes: int) -> str | None:
    """Catalog MIG model of a device named like ``NVIDIA A100-SXM4-80GB``; None if not MIG-capable.

    NVML's device name is what GPU feature discovery writes as ``nvidia.com/gpu.product``
    with spaces as dashes, so the catalog's product rules name the model
    (:func:`scaler.catalog.gpus.product_matches`); where the name gives no size (``NVIDIA
    H100 PCIe``), the part whose memory is nearest the device's total is chosen.
    """
    product = "-".join(name.split())
    gib = memory_total_bytes / 2**30
    candidates = [
        m for m in GPU_MODELS.values() if m.mig_capable and product_matches(m.name, product)
    ]
    if not candidates:
        return None
    return min(candidates, key=lambda m: abs(m.memory_gb - gib)).name


# --- the fake ----------------------------------------------------------------------


@dataclass
class _FakeGi:
    id: int
    profile: str
    start: int
    cis: dict[int, int] = field(default_factory=dict)
    """compute instance id -> slices"""


@dataclass
class _FakeGpu:
    model: str
    uuid: str
    mig: bool = False
    pending: bool | None = None
    gis: dict[int, _FakeGi] = field(default_factory=dict)
    next_gi: int = 1
    procs: list[Process] = field(default_factory=list)
    utilization: float = 0.0
    memory_used: int = 0


class FakeNvml:
    """An in-memory node of MIG-capable GPUs that answers like NVML."""

    def __init__(
        self,
        models: list[str],
        privileged: bool = True,
        reset_required: bool = False,
    ) -> None:
        self._gpus = [
            _FakeGpu(geometry(m).model, f"GPU-fake-{i:04d}") for i, m in enumerate(models)
        ]
        self.privileged = privileged
        self.reset_required = reset_required
        """MIG mode changes stay pending until :meth:`reset` (a GPU reset or reboot)."""
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self._fail: dict[str, int] = {}
        self.closed = False

    # Test controls -----------------------------------------------------------------
    def fail_next(self, method: str, code: int) -> None:
        """Make the next call of ``method`` fail with NVML return ``code``."""
        self._fail[method] = code

    def add_process(
        self, index: int, pid: int, memory_bytes: int = 2**30, gpu_instance: int | None = None
    ) -> None:
        self._gpus[index].procs.append(Process(pid, memory_bytes, gpu_instance, None))

    def kill_processes(self, index: int) -> None:
        self._gpus[index].procs.clear()

    def reset(self, index: int) -> None:
        g = self._gpus[index]
        if g.pending is not None:
            g.mig, g.pending = g.pending, None

    # Helpers ---------------------------------------------------------------------
    def _enter(self, method: str, *args: Any, mutating: bool = False) -> None:
        self.calls.append((method, args))
        if method in self._fail:
            raise nvml_error(self._fail.pop(method), f"{method}{args}")
        if mutating and not self.privileged:
            raise nvml_error(pynvml.NVML_ERROR_NO_PERMISSION, f"{method}{args}")

    def _gpu(self, index: int) -> _FakeGpu:
        if not 0 <= index < len(self._gpus):
            raise nvml_error(pynvml.NVML_ERROR_INVALID_ARGUMENT, f"GPU {index}")
        return self._gpus[index]

    def _geo(self, g: _FakeGpu) -> MigGeometry:
        return GEOMETRIES[g.model]

    # NvmlBackend -------------------------------------------------------------------
    def gpus(self) -> list[Gpu]:
        self._enter("gpus")
        out = []
        for i, g in enumerate(self._gpus):
            mem = geometry(g.model).profiles[-1].memory_gb * 2**30
            used = g.memory_used + sum(p.used_memory_bytes or 0 for p in g.procs)
            out.append(
                Gpu(
                    index=i,
                    name=f"NVIDIA {g.model} (fake)",
                    uuid=g.uuid,
                    model=g.model,
                    mig_current=g.mig,
                    mig_pending=g.mig if g.pending is None else g.pending,
                    memory_used_bytes=used,
                    memory_total_bytes=mem,
                    # NVML reports no GPU utilization for a GPU in MIG mode.
                    utilization_percent=None if g.mig else g.utilization,
                )
            )
        return out

    def gpu_instances(self, index: int) -> list[GpuInstance]:
        self._enter("gpu_instances", index)
        g = self._gpu(index)
        if not g.mig:
            return []
        geo = self._geo(g)
        out = []
        for gi in sorted(g.gis.values(), key=lambda x: x.start):
            p = geo.profile(gi.profile)
            used = sum(pr.used_memory_bytes or 0 for pr in g.procs if pr.gpu_instance_id == gi.id)
            out.append(
                GpuInstance(
                    id=gi.id,
                    profile=gi.profile,
                    start=gi.start,
                    size=p.memory_slices,
                    compute_instances=tuple(
                        ComputeInstance(c, s) for c, s in sorted(gi.cis.items())
                    ),
                    memory_used_bytes=used,
                    memory_total_bytes=int(p.memory_gib * 2**30),
                )
            )
        return out

    def processes(self, index: int) -> list[Process]:
        self._enter("processes", index)
        return list(self._gpu(index).procs)

    def set_mig_mode(self, index: int, enabled: bool) -> bool:
        self._enter("set_mig_mode", index, enabled, mutating=True)
        g = self._gpu(index)
        if g.procs:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE, f"set MIG mode on GPU {index}")
        if g.gis and not enabled:
            raise nvml_error(pynvml.NVML_ERROR_IN_USE, f"disable MIG on GPU {index}")
        if g.mig == enabled:
            g.pending = None
            return True
        if self.reset_required:
            g.pending = enabled
            return False
        g.mig = enabled
        return True

    def possible_placements(self, index: int, profile: str) -> list[tuple[int, int]]:
        self._enter("possible_placements", index, profile)
        p = self._profile(self._gpu(index), profile)
        # Like nvmlDeviceGetGpuInstancePossiblePlacements_v2: every placement of the
        # profile, occupied or not, MIG on or off; only creation checks for overlap.
        return list(p.placements)

    def _profile(self, g: _FakeGpu, profile: str) -> Any:
        for p in self._geo(g).profiles:
            if p.name == profile:
                return p
        raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED, f"profile {profile} on {g.model}")

    def create_gpu_instance(self, index: int, profile: str, start: int) -> int:
        self._enter("create_gpu_instance", index, profile, start, mutating=True)
        g = self._gpu(index)
        p = self._profile(g, profile)
        if not g.mig:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED, f"GPU {index} is not in MIG mode")
        if start not in p.starts:
            raise nvml_error(
                pynvml.NVML_ERROR_INVALID_ARGUMENT, f"{profile} cannot start at slice {start}"
            )
        current = [Placed(gi.start, gi.profile) for gi in g.gis.values()]
        if not is_valid(self._geo(g), [*current, Placed(start, profile)]):
            raise nvml_error(
                pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, f"{profile} at slice {start}"
            )
        gi_id = g.next_gi
        g.next_gi += 1
        g.gis[gi_id] = _FakeGi(gi_id, profile, start)
        return gi_id

    def create_compute_instance(self, index: int, gpu_instance: int) -> int:
        self._enter("create_compute_instance", index, gpu_instance, mutating=True)
        gi = self._gi(index, gpu_instance)
        if gi.cis:
            raise nvml_error(
                pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, f"GPU instance {gpu_instance} is full"
            )
        slices = self._geo(self._gpu(index)).profile(gi.profile).compute_slices
        gi.cis[0] = slices
        return 0

    def _gi(self, index: int, gpu_instance: int) -> _FakeGi:
        g = self._gpu(index)
        if gpu_instance not in g.gis:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND, f"GPU instance {gpu_instance}")
        return g.gis[gpu_instance]

    def destroy_compute_instance(
        self, index: int, gpu_instance: int, compute_instance: int
    ) -> None:
        self._enter(
            "destroy_compute_instance", index, gpu_instance, compute_instance, mutating=True
        )
        gi = self._gi(index, gpu_instance)
        if compute_instance not in gi.cis:
            raise nvml_error(pynvml.NVML_ERROR_NOT_FOUND, f"compute instance {compute_instance}")
        if any(p.gpu_instance_id == gpu_instance for p in self._gpu(index).procs):
            raise nvml_error(pynvml.NVML_ERROR_IN_USE, f"compute instance {compute_instance}")
        del gi.cis[compute_instance]

    def destroy_gpu_instance(self, index: int, gpu_instance: int) -> None:
        self._enter("destroy_gpu_instance", index, gpu_instance, mutating=True)
        gi = self._gi(index, gpu_instance)
        if gi.cis or any(p.gpu_instance_id == gpu_instance for p in self._gpu(index).procs):
            raise nvml_error(pynvml.NVML_ERROR_IN_USE, f"GPU instance {gpu_instance}")
        del self._gpu(index).gis[gpu_instance]

    def close(self) -> None:
        self.closed = True


# --- the real one --------------------------------------------------------------------

_GI_PROFILE_CONSTANTS = [
    getattr(pynvml, n)
    for n in dir(pynvml)
    if n.startswith("NVML_GPU_INSTANCE_PROFILE_") and n != "NVML_GPU_INSTANCE_PROFILE_COUNT"
]
_ABSENT = {pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT}
"""What NVML answers for a profile the GPU does not have."""
_CI_PROFILE_BY_SLICES = {
    1: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE,
    2: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
    3: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE,
    4: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE,
    7: pynvml.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE,
}


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class PynvmlBackend:
    """NVML through ``pynvml`` (nvidia-ml-py). Needs the NVIDIA driver; MIG changes need root."""

    def __init__(self) -> None:
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise NvmlUnavailableError(
                "no usable NVIDIA driver on this machine (NVML: "
                f"{_ERROR_NAMES.get(exc.value, exc.value)}); run the agent on a GPU node"
            ) from exc
        self._profiles: dict[int, dict[str, Any]] = {}

    def _call(self, context: str, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError as exc:
            raise NvmlError(exc.value, context) from exc

    def _handle(self, index: int) -> Any:
        return self._call(f"GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)

    def _profile_infos(self, index: int) -> dict[str, Any]:
        """Profile name (``1g.10gb``) -> NVML profile info, read once per GPU."""
        if index not in self._profiles:
            h = self._handle(index)
            infos: dict[str, Any] = {}
            for const in _GI_PROFILE_CONSTANTS:
                try:
                    info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(h, const)
                except pynvml.NVMLError as exc:
                    if exc.value in _ABSENT:
                        continue  # profile not on this GPU
                    raise NvmlError(exc.value, f"GPU {index} instance profiles") from exc
                name = _text(info.name).removeprefix("MIG ").strip()
                infos[name] = info
            self._profiles[index] = infos
        return self._profiles[index]

    def _info(self, index: int, profile: str) -> Any:
        infos = self._profile_infos(index)
        if profile not in infos:
            raise nvml_error(pynvml.NVML_ERROR_NOT_SUPPORTED, f"profile {profile} on GPU {index}")
        return infos[profile]

    def gpus(self) -> list[Gpu]:
        out = []
        n = self._call("device count", pynvml.nvmlDeviceGetCount)
        for i in range(n):
            h = self._handle(i)
            name = _text(self._call(f"GPU {i} name", pynvml.nvmlDeviceGetName, h))
            uuid = _text(self._call(f"GPU {i} uuid", pynvml.nvmlDeviceGetUUID, h))
            mem = self._call(f"GPU {i} memory", pynvml.nvmlDeviceGetMemoryInfo, h)
            try:
                cur, pend = pynvml.nvmlDeviceGetMigMode(h)
            except pynvml.NVMLError:
                cur, pend = 0, 0  # not MIG-capable
            try:
                util: float | None = float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu)
            except pynvml.NVMLError:
                util = None  # NOT_SUPPORTED in MIG mode
            out.append(
                Gpu(
                    index=i,
                    name=name,
                    uuid=uuid,
                    model=model_from_name(name, int(mem.total)),
                    mig_current=cur == pynvml.NVML_DEVICE_MIG_ENABLE,
                    mig_pending=pend == pynvml.NVML_DEVICE_MIG_ENABLE,
                    memory_used_bytes=int(mem.used),
                    memory_total_bytes=int(mem.total),
                    utilization_percent=util,
                )
            )
        return out

    def _gi_handles(self, index: int) -> list[tuple[str, Any]]:
        h = self._handle(index)
        out = []
        for name, info in self._profile_infos(index).items():
            arr = (pynvml.c_nvmlGpuInstance_t * max(1, int(info.instanceCount)))()
            count = ctypes.c_uint(0)
            self._call(
                f"GPU {index} instances of {name}",
                pynvml.nvmlDeviceGetGpuInstances,
                h,
                info.id,
                arr,
                ctypes.byref(count),
            )
            out += [(name, arr[k]) for k in range(count.value)]
        return out

    def gpu_instances(self, index: int) -> list[GpuInstance]:
        h = self._handle(index)
        cur, _ = self._call(f"GPU {index} MIG mode", pynvml.nvmlDeviceGetMigMode, h)
        if cur != pynvml.NVML_DEVICE_MIG_ENABLE:
            return []
        memory = self._mig_memory(h)
        out = []
        for name, gi in self._gi_handles(index):
            info = self._call(f"GPU {index} instance info", pynvml.nvmlGpuInstanceGetInfo, gi)
            cis = []
            for slices, const in _CI_PROFILE_BY_SLICES.items():
                try:
                    ci_info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                        gi, const, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
                    )
                except pynvml.NVMLError:
                    continue
                arr = (pynvml.c_nvmlComputeInstance_t * max(1, int(ci_info.instanceCount)))()
                count = ctypes.c_uint(0)
                self._call(
                    f"GPU {index} compute instances",
                    pynvml.nvmlGpuInstanceGetComputeInstances,
                    gi,
                    ci_info.id,
                    arr,
                    ctypes.byref(count),
                )
                for k in range(count.value):
                    ci = self._call(
                        f"GPU {index} compute instance info",
                        pynvml.nvmlComputeInstanceGetInfo,
                        arr[k],
                    )
                    cis.append(ComputeInstance(int(ci.id), slices))
            used, total = memory.get(int(info.id), (None, None))
            out.append(
                GpuInstance(
                    id=int(info.id),
                    profile=name,
                    start=int(info.placement.start),
                    size=int(info.placement.size),
                    compute_instances=tuple(sorted(cis, key=lambda c: c.id)),
                    memory_used_bytes=used,
                    memory_total_bytes=total,
                )
            )
        return sorted(out, key=lambda g: g.start)

    def _mig_memory(self, h: Any) -> dict[int, tuple[int, int]]:
        """GPU instance id -> (used, total) bytes, through the MIG device handles."""
        out: dict[int, tuple[int, int]] = {}
        try:
            n = pynvml.nvmlDeviceGetMaxMigDeviceCount(h)
        except pynvml.NVMLError:
            return out
        for k in range(n):
            try:
                mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
                gi_id = pynvml.nvmlDeviceGetGpuInstanceId(mig)
                mem = pynvml.nvmlDeviceGetMemoryInfo(mig)
            except pynvml.NVMLError:
                continue  # NOT_FOUND: an empty MIG device slot
            used, total = out.get(int(gi_id), (0, 0))
            out[int(gi_id)] = (used + int(mem.used), max(total, int(mem.total)))
        return out

    def processes(self, index: int) -> list[Process]:
        h = self._handle(index)
        procs = self._call(f"GPU {index} processes", pynvml.nvmlDeviceGetComputeRunningProcesses, h)
        out = []
        for p in procs:
            gi = getattr(p, "gpuInstanceId", None)
            ci = getattr(p, "computeInstanceId", None)
            # 0xFFFFFFFF marks "not a MIG process" in NVML's process records.
            out.append(
                Process(
                    int(p.pid),
                    None if p.usedGpuMemory is None else int(p.usedGpuMemory),
                    None if gi in (None, 0xFFFFFFFF) else int(gi),
                    None if ci in (None, 0xFFFFFFFF) else int(ci),
                )
            )
        return out

    def set_mig_mode(self, index: int, enabled: bool) -> bool:
        h = self._handle(index)
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if enabled else pynvml.NVML_DEVICE_MIG_DISABLE
        # The call succeeds when the request is recorded; whether the mode took effect
        # is its activation status (an NVML return code) and the current mode.
        status = self._call(f"GPU {index} set MIG mode", pynvml.nvmlDeviceSetMigMode, h, mode)
        cur, _ = self._call(f"GPU {index} MIG mode", pynvml.nvmlDeviceGetMigMode, h)
        self._profiles.pop(index, None)
        if cur == mode:
            return True
        if status == pynvml.NVML_ERROR_IN_USE:
            # Not a pending reset: clients (processes, the device plugin, DCGM) hold the GPU.
            raise nvml_error(status, f"GPU {index} MIG mode change not activated, device not idle")
        return False

    def possible_placements(self, index: int, profile: str) -> list[tuple[int, int]]:
        h = self._handle(index)
        info = self._info(index, profile)
        count = ctypes.c_uint(0)
        arr = (pynvml.c_nvmlGpuInstancePlacement_t * 8)()
        count.value = 8
        self._call(
            f"GPU {index} placements of {profile}",
            pynvml.nvmlDeviceGetGpuInstancePossiblePlacements,
            h,
            info.id,
            arr,
            ctypes.byref(count),
        )
        return [(int(arr[k].start), int(arr[k].size)) for k in range(count.value)]

    def create_gpu_instance(self, index: int, profile: str, start: int) -> int:
        h = self._handle(index)
        info = self._info(index, profile)
        placement = pynvml.c_nvmlGpuInstancePlacement_t()
        placement.start = start
        placement.size = self._size(index, profile, start)
        gi = self._call(
            f"GPU {index} create {profile} at slice {start}",
            pynvml.nvmlDeviceCreateGpuInstanceWithPlacement,
            h,
            info.id,
            ctypes.byref(placement),
        )
        return int(self._call("instance info", pynvml.nvmlGpuInstanceGetInfo, gi).id)

    def _size(self, index: int, profile: str, start: int) -> int:
        # NVML checks the placement; an unknown start is passed on for it to refuse.
        free = dict(self.possible_placements(index, profile))
        return free.get(start, int(self._info(index, profile).sliceCount))

    def create_compute_instance(self, index: int, gpu_instance: int) -> int:
        h = self._handle(index)
        gi = self._call(
            f"GPU {index} instance {gpu_instance}",
            pynvml.nvmlDeviceGetGpuInstanceById,
            h,
            gpu_instance,
        )
        info = self._call("instance info", pynvml.nvmlGpuInstanceGetInfo, gi)
        found = [
            int(v.sliceCount)
            for v in self._profile_infos(index).values()
            if int(v.id) == int(info.profileId)
        ]
        if not found:
            raise nvml_error(
                pynvml.NVML_ERROR_NOT_FOUND,
                f"GPU {index} instance {gpu_instance}: profile {int(info.profileId)} unknown",
            )
        slices = found[0]
        ci_info = self._call(
            f"GPU {index} compute profile ({slices} slices)",
            pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo,
            gi,
            _CI_PROFILE_BY_SLICES[slices],
            pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
        )
        ci = self._call(
            f"GPU {index} create compute instance in {gpu_instance}",
            pynvml.nvmlGpuInstanceCreateComputeInstance,
            gi,
            ci_info.id,
        )
        return int(
            self._call(
                f"GPU {index} compute instance info", pynvml.nvmlComputeInstanceGetInfo, ci
            ).id
        )

    def destroy_compute_instance(
        self, index: int, gpu_instance: int, compute_instance: int
    ) -> None:
        h = self._handle(index)
        gi = self._call(
            f"GPU {index} instance {gpu_instance}",
            pynvml.nvmlDeviceGetGpuInstanceById,
            h,
            gpu_instance,
        )
        ci = self._call(
            f"GPU {index} compute instance {compute_instance}",
            pynvml.nvmlGpuInstanceGetComputeInstanceById,
            gi,
            compute_instance,
        )
        self._call(
            f"GPU {index} destroy compute instance {compute_instance}",
            pynvml.nvmlComputeInstanceDestroy,
            ci,
        )

    def destroy_gpu_instance(self, index: int, gpu_instance: int) -> None:
        h = self._handle(index)
        gi = self._call(
            f"GPU {index} instance {gpu_instance}",
            pynvml.nvmlDeviceGetGpuInstanceById,
            h,
            gpu_instance,
        )
        self._call(
            f"GPU {index} destroy instance {gpu_instance}", pynvml.nvmlGpuInstanceDestroy, gi
        )

    def close(self) -> None:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
