"""Hardware catalog: the GPU models tiercast knows, their memory and MIG capability.

Memory is the usable framebuffer NVIDIA sells the part as. ``mig_compute_slices``
is 0 for parts without MIG. ``pci_device_ids`` are the PCI device IDs (with NVIDIA's
vendor ID, ``0x233010DE``) that mig-parted's ``device-filter`` matches, as the GPU
Operator's default mig-parted config groups them (SXM and PCIe boards, and the
A800/H800 export parts with the same MIG geometry). Detailed MIG profiles and placements live in
:mod:`scaler.catalog.mig` (MIG planning); this module is the flat list the config
validates against.

Sources, per part (docs/mig.md#catalog has the table): memory and MIG support from NVIDIA's
MIG User Guide, "Supported GPUs" (MIG runs only on the parts listed there: GB200 186 GB,
B200 180 GB, RTX PRO 6000 Blackwell 96 GB, H100 94 GB, H20 96 GB, ...; T4, A10G, L4,
L20 and L40S are not listed, so they have no MIG); PCI device IDs from the GPU
Operator's default mig-parted config (NVIDIA/mig-parted
``deployments/systemd/config-default.yaml``, the ``all-balanced`` groups).

The catalog is the built-in models plus the config's own ``gpu_models:``
(:func:`set_user_models`). Those are installed when a config is validated and replaced
by the next one validated (a config without ``gpu_models`` leaves only the built-ins),
so the registry always holds exactly the last loaded config's models; a process plans
one config at a time, and re-reading the same config (the service does so each cycle)
leaves the registry as it was.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GpuModel:
    name: str
    memory_gb: int
    mig_compute_slices: int
    """7 for A100/H100/H20/H200/B200/GB200, 4 for A30 and RTX PRO 6000, 0 without MIG."""
    pci_device_ids: tuple[str, ...] = ()
    """Upper-case ``0xDDDDVVVV`` device IDs of the boards with this MIG geometry."""
    product_patterns: tuple[str, ...] = ()
    """Shell-style patterns (``NVIDIA-X100*``) of GPU feature discovery's
    ``nvidia.com/gpu.product`` for this model, matched without regard to case after the
    ``-MIG-<profile>`` and ``-SHARED`` suffixes are removed; empty: the built-in rules."""

    @property
    def mig_capable(self) -> bool:
        return self.mig_compute_slices > 0


BUILTIN_GPU_MODELS: Mapping[str, GpuModel] = {
    m.name: m
    for m in (
        GpuModel("A100-40GB", 40, 7, ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE")),
        GpuModel("A100-80GB", 80, 7, ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE")),
        GpuModel("H100-80GB", 80, 7, ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE")),
        # H100 94 GB (H100 NVL, H800 NVL): the guide's "H100 94GB product (PCIe and SXM5)".
        GpuModel("H100-NVL-94GB", 94, 7, ("0x232110DE", "0x233A10DE")),
        # H20 96 GB: mig-parted groups it with H100 96 GB and GH200 (one geometry).
        GpuModel("H20-96GB", 96, 7, ("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE")),
        GpuModel("H200-141GB", 141, 7, ("0x233510DE", "0x233B10DE")),
        GpuModel("B200-180GB", 180, 7, ("0x290110DE",)),
        GpuModel("GB200-186GB", 186, 7, ("0x294110DE",)),
        # RTX PRO 6000 Blackwell (Server, Workstation, Max-Q): MIG with 4 instances at most.
        GpuModel("RTX-PRO-6000-96GB", 96, 4, ("0x2BB510DE", "0x2BB110DE", "0x2BB410DE")),
        GpuModel("A30-24GB", 24, 4, ("0x20B710DE",)),
        GpuModel("L4-24GB", 24, 0),
        GpuModel("L40S-48GB", 48, 0),
        GpuModel("L20-48GB", 48, 0),
        GpuModel("A10G-24GB", 24, 0),
        GpuModel("T4-16GB", 16, 0),
    )
}
"""The models tiercast ships with, whatever the config declares."""

BUILTIN_ALIASES: Mapping[str, str] = {
    "A100": "A100-80GB",
    "H100": "H100-80GB",
    "H100-NVL": "H100-NVL-94GB",
    "H20": "H20-96GB",
    "H200": "H200-141GB",
    "B200": "B200-180GB",
    "GB200": "GB200-186GB",
    "RTX-PRO-6000": "RTX-PRO-6000-96GB",
    "A30": "A30-24GB",
    "L4": "L4-24GB",
    "L40S": "L40S-48GB",
    "L20": "L20-48GB",
    "A10G": "A10G-24GB",
    "T4": "T4-16GB",
}

TDP_WATTS: Mapping[str, float] = {
    "A100-40GB": 400,
    "A100-80GB": 400,
    "H100-80GB": 700,
    "H100-NVL-94GB": 400,
    "H200-141GB": 700,
    "B200-180GB": 1000,
    "RTX-PRO-6000-96GB": 600,
    "A30-24GB": 165,
    "L4-24GB": 72,
    "L40S-48GB": 350,
    "L20-48GB": 275,
    "T4-16GB": 70,
}
"""Thermal design power of one GPU, W, from NVIDIA's datasheets: the SXM board's where a
model comes as SXM and PCIe (H100 PCIe is 350 W, A100 PCIe 300 W: set ``watts_per_gpu``).
Models missing here need ``watts_per_gpu`` for energy cost and power caps."""

GPU_MODELS: dict[str, GpuModel] = dict(BUILTIN_GPU_MODELS)
"""Every model known now: the built-ins, then the loaded config's ``gpu_models``
(:func:`set_user_models` updates this mapping in place; do not write it elsewhere)."""

ALIASES = dict(BUILTIN_ALIASES)


def reserved_names() -> frozenset[str]:
    """Names a config's own GPU model may not take: the built-in names and aliases."""
    return frozenset(BUILTIN_GPU_MODELS) | frozenset(BUILTIN_ALIASES)


def user_models() -> tuple[GpuModel, ...]:
    """The models the loaded config declares (``gpu_models:``), in its order."""
    return tuple(m for name, m in GPU_MODELS.items() if name not in BUILTIN_GPU_MODELS)


def set_user_models(models: Iterable[GpuModel]) -> None:
    """Make ``models`` the config-declared models, replacing the previous config's.

    Called by :mod:`scaler.config` each time a config is validated; ``()`` restores the
    built-in catalog. A name clashing with a built-in name or alias is a ValueError.
    """
    chosen = list(models)
    for m in chosen:
        if m.name in reserved_names():
            raise ValueError(f"GPU model {m.name!r} is built in; choose another name")
    _replace(GPU_MODELS, {**BUILTIN_GPU_MODELS, **{m.name: m for m in chosen}})


def _replace(target: dict[str, Any], wanted: Mapping[str, Any]) -> None:
    """Make ``target`` equal ``wanted`` in place, never dropping a key both hold, so a
    reload of the same config (the service re-reads it each cycle) changes nothing a
    concurrent lookup could miss."""
    for key in [k for k in target if k not in wanted]:
        del target[key]
    for key, value in wanted.items():
        if target.get(key) != value:
            target[key] = value


def gpu_model(name: str) -> GpuModel:
    """Look a GPU model up by its catalog name or a short alias (``H100``)."""
    key = ALIASES.get(name, name)
    try:
        return GPU_MODELS[key]
    except KeyError:
        raise KeyError(name) from None


# GPU feature discovery's nvidia.com/gpu.product is NVML's device name with spaces as
# dashes ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H200"), older
# drivers without the "NVIDIA-" prefix, Turing parts with "Tesla-" ("Tesla-T4", as the
# GPU Operator's GPU sharing page shows it); with mig.strategy=single it ends in
# "-MIG-<profile>", with GPU sharing in "-SHARED" (NVIDIA/k8s-device-plugin
# internal/lm/resource.go). Values seen in published listings: NVIDIA-A10G (a g5 node's
# GFD labels), NVIDIA-B200 and NVIDIA-GB200 (NVIDIA NIM support matrices, which name GPUs
# by this label), NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition (public manifests),
# NVIDIA-H100-NVL. Assumed from NVML's name, no listing found: NVIDIA-H20, NVIDIA-L20.
_PRODUCT_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # model: (first word of the product, words that mean another part)
    "A100-40GB": (("A100", "A800"), ()),
    "A100-80GB": (("A100", "A800"), ()),
    "H100-80GB": (("H100", "H800"), ("NVL",)),  # H100 NVL is a 94 GB part
    "H100-NVL-94GB": (("H100", "H800"), ()),
    "H20-96GB": (("H20",), ()),
    "H200-141GB": (("H200",), ()),
    "B200-180GB": (("B200",), ()),
    "GB200-186GB": (("GB200",), ()),
    "RTX-PRO-6000-96GB": (("RTX",), ()),
    "A30-24GB": (("A30",), ()),
    "L4-24GB": (("L4",), ()),
    "L40S-48GB": (("L40S",), ()),
    "L20-48GB": (("L20",), ()),
    "A10G-24GB": (("A10G",), ()),
    "T4-16GB": (("T4",), ()),
}
_PRODUCT_WORDS: dict[str, tuple[str, ...]] = {
    # model: words of which the product must carry one (besides its size, if any)
    "H100-NVL-94GB": ("NVL", "94GB"),
}
_RTX_PRO_6000 = ("PRO", "6000")
_SUFFIXES = re.compile(r"-(MIG-.*|SHARED)$")
_SIZE = re.compile(r"^(\d+)GB$")


def base_product(product: str) -> str:
    """The product label without GPU feature discovery's ``-MIG-<profile>`` (single
    strategy) and ``-SHARED`` (time-slicing or MPS) suffixes: the model's own name."""
    return _SUFFIXES.sub("", product.strip())


# The PCI device ID of each variant of a model, told by the words of GPU feature
# discovery's product label (NVML's name): first row whose words the product carries
# wins; a product no row names could be any of the model's IDs. IDs: the GPU Operator's
# default mig-parted config (NVIDIA/mig-parted deployments/systemd/config-default.yaml,
# commit bd7160f: "H200 141GB, H200 NVL" 0x2335/0x233B, "RTX PRO 6000 Blackwell"
# 0x2BB5, the H100/H800 and A100/A800 groups) and the PCI ID database's names for the
# variants it groups (10de:2330 H100 SXM5 80GB, 2331 H100 PCIe, 2322 H800 PCIe, 2324
# H800, 2321 H100 NVL, 233a H800 NVL, 2335 H200 SXM 141GB, 233b H200 NVL, 20b0 A100 SXM4
# 40GB, 20b1/20f1 A100 PCIe 40GB, 20f6 A800 40GB PCIe, 20b2 A100 SXM4 80GB, 20b5 A100
# PCIe 80GB, 20f3 A800 SXM4 80GB, 20f5 A800 80GB PCIe, 2bb1 RTX PRO 6000 Blackwell
# Workstation Edition, 2bb4 RTX PRO 6000 Blackwell Max-Q Workstation Edition, 2bb5 RTX
# PRO 6000 Blackwell Server Edition; lspci listings of those boards agree).
_VARIANT_IDS: dict[str, tuple[tuple[tuple[str, ...], tuple[str, ...]], ...]] = {
    "H200-141GB": ((("NVL",), ("0x233B10DE",)), (("H200",), ("0x233510DE",))),
    "H100-80GB": (
        (("H800", "PCIE"), ("0x232210DE",)),
        (("H800",), ("0x232410DE",)),
        (("PCIE",), ("0x233110DE",)),
        (("HBM3",), ("0x233010DE",)),
        (("SXM5",), ("0x233010DE",)),
    ),
    "H100-NVL-94GB": ((("H800",), ("0x233A10DE",)), (("H100",), ("0x232110DE",))),
    "A100-40GB": (
        (("A800",), ("0x20F610DE",)),
        (("SXM4",), ("0x20B010DE",)),
        (("PCIE",), ("0x20B110DE", "0x20F110DE")),
    ),
    "A100-80GB": (
        (("A800", "SXM4"), ("0x20F310DE",)),
        (("A800",), ("0x20F510DE",)),
        (("SXM4",), ("0x20B210DE",)),
        (("PCIE",), ("0x20B510DE",)),
    ),
    "RTX-PRO-6000-96GB": (
        (("MAX", "Q"), ("0x2BB410DE",)),
        (("WORKSTATION",), ("0x2BB110DE",)),
        (("SERVER",), ("0x2BB510DE",)),
    ),
}


def device_ids_for_product(model: str, product: str | None) -> tuple[str, ...]:
    """The PCI device IDs a GPU of ``model`` whose ``nvidia.com/gpu.product`` is ``product``
    may have: its variant's where the product names one (``NVIDIA-H200-NVL``: 0x233B10DE),
    else every ID of the model (a part with one ID, a name that does not tell)."""
    m = gpu_model(model)
    if product:
        words = set(base_product(product).upper().replace("_", "-").split("-"))
        for needed, ids in _VARIANT_IDS.get(m.name, ()):
            if all(w in words for w in needed):
                return ids
    return m.pci_device_ids


def product_matches(model: str, product: str) -> bool:
    """Whether GPU feature discovery's ``nvidia.com/gpu.product`` value names ``model``.

    ``NVIDIA-A100-SXM4-80GB`` is an A100-80GB and not an A100-40GB; ``NVIDIA-H100-PCIe``
    (no size in the name) is an H100-80GB; ``NVIDIA-H100-NVL`` is not, it is an
    H100-NVL-94GB. A config-declared model matches its ``product_patterns``.
    """
    m = gpu_model(model)
    name = base_product(product).upper()
    if m.product_patterns:
        return any(fnmatch.fnmatchcase(name, p.upper()) for p in m.product_patterns)
    words = [w for w in name.split("-") if w]
    if words[:1] in (["NVIDIA"], ["TESLA"]):
        words = words[1:]
    families, others = _PRODUCT_FAMILIES.get(m.name, ((m.name.split("-")[0],), ()))
    if not words or words[0] not in families or any(w in others for w in words):
        return False
    if m.name == "RTX-PRO-6000-96GB" and words[1:3] != list(_RTX_PRO_6000):
        return False
    required = _PRODUCT_WORDS.get(m.name)
    if required and not any(w in required for w in words):
        return False
    sizes = {int(g.group(1)) for w in words if (g := _SIZE.match(w))}
    return not sizes or sizes == {m.memory_gb}


def tdp_watts(name: str) -> float | None:
    """The catalog's TDP of GPU model ``name`` (a name or alias), W; None where unknown."""
    try:
        return TDP_WATTS.get(gpu_model(name).name)
    except KeyError:
        return None
