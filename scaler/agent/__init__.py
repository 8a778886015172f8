"""The node agent (``tiercast agent``): one GPU node's MIG state and metrics through NVML.

- ``node``: the agent itself (state, metrics, applying a layout by hand);
- ``nvml``: the NVML backends, the real one through ``pynvml`` and a fake enforcing MIG's rules.

Only this package (and ``scaler.actuation``) may import pynvml or the Kubernetes client.
"""
