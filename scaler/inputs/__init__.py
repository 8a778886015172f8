"""Where a cycle's inputs come from: config and history from flags (``loading``),
Prometheus (``collecting``), the built-in demo fleet (``demo``), and loading CSV traces
into a Prometheus TSDB (``backfilling``).

Below the service and the CLI, above config: nothing here plans or acts.
"""
