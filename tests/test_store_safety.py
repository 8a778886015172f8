"""The model store never writes through a link planted among its files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.estimators import make
from forecaster.files import write_atomic
from forecaster.store import ModelStore

METHOD = "seasonal_naive_1d"


def series() -> pd.Series:
    index = pd.date_range("2026-02-02", periods=12 * 24, freq="1h", name="timestamp")
    values = 100 + 40 * np.sin(2 * np.pi * index.hour.to_numpy() / 24)
    return pd.Series(values, index=index, name="rps")


def store_at(path: Path) -> ModelStore:
    return ModelStore(path, max_age_s=86400, clock=lambda: 1_800_000_000.0)


def outside_file(tmp_path: Path, name: str) -> Path:
    """A file outside the store that a planted link points at."""
    target = tmp_path / "outside" / name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(b"precious " + name.encode())
    return target


def test_planted_temporary_links_are_never_followed(tmp_path: Path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    store = store_at(folder)
    key = store.key("rps", METHOD)
    targets = {}
    for suffix in (".npz.tmp", ".json.tmp"):
        targets[suffix] = outside_file(tmp_path, f"victim{suffix}")
        (folder / f"{key}{suffix}").symlink_to(targets[suffix])

    first = store.get_or_fit(series(), METHOD, lambda: make(METHOD))

    assert not first.reused
    for suffix, target in targets.items():
        assert target.read_bytes() == f"precious victim{suffix}".encode()
        assert (folder / f"{key}{suffix}").is_symlink()
    assert (folder / f"{key}.npz").is_file() and not (folder / f"{key}.npz").is_symlink()
    assert (folder / f"{key}.json").is_file() and not (folder / f"{key}.json").is_symlink()
    # The entry reads back in a fresh store, and no temporary of the store's own is left.
    assert store_at(folder).get_or_fit(series(), METHOD, lambda: make(METHOD)).reused
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [f"{key}.npz", f"{key}.json", f"{key}.npz.tmp", f"{key}.json.tmp"]
    )


@pytest.mark.parametrize("suffix", [".npz", ".json"])
def test_a_link_at_the_final_name_is_refused_and_left_alone(
    tmp_path: Path, suffix: str, caplog: pytest.LogCaptureFixture
) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    store = store_at(folder)
    key = store.key("rps", METHOD)
    target = outside_file(tmp_path, f"victim{suffix}")
    (folder / f"{key}{suffix}").symlink_to(target)

    outcome = store.get_or_fit(series(), METHOD, lambda: make(METHOD))

    assert not outcome.reused  # the run still forecasts, from a fresh fit
    assert target.read_bytes() == f"precious victim{suffix}".encode()
    assert (folder / f"{key}{suffix}").is_symlink()
    assert "model store" in caplog.text


def test_the_shared_writer_uses_a_fresh_temporary_name(tmp_path: Path) -> None:
    target = outside_file(tmp_path, "victim")
    (tmp_path / "plan.json.tmp").symlink_to(target)
    write_atomic(tmp_path / "plan.json", "{}\n")
    assert target.read_bytes() == b"precious victim"
    assert (tmp_path / "plan.json").read_text() == "{}\n"
    assert not (tmp_path / "plan.json").is_symlink()


def test_an_owned_path_that_is_a_link_is_refused(tmp_path: Path) -> None:
    target = outside_file(tmp_path, "victim")
    link = tmp_path / "entry.npz"
    link.symlink_to(target)
    with pytest.raises(OSError, match="link"):
        write_atomic(link, b"new", owned=True)
    assert target.read_bytes() == b"precious victim"
    assert link.is_symlink()
