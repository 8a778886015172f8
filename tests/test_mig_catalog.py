"""The MIG catalog against NVIDIA's documented profiles, placements and combinations."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from forecaster.errors import BadInputError
from scaler.catalog.mig import (
    GEOMETRIES,
    Layout,
    Placed,
    enumerate_layouts,
    geometry,
    is_valid,
    layouts,
    mig_parted_entry,
    parse_layout,
    parse_mig_parted_entry,
    place,
    profile_for_memory,
)

# Profile names per model, as DESIGN.md lists them from NVIDIA's MIG User Guide.
DOCUMENTED = {
    "A100-40GB": "1g.5gb 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "A100-80GB": "1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H100-80GB": "1g.10gb 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "H200-141GB": "1g.18gb 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "A30-24GB": "1g.6gb 2g.12gb 4g.24gb",
}


@pytest.mark.parametrize("model", sorted(DOCUMENTED))
def test_profile_names_match_the_guide(model: str) -> None:
    geo = geometry(model)
    assert " ".join(p.name for p in geo.base_profiles) == DOCUMENTED[model]
    assert all(p.name.endswith("+me") and p.max_count == 1 for p in geo.profiles if p.media)


@pytest.mark.parametrize("model", ["A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB"])
def test_seven_slice_placements(model: str) -> None:
    geo = geometry(model)
    by_kind = {}
    for p in geo.base_profiles:
        by_kind.setdefault((p.compute_slices, p.memory_slices), p)
    assert by_kind[(1, 1)].placements == tuple((s, 1) for s in range(7))
    assert by_kind[(1, 2)].placements == ((0, 2), (2, 2), (4, 2), (6, 2))
    assert by_kind[(2, 2)].placements == ((0, 2), (2, 2), (4, 2))
    assert by_kind[(3, 4)].placements == ((0, 4), (4, 4))
    assert by_kind[(4, 4)].placements == ((0, 4),)
    assert by_kind[(7, 8)].placements == ((0, 8),)
    assert [p.max_count for p in geo.base_profiles] == [7, 4, 3, 2, 1, 1]


def test_a30_placements() -> None:
    geo = geometry("A30")
    assert [p.placements for p in geo.base_profiles] == [
        ((0, 1), (1, 1), (2, 1), (3, 1)),
        ((0, 2), (2, 2)),
        ((0, 4),),
    ]


def _full_layouts(model: str, exclude: set[str]) -> list[tuple[Placed, ...]]:
    """Positional layouts to which no instance of the kept profiles can be added."""
    geo = geometry(model)
    cands = [
        Placed(s, p.name) for p in geo.base_profiles if p.name not in exclude for s in p.starts
    ]
    every = [lay for lay in enumerate_layouts(model) if not any(i.profile in exclude for i in lay)]
    return [
        lay for lay in every if not any(c not in lay and is_valid(geo, [*lay, c]) for c in cands)
    ]


@pytest.mark.parametrize(("model", "double"), [("A100-40GB", "1g.10gb"), ("H100-80GB", "1g.20gb")])
def test_documented_combinations(model: str, double: str) -> None:
    # NVIDIA's combination table (1g/2g/3g/4g/7g, no double-memory 1g) draws 18 full
    # layouts; NVML also creates 4g (start 0) beside 3g (start 4), which the table omits.
    full = _full_layouts(model, {double})
    assert len(full) == 19
    names = {tuple((i.start, i.profile.split(".")[0]) for i in lay) for lay in full}
    assert ((0, "4g"), (4, "3g")) in names
    assert ((0, "7g"),) in names
    assert ((0, "4g"), (4, "2g"), (6, "1g")) in names
    assert ((0, "3g"), (4, "3g")) in names
    assert ((0, "2g"), (2, "2g"), (4, "2g"), (6, "1g")) in names
    assert tuple((s, "1g") for s in range(7)) in names
    assert ((0, "1g"), (1, "1g"), (2, "1g"), (3, "1g"), (4, "3g")) in names


def test_a30_combinations() -> None:
    full = _full_layouts("A30-24GB", set())
    assert len(full) == 5  # 4g; 2g+2g; 2g+1g+1g; 1g+1g+2g; 4 x 1g


@pytest.mark.parametrize(
    "instances",
    [
        [Placed(0, "4g.40gb"), Placed(0, "4g.40gb")],  # 4g + 4g
        [Placed(0, "4g.40gb"), Placed(0, "3g.40gb")],  # 4g + 3g overlapping at 0
        [Placed(0, "7g.80gb"), Placed(0, "1g.10gb")],
        [Placed(1, "2g.20gb")],  # 2g cannot start at 1
        [Placed(0, "3g.40gb"), Placed(2, "2g.20gb")],  # overlap
        [Placed(s, "1g.10gb") for s in range(7)] + [Placed(6, "1g.20gb")],
        [Placed(0, "1g.10gb+me"), Placed(1, "1g.10gb+me")],  # one +me per GPU
        [Placed(0, "1g.5gb")],  # not an A100-80GB profile
    ],
)
def test_invalid_layouts_are_refused(instances: list[Placed]) -> None:
    assert not is_valid(geometry("A100-80GB"), instances)


@pytest.mark.slow
def test_count_layouts_and_placement() -> None:
    lay = parse_layout("H100", "3g.40gb:1,1g.10gb:4")
    # First fit would put the 3g at 0 and strand the fourth 1g; placement backtracks.
    assert place("H100-80GB", lay) == tuple(
        sorted(
            [
                Placed(0, "1g.10gb"),
                Placed(1, "1g.10gb"),
                Placed(2, "1g.10gb"),
                Placed(3, "1g.10gb"),
                Placed(4, "3g.40gb"),
            ]
        )
    )
    assert place("H100-80GB", Layout.of({"4g.40gb": 2})) is None
    assert Layout.of({"3g.40gb": 2}) in layouts("A100-80GB")
    assert Layout.of({"3g.40gb": 1}) not in layouts("A100-80GB")  # not maximal
    assert Layout.of({"3g.40gb": 1}) in layouts("A100-80GB", maximal_only=False)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4g.40gb:2", "not a valid MIG layout"),
        ("1g.5gb:7", "does not exist on A100-80GB"),
        ("1g.10gb:x", "is not PROFILE:COUNT"),
    ],
)
def test_parse_layout_errors_are_one_line(text: str, message: str) -> None:
    with pytest.raises(BadInputError, match=message) as exc:
        parse_layout("A100-80GB", text)
    assert "\n" not in str(exc.value)


def test_mig_parted_entries_round_trip() -> None:
    per_device = [Layout(whole=True)] * 2 + [Layout.of({"1g.10gb": 7})] * 6
    entry = mig_parted_entry(per_device)
    assert entry[0] == {"devices": [0, 1], "mig-enabled": False}
    assert entry[1]["mig-devices"] == {"1g.10gb": 7}
    parsed = parse_mig_parted_entry("A100-80GB", entry, 8)
    assert [parsed[i] for i in range(8)] == per_device
    assert mig_parted_entry([Layout.of({"7g.80gb": 1})] * 4) == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}
    ]
    with pytest.raises(BadInputError, match="GPU 9 does not exist"):
        parse_mig_parted_entry("A100-80GB", [{"devices": [9], "mig-enabled": False}], 8)


def test_four_and_three_slices_share_a_gpu_as_nvml_allows() -> None:
    geo = geometry("H100-80GB")
    assert is_valid(geo, [Placed(0, "4g.40gb"), Placed(4, "3g.40gb")])
    lay = parse_layout("H100", "4g.40gb:1,3g.40gb:1")
    assert place("H100-80GB", lay) == (Placed(0, "4g.40gb"), Placed(4, "3g.40gb"))
    assert lay in layouts("H100-80GB")


def test_profile_for_memory() -> None:
    assert profile_for_memory("A100-80GB", 8) == "1g.10gb"
    assert profile_for_memory("A100-80GB", 15) == "1g.20gb"
    assert profile_for_memory("A100-80GB", 30) == "3g.40gb"
    # NVML's sizes, not the names: H200 1g.18gb holds 16.00 GiB, so 17 needs the next size.
    assert geometry("H200").profile("1g.18gb").memory_gib == 16.0
    assert profile_for_memory("H200", 16) == "1g.18gb"
    assert profile_for_memory("H200", 17) == "1g.35gb"
    # 1g.10gb on an A100-80GB reports 9.50 GiB: 9.6 does not fit it.
    assert profile_for_memory("A100-80GB", 9.6) == "1g.20gb"
    for geo in GEOMETRIES.values():
        assert all(0 < p.memory_gib < p.memory_gb for p in geo.profiles)
    with pytest.raises(BadInputError, match="does not fit any MIG profile"):
        profile_for_memory("A30", 40)
    with pytest.raises(BadInputError, match="does not support MIG"):
        geometry("L40S")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(GEOMETRIES)), st.data())
@pytest.mark.slow
def test_accepted_layouts_never_overlap_or_overcommit(model: str, data: st.DataObject) -> None:
    geo = geometry(model)
    cands = [Placed(s, p.name) for p in geo.profiles for s in p.starts]
    chosen = data.draw(st.lists(st.sampled_from(cands), max_size=8, unique=True))
    if is_valid(geo, chosen):
        slices = [
            s
            for i in chosen
            for s in range(i.start, i.start + geo.profile(i.profile).memory_slices)
        ]
        assert len(slices) == len(set(slices))
        assert sum(geo.profile(i.profile).compute_slices for i in chosen) <= geo.compute_slices
        lay = Layout.from_placed(chosen)
        assert place(model, lay) is not None


def test_device_filter_selects_the_groups_of_one_model() -> None:
    from tests.gpu_operator import default_mig_parted_config

    configs = default_mig_parted_config()["mig-configs"]
    # One name, a different layout per GPU model: 7 slices on an H100, 4 on an A100-40GB.
    assert parse_mig_parted_entry("H100-80GB", configs["all-1g.10gb"], 2) == {
        0: Layout.of({"1g.10gb": 7}),
        1: Layout.of({"1g.10gb": 7}),
    }
    assert parse_mig_parted_entry("A100-40GB", configs["all-1g.10gb"], 1) == {
        0: Layout.of({"1g.10gb": 4})
    }
    balanced = {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
    assert parse_mig_parted_entry("H200", configs["all-balanced"], 8)[7] == Layout.of(balanced)
    assert parse_mig_parted_entry("A30", configs["all-balanced"], 1)[0] == Layout.of(
        {"1g.6gb": 2, "2g.12gb": 1}
    )
    # No group selects an L4-like board: nothing is said about its GPUs.
    entry = [{"device-filter": "0x20B710DE", "devices": "all", "mig-enabled": False}]
    assert parse_mig_parted_entry("H100", entry, 2) == {}
    with pytest.raises(BadInputError, match="device-filter: expected a PCI device ID"):
        parse_mig_parted_entry("H100", [{"device-filter": 5, "devices": "all"}], 1)


def test_every_default_entry_reads_on_the_models_it_names() -> None:
    from tests.gpu_operator import default_mig_parted_config

    configs = default_mig_parted_config()["mig-configs"]
    assert parse_mig_parted_entry("H100", configs["all-disabled"], 8)[0].whole
    for model in ("A100-40GB", "A100-80GB", "H100-80GB", "H200-141GB", "A30-24GB"):
        lay = parse_mig_parted_entry(model, configs["all-balanced"], 1)[0]
        assert place(model, lay) is not None and len(lay.counts) >= 2


def test_mixed_strategy_is_needed_for_mixed_nodes() -> None:
    from scaler.catalog.mig import needs_mixed_strategy

    one = Layout.of({"1g.10gb": 7})
    assert not needs_mixed_strategy([one, one])
    assert not needs_mixed_strategy([Layout(whole=True)] * 2)
    assert needs_mixed_strategy([one, Layout.of({"3g.40gb": 2})])
    assert needs_mixed_strategy([Layout.of({"3g.40gb": 1, "2g.20gb": 2})])
    assert needs_mixed_strategy([one, Layout(whole=True)])


@pytest.mark.parametrize(
    ("model", "product", "same"),
    [
        ("A100-80GB", "NVIDIA-A100-SXM4-80GB", True),
        ("A100-80GB", "NVIDIA-A100-80GB-PCIe", True),
        ("A100-40GB", "NVIDIA-A100-SXM4-80GB", False),
        ("A100-40GB", "A100-SXM4-40GB", True),  # older drivers: no NVIDIA- prefix
        ("A100-40GB", "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", True),  # mig.strategy=single
        ("H100-80GB", "NVIDIA-H100-80GB-HBM3", True),
        ("H100-80GB", "NVIDIA-H100-PCIe", True),
        ("H100-80GB", "NVIDIA-H100-NVL", False),  # 94 GB, other MIG profiles
        ("H100-80GB", "NVIDIA-H200", False),
        ("H200-141GB", "NVIDIA-H200", True),
        ("A30-24GB", "NVIDIA-A30-SHARED", True),
        ("L4-24GB", "NVIDIA-L40S", False),
    ],
)
def test_gpu_feature_discovery_products_are_matched_to_models(
    model: str, product: str, same: bool
) -> None:
    from scaler.catalog.gpus import product_matches

    assert product_matches(model, product) is same


# ---- device-filter per GPU, as mig-parted matches it --------------------------------------

VARIANTS = [
    # (model, nvidia.com/gpu.product, the board's PCI device ID)
    ("H200-141GB", "NVIDIA-H200", "0x233510DE"),
    ("H200-141GB", "NVIDIA-H200-NVL", "0x233B10DE"),
    ("H100-80GB", "NVIDIA-H100-80GB-HBM3", "0x233010DE"),
    ("H100-80GB", "NVIDIA-H100-PCIe", "0x233110DE"),
    ("H100-NVL-94GB", "NVIDIA-H100-NVL", "0x232110DE"),
    ("A100-80GB", "NVIDIA-A100-SXM4-80GB", "0x20B210DE"),
    ("A100-40GB", "NVIDIA-A100-SXM4-40GB", "0x20B010DE"),
    ("RTX-PRO-6000-96GB", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "0x2BB510DE"),
    ("RTX-PRO-6000-96GB", "NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", "0x2BB110DE"),
    (
        "RTX-PRO-6000-96GB",
        "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition",
        "0x2BB410DE",
    ),
]
RTX_BALANCED = [
    {
        "device-filter": ["0x2BB510DE"],
        "devices": "all",
        "mig-enabled": True,
        "mig-devices": {"1g.24gb": 2, "2g.48gb": 1},
    }
]


def test_device_filter_is_matched_per_gpu_by_its_pci_device_id() -> None:
    """The operator's all-1g.35gb names the H200 SXM board only: on an H200 NVL mig-parted
    changes nothing; on a board that cannot be told, the entry cannot be read."""
    from scaler.catalog.gpus import device_ids_for_product
    from tests.gpu_operator import default_mig_parted_config

    entry = default_mig_parted_config()["mig-configs"]["all-1g.35gb"]
    for model, product, board in VARIANTS:
        assert device_ids_for_product(model, product) == (board,), product
    sxm = device_ids_for_product("H200-141GB", "NVIDIA-H200")
    nvl = device_ids_for_product("H200-141GB", "NVIDIA-H200-NVL")
    assert parse_mig_parted_entry("H200-141GB", entry, 8, "all-1g.35gb", sxm) == {
        i: Layout.of({"1g.35gb": 4}) for i in range(8)
    }
    assert parse_mig_parted_entry("H200-141GB", entry, 8, "all-1g.35gb", nvl) == {}
    with pytest.raises(BadInputError, match="mig-parted matches each GPU's own PCI device ID"):
        parse_mig_parted_entry("H200-141GB", entry, 8, "all-1g.35gb")
    # all-balanced's RTX PRO 6000 group names the Server Edition only.
    for product, layouts_read in (
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", 4),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Workstation-Edition", 0),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition", 0),
    ):
        ids = device_ids_for_product("RTX-PRO-6000-96GB", product)
        got = parse_mig_parted_entry("RTX-PRO-6000-96GB", RTX_BALANCED, 4, "all-balanced", ids)
        assert len(got) == layouts_read, product


def test_an_operator_entry_is_reused_only_where_it_selects_every_board_of_the_model() -> None:
    """Planning 4 x 1g.35gb on H200s: the operator's all-1g.35gb selects the SXM board only,
    so tiercast writes its own entry (no device-filter) rather than one mig-parted would
    skip on an H200 NVL."""
    from scaler.planning.mig.state import resolve_config_name
    from tests.gpu_operator import default_mig_parted_config

    configs = default_mig_parted_config()["mig-configs"]
    name, known = resolve_config_name("H200-141GB", [Layout.of({"1g.35gb": 4})] * 8, configs)
    assert name.startswith("tiercast-") and not known
    # An entry whose filter names every board of the model is still reused.
    name, known = resolve_config_name(
        "H200-141GB", [Layout.of({"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1})] * 8, configs
    )
    assert (name, known) == ("all-balanced", True)


@pytest.mark.parametrize(("model", "product", "board"), VARIANTS)
def test_tiercast_reads_each_default_entry_as_the_fake_mig_parted_applies_it(
    model: str, product: str, board: str
) -> None:
    """The fake MIG manager follows mig-parted's own walk (tests/gpu_operator.py
    ``mig_parted_layouts``); tiercast's reading of every default entry, for this board,
    must say the same of every GPU it says anything of, and say nothing of the others."""
    from scaler.catalog.gpus import device_ids_for_product
    from tests.gpu_operator import default_mig_parted_config, mig_parted_layouts

    ids = device_ids_for_product(model, product)
    configs = default_mig_parted_config()["mig-configs"] | {"all-balanced-rtx": RTX_BALANCED}
    for name, entry in configs.items():
        applied = mig_parted_layouts(entry, [board] * 4, {})
        try:
            read = parse_mig_parted_entry(model, entry, 4, name, ids)
        except BadInputError:
            continue  # a profile this model lacks: the entry is another model's
        assert read == applied, (name, product)


def test_the_fake_mig_parted_skips_gpus_no_group_selects() -> None:
    from tests.gpu_operator import H200_NVL_ID, H200_SXM_ID, mig_parted_layouts

    entry = [
        {"device-filter": [H200_SXM_ID], "devices": [0, 1], "mig-enabled": True,
         "mig-devices": {"1g.35gb": 4}},
        {"device-filter": "not-an-id", "devices": "all", "mig-enabled": False},
    ]  # fmt: skip
    before = {i: Layout(whole=True) for i in range(3)}
    got = mig_parted_layouts(entry, [H200_SXM_ID, H200_NVL_ID, H200_SXM_ID], before)
    assert got == {0: Layout.of({"1g.35gb": 4}), 1: Layout(whole=True), 2: Layout(whole=True)}


def test_rtx_pro_6000_mig_memory_is_what_nvml_reports() -> None:
    """``nvidia-smi mig -lgip``: 23.62 / 47.38 / 95.00 GiB; a workload needing 22 GiB fits
    a 1g.24gb (not the 2g.48gb a lower bound of 21.25 GiB chose)."""
    g = geometry("RTX-PRO-6000-96GB")
    assert [g.profile(n).memory_gib for n in ("1g.24gb", "2g.48gb", "4g.96gb")] == [
        23.62,
        47.38,
        95.00,
    ]
    assert profile_for_memory("RTX-PRO-6000-96GB", 22) == "1g.24gb"
    assert profile_for_memory("RTX-PRO-6000-96GB", 45) == "2g.48gb"
