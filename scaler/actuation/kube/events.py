"""Events on the objects an action changed, as ``kubectl describe`` shows them.

Follows the ``events.k8s.io/v1`` Event API: one Event per object the action's successful
writes changed, ``regarding`` that object, with tiercast as its reporting controller.
"""

from __future__ import annotations

import hashlib
from typing import Any

from scaler.plans import Action

NOTE_LIMIT = 1024
"""The most characters ``events.k8s.io/v1`` accepts in an Event's note."""
EVENT_CONTROLLER = "tiercast.io/tiercast"
"""The ``reportingController`` of every Event tiercast writes."""
_KINDS = {
    "nodes": "Node",
    "machinedeployments": "MachineDeployment",
    "nodepools": "NodePool",
    "deployments": "Deployment",
    "priorityclasses": "PriorityClass",
    "configmaps": "ConfigMap",
    "capacitybuffers": "CapacityBuffer",
    "podtemplates": "PodTemplate",
}
_EVENT_REASONS = {
    "scale-up": ("ScaleUp", "Scale"),
    "scale-down": ("ScaleDown", "Scale"),
    "relayout": ("MigRelayout", "Relabel"),
    "no-op": ("Reconciled", "Update"),
}


def change_events(
    action: Action,
    calls: list[dict[str, Any]],
    outcome: str,
    message: str,
    when: str,
    instance: str,
) -> list[tuple[str, dict[str, Any]]]:
    """One ``events.k8s.io/v1`` Event per object the action's successful writes changed.

    Each carries the action's reason, whole (:func:`action_note`), and the outcome's
    message as its note, the
    decision as its reason, and ``Warning`` when the action failed. Events of
    cluster-scoped objects go to ``default``, as kubectl's do.
    """
    reason, verb = _EVENT_REASONS.get(action.decision, ("Changed", "Update"))
    note = action_note(action, outcome, message)
    out = []
    for k, ((plural, ns, name), api) in enumerate(sorted(_changed_objects(calls).items())):
        digest = hashlib.sha1(f"{when}|{plural}|{name}|{k}".encode()).hexdigest()[:10]
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{digest}", "namespace": ns or "default"},
            "eventTime": when,
            "reportingController": EVENT_CONTROLLER,
            "reportingInstance": instance[:128],
            "action": verb,
            "reason": reason,
            "type": "Warning" if outcome == "failed" else "Normal",
            "note": note,
            "regarding": {
                "apiVersion": api,
                "kind": _KINDS[plural],
                "name": name,
                **({"namespace": ns} if ns else {}),
            },
        }
        out.append((f"/apis/events.k8s.io/v1/namespaces/{ns or 'default'}/events", body))
    return out


def action_note(action: Action, outcome: str, message: str) -> str:
    """An Event's note: the action's reason rendered whole, then the outcome; only the
    provider's message is shortened, so the note fits the API's :data:`NOTE_LIMIT` and
    the reason's end (its outcome and what binds) always reaches ``kubectl describe``."""
    head = f"{action.reason.text('en')} -> {outcome}"
    if len(head) > NOTE_LIMIT:
        raise ValueError(
            f"the reason of {action.pool}'s {action.decision} ({len(head)} characters) does "
            f"not fit an Event note ({NOTE_LIMIT})"
        )
    if not message:
        return head
    room = NOTE_LIMIT - len(head) - 2
    text = message if len(message) <= room else message[: max(0, room - 3)] + "..."
    return f"{head}: {text}" if room > 3 else head


def notice_event(
    reason: str,
    note: str,
    when: str,
    instance: str,
    namespace: str,
    pod: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """An ``events.k8s.io/v1`` Event about tiercast itself (a forecast that drifted and was
    refitted, say): ``regarding`` tiercast's own pod where its name is known, so
    ``kubectl describe pod`` and ``kubectl get events`` show it; ``Warning`` type."""
    digest = hashlib.sha1(f"{when}|{reason}|{note}".encode()).hexdigest()[:10]
    body: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{pod or 'tiercast'}.{digest}", "namespace": namespace},
        "eventTime": when,
        "reportingController": EVENT_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": "Refit",
        "reason": reason,
        "type": "Warning",
        "note": note if len(note) <= 1024 else note[:1021] + "...",
    }
    if pod:
        body["regarding"] = {"apiVersion": "v1", "kind": "Pod", "name": pod, "namespace": namespace}
    return f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body


def _changed_objects(calls: list[dict[str, Any]]) -> dict[tuple[str, str | None, str], str]:
    """``(plural, namespace, name)`` of each object a successful write changed: its API.

    Reads and waits changed nothing, and an eviction's object is the pod, not the node
    being drained; a create (a POST to the collection) names its object in the body.
    """
    seen: dict[tuple[str, str | None, str], str] = {}
    for c in calls:
        if (
            c["verb"] in ("GET", "WAIT")
            or c.get("status") != "ok"
            or c["path"].endswith("/eviction")
        ):
            continue
        parts = [x for x in c["path"].split("/") if x]
        api = parts[1] if parts[0] == "api" else f"{parts[1]}/{parts[2]}"
        rest = parts[2:] if parts[0] == "api" else parts[3:]
        ns = None
        if rest[:1] == ["namespaces"] and len(rest) >= 3:  # a collection POST has 3
            ns, rest = rest[1], rest[2:]
        if len(rest) < 2 or rest[0] not in _KINDS:
            name = ((c.get("body") or {}).get("metadata") or {}).get("name")
            if not (rest and rest[0] in _KINDS and name):
                continue
            rest = [rest[0], name]
        seen.setdefault((rest[0], ns, rest[1]), api)
    return seen
