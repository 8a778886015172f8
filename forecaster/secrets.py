"""Credential values read from secret files, so every redaction can mask them exactly.

Pattern-based masking (``token=...``, ``Bearer ...``, ``Basic ...``, ``user:pass@`` in a
URL) misses a secret that a server echoes back in an unexpected shape; the values
themselves do not change shape. Whoever reads or derives a secret (the Prometheus source:
its token, its password, the ``Basic`` header made of them, a password in its URL) calls
:func:`remember`; :func:`redact`
(logs through ``scaler.service.telemetry.RedactSecrets``, the CLI's final error, run records,
``tiercast history``) replaces each remembered value and anything that looks like a
credential with ``***``.
"""

from __future__ import annotations

import logging
import re
import threading

MIN_LENGTH = 4
"""Shorter values are not remembered: masking them would garble ordinary text."""

_VALUES: set[str] = set()
_LOCK = threading.Lock()


def remember(value: str) -> None:
    """Mask ``value`` (and its stripped form) in everything redacted from now on."""
    with _LOCK:
        for v in (value, value.strip()):
            if len(v) >= MIN_LENGTH:
                _VALUES.add(v)


def mask(text: str) -> str:
    """``text`` with every remembered secret value replaced by ``***`` (longest first)."""
    with _LOCK:
        values = sorted(_VALUES, key=len, reverse=True)
    for v in values:
        if v in text:
            text = text.replace(v, "***")
    return text


_SECRET = re.compile(
    r"(?i)(authorization|bearer|token|password|passwd|secret|api[_-]?key)"
    r"(\s*[:=]\s*|\s+)"
    r"(bearer\s+|basic\s+)?"
    r"[^\s,;'\"&}]+"
)
# Userinfo in a URL: everything between "scheme://" and the last "@" of the authority
# (a password with an unencoded "@" included), stopping at a "/", "?", "#", space or quote,
# so an e-mail address in free text or an "@" in a URL's path is left alone.
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)(?:[^/?#\s@\"'<>\\]+@)+")
# "Basic <base64(user:password)>" wherever it shows up (an echoed header, a quoted one).
_BASIC = re.compile(r"(?<![\w-])((?i:basic)\s+)([A-Za-z0-9+/]{8,}={0,2})(?![A-Za-z0-9+/=])")


def _looks_like_base64(token: str) -> bool:
    """Whether ``token`` after the word Basic is a credential rather than an English word.

    HTTP basic credentials are padded base64 (a multiple of 4 characters) and nearly
    always hold a digit, ``+``, ``/``, ``=`` or a capital after the first letter; a word
    such as "authentication" or "Settings" has none of these or the wrong length.
    """
    if len(token) % 4:
        return False
    return any(c.isdigit() or c in "+/=" or c.isupper() for c in token[1:])


def _mask_basic(match: re.Match[str]) -> str:
    return f"{match.group(1)}***" if _looks_like_base64(match.group(2)) else match.group(0)


def redact(text: str) -> str:
    """Mask what looks like a credential and every secret value remembered, whatever its shape.

    The shapes: ``token=...``, ``password: ...``, ``Authorization: ...``, ``Bearer ...``,
    ``Basic <base64>`` (kept as ``Basic ***``) and the userinfo of a URL
    (``https://user:pass@host/x`` becomes ``https://***@host/x``: scheme and host kept).
    """
    text = mask(text)
    text = _URL_CREDENTIALS.sub(r"\1***@", text)
    text = _BASIC.sub(_mask_basic, text)
    return _SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}{m.group(3) or ''}***", text)


class RedactSecrets(logging.Filter):
    """Rewrites a record's message with credentials masked (both log formats)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if record.exc_info and record.exc_info[1] is not None:
            # The traceback text is formatted later from exc_info; keep the masked
            # one-line form instead so no secret in an exception reaches the log.
            exc = record.exc_info[1]
            masked += f" ({type(exc).__name__}: {redact(str(exc))})"
            record.exc_info = None
            record.exc_text = None
        record.msg, record.args = masked, None
        return True
