"""Writing output files: atomic where tiercast owns the path, through links and devices."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from forecaster.files import write_atomic


def test_a_new_file_is_written_whole_with_no_temporary_left(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "plan.json"
    write_atomic(target, "{}\n", parents=True)
    write_atomic(target, b"[1]\n")
    assert target.read_bytes() == b"[1]\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["plan.json"]


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "new"


def test_a_fifo_is_written_through_not_renamed_over(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        write_atomic(fifo, "through")
        assert os.read(reader, 100) == b"through"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.skipif(not Path("/dev/null").is_char_device(), reason="no /dev/null device here")
def test_dev_null_stays_a_device() -> None:
    write_atomic("/dev/null", "discarded")
    assert Path("/dev/null").is_char_device()
    assert not Path("/dev/null.tmp").exists()
