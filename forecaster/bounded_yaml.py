"""A YAML loader that bounds nesting and ``*alias`` references as it composes.

Both YAML readers use it: :mod:`forecaster.documents` (inputs such as node lists) and the
config parser in ``scaler.config``. Each sets its own bounds and says what to raise, so a
file nested too deep or a billion-laughs file stops at the bound, never at Python's
recursion limit. It imports only ``yaml``: the config parser stays light to import.
"""

from __future__ import annotations

from typing import Any

import yaml


class BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that stops past :attr:`max_depth` levels of nesting or
    :attr:`max_aliases` alias references, raising what :meth:`over_limit` gives."""

    max_depth: int
    max_aliases: int

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0

    def over_limit(self, problem: str) -> Exception:
        """The error to raise for ``problem`` (e.g. "nested deeper than 32 levels")."""
        raise NotImplementedError

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > self.max_aliases:
                raise self.over_limit(f"more than {self.max_aliases} *alias references")
        self._depth += 1
        try:
            if self._depth > self.max_depth:
                raise self.over_limit(f"nested deeper than {self.max_depth} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
