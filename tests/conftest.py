"""Shared fixtures: paths to the public traces, the demo inputs, a temp workdir, a test clock."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.fake_kube import Clock

# The fast tier's time rule (an unmarked test over 2 s fails the run where CI=true).
pytest_plugins = ["tests.duration_rule", "tests.plan_checks"]
# (plan_checks: every plan a test exports is checked against scaler/plan_schema.py.)

# No example database, and hypothesis' own cache in a temporary folder removed at the end:
# both would otherwise go to ``.hypothesis/`` of the working folder, the checkout, and the
# tests write only under their temporary folders.
# Made in pytest_configure, not at import: a helper process that imports this module
# outside pytest would never remove it.
# No per-example deadline either: a test does not judge speed (a clock bound breaks on a busy
# machine; see the clock rule in tests/test_house_rules.py), and the 2-second rule times it whole.
settings.register_profile("tiercast", database=None, deadline=None)
settings.load_profile("tiercast")
_HYPOTHESIS_HOME: list[Path] = []


def pytest_configure(config: pytest.Config) -> None:
    _HYPOTHESIS_HOME.append(Path(tempfile.mkdtemp(prefix="tiercast-hypothesis-")))
    set_hypothesis_home_dir(str(_HYPOTHESIS_HOME[-1]))


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in _HYPOTHESIS_HOME:
        shutil.rmtree(folder, ignore_errors=True)


REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"


def trace_path(relative: str) -> Path:
    """Path of a public trace; skips the test with a clear message when absent."""
    path = TRACES / relative
    if not path.is_file():
        pytest.skip(
            f"public trace {relative} not found under {TRACES} (the shared data folder is absent)"
        )
    return path


@pytest.fixture
def traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"public traces folder {TRACES} is absent")
    return TRACES


@pytest.fixture(autouse=True)
def _state_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test's state directory (run records, models, plans) in a temporary folder of
    its own, never the user's ``~/.local/state/tiercast``; the ``state_dir`` fixture names it."""
    home = tmp_path_factory.mktemp("xdg-state")
    monkeypatch.setenv("XDG_STATE_HOME", str(home))
    for name in ("TIERCAST_STATE_DIR", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture
def state_dir(_state_home: Path) -> Path:
    """Where commands write what no path in the config or the flags places (the state directory)."""
    return _state_home / "tiercast"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def demo_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built-in demo's model store after one ``tiercast run --dry-run``, made once per
    session: its fitted models and the growth backtest's forecasts (``growth-backtests.json``).
    Forecasting is most of a demo cycle's time; a cycle on a copy of this store fits nothing."""
    import contextlib
    import io

    from scaler.cli import main

    state = tmp_path_factory.mktemp("demo-state")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(["run", "--dry-run", "--state-dir", str(state)])
    assert code == 0, out.getvalue()
    return state / "models"


@pytest.fixture
def warm_demo_models(demo_models: Path, workdir: Path, state_dir: Path) -> list[Path]:
    """A copy of :func:`demo_models` where this test's demo cycles look for their store:
    ``models`` in the working folder (the demo config's relative path, as ``run_cycle`` and
    the cycle job read it) and in the state directory (``tiercast run``'s default). For
    tests of planning, actuation and reports, which should not pay for forecasting."""
    copies = [workdir / "models", state_dir / "models"]
    for folder in copies:
        shutil.copytree(demo_models, folder)
    return copies


@pytest.fixture
def clock() -> Clock:
    """A :class:`tests.fake_kube.Clock`: sleeps return at once and move its time."""
    return Clock()
