"""The fuzz corpus: malformed configs and histories for the CLI, and how to judge an outcome.

Plain Python on purpose (no tiercast import, no hypothesis): ``tests/fuzz_cli.py`` runs
the whole corpus against the installed ``tiercast`` command in subprocesses, and
``tests/test_fuzz_cli.py`` runs a bounded sample in-process in CI (adding hypothesis
strategies over the same mutations).

Each :class:`Case` writes its files into an empty folder (and makes its FIFOs; serves its
Prometheus answer on a local port) and runs one command. The families: malformed configs
and histories, output settings, and (#50) node lists and mig-parted configs for
``inventory``, special files and NUL bytes at inputs, corrupt state in the model store,
duplicate label sets from Prometheus and implausible footprints. Its ``expect`` says what
a correct tiercast does:

* ``error``: exit 2 with exactly one stderr line of at most 300 characters that
  contains ``field`` (the field, or the word naming the limit);
* ``hold``: a documented safe hold: exit 0 or 1 with at most one stderr line, and the
  plan (when written) is strict JSON with no scale-down;
* ``held``: suspect data in range (zeros unlike the past, a spike, a need past the
  pools' limits): exit 1 (``held``), and the plan (when written) changes no pool;
* ``ok``: exit 0 and a strict-JSON plan.

A case with ``outputs`` also says what may be left in its folder afterwards: its own
files and the paths its flags or config name (``outputs``); anything else (a plan, run
records or a model store written into the working folder unasked) is a wrong success.
The runners give each case a state directory of its own outside its folder.

:func:`judge` sorts an outcome into ``clean``, ``traceback`` (a traceback, several
error lines, a line over 300 characters, or an unexpected exit code), ``wrong-success``
(exit 0 where an error was due, a plan that is not strict JSON or scales down on bad
data, or a file left where nothing said to write) and ``hang`` (over the time limit).
"""

from __future__ import annotations

import copy
import json
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LINE = 300


def base_config() -> dict[str, Any]:
    """A small valid config with a file signal and a fast estimator."""
    return {
        "signals": [{"name": "rps", "file": "rps.csv", "step_s": 3600}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10.0}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "current_nodes": 2,
                "max_nodes": 20,
            }
        ],
        "forecast": {"method": "seasonal_naive_1d"},
        "policy": {"horizon_s": 21600},
        "service": {"records_path": "runs.sqlite"},
        "model_store": {"path": "models"},
    }


def history_csv(days: int = 4, step_s: int = 3600, level: float = 60.0) -> bytes:
    """``timestamp,value`` rows of a daily cycle ending 2026-11-30."""
    start = 1_764_201_600 - days * 86400  # 2025-11-27; any fixed recent day works
    rows = ["timestamp,value"]
    for i in range(days * 86400 // step_s):
        t = start + i * step_s
        v = level + 20 * math.sin(2 * math.pi * (t % 86400) / 86400)
        rows.append(f"{_iso(t)},{v:.3f}")
    return ("\n".join(rows) + "\n").encode()


def _iso(seconds: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def dump_yaml(data: Any) -> bytes:
    """JSON is YAML: one writer without a YAML dependency."""
    return json.dumps(data).encode()


@dataclass
class Case:
    name: str
    files: dict[str, bytes]
    argv: list[str]
    expect: str
    field: str = ""
    slow: bool = False
    """Too slow or large for the CI sample (the standalone script runs it)."""
    outputs: tuple[str, ...] | None = None
    """What may be left in the case's folder besides its files: paths, or folders ending
    in ``/`` (anything under them but a ``tiercast-plan.json``). None: not checked."""
    fifos: tuple[str, ...] = ()
    """Named pipes the runner makes in the case's folder (no writer ever opens them)."""
    folders: tuple[str, ...] = ()
    """Folders the runner makes in the case's folder (before its FIFOs): a folder where
    an output file goes, or the parent of a FIFO."""
    links: tuple[tuple[str, str], ...] = ()
    """Symbolic links the runner makes: (name in the folder, what it points at)."""
    prometheus: Callable[[float], bytes] | None = None
    """A Prometheus answer, made from the wall-clock time: the runner serves it to every
    query (:func:`serve_prometheus`) and puts its URL where a file holds ``@PROMETHEUS@``."""


RUN = ["run", "--dry-run", "--config", "config.yaml", "--plan-out", "plan.json"]


def config_case(name: str, data: Any, field_name: str, expect: str = "error", **kw: Any) -> Case:
    files = {"config.yaml": data if isinstance(data, bytes) else dump_yaml(data)}
    files["rps.csv"] = history_csv()
    return Case(name, files, list(RUN), expect, field_name, **kw)


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(data: dict[str, Any]) -> None:
        target: Any = data
        parts = path.split(".")
        for part in parts[:-1]:
            target = target[int(part)] if part.isdigit() else target.setdefault(part, {})
        last = parts[-1]
        if last.isdigit():
            target[int(last)] = value
        else:
            target[last] = value

    return mutate


def mutated(path: str, value: Any) -> dict[str, Any]:
    data = base_config()
    _set(path, value)(data)
    return data


def _nested(depth: int) -> bytes:
    return b"signals: " + b"[" * depth + b"]" * depth + b"\n"


def _alias_bomb() -> bytes:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for i, name in enumerate("bcdefghi"):
        prev = "abcdefghi"[i]
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("signals: *i")
    return ("\n".join(lines) + "\n").encode()


def _many_pools(n: int) -> dict[str, Any]:
    data = base_config()
    pool = data["pools"][0]
    data["pools"] = [{**pool, "name": f"p{i}"} for i in range(n)]
    return data


def hand_config_cases() -> list[Case]:
    """The issue's cases and their neighbours, each with the field its error must name."""
    big = "x" * (10 * 1024 * 1024)
    cases = [
        config_case(
            "records_keep_days-1e9", mutated("service.records_keep_days", 1e9), "records_keep_days"
        ),
        config_case("nested-20000", _nested(20000), "nested"),
        config_case("horizon_s-1e9", mutated("policy.horizon_s", 1e9), "horizon_s"),
        config_case("horizon_s-1e15", mutated("policy.horizon_s", 1e15), "horizon_s"),
        config_case("cycle_s-1e10", mutated("policy.cycle_s", 1e10), "cycle_s"),
        config_case("alias-bomb", _alias_bomb(), "alias"),
        config_case("pools-5000", _many_pools(5000), "pools"),
        config_case("units_per_replica-inf", b"", "units_per_replica"),
        config_case(
            "units_per_replica-1e-9",
            mutated("workloads.0.units_per_replica", 1e-9),
            "units_per_replica",
        ),
        config_case(
            "units_per_replica-1e308",
            mutated("workloads.0.units_per_replica", 1e308),
            "units_per_replica",
        ),
        config_case("price_per_gpu_hour-inf", b"", "price_per_gpu_hour"),
        config_case("duplicate-key", b"", "duplicate key"),
        config_case("max_nodes-true", mutated("pools.0.max_nodes", True), "max_nodes"),
        config_case(
            "current_nodes-above-max", mutated("pools.0.current_nodes", 58), "current_nodes"
        ),
        config_case("value-10MB", mutated("signals.0.unit", big), "bytes"),
        config_case("name-100KB", mutated("pools.0.name", "a" * 100_000), "pools[0].name"),
        config_case("quantile-nan", b"", "quantile"),
        config_case(
            "gpus_per_node-negative", mutated("pools.0.gpus_per_node", -8), "gpus_per_node"
        ),
        config_case("max_nodes-string", mutated("pools.0.max_nodes", "lots"), "max_nodes"),
        config_case("pools-null", mutated("pools", None), "pools"),
        config_case("pools-mapping", mutated("pools", {"a": 1}), "pools"),
        config_case("top-level-list", [1, 2, 3], "mapping"),
        config_case("empty-file", b"", "mapping"),
        config_case("binary-garbage", bytes(range(256)) * 4, "config"),
        config_case("unknown-top-level", mutated("polcy", {"quantile": 0.9}), "polcy"),
        config_case("jobs-1e6", mutated("forecast.jobs", 1_000_000), "jobs"),
        config_case(
            "lookback_s-1e12",
            mutated("prometheus", {"url": "https://p", "lookback_s": 1e12}),
            "lookback_s",
        ),
        config_case("timeout_s-inf", b"", "timeout_s"),
        config_case("staleness-0", mutated("policy.staleness_limit_s", 0), "staleness_limit_s"),
        config_case(
            "token-over-http",
            mutated("prometheus", {"url": "http://p:9090", "bearer_token_file": "/t"}),
            "allow_insecure",
        ),
        config_case("quantiles-10000", mutated("forecast.quantiles", [0.5] * 10_000), "quantiles"),
        config_case("max_step_nodes-0", mutated("policy.max_step_nodes", 0), "max_step_nodes"),
        config_case("budget-inf", b"", "budget_per_hour"),
        config_case("lead_time-negative", mutated("pools.0.lead_time_s", -600), "lead_time_s"),
        config_case("signals-empty", mutated("signals", []), "signals"),
        config_case("tier-bool", mutated("pools.0.tier", True), "tier"),
        config_case(
            "min_replicas-huge", mutated("workloads.0.min_replicas", 10**30), "min_replicas"
        ),
        config_case("gpu_model-unknown", mutated("pools.0.gpu_model", "Z9000"), "gpu_model"),
        config_case("tabs", b"signals:\n\t- name: rps\n", "line"),
        config_case("unclosed-quote", b'signals: [{"name": "rps}]\n', "line"),
        config_case(
            "yaml-python-tag", b"signals: !!python/object/apply:os.system ['touch pwned']\n", "line"
        ),
        config_case(
            "records_keep_days-bool",
            mutated("service.records_keep_days", False),
            "records_keep_days",
        ),
        config_case(
            "spot-rate-1",
            mutated("pools.0.spot_interruption_rate_per_hour", 1.0),
            "spot_interruption_rate_per_hour",
        ),
        config_case("horizon_s-negative", mutated("policy.horizon_s", -1), "horizon_s"),
        config_case("horizon_s-float-string", mutated("policy.horizon_s", "1e9"), "horizon_s"),
    ]
    yaml_text = {
        "units_per_replica-inf": ("units_per_replica: 10.0", "units_per_replica: .inf"),
        "price_per_gpu_hour-inf": ("price_per_gpu_hour: 2.0", "price_per_gpu_hour: .inf"),
        "quantile-nan": ("horizon_s: 21600", "horizon_s: 21600\n  quantile: .nan"),
        "timeout_s-inf": (
            "model_store:",
            "prometheus: {url: 'https://p', timeout_s: .inf}\nmodel_store:",
        ),
        "budget-inf": ("horizon_s: 21600", "horizon_s: 21600\n  budget_per_hour: .inf"),
        "duplicate-key": ("max_nodes: 20", "max_nodes: 20\n    max_nodes: 2"),
    }
    for case in cases:
        if case.name in yaml_text:
            old, new = yaml_text[case.name]
            text = block_yaml(base_config())
            assert old in text, (case.name, old)
            case.files["config.yaml"] = text.replace(old, new, 1).encode()
    return cases


def block_yaml(data: Any, indent: int = 0) -> str:
    """Block-style YAML of plain data (enough for the base config), for text-level edits."""
    pad = " " * indent
    out = []
    if isinstance(data, dict):
        for k, v in data.items():
            if isinstance(v, dict | list) and v:
                out.append(f"{pad}{k}:")
                out.append(block_yaml(v, indent + 2))
            else:
                out.append(f"{pad}{k}: {json.dumps(v)}")
    else:
        for item in data:
            inner = block_yaml(item, indent + 2).lstrip()
            out.append(f"{pad}- {inner}")
    return "\n".join(out) + ("\n" if indent == 0 else "")


def history_case(
    name: str, content: bytes, field_name: str, expect: str = "error", **kw: Any
) -> list[Case]:
    """The same history through ``run`` and ``forecast``."""
    return [
        Case(
            f"{name}/run",
            {"h.csv": content},
            ["run", "--dry-run", "--history", "h.csv", "--plan-out", "plan.json"],
            expect,
            field_name,
            **kw,
        ),
        Case(
            f"{name}/forecast",
            {"h.csv": content},
            ["forecast", "--history", "h.csv", "--horizon", "1d", "--method", "seasonal_naive_1d"],
            expect,
            field_name,
            **kw,
        ),
    ]


def _rows(stamps: list[str], values: list[str]) -> bytes:
    return (
        "timestamp,value\n" + "".join(f"{t},{v}\n" for t, v in zip(stamps, values, strict=True))
    ).encode()


def _hourly(n: int, start_year: int = 2026) -> list[str]:
    return [f"{start_year}-11-{1 + h // 24:02d}T{h % 24:02d}:00:00Z" for h in range(n)]


def _million_rows() -> bytes:
    base = 1_764_000_000
    lines = ["timestamp,value"] + [
        f"{_iso(base + i)},{50 + (i % 600) / 10}" for i in range(1_000_000)
    ]
    return ("\n".join(lines) + "\n").encode()


def fresh_config() -> dict[str, Any]:
    """The base config on a 5-minute history that is fresh at 'now' (planned, not held)."""
    data = base_config()
    data["signals"][0]["step_s"] = 300
    return data


def _with_files(case: Case, **files: bytes) -> Case:
    case.files.update(files)
    return case


def hand_output_cases() -> list[Case]:
    """Round three of the issue (#31 findings 7 and 8): settings the cycle cannot run with
    are one line at load, a store path that is a file refits, and a dry-run writes only
    where a flag or the config says."""
    fresh = history_csv(days=3, step_s=300)
    nan = _rows(_hourly(96), ["nan"] * 96)
    store_is_a_file = fresh_config()
    store_is_a_file["policy"]["staleness_limit_s"] = 3600
    return [
        config_case("quantiles-above-1", mutated("forecast.quantiles", [0.5, 1.5]), "quantiles"),
        config_case("quantiles-zero", mutated("forecast.quantiles", [0.0, 0.9]), "quantiles"),
        config_case("quantiles-nan-text", mutated("forecast.quantiles", ["nan"]), "quantiles"),
        config_case("method-unknown", mutated("forecast.method", "nope"), "method"),
        config_case(
            "method-bad-setting", mutated("forecast.method", "seasonal_naive_1d(x=1)"), "method"
        ),
        config_case("method-empty", mutated("forecast.method", ""), "method"),
        _with_files(
            config_case("store-path-is-a-file", store_is_a_file, "", expect="ok"),
            **{"rps.csv": fresh, "models": b"a file where the store folder would be\n"},
        ),
        _with_files(
            config_case("store-path-under-a-file", _store_at("rps.csv/models"), "", "ok"),
            **{"rps.csv": fresh},
        ),
        _with_files(
            config_case("all-nan-config", base_config(), "", expect="hold"), **{"rps.csv": nan}
        ),
        # A file too fine to forecast is named at load, not held as "no data" (it was exit 1).
        *history_case("points-over-the-limit", _sparse_one_second(), "points"),
        Case(
            "dry-run-in-an-empty-folder",
            {"h.csv": fresh},
            ["run", "--dry-run", "--history", "h.csv"],
            "ok",
            outputs=(),
        ),
        Case(
            "dry-run-plan-out",
            {"h.csv": fresh},
            ["run", "--dry-run", "--history", "h.csv", "--plan-out", "plan.json"],
            "ok",
            outputs=("plan.json",),
        ),
        Case(
            "plan-out-dir",
            {"h.csv": fresh},
            ["plan", "--history", "h.csv", "--out-dir", "finance", "--horizon", "7d"],
            "ok",
            outputs=("finance/",),
        ),
        Case(
            "dry-run-config-paths",
            {"config.yaml": dump_yaml(fresh_config()), "rps.csv": fresh},
            ["run", "--dry-run", "--config", "config.yaml"],
            "ok",
            outputs=("runs.sqlite", "runs.sqlite-wal", "runs.sqlite-shm", "models/"),
        ),
    ]


def _sparse_one_second() -> bytes:
    """100 rows a second apart and one a week later: 604,801 points at a 1-second step."""
    base = 1_764_000_000
    stamps = [_iso(base + i) for i in range(100)] + [_iso(base + 7 * 86400)]
    return _rows(stamps, [str(i % 7) for i in range(101)])


def _store_at(path: str) -> dict[str, Any]:
    data = fresh_config()
    data["model_store"]["path"] = path
    data["policy"]["staleness_limit_s"] = 3600
    return data


def hand_history_cases() -> list[Case]:
    n = 96
    cases: list[Case] = []
    cases += history_case("all-nan", _rows(_hourly(n), ["nan"] * n), "observed", expect="hold")
    cases += history_case("all-inf", _rows(_hourly(n), ["inf"] * n), "observed", expect="hold")
    cases += history_case("all-negative", _rows(_hourly(n), ["-5"] * n), "observed", expect="hold")
    cases += history_case(
        "some-negative",
        _rows(_hourly(n), [str(-3 if i % 7 == 0 else 40) for i in range(n)]),
        "",
        expect="hold",
    )
    cases += history_case(
        "year-1000", _rows([t.replace("2026", "1000") for t in _hourly(n)], ["1"] * n), "timestamp"
    )
    cases += history_case(
        "year-3000", _rows([t.replace("2026", "3000") for t in _hourly(n)], ["1"] * n), "timestamp"
    )
    ms = [f"2026-11-01T00:00:00.{i:03d}Z" for i in range(n)]
    cases += history_case("millisecond-step", _rows(ms, ["1"] * n), "step")
    cases += history_case("non-numeric", _rows(_hourly(3), ["1", "abc", "2"]), "value")
    cases += history_case("empty", b"", "empty")
    cases += history_case("header-only", b"timestamp,value\n", "rows")
    cases += history_case("one-row", _rows(_hourly(1), ["1"]), "observed", expect="hold")
    cases += history_case(
        "same-timestamp", _rows([_hourly(1)[0]] * 5, ["1"] * 5), "observed", expect="hold"
    )
    cases += history_case("huge-values", _rows(_hourly(n), ["1e308"] * n), "", expect="hold")
    cases += history_case("garbage", bytes(range(256)) * 8, "history")
    cases += history_case("no-columns", b"a,b\n1,2\n", "columns")
    cases += history_case(
        "ragged", b"timestamp,value\n2026-11-01T00:00:00Z,1,2,3\n2026-11-01T01:00:00Z\n", "history"
    )
    cases += history_case(
        "long-line", b"timestamp,value\n" + b"9" * (10 * 1024 * 1024) + b",1\n", "timestamp"
    )
    cases += history_case(
        "bad-timestamp", _rows(["yesterday", *_hourly(3)[1:]], ["1"] * 3), "timestamp"
    )
    cases += history_case(
        "epoch-seconds-far", _rows(["99999999999999"] * 2, ["1", "2"]), "timestamp"
    )
    cases += history_case("million-rows-1s", _million_rows(), "points", slow=True)
    cases += suspect_history_cases()
    return cases


def suspect_history_cases() -> list[Case]:
    """#31 findings 2 and 6: values in range that are suspect hold the pool (``held``)."""
    rows = history_csv(days=3, step_s=300).decode().strip().splitlines()

    def case(name: str, value: Callable[[int, str], str]) -> Case:
        """The fresh history with each value replaced by ``value(steps before the newest,
        value)``."""
        body = [rows[0]]
        for i, row in enumerate(rows[1:]):
            stamp, v = row.split(",")
            body.append(f"{stamp},{value(len(rows) - 2 - i, v)}")
        made = config_case(name, fresh_config(), "", expect="held")
        made.files["rps.csv"] = ("\n".join(body) + "\n").encode()
        return made

    return [
        case("zeros-last-hour", lambda back, v: "0" if back < 12 else v),
        case("spike-1e14-newest", lambda back, v: "1e14" if back == 0 else v),
        case("values-near-cap", lambda back, v: "9.99e14"),
    ]


# -- random mutations (the standalone script draws them with ``random``; CI with hypothesis) --

NUMERIC_FIELDS = [
    "policy.horizon_s",
    "policy.cycle_s",
    "policy.staleness_limit_s",
    "policy.scale_down_stabilization_s",
    "policy.max_step_nodes",
    "policy.quantile",
    "policy.headroom_fraction",
    "policy.budget_per_hour",
    "pools.0.max_nodes",
    "pools.0.min_nodes",
    "pools.0.current_nodes",
    "pools.0.gpus_per_node",
    "pools.0.price_per_gpu_hour",
    "pools.0.lead_time_s",
    "pools.0.mig_change_s",
    "workloads.0.units_per_replica",
    "workloads.0.gpus_per_replica",
    "workloads.0.min_replicas",
    "signals.0.step_s",
    "forecast.jobs",
    "forecast.batch_size",
    "model_store.max_age_s",
    "service.records_keep_days",
    "service.misfire_grace_s",
    "service.shutdown_grace_s",
    "service.lease_duration_s",
    "kubernetes.max_changes_per_cycle",
    "kubernetes.request_timeout_s",
    "kubernetes.drain_timeout_s",
]
"""Config fields that hold a quantity."""

ABSURD_NUMBERS: list[Any] = [
    True,
    False,
    -7,
    -1e308,
    1e308,
    10**30,
    1e15,
    "lots",
    "",
    None,
    [],
    {},
    [1, 2],
    "x" * 5000,
]
"""Values no quantity may take (.inf and .nan are in the YAML-text cases); ``None`` only
where the field is required (see :data:`OPTIONAL`)."""

OPTIONAL = {"policy.budget_per_hour", "pools.0.current_nodes"}
"""Quantity fields where ``null`` is a valid value (none; unknown)."""

WORDS = {"pools.0.lead_time_s": {"auto"}}
"""Quantity fields that also take these exact strings (``lead_time_s: auto``, learned from
the cluster); any other text, ``Auto`` or ``" auto"`` included, stays invalid."""


def is_absurd(path: str, value: Any) -> bool:
    """Whether ``value`` is invalid for the field at ``path`` (the oracle of the random cases)."""
    if value is None:
        return path not in OPTIONAL
    return not (isinstance(value, str) and value in WORDS.get(path, set()))


def random_config_cases(count: int, seed: int = 0) -> Iterator[Case]:
    """``count`` cases: one quantity set to an absurd value (the error must name it)."""
    rng = random.Random(seed)
    for i in range(count):
        path = rng.choice(NUMERIC_FIELDS)
        value = rng.choice(ABSURD_NUMBERS)
        while not is_absurd(path, value):
            value = rng.choice(ABSURD_NUMBERS)
        yield absurd_case(path, value, f"random-{i}")


def absurd_case(path: str, value: Any, name: str) -> Case:
    data = base_config()
    _set(path, value)(data)
    return config_case(f"{name}:{path}={short(value)}", copy.deepcopy(data), path.split(".")[-1])


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 20 else text[:17] + "..."


# -- judging -------------------------------------------------------------------------


def _strict_json(text: str) -> Any:
    def refuse(token: str) -> Any:
        raise ValueError(f"non-finite number {token} in the plan")

    return json.loads(text, parse_constant=refuse)


def _scales_down(plan: Any) -> bool:
    actions = plan.get("actions", []) if isinstance(plan, dict) else []
    return any(isinstance(a, dict) and a.get("decision") == "scale-down" for a in actions)


def _changes(plan: Any) -> bool:
    actions = plan.get("actions", []) if isinstance(plan, dict) else []
    return any(isinstance(a, dict) and a.get("decision") != "no-op" for a in actions)


def stray_files(case: Case, left: set[str] | None) -> list[str]:
    """Files in the case's folder that neither the case nor its ``outputs`` account for."""
    if case.outputs is None or left is None:
        return []
    stray = []
    for path in sorted(left - set(case.files)):
        folders = [o for o in case.outputs if o.endswith("/") and path.startswith(o)]
        if path in case.outputs or (folders and not path.endswith("tiercast-plan.json")):
            continue
        stray.append(path)
    return stray


def left_in(folder: Any) -> set[str]:
    """Every file under ``folder`` (a :class:`pathlib.Path`), as ``/``-separated relative paths."""
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if not p.is_dir()}


def judge(
    case: Case,
    code: int | None,
    stderr: str,
    plan_text: str | None,
    left: set[str] | None = None,
) -> str:
    """``clean``, ``traceback``, ``wrong-success`` or ``hang`` for one outcome (see the module).

    ``left``: the files in the case's folder afterwards (:func:`left_in`), for ``outputs``.
    """
    if code is None:
        return "hang"
    lines = [line for line in stderr.splitlines() if line.strip()]
    # A final error line and a log line saying the same thing are two lines.
    errors = [line for line in lines if line.startswith("tiercast: ") or " ERROR " in line]
    if "Traceback" in stderr or code not in (0, 1, 2):
        return "traceback"
    if any(len(line) > MAX_LINE for line in lines):
        return "traceback"
    plan: Any = None
    if plan_text is not None:
        try:
            plan = _strict_json(plan_text)
        except ValueError:
            return "wrong-success"
    if stray_files(case, left):
        return "wrong-success"
    if case.expect == "error":
        if code == 0:
            return "wrong-success"
        if code == 2 and len(errors) == 1 and case.field.lower() in errors[0].lower():
            return "clean"
        return "traceback"
    if len(errors) > 1:
        return "traceback"
    if case.expect == "hold":
        if plan is not None and _scales_down(plan):
            return "wrong-success"
        return "clean" if code in (0, 1, 2) else "traceback"
    if case.expect == "held":
        if code == 0 or (plan is not None and _changes(plan)):
            return "wrong-success"
        return "clean" if code == 1 else "traceback"
    return "clean" if code == 0 else "traceback"


# -- #50: new inputs (node lists, mig-parted configs), NUL bytes, corrupt state, suspect
# duplicates and footprints -----------------------------------------------------------

INVENTORY = ["inventory", "--nodes", "nodes.json"]


def _node(**changes: Any) -> dict[str, Any]:
    node: dict[str, Any] = {
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"tiercast.io/pool": "h100"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": []},
    }
    for path, value in changes.items():
        target = node
        parts = path.split("__")
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = value
    return node


def _node_list(*nodes: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "List", "items": list(nodes)}).encode()


def _inventory_case(name: str, nodes: bytes, field_name: str, **kw: Any) -> Case:
    return Case(f"nodes/{name}", {"nodes.json": nodes}, list(INVENTORY), "error", field_name, **kw)


def _mig_case(name: str, content: bytes, field_name: str) -> Case:
    files = {"nodes.json": _node_list(_node()), "mig.yaml": content}
    argv = [*INVENTORY, "--mig-parted", "mig.yaml"]
    return Case(f"mig-parted/{name}", files, argv, "error", field_name)


MIG_OK = b"version: v1\nmig-configs:\n  all-1g:\n  - devices: all\n    mig-enabled: true\n"


def hand_input_cases() -> list[Case]:
    """#50 finding 5: malformed node lists and mig-parted configs, special files and NUL
    bytes are one line naming the file and the field, exit 2."""
    deep = b"[" * 100_000 + b"]" * 100_000
    cases = [
        _inventory_case("labels-a-list", _node_list(_node(metadata__labels=["a"])), "labels"),
        _inventory_case("label-value-int", _node_list(_node(metadata__labels={"x": 1})), "x"),
        _inventory_case("metadata-a-string", _node_list(_node(metadata="gpu-1")), "metadata"),
        _inventory_case("metadata-null", _node_list(_node(metadata=None)), "metadata"),
        _inventory_case("name-missing", _node_list(_node(metadata={"labels": {}})), "name"),
        _inventory_case("name-an-int", _node_list(_node(metadata__name=7)), "name"),
        _inventory_case("status-a-list", _node_list(_node(status=[])), "status"),
        _inventory_case("spec-a-string", _node_list(_node(spec="x")), "spec"),
        _inventory_case(
            "unschedulable-a-string", _node_list(_node(spec__unschedulable="yes")), "unschedulable"
        ),
        _inventory_case(
            "allocatable-a-list", _node_list(_node(status__allocatable=[1])), "allocatable"
        ),
        _inventory_case(
            "allocatable-a-float",
            _node_list(_node(status__allocatable={"nvidia.com/gpu": 1.5})),
            "allocatable",
        ),
        _inventory_case(
            "conditions-a-mapping", _node_list(_node(status__conditions={})), "conditions"
        ),
        _inventory_case(
            "condition-a-string", _node_list(_node(status__conditions=["Ready"])), "conditions"
        ),
        _inventory_case(
            "annotations-a-list", _node_list(_node(metadata__annotations=[1])), "annotations"
        ),
        _inventory_case("items-a-mapping", b'{"kind": "List", "items": {"a": 1}}', "items"),
        _inventory_case("items-a-string", b'{"kind": "List", "items": "x"}', "items"),
        _inventory_case("item-a-number", b'{"kind": "List", "items": [7]}', "items[0]"),
        _inventory_case("empty-list", b'{"kind": "List", "items": []}', "nodes"),
        _inventory_case("top-level-a-number", b"7", "nodes"),
        _inventory_case("empty-file", b"", "nodes"),
        _inventory_case("not-utf-8", b'\xff\xfe{"items": []}', "UTF-8"),
        _inventory_case("binary-garbage", bytes(range(256)) * 4, "nodes.json"),
        _inventory_case("json-nested-100000", deep, "nested"),
        _inventory_case("yaml-nested-5000", b"a: " + b"[" * 5000 + b"]" * 5000, "nested"),
        _inventory_case("yaml-block-nested", _block_nested(3000), "nested"),
        _inventory_case("alias-bomb", _alias_bomb(), "alias"),
        _inventory_case("unparseable-yaml", b"items: [\n", "line"),
        _inventory_case("python-tag", b"items: !!python/object/apply:os.system ['x']\n", "line"),
        _inventory_case("over-the-size-bound", b" " * (64 * 1024 * 1024 + 1), "bytes", slow=True),
        Case("nodes/dev-zero", {}, ["inventory", "--nodes", "/dev/zero"], "error", "device"),
        Case("nodes/a-folder", {}, ["inventory", "--nodes", "."], "error", "directory"),
        Case("nodes/missing", {}, list(INVENTORY), "error", "does not exist"),
        Case("nodes/fifo", {}, list(INVENTORY), "error", "FIFO", fifos=("nodes.json",)),
        _mig_case("unparseable-yaml", b"version: v1\nmig-configs: {a: [\n", "line"),
        _mig_case("not-utf-8", b"\xff\xfeversion: v1\n", "UTF-8"),
        _mig_case("configs-a-number", b"version: v1\nmig-configs:\n  a: 5\n", "mig-configs.a"),
        _mig_case("configs-a-list", b"version: v1\nmig-configs: [1]\n", "mig-configs"),
        _mig_case("no-configs", b"version: v1\n", "mig-configs"),
        _mig_case("mig-enabled-a-string", MIG_OK.replace(b"true", b"'yes'"), "mig-enabled"),
        _mig_case("devices-a-string", MIG_OK.replace(b"all\n", b"some\n"), "devices"),
        _mig_case(
            "mig-devices-a-list",
            MIG_OK + b"    mig-devices: [1g.10gb]\n",
            "mig-devices",
        ),
        _mig_case(
            "configmap-unparseable", b'data:\n  config.yaml: "mig-configs: {a: [\\n"\n', "line"
        ),
        _mig_case("configmap-config-a-list", b"data:\n  config.yaml: [1]\n", "config.yaml"),
        _mig_case("nested-5000", b"mig-configs: " + b"[" * 5000 + b"]" * 5000, "nested"),
        _mig_case("binary-garbage", bytes(range(256)) * 4, "mig.yaml"),
    ]
    cases.append(
        Case(
            "mig-parted/fifo",
            {"nodes.json": _node_list(_node())},
            [*INVENTORY, "--mig-parted", "mig.yaml"],
            "error",
            "FIFO",
            fifos=("mig.yaml",),
        )
    )
    for key in ("service.state_dir", "service.records_path", "model_store.path", "signals.0.file"):
        cases.append(config_case(f"nul-byte:{key}", mutated(key, "a\x00b"), key.split(".")[-1]))
    cases.append(config_case("nul-byte:key", mutated("pools.0.na\x00me", "x"), "NUL"))
    return cases


def _block_nested(depth: int) -> bytes:
    return ("a:\n" + "".join(" " * i + "- \n" for i in range(1, depth))).encode()


def _state_case(name: str, path: str, content: bytes) -> Case:
    """A fresh dry run whose model store holds a corrupt state file: the file is set aside
    and the cycle plans (exit 0), this run and the next."""
    made = config_case(f"state/{name}", fresh_config(), "", expect="ok")
    made.files["rps.csv"] = history_csv(days=3, step_s=300)
    made.files[path] = content
    return made


def state_cases() -> list[Case]:
    """#50 finding 10: state files that failed every cycle until someone deleted them."""
    deep = b"[" * 100_000 + b"]" * 100_000
    entry = {
        "origin": "2026-11-02T23:55:00",
        "estimator": "seasonal_naive_1d",
        "start": "2026-11-03T00:00:00",
        "step_s": 300.0,
        "median": [1.0],
    }

    def cache(**changes: Any) -> bytes:
        return json.dumps({"format": 1, "entries": {"k": {**entry, **changes}}}).encode()

    growth = "models/growth-backtests.json"
    drift = "models/drift-state.json"
    return [
        _state_case("growth-cache-nested", growth, b'{"format": 1, "entries": ' + deep + b"}"),
        _state_case("growth-cache-offset-origin", growth, cache(origin="2026-11-02T23:55+05:00")),
        _state_case("growth-cache-bad-origin", growth, cache(origin="yesterday")),
        _state_case("growth-cache-huge-step", growth, cache(step_s=1e20)),
        _state_case("growth-cache-binary", growth, bytes(range(256)) * 4),
        _state_case("drift-state-bad-time", drift, b'{"refitted_at": {"rps": "soon"}}'),
    ]


def _prometheus_body(now: float, copies: list[float]) -> bytes:
    """Three days at 5 minutes ending now, one series per value in ``copies``, all with
    the same labels (the first keeps its level; the others read their own)."""
    start = int(now // 300 * 300) - 3 * 86400
    result = []
    for level in copies:
        values = [
            [start + i * 300, f"{level + 20 * math.sin(2 * math.pi * (i % 288) / 288):.3f}"]
            for i in range(3 * 288 + 1)
        ]
        result.append({"metric": {"pod": "chat-0"}, "values": values})
    return json.dumps(
        {"status": "success", "data": {"resultType": "matrix", "result": result}}
    ).encode()


def _prometheus_config(current_nodes: int = 12) -> dict[str, Any]:
    data = fresh_config()
    data["signals"] = [{"name": "rps", "query": "sum by (pod) (rps)", "step_s": 300}]
    data["prometheus"] = {"url": "@PROMETHEUS@", "allow_insecure": True}
    data["pools"][0]["current_nodes"] = current_nodes
    return data


def suspect_input_cases() -> list[Case]:
    """#50 findings 6 and 8: duplicate label sets with different values and footprints far
    below what a replica uses are suspect data: held (exit 1), never a scale-down."""
    duplicate = config_case("duplicate-label-sets", _prometheus_config(), "", expect="held")
    duplicate.files.pop("rps.csv")
    duplicate.prometheus = lambda now: _prometheus_body(now, [60.0, 0.0])
    agree = config_case("duplicate-label-sets-equal", _prometheus_config(2), "", expect="ok")
    agree.files.pop("rps.csv")
    agree.prometheus = lambda now: _prometheus_body(now, [60.0, 60.0])
    cases = [duplicate, agree]
    for name, mem, util in (
        ("footprint-0.05GB-0pct", 0.05, 0.0),
        ("footprint-0.1GB", 0.1, 30.0),
        ("footprint-0.5pct", 20.0, 0.5),
    ):
        data = fresh_config()
        data["signals"] += [
            {"name": "mem", "file": "mem.csv", "step_s": 300},
            {"name": "util", "file": "util.csv", "step_s": 300},
        ]
        data["workloads"][0].update(memory_signal="mem", utilization_signal="util")
        data["pools"][0]["current_nodes"] = 12
        made = config_case(f"suspect/{name}", data, "", expect="held")
        made.files["rps.csv"] = history_csv(days=3, step_s=300, level=600.0)
        made.files["mem.csv"] = _flat_csv(mem)
        made.files["util.csv"] = _flat_csv(util)
        cases.append(made)
    return cases


def _flat_csv(level: float) -> bytes:
    """The fresh 5-minute history's stamps at one value throughout."""
    rows = history_csv(days=3, step_s=300).decode().strip().splitlines()
    body = [rows[0]] + [f"{row.split(',')[0]},{level}" for row in rows[1:]]
    return ("\n".join(body) + "\n").encode()


def serve_prometheus(answer: Callable[[float], bytes]) -> Any:
    """A local HTTP server answering every request with ``answer(time.time())`` (a
    context manager giving its URL)."""
    import contextlib
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = answer(time.time())
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, format: str, *args: Any) -> None:
            pass

    @contextlib.contextmanager
    def running() -> Iterator[str]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()

    return running()


def place_files(case: Case, folder: Any, url: str | None = None) -> None:
    """Write ``case``'s files (and make its FIFOs) in ``folder`` (a :class:`pathlib.Path`),
    with ``url`` for ``@PROMETHEUS@``."""
    import os

    for name, content in case.files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if url is not None:
            content = content.replace(b"@PROMETHEUS@", url.encode())
        target.write_bytes(content)
    for name in case.folders:
        (folder / name).mkdir(parents=True, exist_ok=True)
    for name, target in case.links:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, folder / name)
    for name in case.fifos:
        os.mkfifo(folder / name)


def special_output_cases() -> list[Case]:
    """#50 finding 9: a FIFO with no reader, a folder, a full device or a planted link at
    every output is one line naming the flag (exit 2), never a hang or a traceback; a
    chart written at the name given. ``slow``: the failure comes after a replay."""
    h = {"h.csv": history_csv(days=3, step_s=300)}
    plan = ["plan", "--history", "h.csv"]
    sim = ["simulate", "--history", "h.csv", "--method", "seasonal_naive_1d"]
    # A replay needs a day of training before its test period (4 days for a short series).
    long = {"h.csv": history_csv(days=6, step_s=300)}
    replay = [*sim, "--policies", "reactive,predictive", "--reforecast", "6h"]
    replay += ["--growth-backtest", "0"]
    full = Path("/dev/full").is_char_device()
    served = fresh_config()
    served["policy"]["staleness_limit_s"] = 3600
    served.setdefault("service", {})["plan_out"] = "served.fifo"
    cases = [
        Case(
            "out/plan-out-fifo",
            h,
            [*plan, "--plan-out", "p.fifo"],
            "error",
            "--plan-out",
            fifos=("p.fifo",),
        ),
        Case(
            "out/plan-out-folder",
            h,
            [*plan, "--plan-out", "pdir"],
            "error",
            "--plan-out",
            folders=("pdir",),
        ),
        Case(
            "out/run-plan-out-fifo",
            h,
            ["run", "--dry-run", "--history", "h.csv", "--plan-out", "p.fifo"],
            "error",
            "--plan-out",
            fifos=("p.fifo",),
        ),
        Case(
            "out/default-plan-file-planted-link",
            h,
            [*plan, "--state-dir", "st"],
            "error",
            "default plan file",
            links=(("st/tiercast-plan.json", "../elsewhere.json"),),
        ),
        Case(
            "out/records-dangling-link",
            h,
            [
                "run",
                "--dry-run",
                "--history",
                "h.csv",
                "--state-dir",
                "st",
                "--plan-out",
                "plan.json",
            ],
            "hold",
            links=(("st/tiercast-records.sqlite", "../gone/records.sqlite"),),
        ),
        Case(
            "out/service-plan-out-fifo",
            {"config.yaml": dump_yaml(served), "rps.csv": history_csv(days=3, step_s=300)},
            ["run", "--dry-run", "--config", "config.yaml"],
            "error",
            "service.plan_out",
            fifos=("served.fifo",),
        ),
        Case(
            "out/out-file-fifo",
            h,
            ["forecast", "--history", "h.csv", "--out-file", "f.fifo"],
            "error",
            "--out-file",
            fifos=("f.fifo",),
        ),
        Case(
            "out/out-file-folder",
            h,
            ["forecast", "--history", "h.csv", "--out-file", "fdir"],
            "error",
            "--out-file",
            folders=("fdir",),
        ),
        Case(
            "out/finance-html-fifo",
            h,
            [*plan, "--out-dir", "fin"],
            "error",
            "--out-dir",
            folders=("fin",),
            fifos=("fin/finance.html",),
        ),
        Case(
            "out/report-html-folder",
            h,
            ["report", "--history", "h.csv", "--out-dir", "rep", "--backtest-origins", "0"],
            "error",
            "--out-dir",
            folders=("rep/report.html",),
        ),
        Case(
            "out/forecast-cache-is-a-file",
            {**h, "fc": b"a file"},
            [*sim, "--forecast-cache", "fc"],
            "error",
            "--forecast-cache",
        ),
        Case(
            "out/timeline-out-folder",
            h,
            [*sim, "--timeline-out", "tdir"],
            "error",
            "--timeline-out",
            folders=("tdir",),
        ),
        Case(
            "out/timeline-out-fifo",
            long,
            [*replay, "--timeline-out", "t.fifo", "--chart-out", ""],
            "error",
            "--timeline-out",
            fifos=("t.fifo",),
            slow=True,
        ),
        Case(
            "out/chart-out-without-png",
            long,
            [*replay, "--timeline-out", "", "--chart-out", "chart"],
            "ok",
            outputs=("chart",),
            slow=True,
        ),
    ]
    if full:
        cases += [
            Case(
                "out/plan-out-dev-full",
                h,
                [*plan, "--plan-out", "/dev/full"],
                "error",
                "--plan-out",
            ),
            Case(
                "out/out-file-dev-full",
                h,
                ["forecast", "--history", "h.csv", "--out-file", "/dev/full"],
                "error",
                "--out-file",
            ),
            Case(
                "out/timeline-out-dev-full",
                long,
                [*replay, "--timeline-out", "/dev/full", "--chart-out", ""],
                "error",
                "--timeline-out",
                slow=True,
            ),
        ]
    return cases
