"""Running tiercast: one cycle (``cycle``); what every job shares, its inputs, outcome, exit
codes and the shutdown request (``runs``); the provider guarded by leadership, shutdown and
action retries (``guarded``); the cycle job and its run record (``cycle_job``); the refit and
report jobs (``scheduled``); ``serve``'s APScheduler service (``scheduler``); ``serve`` and
``run_once`` put together (``wiring``); leader election on a Lease (``leader``) and tiercast's
own health (``telemetry``: /metrics, /healthz, structured logs).

Above planning, actuation, inputs and reports; only the CLI is above it.
"""
