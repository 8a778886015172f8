"""MIG layout planning: slice demand from forecasts, target layouts per GPU, and when to change.

Pure: forecasts, config and inventory in; ``mig-layout`` actions and the plan's ``mig``
section out (``plan.plan_mig``). For each GPU model with MIG-managed pools
(``mig_layouts`` set):

1. *Slice demand* (``demand``). A workload with a ``mig_profile`` needs one instance of
   that profile per replica, ``max(min_replicas, ceil(signal / units_per_replica))``, at
   the policy quantile on the planning grid (``auto`` picks the smallest profile with
   ``memory_gb``). Layouts must hold for hours, so the target covers the peak over
   the horizon.
2. *Layouts* (``layouts``, ``node_layouts``). Every GPU gets one layout (a maximal valid
   one, its current one, or ``whole``) or is left as it is and unused. The cost of a
   choice is GPU-hours: a used GPU costs the horizon, a changed GPU costs its drain and
   re-partition time; uncovered demand costs more than any number of GPUs. GPUs that are
   interchangeable (same current layout, same newness) form one class, so the exact
   integer programme (scipy's ``milp``, HiGHS) has classes x layouts variables, not
   GPUs x layouts. A greedy heuristic covers what the solver does not finish within its
   time limit. A node on ``mig.strategy=single`` gets one layout on every GPU.
3. *Timing* (``timing``). A change needed for coverage happens in the lowest-demand
   window before the current layouts fall short; a change that only saves GPUs happens
   in the lowest-demand window of the horizon, and only when the GPU-hours it saves
   exceed the GPU-hours its drains cost. A window that starts within this cycle gives a
   ``relayout`` action; a later one gives a ``no-op`` naming the window.
4. *Outputs* (``actions``, ``plan``). Per node the ``nvidia.com/mig.config`` value, and a
   mig-parted config (``version: v1``) with one named entry per distinct node layout.

The modules, each importing only modules listed before it:

- ``state``: the node values the planner and the actuators share (``MigNodeState``,
  ``MigNode``), the nodes a config describes and ``nvidia.com/mig.config`` names;
- ``demand``: slice demand per GPU model and profile, its peak, the stale signals;
- ``layouts``: the layout problem per GPU, the exact solver and the heuristic;
- ``node_layouts``: the same where ``mig.strategy=single`` nodes must be uniform;
- ``context``: what one GPU model's plan shares across its steps;
- ``timing``: the change window and whether a change is worth its drains;
- ``actions``: node targets and their names, the ``mig-layout`` actions and reasons;
- ``plan``: ``plan_mig``, putting the steps together per GPU model.
"""
