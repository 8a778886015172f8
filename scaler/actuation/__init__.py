"""Acting on the world: the ``CapacityProvider`` protocol, the recording provider that
dry-run uses (``protocol``), and the Kubernetes providers (``kube``).

The only package of the cycle that changes anything; it may import planning's value types,
never the service or the CLI above it.
"""
