"""Model-store artifacts in a format that cannot execute code when read.

A fitted estimator is written as one ``.npz`` file: its numeric arrays saved
by numpy and read back with ``allow_pickle=False``, plus a JSON description
of the object graph (plain values, tagged timestamps, durations, tuples,
series and nested estimators). Reading it builds objects only of classes that
are tiercast estimators already defined in this process (``cls.__new__`` and
the saved attributes: no ``__init__``, no ``__setstate__``, no import named by
the file except ``forecaster.*`` modules), so a crafted file can at worst
describe a wrong model, never run code.

Prophet models go through Prophet's own JSON serializer. What has no
code-free form (scikit-learn's gradient boosting trees) is pickled only when a
signing key is configured, and each such blob carries an HMAC-SHA256 over the
artifact's key and the blob; on reading, a blob whose HMAC does not verify,
or any blob when no key is configured, is refused before ``pickle`` sees it
(:class:`UntrustedArtifact`), and the store refits.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib
import io
import json
import logging
import math
import multiprocessing
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.files import read_bounded

log = logging.getLogger(__name__)

SIGNING_KEY_ENV = "TIERCAST_MODEL_SIGNING_KEY_FILE"
"""Environment variable naming the signing key file when the config names none."""

MAX_STATE_BYTES = 64 * 1024 * 1024
"""A state description larger than this is refused (no real model needs it)."""

MAX_DEPTH = 64
"""Deepest nesting of the object graph that is read back."""


class ArtifactError(Exception):
    """The artifact cannot be read back as a model (the store refits)."""


class UntrustedArtifact(ArtifactError):
    """The artifact holds pickled data that is not signed with this store's key."""


class Unpersistable(ArtifactError):
    """The model needs pickled data and no signing key is configured."""


MAX_SIGNING_KEY_BYTES = 64 * 1024
"""Largest signing-key file read (a key is a few dozen bytes; docs/operations.md)."""


_WARNED_MISSING: set[str] = set()
"""Key files named by the environment and found missing, warned about in this process."""


def load_signing_key(path: str | Path | None) -> bytes | None:
    """The HMAC key from ``path`` (or ``$TIERCAST_MODEL_SIGNING_KEY_FILE``); None when neither is set.

    Raises BadInputError (one line) when a named file is missing, is shorter than 16
    bytes, or others can read it (:func:`_refuse_open_permissions`). A file that the
    environment names and that does not exist (an optional Secret not created yet) is not
    an error: it is warned about once per process, and there is no key.
    """
    name = path if path else os.environ.get(SIGNING_KEY_ENV)
    if not name:
        return None
    if not path and not os.path.lexists(name):
        _warn_missing(str(name))
        return None
    try:
        # A key is a few dozen bytes: a device or a huge file is refused before reading.
        key = read_bounded(name, MAX_SIGNING_KEY_BYTES, "model_store.signing_key_file").strip()
        _refuse_open_permissions(name, os.stat(name))
    except OSError as exc:
        raise BadInputError(
            f"model_store.signing_key_file {str(name)[:200]!r} cannot be read ({exc.strerror or exc})"
        ) from exc
    if len(key) < 16:
        raise BadInputError(
            f"model_store.signing_key_file {str(name)[:200]!r} holds {len(key)} bytes; expected at least 16"
        )
    return key


def _refuse_open_permissions(name: str | Path, info: os.stat_result) -> None:
    """Refuse a key file others can read, as ssh refuses an unprotected private key.

    Any permission for "others" is refused. Group permissions are refused on a file the
    running user owns (``chmod 600`` is the fix), but not on one another user owns: that
    is how a non-root pod reads a Kubernetes Secret, owned by root and made readable to
    the pod's ``fsGroup`` alone (mode 0440 from the volume's ``defaultMode: 0400``).
    """
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o007 or (mode & 0o070 and info.st_uid == os.geteuid()):
        raise BadInputError(
            f"model_store.signing_key_file {str(name)[:200]!r} has mode {mode:04o}, open "
            "to other users; chmod 600 it (a Kubernetes Secret volume: defaultMode 0400)"
        )


def _warn_missing(name: str) -> None:
    """One warning per process for a missing key file named by the environment.

    Worker processes of a parallel forecast read the key too; only the process that runs
    the cycle warns, so a run says it once.
    """
    if name in _WARNED_MISSING or multiprocessing.parent_process() is not None:
        return
    _WARNED_MISSING.add(name)
    log.warning(
        "model store: no signing key: $%s names %s, which does not exist (its Secret not "
        "created yet?); models with pickled parts (gbm) are refitted every cycle and never "
        "stored (docs/install.md, the model signing key)",
        SIGNING_KEY_ENV,
        name[:200],
    )


def _mac(key: bytes, scope: str, blob: bytes) -> str:
    return hmac.new(
        key, b"tiercast-model\0" + scope.encode() + b"\0" + blob, hashlib.sha256
    ).hexdigest()


def _class_path(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _resolve_class(path: Any) -> type[Any]:
    """A tiercast estimator class by ``module:qualname``, never importing outside ``forecaster``."""
    from forecaster.estimators import BaseEstimator

    if not isinstance(path, str) or path.count(":") != 1:
        raise ArtifactError(f"class name {str(path)[:80]!r} is not module:qualname")
    module_name, qualname = path.split(":")
    module = sys.modules.get(module_name)
    if module is None:
        if not (module_name == "forecaster" or module_name.startswith("forecaster.")):
            raise UntrustedArtifact(f"class {path[:80]!r} is not a loaded tiercast estimator")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ArtifactError(f"class {path[:80]!r} cannot be found") from exc
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not (isinstance(obj, type) and issubclass(obj, BaseEstimator)):
        raise UntrustedArtifact(f"class {path[:80]!r} is not a tiercast estimator")
    return obj


class _Writer:
    def __init__(self, scope: str, key: bytes | None) -> None:
        self.scope = scope
        self.key = key
        self.arrays: dict[str, np.ndarray] = {}

    def _array(self, value: np.ndarray) -> dict[str, Any]:
        if value.dtype.kind not in "biufcMm" or value.dtype.hasobject:
            return self._pickled(value)
        name = f"a{len(self.arrays)}"
        self.arrays[name] = np.ascontiguousarray(value)
        return {"$t": "arr", "k": name}

    def _pickled(self, value: Any) -> dict[str, Any]:
        if self.key is None:
            raise Unpersistable(
                f"{type(value).__name__} has no code-free form; set model_store.signing_key_file to store it"
            )
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        name = f"p{len(self.arrays)}"
        self.arrays[name] = np.frombuffer(blob, dtype=np.uint8)
        return {"$t": "pickle", "k": name, "hmac": _mac(self.key, self.scope + "\0" + name, blob)}

    def encode(self, value: Any, depth: int = 0) -> Any:
        from forecaster.estimators import BaseEstimator

        if depth > MAX_DEPTH:
            raise ArtifactError("model object graph is nested too deep")
        if value is None or isinstance(value, bool | str):
            return value
        if isinstance(value, int | np.integer) and not isinstance(value, np.bool_):
            return int(value)
        if isinstance(value, float | np.floating):
            v = float(value)
            return v if math.isfinite(v) else {"$t": "float", "v": repr(v)}
        if isinstance(value, np.bool_):
            return bool(value)
        if isinstance(value, np.ndarray):
            return self._array(value)
        if isinstance(value, pd.Timestamp):
            return {"$t": "ts", "v": value.isoformat()}
        if isinstance(value, pd.Timedelta):
            return {"$t": "td", "ns": int(value.value)}
        if isinstance(value, pd.Series) and isinstance(value.index, pd.DatetimeIndex):
            return {
                "$t": "series",
                "name": self.encode(value.name, depth + 1),
                "tz": str(value.index.tz) if value.index.tz is not None else None,
                "index_name": self.encode(value.index.name, depth + 1),
                "index": self._array(_naive_utc(value.index).to_numpy()),
                "values": self._array(value.to_numpy()),
            }
        if isinstance(value, list):
            return [self.encode(v, depth + 1) for v in value]
        if isinstance(value, tuple):
            return {"$t": "tuple", "v": [self.encode(v, depth + 1) for v in value]}
        if isinstance(value, dict):
            return {
                "$t": "dict",
                "v": [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)] for k, v in value.items()
                ],
            }
        if isinstance(value, BaseEstimator):
            state = {str(k): self.encode(v, depth + 1) for k, v in value.artifact_state().items()}
            return {"$t": "est", "cls": _class_path(type(value)), "d": state}
        if type(value).__module__.startswith("prophet"):
            from prophet.serialize import model_to_json

            return {"$t": "prophet", "v": model_to_json(value)}
        return self._pickled(value)


class _Reader:
    def __init__(self, scope: str, key: bytes | None, arrays: Any) -> None:
        self.scope = scope
        self.key = key
        self.arrays = arrays

    def _array(self, name: Any) -> np.ndarray:
        if not isinstance(name, str) or name not in self.arrays:
            raise ArtifactError(f"array {str(name)[:40]!r} is missing")
        return np.asarray(self.arrays[name])

    def decode(self, value: Any, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise ArtifactError("model object graph is nested too deep")
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.decode(v, depth + 1) for v in value]
        if not isinstance(value, dict):
            raise ArtifactError(f"unexpected {type(value).__name__} in the model description")
        tag = value.get("$t")
        if tag == "float":
            if value.get("v") not in ("nan", "inf", "-inf"):
                raise ArtifactError("a non-finite float is not nan, inf or -inf")
            return float(value["v"])
        if tag == "arr":
            return self._array(value.get("k"))
        if tag == "ts":
            return pd.Timestamp(str(value.get("v")))
        if tag == "td":
            ns = value.get("ns")
            if not isinstance(ns, int) or isinstance(ns, bool):
                raise ArtifactError("a duration is not an integer of nanoseconds")
            return pd.Timedelta(ns, unit="ns")
        if tag == "series":
            stamps = np.asarray(self.decode(value.get("index"), depth + 1))
            if stamps.dtype.kind != "M":
                raise ArtifactError("a stored series index is not datetimes")
            index = pd.DatetimeIndex(stamps, name=self.decode(value.get("index_name"), depth + 1))
            tz = value.get("tz")
            if tz is not None:
                index = index.tz_localize("UTC").tz_convert(str(tz))
            values = np.asarray(self.decode(value.get("values"), depth + 1))
            if len(values) != len(index):
                raise ArtifactError("a stored series has ragged index and values")
            return pd.Series(values, index=index, name=self.decode(value.get("name"), depth + 1))
        if tag == "tuple":
            return tuple(self.decode(v, depth + 1) for v in _list(value.get("v")))
        if tag == "dict":
            out = {}
            for pair in _list(value.get("v")):
                if not isinstance(pair, list) or len(pair) != 2:
                    raise ArtifactError("a stored mapping entry is not a key/value pair")
                key = self.decode(pair[0], depth + 1)
                if not isinstance(key, str | int | float | bool | tuple) and key is not None:
                    raise ArtifactError("a stored mapping key is not a plain value")
                out[key] = self.decode(pair[1], depth + 1)
            return out
        if tag == "est":
            cls = _resolve_class(value.get("cls"))
            state = value.get("d")
            if not isinstance(state, dict):
                raise ArtifactError("an estimator's state is not a mapping")
            obj: Any = object.__new__(cls)  # no __init__, no __setstate__
            for k, v in state.items():
                if not isinstance(k, str) or k.startswith("__"):
                    raise ArtifactError(f"attribute name {str(k)[:40]!r} is not allowed")
                obj.__dict__[k] = self.decode(v, depth + 1)
            try:
                obj.restore_artifact()  # tiercast's own method, from stored values only
            except (ValueError, TypeError, KeyError, AttributeError, np.linalg.LinAlgError) as exc:
                raise ArtifactError(
                    f"a stored {cls.__name__} cannot be rebuilt ({type(exc).__name__})"
                ) from exc
            return obj
        if tag == "prophet":
            from prophet.serialize import model_from_json

            text = value.get("v")
            if not isinstance(text, str):
                raise ArtifactError("a stored Prophet model is not JSON text")
            return model_from_json(text)
        if tag == "pickle":
            name = value.get("k")
            blob = self._array(name).tobytes()
            mac = value.get("hmac")
            if self.key is None:
                raise UntrustedArtifact("it holds pickled data and no signing key is configured")
            expected = _mac(self.key, self.scope + "\0" + str(name), blob)
            if not isinstance(mac, str) or not hmac.compare_digest(mac, expected):
                raise UntrustedArtifact("its pickled data does not carry this store's signature")
            return pickle.loads(blob)  # authenticated: written by this store with its key
        raise ArtifactError(f"unknown tag {str(tag)[:40]!r} in the model description")


def _naive_utc(index: pd.DatetimeIndex) -> pd.DatetimeIndex:
    return index.tz_convert("UTC").tz_localize(None) if index.tz is not None else index


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ArtifactError("expected a list in the model description")
    return value


def dumps(payload: dict[str, Any], scope: str, key: bytes | None) -> bytes:
    """The ``.npz`` bytes for ``payload`` (a mapping of estimators, series and plain values).

    ``scope`` (the store key) is bound into every signature, so a signed blob
    cannot be moved to another series' artifact. Raises :class:`Unpersistable`
    when a part needs pickling and ``key`` is None.
    """
    writer = _Writer(scope, key)
    state = writer.encode(payload)
    text = json.dumps(state, allow_nan=False, separators=(",", ":")).encode()
    buffer = io.BytesIO()
    arrays: dict[str, Any] = {"__state__": np.frombuffer(text, dtype=np.uint8), **writer.arrays}
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def loads(path: Path, scope: str, key: bytes | None) -> Any:
    """The payload of the ``.npz`` at ``path``; raises :class:`ArtifactError` on anything untrusted."""
    try:
        with path.open("rb") as handle:
            if handle.read(4) != b"PK\x03\x04":  # only an .npz archive, never a bare pickle
                raise ArtifactError("not an .npz archive")
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except ValueError as exc:
        if "Object arrays" in str(exc):
            raise UntrustedArtifact("it holds an object array, which only pickle can read") from exc
        raise ArtifactError(f"not a readable array archive ({type(exc).__name__})") from exc
    except (OSError, EOFError, KeyError) as exc:
        raise ArtifactError(f"not a readable array archive ({type(exc).__name__})") from exc
    raw = arrays.pop("__state__", None)
    if raw is None or raw.dtype != np.uint8 or raw.ndim != 1 or raw.size > MAX_STATE_BYTES:
        raise ArtifactError("the model description is missing or malformed")
    try:
        state = json.loads(raw.tobytes())
    except (ValueError, RecursionError) as exc:
        raise ArtifactError("the model description is not JSON") from exc
    try:
        return _Reader(scope, key, arrays).decode(state)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise ArtifactError(f"the model description is malformed ({type(exc).__name__})") from exc
