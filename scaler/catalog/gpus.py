"""Hardware catalog: the GPU models tiercast knows, their memory and MIG capability.

Memory is the usable framebuffer NVIDIA sells the part as. ``mig_compute_slices``
is 0 for parts without MIG. ``pci_device_ids`` are the PCI device IDs (with NVIDIA's
vendor ID, ``0x233010DE``) that mig-parted's ``device-filter`` matches, as the GPU
Operator's default mig-parted config groups them (SXM and PCIe boards, and the
A800/H800 export parts with the same MIG geometry). Detailed MIG profiles and placements live in
:mod:`scaler.catalog.mig` (MIG planning); this module is the flat list the config
validates against.
"""

from __future__ import annotations

import re
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


# GPU feature discovery's nvidia.com/gpu.product is NVML's device name with spaces as
# dashes ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"), older
# drivers without the "NVIDIA-" prefix; with mig.strategy=single it ends in
# "-MIG-<profile>", with GPU sharing in "-SHARED".
_PRODUCT_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # model: (first word of the product, words that mean another part)
    "A100-40GB": (("A100", "A800"), ()),
    "A100-80GB": (("A100", "A800"), ()),
    "H100-80GB": (("H100", "H800"), ("NVL",)),  # H100 NVL is a 94 GB part
    "H200-141GB": (("H200",), ()),
    "A30-24GB": (("A30",), ()),
    "L4-24GB": (("L4",), ()),
    "L40S-48GB": (("L40S",), ()),
}
_SIZE = re.compile(r"^(\d+)GB$")


def product_matches(model: str, product: str) -> bool:
    """Whether GPU feature discovery's ``nvidia.com/gpu.product`` value names ``model``.

    ``NVIDIA-A100-SXM4-80GB`` is an A100-80GB and not an A100-40GB; ``NVIDIA-H100-PCIe``
    (no size in the name) is an H100-80GB; ``NVIDIA-H100-NVL`` is not.
    """
    m = gpu_model(model)
    name = re.sub(r"-(MIG-.*|SHARED)$", "", product.strip().upper())
    words = [w for w in name.split("-") if w]
    if words[:1] == ["NVIDIA"]:
        words = words[1:]
    families, others = _PRODUCT_FAMILIES.get(m.name, ((m.name.split("-")[0],), ()))
    if not words or words[0] not in families or any(w in others for w in words):
        return False
    sizes = {int(g.group(1)) for w in words if (g := _SIZE.match(w))}
    return not sizes or sizes == {m.memory_gb}
