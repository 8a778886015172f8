"""Hardware catalog: the GPU models tiercast knows, their memory and MIG capability.

Memory is the usable framebuffer NVIDIA sells the part as. ``mig_compute_slices``
is 0 for parts without MIG. ``pci_device_ids`` are the PCI device IDs (with NVIDIA's
vendor ID, ``0x233010DE``) that mig-parted's ``device-filter`` matches, as the GPU
Operator's default mig-parted config groups them (SXM and PCIe boards, and the
A800/H800 export parts with the same MIG geometry). Detailed MIG profiles and placements live in
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
    pci_device_ids: tuple[str, ...] = ()
    """Upper-case ``0xDDDDVVVV`` device IDs of the boards with this MIG geometry."""

    @property
    def mig_capable(self) -> bool:
        return self.mig_compute_slices > 0


GPU_MODELS: dict[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("A100-40GB", 40, 7, ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE")),
        GpuModel("A100-80GB", 80, 7, ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE")),
        GpuModel("H100-80GB", 80, 7, ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE")),
        GpuModel("H200-141GB", 141, 7, ("0x233510DE", "0x233B10DE")),
        GpuModel("A30-24GB", 24, 4, ("0x20B710DE",)),
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
