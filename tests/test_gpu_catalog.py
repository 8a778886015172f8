"""The current GPU line-up and config-declared models, against NVIDIA's documentation.

Profiles and instance counts follow NVIDIA's MIG User Guide, "Supported MIG Profiles"
(B200, H100 94GB, H100 96GB, RTX PRO 6000 Blackwell tables) and "Supported GPUs";
GB200 and the PCI device IDs follow the GPU Operator's default mig-parted config
(NVIDIA/mig-parted ``deployments/systemd/config-default.yaml``, commit bd7160f).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from forecaster.errors import BadInputError
from scaler.catalog.gpus import BUILTIN_GPU_MODELS, GPU_MODELS, gpu_model, product_matches
from scaler.catalog.mig import (
    BUILTIN_GEOMETRIES,
    GEOMETRIES,
    Layout,
    MigGeometry,
    MigProfile,
    geometry,
    geometry_problem,
    gpu_fraction,
    layouts,
    parse_layout,
    parse_mig_parted_entry,
    place,
    profile_for_memory,
    set_user_catalog,
)
from scaler.cli import main
from scaler.config import ConfigError, parse_config


@pytest.fixture(autouse=True)
def _builtin_catalog() -> Iterator[None]:
    """Each test starts and ends with the built-in catalog alone."""
    set_user_catalog(())
    yield
    set_user_catalog(())


# Base profiles per part, as the guide's tables list them (GB200: mig-parted's entries).
DOCUMENTED = {
    "B200-180GB": "1g.23gb 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
    "GB200-186GB": "1g.23gb 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb",
    "H100-NVL-94GB": "1g.12gb 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb",
    "H20-96GB": "1g.12gb 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "RTX-PRO-6000-96GB": "1g.24gb 2g.48gb 4g.96gb",
}
# "Number of Instances" per base profile, from the same tables.
INSTANCES = {
    "B200-180GB": [7, 4, 3, 2, 1, 1],
    "GB200-186GB": [7, 4, 3, 2, 1, 1],
    "H100-NVL-94GB": [7, 4, 3, 2, 1, 1],
    "H20-96GB": [7, 4, 3, 2, 1, 1],
    "RTX-PRO-6000-96GB": [4, 2, 1],
}
# The guide's "Supported GPUs" memory sizes; parts it does not list have no MIG.
MEMORY = {
    "B200-180GB": 180,
    "GB200-186GB": 186,
    "H100-NVL-94GB": 94,
    "H20-96GB": 96,
    "RTX-PRO-6000-96GB": 96,
}
NO_MIG = {"A10G-24GB": 24, "T4-16GB": 16, "L20-48GB": 48, "L4-24GB": 24, "L40S-48GB": 48}


@pytest.mark.parametrize("model", sorted(DOCUMENTED))
def test_new_parts_profiles_match_the_guide(model: str) -> None:
    geo = geometry(model)
    assert " ".join(p.name for p in geo.base_profiles) == DOCUMENTED[model]
    assert [p.max_count for p in geo.base_profiles] == INSTANCES[model]
    assert gpu_model(model).memory_gb == MEMORY[model]
    # Every part has one +me profile, one instance, on its 1g placements.
    (media,) = [p for p in geo.profiles if p.media]
    assert media.base == geo.base_profiles[0].name and media.max_count == 1
    # NVML reports less than the nominal size; the derived sizes stay below it.
    assert all(0 < p.memory_gib < p.memory_gb for p in geo.profiles)


def test_rtx_pro_6000_is_a_four_slice_part() -> None:
    # The guide: RTX PRO 6000 Blackwell supports MIG, 4 instances at most, 1/4 per 1g.
    geo = geometry("RTX-PRO-6000")
    assert (geo.compute_slices, geo.memory_slices) == (4, 4)
    assert [p.placements for p in geo.base_profiles] == [
        ((0, 1), (1, 1), (2, 1), (3, 1)),
        ((0, 2), (2, 2)),
        ((0, 4),),
    ]
    assert {lay.name for lay in layouts("RTX-PRO-6000-96GB")} == {
        "4x1g.24gb",
        "2g.48gb-2x1g.24gb",
        "2x2g.48gb",
        "4g.96gb",
    }
    assert gpu_fraction("RTX-PRO-6000-96GB", "2g.48gb") == 0.5


@pytest.mark.parametrize("model", sorted(NO_MIG))
def test_parts_the_guide_does_not_list_have_no_mig(model: str) -> None:
    assert gpu_model(model).memory_gb == NO_MIG[model]
    assert not gpu_model(model).mig_capable
    with pytest.raises(BadInputError, match="does not support MIG"):
        geometry(model)


@pytest.mark.parametrize("model", sorted(BUILTIN_GEOMETRIES))
def test_every_builtin_geometry_keeps_the_rules_config_models_are_held_to(model: str) -> None:
    geo = BUILTIN_GEOMETRIES[model]
    assert geometry_problem(geo) is None
    assert gpu_model(model).mig_compute_slices == geo.compute_slices


def test_pci_device_ids_name_one_model_each() -> None:
    seen: dict[str, str] = {}
    for m in BUILTIN_GPU_MODELS.values():
        for d in m.pci_device_ids:
            assert d not in seen, f"{d} is {seen[d]} and {m.name}"
            seen[d] = m.name
    assert bool(BUILTIN_GPU_MODELS["B200-180GB"].pci_device_ids) and all(
        m.pci_device_ids for m in BUILTIN_GPU_MODELS.values() if m.mig_capable
    )


# The GPU Operator's default config, its all-balanced groups for the new parts.
ALL_BALANCED = [
    {
        "device-filter": ["0x294110DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1},
    },
    {
        "device-filter": ["0x2BB510DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.24gb": 2, "2g.48gb": 1},
    },
    {
        "device-filter": ["0x290110DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    },
    {
        "device-filter": ["0x232110DE", "0x233A10DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    },
    {
        "device-filter": ["0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    },
]


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("GB200-186GB", "1g.23gb:2,2g.47gb:1,3g.93gb:1"),
        ("RTX-PRO-6000-96GB", "1g.24gb:2,2g.48gb:1"),
        ("B200-180GB", "1g.23gb:2,2g.45gb:1,3g.90gb:1"),
        ("H100-NVL-94GB", "1g.12gb:2,2g.24gb:1,3g.47gb:1"),
        ("H20-96GB", "1g.12gb:2,2g.24gb:1,3g.48gb:1"),
    ],
)
def test_operator_all_balanced_reads_per_new_part(model: str, expected: str) -> None:
    # The group names the RTX PRO 6000 Server Edition only: read for that board.
    ids = ("0x2BB510DE",) if model == "RTX-PRO-6000-96GB" else None
    per = parse_mig_parted_entry(model, ALL_BALANCED, 8, "all-balanced", ids)
    assert {lay.spec() for lay in per.values()} == {expected} and len(per) == 8
    assert place(model, per[0]) is not None


def test_new_parts_layouts_and_auto_profiles() -> None:
    # 7 x 1g.23gb fills a B200 as 7 x 1g.10gb fills an H100; 4g beside 3g is admitted.
    assert parse_layout("B200", "1g.23gb:7") == Layout.of({"1g.23gb": 7})
    assert parse_layout("GB200", "4g.93gb:1,3g.93gb:1") is not None
    with pytest.raises(BadInputError, match="not a valid MIG layout"):
        parse_layout("H100-NVL", "7g.94gb:1,1g.12gb:1")
    # Against the derived lower bound of what NVML reports (1g.23gb: 20.25 GiB).
    assert profile_for_memory("B200-180GB", 20) == "1g.23gb"
    assert profile_for_memory("B200-180GB", 22) == "1g.45gb"
    assert profile_for_memory("RTX-PRO-6000-96GB", 30) == "2g.48gb"


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-B200", "B200-180GB"),
        ("NVIDIA-GB200", "GB200-186GB"),
        ("NVIDIA-H100-NVL", "H100-NVL-94GB"),
        ("NVIDIA-H100-NVL-MIG-1g.12gb", "H100-NVL-94GB"),
        ("NVIDIA-H20", "H20-96GB"),
        ("NVIDIA-A10G", "A10G-24GB"),
        ("NVIDIA-A10G-SHARED", "A10G-24GB"),
        ("Tesla-T4", "T4-16GB"),
        ("Tesla-T4-SHARED", "T4-16GB"),
        ("NVIDIA-L20", "L20-48GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-96GB"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition-SHARED", "RTX-PRO-6000-96GB"),
        ("NVIDIA-H100-80GB-HBM3", "H100-80GB"),
    ],
)
def test_product_labels_name_exactly_one_model(product: str, model: str) -> None:
    assert [m for m in GPU_MODELS if product_matches(m, product)] == [model]


def test_look_alike_products_are_other_parts() -> None:
    assert not product_matches("B200", "NVIDIA-GB200")
    assert not product_matches("GB200", "NVIDIA-B200")
    assert not product_matches("H100", "NVIDIA-H100-NVL")
    assert not product_matches("H100-NVL", "NVIDIA-H100-80GB-HBM3")
    assert not product_matches("H20", "NVIDIA-H200")
    assert not product_matches("L20", "NVIDIA-L40S")
    assert not product_matches("RTX-PRO-6000", "NVIDIA-RTX-6000-Ada-Generation")
    assert not product_matches("RTX-PRO-6000", "NVIDIA-RTX-PRO-5000-Blackwell")


# --------------------------------------------------------------------- gpu_models: config


def _config() -> dict[str, Any]:
    return {
        "gpu_models": [
            {
                "name": "X100-64GB",
                "memory_gb": 64,
                "product": "NVIDIA-X100*",
                "pci_device_ids": ["0x1234abcd"],
                "mig": {
                    "compute_slices": 7,
                    "memory_slices": 8,
                    "profiles": [
                        {
                            "name": "1g.8gb",
                            "compute_slices": 1,
                            "memory_slices": 1,
                            "placements": [0, 1, 2, 3, 4, 5, 6],
                            "memory_gib": 7.5,
                        },
                        {
                            "name": "1g.8gb+me",
                            "compute_slices": 1,
                            "memory_slices": 1,
                            "placements": [0, 1, 2, 3, 4, 5, 6],
                        },
                        {
                            "name": "3g.32gb",
                            "compute_slices": 3,
                            "memory_slices": 4,
                            "placements": [0, 4],
                        },
                        {
                            "name": "7g.64gb",
                            "compute_slices": 7,
                            "memory_slices": 8,
                            "placements": [0],
                        },
                    ],
                },
            },
            {"name": "Y9", "memory_gb": 32, "product": ["Y9", "NVIDIA-Y9-*"]},
        ],
        "signals": [{"name": "rps"}, {"name": "small"}],
        "workloads": [
            {
                "name": "api",
                "signal": "rps",
                "gpu_model": "X100-64GB",
                "units_per_replica": 10,
                "mig_profile": "auto",
                "memory_gb": 7,
            },
            {"name": "small", "signal": "small", "gpu_model": "Y9", "units_per_replica": 5},
        ],
        "pools": [
            {
                "name": "x100",
                "tier": "on-demand",
                "gpu_model": "X100-64GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "mig_layouts": ["3g.32gb:2", "1g.8gb:7"],
            },
            {
                "name": "y9",
                "tier": "on-demand",
                "gpu_model": "Y9",
                "gpus_per_node": 4,
                "price_per_gpu_hour": 0.5,
            },
        ],
    }


def test_config_declares_gpu_models_that_pools_and_workloads_use() -> None:
    config = parse_config(_config())
    x = gpu_model("X100-64GB")
    assert (x.memory_gb, x.mig_compute_slices, x.pci_device_ids) == (64, 7, ("0x1234ABCD",))
    assert not gpu_model("Y9").mig_capable
    geo = geometry("X100-64GB")
    assert geo.profile("1g.8gb").memory_gib == 7.5
    assert geo.profile("1g.8gb+me").media and geo.profile("1g.8gb+me").max_count == 1
    assert geo.profile("3g.32gb").max_count == 2  # its 2 placements
    assert geo.profile("7g.64gb").memory_gib == 56.75  # 64 x 16/18, down to 0.25 GiB
    assert [p.name for p in config.pools_for("X100-64GB")] == ["x100"]
    assert {lay.name for lay in layouts("X100-64GB")} >= {"7x1g.8gb", "2x3g.32gb", "7g.64gb"}
    # mig_profile: auto resolves on the declared NVML sizes.
    assert profile_for_memory("X100-64GB", 7) == "1g.8gb"
    assert product_matches("X100-64GB", "nvidia-x100-sxm-MIG-1g.8gb")
    assert product_matches("Y9", "NVIDIA-Y9-PCIe-SHARED") and product_matches("Y9", "Y9")
    assert not product_matches("Y9", "NVIDIA-Y90")


def test_next_config_replaces_the_declared_models() -> None:
    parse_config(_config())
    assert "X100-64GB" in GPU_MODELS and "X100-64GB" in GEOMETRIES
    plain = _config()
    del plain["gpu_models"]
    for w, p in zip(plain["workloads"], plain["pools"], strict=True):
        w.update(gpu_model="H100", mig_profile=None)
        p.update(gpu_model="H100", mig_layouts=None)
    parse_config(plain)
    assert "X100-64GB" not in GPU_MODELS and "X100-64GB" not in GEOMETRIES
    with pytest.raises(KeyError):
        gpu_model("X100-64GB")
    # A config naming the model without declaring it is refused.
    with pytest.raises(ConfigError, match=r"pools\[0\].gpu_model: unknown GPU model 'X100-64GB'"):
        parse_config({**_config(), "gpu_models": []})


def test_a_config_that_fails_keeps_the_previous_models() -> None:
    parse_config(_config())
    bad = _config()
    bad["pools"][0]["mig_layouts"] = ["7g.64gb:1,1g.8gb:1"]
    with pytest.raises(ConfigError):
        parse_config(bad)
    assert gpu_model("X100-64GB").memory_gb == 64 and "X100-64GB" in GEOMETRIES


def test_redeclared_geometry_is_not_served_from_a_stale_cache() -> None:
    parse_config(_config())
    assert "7x1g.8gb" in {lay.name for lay in layouts("X100-64GB")}
    smaller = _config()
    smaller["gpu_models"][0]["mig"]["profiles"] = [
        {"name": "7g.64gb", "compute_slices": 7, "memory_slices": 8, "placements": [0]}
    ]
    smaller["workloads"][0].update(mig_profile="7g.64gb")
    smaller["pools"][0].update(mig_layouts=["7g.64gb:1"])
    parse_config(smaller)
    assert {lay.name for lay in layouts("X100-64GB")} == {"7g.64gb"}


def _edit(change: Callable[[dict[str, Any]], object]) -> str:
    data = copy.deepcopy(_config())
    change(data)
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return str(info.value)


def _x(data: dict[str, Any]) -> dict[str, Any]:
    return data["gpu_models"][0]


def _profile(data: dict[str, Any], i: int) -> dict[str, Any]:
    return data["gpu_models"][0]["mig"]["profiles"][i]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda d: _profile(d, 0).update(placements=[0, 1, 8]),
            "gpu_models[0].mig.profiles[0].placements: start 8 with 1 memory slice(s) is "
            "outside the GPU's slices 0 to 7",
        ),
        (
            lambda d: _profile(d, 2).update(placements=[0, 6]),
            "gpu_models[0].mig.profiles[2].placements: start 6 with 4 memory slice(s)",
        ),
        (
            lambda d: _profile(d, 2).update(compute_slices=2),
            "gpu_models[0].mig.profiles[2].compute_slices: 2 disagrees with the name '3g.32gb'",
        ),
        (
            lambda d: _profile(d, 2).update(memory_slices=9),
            "gpu_models[0].mig.profiles[2].memory_slices: Input should be less than or equal to 8",
        ),
        (
            lambda d: _profile(d, 0).update(max_count=8),
            "gpu_models[0].mig.profiles[0].max_count: 8 is not 1 to 7",
        ),
        (
            lambda d: _profile(d, 0).update(name="1g-8gb"),
            "gpu_models[0].mig.profiles[0].name: '1g-8gb' is not <compute>g.<GB>gb",
        ),
        (
            lambda d: _profile(d, 3).update(name="7g.80gb"),
            "gpu_models[0].mig.profiles[3].name: 7g.80gb holds more than the GPU's 64 GB",
        ),
        (
            lambda d: _profile(d, 0).update(memory_gib=9),
            "gpu_models[0].mig.profiles[0].memory_gib: 9 is not above 0 and at most its 8 GB",
        ),
        (
            lambda d: _profile(d, 1).update(name="1g.16gb+me"),
            "gpu_models[0].mig.profiles[1].name: '1g.16gb+me' has no base profile '1g.16gb'",
        ),
        (
            lambda d: _x(d).update(name="B200"),
            "gpu_models[0].name: 'B200' is a built-in GPU model or alias",
        ),
        (
            lambda d: _x(d).update(pci_device_ids=["10DE"]),
            "gpu_models[0].pci_device_ids: '10DE' is not a device and vendor ID",
        ),
        (lambda d: _x(d).update(product=[]), "gpu_models[0].product"),
        (lambda d: _x(d).pop("product"), "gpu_models[0].product: required field is missing"),
        (
            lambda d: d["gpu_models"].append(copy.deepcopy(_x(d))),
            "gpu_models: name 'X100-64GB' is used twice",
        ),
        (
            lambda d: _x(d)["mig"].update(memory_slices=4),
            "gpu_models[0].mig.profiles[0].placements: start 4 with 1 memory slice(s)",
        ),
    ],
)
def test_a_bad_gpu_model_is_one_line_naming_the_field(
    change: Callable[[dict[str, Any]], object], expected: str
) -> None:
    msg = _edit(change)
    assert expected in msg and len(msg.splitlines()) == 1, msg
    assert "X100-64GB" not in GPU_MODELS


def test_a_bad_gpu_model_exits_2(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = _config()
    _profile(data, 2)["placements"] = [0, 5]
    (workdir / "c.yaml").write_text(yaml.safe_dump(data))
    assert main(["run", "--dry-run", "--config", "c.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert "gpu_models[0].mig.profiles[2].placements: start 5" in err
    assert len(err.splitlines()) == 1


def test_set_user_catalog_refuses_what_the_config_would() -> None:
    from scaler.catalog.gpus import GpuModel

    broken = MigGeometry("Z1", 7, 8, (MigProfile("1g.10gb", 1, 1, 10, 7, (0, 7, 8), 9.0),))
    with pytest.raises(ValueError, match="placements: start 8"):
        set_user_catalog([(GpuModel("Z1", 80, 7), broken)])
    with pytest.raises(ValueError, match="built in"):
        set_user_catalog([(GpuModel("H100-80GB", 80, 0), None)])
    assert "Z1" not in GPU_MODELS
