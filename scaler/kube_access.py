"""The one way tiercast reaches Kubernetes: the client's credentials, loaded in one place.

Actuation (:func:`scaler.actuation.kube.transport.connect`), the Lease elector
(:func:`scaler.service.leader.coordination_api`) and the node agent
(:class:`scaler.agent.node.KubeNodeGate`) all take their client configuration from
:func:`load_credentials`, so ``--kubeconfig`` and ``--context`` mean the same everywhere:

* neither given, inside a pod (``KUBERNETES_SERVICE_HOST`` set): the pod's service account;
* otherwise the kubeconfig (``kubeconfig``, else ``$KUBECONFIG``, else ``~/.kube/config``)
  at ``context`` (default: its current context).

A kubeconfig that cannot be read or names no usable cluster is a bad input: one line
saying which file and context.
"""

from __future__ import annotations

import os
from typing import Any

from forecaster.errors import BadInputError


def load_credentials(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``kubernetes.client.Configuration`` for the cluster (module docstring); the
    process-wide default configuration is left as it is."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except config.ConfigException as exc:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise BadInputError(
            f"--kubeconfig {where}{f' --context {context}' if context else ''}: "
            f"cannot load cluster credentials: {exc}"
        ) from exc
    except OSError as exc:
        raise BadInputError(f"--kubeconfig {kubeconfig}: cannot be read: {exc}") from exc
    return configuration
