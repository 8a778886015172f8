"""What every command of the CLI shares: the final error line, ``-o json|yaml`` documents,
aligned tables, writing an output file, the input and output flags, ``--dry-run[=client|server]``
and the old spellings kept for one release (:class:`DeprecatedAlias`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from forecaster.errors import BadInputError
from forecaster.files import write_output
from forecaster.secrets import redact
from scaler.inputs.loading import DEFAULT_PLAN_FILE, IN_CLUSTER_CONFIG, STATE_DIR_ENV

if TYPE_CHECKING:
    import pandas as pd

    from forecaster.series import History


MAX_ERROR_CHARS = 300
"""The final error line is cut to this many characters (an input may be megabytes)."""


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` redacted, on one line, at most ``limit`` characters (the CLI's final error line)."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def flag_error(message: str) -> NoReturn:
    """Exit 2 with ``message`` as the one error line (an argparse error without the usage)."""
    print(one_line(f"tiercast: error: {message}"), file=sys.stderr)
    raise SystemExit(2)


def deprecation_notice(old: str, new: str) -> None:
    """The one line on stderr an old spelling prints: it still works, for one release."""
    print(
        f"tiercast: {old} is deprecated; use {new} (it is removed in the next release)",
        file=sys.stderr,
    )


class DeprecatedAlias(argparse.Action):
    """An old spelling of an option kept for one release: it stores what its ``replacement``
    stores (same ``dest``) and prints :func:`deprecation_notice`. Hidden from ``--help`` and
    from shell completion; register it after the new option, so the new one's default holds."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        replacement: str,
        implies: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("help", argparse.SUPPRESS)
        kwargs.setdefault("default", argparse.SUPPRESS)
        super().__init__(option_strings, dest, **kwargs)
        self.replacement = replacement
        self.implies = dict(implies or {})

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        deprecation_notice(option_string or self.dest, self.replacement)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        for name, value in self.implies.items():
            setattr(namespace, name, value)


DRY_RUN_MODES = ("client", "server")
"""``--dry-run=client`` (the default of a bare ``--dry-run``): plan and record, every write
kept in memory; ``--dry-run=server``: the writes go to the API server with ``dryRun=All``."""


class DryRunAction(argparse.Action):
    """``--dry-run[=client|server]``, as kubectl's: sets ``dry_run`` (and ``server_dry_run``
    for ``server``), the two booleans ``scaler.service.wiring`` reads."""

    def __init__(
        self,
        option_strings: Sequence[str],
        dest: str,
        modes: Sequence[str] = DRY_RUN_MODES,
        refused: str = "",
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("default", False)
        kwargs.setdefault("metavar", "{" + ",".join(modes) + "}")
        super().__init__(option_strings, dest, nargs="?", const="client", **kwargs)
        self.modes = tuple(modes)
        self.completions = self.modes  # what shell completion offers after --dry-run
        self.refused = refused

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        mode = str(values)
        if mode not in self.modes:
            flag_error(
                f"argument --dry-run: {mode!r} is not a dry-run mode; expected "
                f"{' or '.join(self.modes)} (a bare --dry-run is client){self.refused}"
            )
        setattr(namespace, self.dest, True)
        if mode == "server":
            namespace.server_dry_run = True


def add_dry_run_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--dry-run[=client|server]`` of ``run`` and ``serve``, and the old ``--server-dry-run``."""
    p.add_argument(
        "--dry-run",
        action=DryRunAction,
        help="client (a bare --dry-run): record the actions instead of applying them, every "
        "write kept in memory; server: send the writes with dryRun=All, so the API server "
        "validates them and nothing persists (needs --kubeconfig or --context)",
    )
    p.add_argument(
        "--server-dry-run",
        action=DeprecatedAlias,
        replacement="--dry-run=server",
        dest="server_dry_run",
        nargs=0,
        const=True,
        default=False,
        implies={"dry_run": True},
    )


def add_prometheus_url_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--prometheus-url URL``: the config's ``prometheus.url`` from the command line."""
    p.add_argument(
        "--prometheus-url",
        metavar="URL",
        help="read the config's PromQL signals from this Prometheus (overrides prometheus.url, "
        "or adds the section); needs --config, the built-in demo has no queries",
    )


def write_file(path: str, text: str, flag: str = "--out-file", owned: bool = False) -> None:
    """``text`` to ``path`` (folders created): atomically, or through a device or link; a
    failure is one line naming ``flag`` (exit 2). ``owned``: a path tiercast chose itself,
    where a planted link is refused (:func:`forecaster.files.write_output`)."""
    write_output(path, text, flag, parents=True, owned=owned)


OUTPUT_FORMATS = ("table", "json", "yaml")


def format_document(document: object, output: str) -> str:
    """``document`` as JSON or YAML text (kubectl's ``-o``)."""
    if output == "yaml":
        import yaml

        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def print_document(document: object, output: str) -> None:
    """``document`` on stdout as JSON or YAML (kubectl's ``-o``)."""
    sys.stdout.write(format_document(document, output))


def text_table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned lines, indented two spaces: ``rows[0]`` is the header; columns in ``right``
    are right-aligned (numbers)."""
    # Imported here: tabulate is not needed for --help and --version.
    from forecaster.tables import aligned

    return aligned(rows, right, indent="  ")


def select_series(history: History, name: str | None) -> pd.Series:
    """The ``--series`` named ``name``, or the file's only series when ``name`` is None."""
    if name is not None:
        if name not in history:
            raise BadInputError(
                f"--series: {name!r} is not in the file; it has {', '.join(sorted(history))}"
            )
        return history[name]
    if len(history) == 1:
        return next(iter(history.values()))
    raise BadInputError(
        f"--history has {len(history)} series ({', '.join(sorted(history))}); pick one with --series"
    )


def parse_quantiles(text: str) -> list[tuple[float, str]]:
    from forecaster.estimators import check_quantiles

    parts = [p.strip() for p in text.split(",") if p.strip()]
    out = []
    for p in parts:
        try:
            out.append((float(p), p))
        except ValueError:
            raise BadInputError(
                f"--quantiles: {p!r} is not a number; expected e.g. 0.1,0.5,0.9"
            ) from None
    check_quantiles([q for q, _ in out], "--quantiles")
    return out


def add_fleet_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--current-nodes`` for ``plan``, ``report`` and ``run`` inputs."""
    p.add_argument(
        "--current-nodes",
        action="append",
        default=[],
        metavar="POOL=N",
        help="nodes running now in POOL (repeatable); overrides the config's current_nodes, "
        "e.g. default-on-demand=4 with --history (default: the config's, else min_nodes)",
    )


def add_state_flag(p: argparse.ArgumentParser) -> None:
    """``--state-dir``: where run records, models and the plan go when no path is given."""
    p.add_argument(
        "--state-dir",
        metavar="DIR",
        help="folder of the run records, the model store and the plan JSON where the config "
        f"gives no path (default: service.state_dir, ${STATE_DIR_ENV}, "
        "$XDG_STATE_HOME/tiercast, else ~/.local/state/tiercast)",
    )


def add_input_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        help="YAML config (see data/example-config.yaml); default: $TIERCAST_CONFIG, then "
        f"{IN_CLUSTER_CONFIG} when present, else the built-in demo",
    )
    p.add_argument(
        "--history",
        help="CSV history (timestamp,value or timestamp,series,value) instead of the config's sources",
    )
    p.add_argument(
        "--now", help="plan as of this time (ISO-8601, UTC); default: just after the newest sample"
    )
    p.add_argument(
        "--plan-out",
        help="where to write the plan JSON (default: the config's service.plan_out, else "
        f"{DEFAULT_PLAN_FILE} in the state directory)",
    )
    add_prometheus_url_flag(p)
    add_state_flag(p)
    add_fleet_flags(p)
    g = p.add_argument_group("for --history without --config")
    g.add_argument(
        "--signal-unit",
        default="1",
        help="unit of the history's values, shown in reports, e.g. requests/s (default: %(default)s)",
    )
    g.add_argument(
        "--units-per-gpu",
        type=float,
        default=1.0,
        help="signal units one GPU serves (default 1: the values are GPUs)",
    )
    g.add_argument(
        "--gpu-model",
        default="H100-80GB",
        help="GPU model of the default pool (default: %(default)s)",
    )
    g.add_argument(
        "--gpus-per-node",
        type=int,
        default=8,
        help="GPUs per node of the default pool (default: %(default)s)",
    )
    g.add_argument(
        "--price-per-gpu-hour",
        type=float,
        default=4.0,
        help="price of the default pool (default: %(default)s)",
    )


def add_output_flag(p: argparse.ArgumentParser, wide: bool = False) -> None:
    """``-o table|json|yaml``; ``wide``: also ``-o wide``, the table with evidence columns."""
    p.add_argument(
        "-o",
        "--output",
        choices=(*OUTPUT_FORMATS, "wide") if wide else OUTPUT_FORMATS,
        default="table",
        help="what stdout shows: the human table (default, fits 120 columns)"
        + (
            ", wide (the table with the evidence: signals, forecast, margin, growth, bound)"
            if wide
            else ""
        )
        + ", or the plan and action outcomes as json or yaml (other messages go to stderr)",
    )


def add_verbose_flag(p: argparse.ArgumentParser) -> None:
    """``-v/--verbose``: every write's whole body and each outcome's whole message."""
    p.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print each write's whole request body and each outcome's whole message",
    )
