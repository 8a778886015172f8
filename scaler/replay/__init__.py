"""Walk-forward replay (``tiercast simulate``): how a scaling policy would have done on a
real demand trace, and the suites of traces it is judged on (``replay_suite.yaml``, the dev
suite; ``replay_holdout.yaml``, the hold-out suite).

A benchmark of the planner, kept apart from it: it may import planning, never the reverse.
"""
