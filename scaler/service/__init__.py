"""Running tiercast: one cycle (``cycle``), the cycle, refit and report jobs and
``serve``'s scheduler (``jobs``), leader election on a Lease (``leader``) and tiercast's own
health (``telemetry``: /metrics, /healthz, structured logs).

Above planning, actuation, inputs and reports; only the CLI is above it.
"""
