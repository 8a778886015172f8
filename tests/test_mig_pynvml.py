"""The pynvml backend's error paths, through a simulated NVML C library.

No GPU can be used here, so ``pynvml``'s function lookup (``_nvmlGetFunctionPointer``)
is replaced by a table of Python functions with the C signatures (ctypes arguments,
outputs through ``byref``, an ``nvmlReturn_t`` result); ``pynvml``'s own wrappers,
``_nvmlCheckReturn`` and ``NVMLError`` run unchanged (nvidia-ml-py 13.615.71). The
simulated library holds one H100 GPU in MIG mode with one 1g.10gb instance and one
compute instance, and can be told to fail one C function with a code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pynvml
import pytest

from scaler.agent.nvml import NvmlError, PynvmlBackend

GI_PROFILE_1G = 19  # NVML's profile id for 1g.10gb on an H100


def _out(ref: Any) -> Any:
    return ref._obj  # the ctypes object ``byref`` points at


class FakeLibrary:
    """The C functions the backend reaches, answering like libnvidia-ml for one GPU."""

    def __init__(self) -> None:
        self.fail: dict[str, int] = {}
        self.mig = [1, 1]  # current, pending
        self.activation = pynvml.NVML_SUCCESS
        self.calls: list[str] = []

    def lookup(self, name: str) -> Callable[..., int]:
        fn = getattr(self, name, None)
        if fn is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

        def call(*args: Any) -> int:
            self.calls.append(name)
            if name in self.fail:
                return self.fail[name]
            return int(fn(*args) or 0)

        return call

    # -- the C API (signatures as nvml.h; only what the backend calls here)

    def nvmlInitWithFlags(self, flags: int) -> int:
        return 0

    def nvmlShutdown(self) -> int:
        return 0

    def nvmlDeviceGetHandleByIndex_v2(self, index: Any, device: Any) -> int:
        return 0

    def nvmlDeviceGetMigMode(self, device: Any, current: Any, pending: Any) -> int:
        _out(current).value, _out(pending).value = self.mig
        return 0

    def nvmlDeviceSetMigMode(self, device: Any, mode: int, activation: Any) -> int:
        self.mig[1] = mode
        _out(activation).value = self.activation
        if self.activation == pynvml.NVML_SUCCESS:
            self.mig[0] = mode
        return 0

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any, count: Any) -> int:
        return pynvml.NVML_ERROR_NOT_SUPPORTED  # no per-instance memory in this test

    def nvmlDeviceGetGpuInstanceProfileInfoV(self, device: Any, profile: int, info: Any) -> int:
        if profile != pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        i = _out(info)
        i.id, i.sliceCount, i.instanceCount, i.name = GI_PROFILE_1G, 1, 7, b"MIG 1g.10gb"
        return 0

    def nvmlDeviceGetGpuInstances(self, device: Any, profile: int, arr: Any, count: Any) -> int:
        _out(count).value = 1 if profile == GI_PROFILE_1G else 0
        return 0

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gi: int, out: Any) -> int:
        return 0 if gi == 1 else pynvml.NVML_ERROR_NOT_FOUND

    def nvmlGpuInstanceGetInfo(self, gi: Any, info: Any) -> int:
        i = _out(info)
        i.id, i.profileId = 1, GI_PROFILE_1G
        i.placement.start, i.placement.size = 0, 1
        return 0

    def nvmlGpuInstanceGetComputeInstanceProfileInfoV(
        self, gi: Any, profile: int, engine: int, info: Any
    ) -> int:
        if profile != pynvml.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        _out(info).id, _out(info).instanceCount = 0, 1
        return 0

    def nvmlGpuInstanceGetComputeInstances(self, gi: Any, prof: int, arr: Any, count: Any) -> int:
        _out(count).value = 1
        return 0

    def nvmlGpuInstanceCreateComputeInstance(self, gi: Any, prof: int, out: Any) -> int:
        return 0

    def nvmlComputeInstanceGetInfo_v2(self, ci: Any, info: Any) -> int:
        _out(info).id = 0
        return 0


@pytest.fixture
def lib(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLibrary]:
    fake = FakeLibrary()
    monkeypatch.setattr(pynvml, "_LoadNvmlLibrary", lambda: None)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", fake.lookup)
    yield fake


def test_the_simulated_library_answers_through_pynvmls_wrappers(lib: FakeLibrary) -> None:
    backend = PynvmlBackend()
    (gi,) = backend.gpu_instances(0)
    assert (gi.profile, gi.start, gi.size, len(gi.compute_instances)) == ("1g.10gb", 0, 1, 1)
    assert backend.create_compute_instance(0, 1) == 0
    assert "nvmlComputeInstanceGetInfo_v2" in lib.calls


@pytest.mark.parametrize("path", ["list", "create"])
def test_compute_instance_info_failures_are_nvml_errors(lib: FakeLibrary, path: str) -> None:
    backend = PynvmlBackend()
    lib.fail["nvmlComputeInstanceGetInfo_v2"] = pynvml.NVML_ERROR_UNKNOWN
    with pytest.raises(NvmlError) as info:
        if path == "list":
            backend.gpu_instances(0)
        else:
            backend.create_compute_instance(0, 1)
    # Wrapped with context, the code by name, pynvml's exception chained: no raw NVMLError.
    assert info.value.name == "NVML_ERROR_UNKNOWN" and "compute instance info" in str(info.value)
    assert isinstance(info.value.__cause__, pynvml.NVMLError)


def test_every_failing_call_on_the_create_path_is_wrapped(lib: FakeLibrary) -> None:
    backend = PynvmlBackend()
    backend.create_compute_instance(0, 1)
    reached = [c for c in dict.fromkeys(lib.calls) if not c.startswith("nvmlInit")]
    assert len(reached) >= 6
    for name in reached:
        lib.fail = {name: pynvml.NVML_ERROR_GPU_IS_LOST}
        backend._profiles.clear()
        # Every C failure surfaces as an NvmlError naming NVML's code, nothing raw.
        with pytest.raises(NvmlError) as info:
            backend.create_compute_instance(0, 1)
        assert info.value.name == "NVML_ERROR_GPU_IS_LOST", name


def test_a_mig_mode_change_on_a_busy_gpu_is_not_idle_not_pending(lib: FakeLibrary) -> None:
    backend = PynvmlBackend()
    lib.mig = [1, 1]
    lib.activation = pynvml.NVML_ERROR_IN_USE
    with pytest.raises(NvmlError) as info:
        backend.set_mig_mode(0, False)
    assert info.value.name == "NVML_ERROR_IN_USE" and "device not idle" in str(info.value)
    # Recorded but not activated for another reason: a reset is pending.
    lib.activation = pynvml.NVML_ERROR_RESET_REQUIRED
    assert backend.set_mig_mode(0, False) is False
    lib.activation = pynvml.NVML_SUCCESS
    assert backend.set_mig_mode(0, False) is True
    assert lib.mig == [0, 0]
