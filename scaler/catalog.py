"""Hardware catalog: the GPU models tiercast knows, their memory and MIG capability.

Memory is the usable framebuffer NVIDIA sells the part as. ``mig_compute_slices``
is 0 for parts without MIG. Detailed MIG profiles and placements live in
:mod:`scaler.mig` (MIG planning); this module is the flat list the config
validates against.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_gb: int
    mig_compute_slices: int
    """7 for A100/H100/H200, 4 for A30, 0 where MIG is not supported."""

    @property
    def mig_capable(self) -> bool:
        return self.mig_compute_slices > 0


GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("A100-40GB", 40, 7),
        GpuModel("A100-80GB", 80, 7),
        GpuModel("H100-80GB", 80, 7),
        GpuModel("H200-141GB", 141, 7),
        GpuModel("A30-24GB", 24, 4),
        GpuModel("L4-24GB", 24, 0),
        GpuModel("L40S-48GB", 48, 0),
    )
}

ALIASES = {
    "A100": "A100-80GB",
    "H100": "H100-80GB",
    "H200": "H200-141GB",
    "A30": "A30-24GB",
    "L4": "L4-24GB",
    "L40S": "L40S-48GB",
}


def gpu_model(name: str) -> GpuModel:
    """Look a GPU model up by its catalog name or a short alias (``H100``)."""
    key = ALIASES.get(name, name)
    try:
        return GPU_MODELS[key]
    except KeyError:
        raise KeyError(name) from None
