"""The provider as the cycle job sees it: leadership, shutdown and retries around every action.

:class:`GuardedProvider` wraps the real provider. Before every action it checks
leadership and shutdown; it retries temporary API failures only after re-reading the
pool (an action that did land is not sent twice), and turns errors into ``failed``
results rather than half-done cycles. A provider with ``stop_waits_on`` is given the
shutdown flag, so its waits inside one action end at SIGTERM as well. It offers the
wrapped provider's optional capabilities and no others (``capabilities()``,
:mod:`scaler.actuation.protocol`), found once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from forecaster.errors import BadInputError, TemporaryError
from forecaster.retrying import Attempts, Retry, RetryPolicy
from scaler.actuation.protocol import (
    ActionResult,
    Capabilities,
    CapacityProvider,
    capabilities_of,
)
from scaler.plans import Action
from scaler.records import LeadTimeObservation
from scaler.service.runs import Stop
from scaler.service.telemetry import Telemetry

log = logging.getLogger(__name__)

RETRY_BACKOFF_S = (1.0, 4.0, 10.0)
"""Waits before the 1st, 2nd, 3rd+ retry of an action, unless the error names a delay."""
MAX_RETRY_WAIT_S = 30.0
"""The longest wait before a retry of an action, a delay the error names included."""


class GuardedProvider:
    """Wraps the real provider: leadership, shutdown and retries around every ``apply``."""

    def __init__(
        self,
        provider: CapacityProvider,
        act: Callable[[], bool],
        stop: Stop,
        telemetry: Telemetry,
        retries: int = 2,
        sleep: Callable[[float], Any] | None = None,
    ) -> None:
        self.provider = provider
        self.act = act
        self.stop = stop
        self.telemetry = telemetry
        self.retries = retries
        self._sleep = sleep or (lambda s: stop.event.wait(s))
        self.stage = "plan"
        self.abandoned = False
        self.inner = capabilities_of(provider)
        """What the wrapped provider can do beyond the required (checked once)."""
        # Waits inside one action (a MIG relayout's drain and MIG manager) end at shutdown too.
        if self.inner.stop_waits is not None:
            self.inner.stop_waits.stop_waits_on(stop.event)

    def capabilities(self) -> Capabilities:
        """The wrapped provider's optional capabilities, each read through this guard (its
        stage says what the cycle waits on); Events and stop-waits go to it directly."""
        inner = self.inner
        return Capabilities(
            mig=self if inner.mig is not None else None,
            sharing=self if inner.sharing is not None else None,
            kueue=self if inner.kueue is not None else None,
            lead_times=self if inner.lead_times is not None else None,
            events=inner.events,
            stop_waits=inner.stop_waits,
        )

    def inventory(self) -> dict[str, int]:
        stage, self.stage = self.stage, "inventory"
        inv = self.provider.inventory()
        self.stage = stage
        return inv

    def mig_inventory(self) -> tuple[Any, Any]:
        """The wrapped provider's MIG nodes and mig-parted entries, when it can read them."""
        if self.inner.mig is None:
            return None, None
        stage, self.stage = self.stage, "inventory"
        out = self.inner.mig.mig_inventory()
        self.stage = stage
        return out

    def sharing_inventory(self) -> tuple[Any, str | None]:
        """The wrapped provider's nodes for the sharing plan, when it can read them
        (``(None, None)``: it reads none; the plan then takes the configured nodes)."""
        if self.inner.sharing is None:
            return None, None
        stage, self.stage = self.stage, "inventory"
        out = self.inner.sharing.sharing_inventory()
        self.stage = stage
        return out

    def kueue_action(self, section: dict[str, Any], at: str) -> Action | None:
        """The wrapped provider's Kueue quota action, when it can read the ClusterQueue."""
        if self.inner.kueue is None:
            return None
        stage, self.stage = self.stage, "inventory"
        try:
            action: Action | None = self.inner.kueue.kueue_action(section, at)
            return action
        finally:
            self.stage = stage

    def lead_time_observations(self, pools: Sequence[str]) -> list[LeadTimeObservation]:
        """The wrapped provider's node starts of ``pools``, when it can see a cluster."""
        if self.inner.lead_times is None:
            return []
        stage, self.stage = self.stage, "inventory"
        try:
            return list(self.inner.lead_times.lead_time_observations(pools))
        finally:
            self.stage = stage

    def apply(self, action: Action) -> ActionResult:
        """Apply ``action`` when leading and not stopping, retrying temporary API errors.

        A retry comes only after the wait, while still leading and not stopping, and for a
        node count only when the pool is not already at the target (the failed call may
        have landed). An error a retry would repeat, or any other, fails the action.
        """
        self.stage = "act"
        if self.stop.is_set():
            self.abandoned = True
            return ActionResult(action, "skipped", "shutting down: not applied")
        if not self.act():
            what = (
                f"scale {action.pool} to {action.target_nodes}"
                if action.kind == "nodes"
                else f"change {action.pool}"
            )
            return ActionResult(action, "recorded", f"not the leader or dry-run: would {what}")
        tries = Attempts(self._retry_policy(action))
        for attempt in tries:
            if isinstance(tries.last_error, TemporaryError):
                settled = self._settled_before_retry(action, tries.last_error)
                if settled is not None:
                    return settled
            with attempt:
                result = self._apply_once(action)
                if self.stop.is_set():
                    # SIGTERM while acting: the action's own waits ended early.
                    self.abandoned = True
                return result
        return ActionResult(
            action, "failed", f"gave up after {self.retries + 1} attempts: {tries.last_error}"
        )

    def _retry_policy(self, action: Action) -> RetryPolicy:
        def log_retry(retry: Retry) -> None:
            log.warning("%s: %s; retrying in %.1f s", action.pool, retry.error, retry.delay_s)

        return RetryPolicy(
            self.retries,
            # Uncapped here so that the log line names the delay the error asked for; the
            # wait itself is capped at MAX_RETRY_WAIT_S.
            max_s=math.inf,
            sleep=lambda seconds: self._sleep(min(seconds, MAX_RETRY_WAIT_S)),
            schedule=RETRY_BACKOFF_S,
            retryable=lambda error: isinstance(error, TemporaryError),
            delay_hint=lambda error: getattr(error, "delay_s", None) or None,
            before_sleep=log_retry,
        )

    def _apply_once(self, action: Action) -> ActionResult:
        """One try: the provider's result, a failed result, or a TemporaryError to retry."""
        try:
            return self.provider.apply(action)
        except TemporaryError as exc:
            self.telemetry.error(exc, "act")
            raise
        except BadInputError as exc:
            # The API rejected the change itself (422, 403): a retry would repeat it.
            self.telemetry.error(exc, "act")
            return ActionResult(action, "failed", str(exc))
        except Exception as exc:
            self.telemetry.error(exc, "act")
            log.error("%s: unexpected %s: %s", action.pool, type(exc).__name__, exc)
            return ActionResult(action, "failed", f"{type(exc).__name__}: {exc}")

    def _settled_before_retry(self, action: Action, error: TemporaryError) -> ActionResult | None:
        """After the wait: a result that makes the retry needless, or None to retry."""
        if self.stop.is_set() or not self.act():
            self.abandoned = self.stop.is_set()
            return ActionResult(action, "skipped", f"stopped before retrying: {error}")
        if action.kind != "nodes":
            return None
        # The failed call may have landed (a timeout after the write): re-read the pool,
        # and do not send the change again if it is already there.
        try:
            now_nodes = self.provider.inventory().get(action.pool)
        except TemporaryError as inv_exc:
            self.telemetry.error(inv_exc, "inventory")
            return None
        if now_nodes == action.target_nodes:
            return ActionResult(action, "applied", f"confirmed at {now_nodes} after a retried call")
        return None
