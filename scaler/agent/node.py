"""The node agent, ``tiercast agent``: MIG state and metrics of one GPU node, and manual layout changes.

Runs as a DaemonSet (``deploy/base/node-agent-daemonset.yaml``). Through an
:class:`~scaler.agent.nvml.NvmlBackend` it reads the node's GPUs, MIG mode, GPU and compute
instances, utilization, memory and processes, and serves them as Prometheus
``/metrics`` and a JSON ``/state``.

In the cluster, MIG layouts are applied by NVIDIA's GPU Operator (its MIG manager,
driven by the ``nvidia.com/mig.config`` label tiercast sets): the manager stops the
GPU clients, re-partitions, and restarts the device plugin so the new MIG devices
are advertised. The agent does not re-partition in the cluster: doing it safely
would need the same stop-and-restart of the device plugin, GPU feature discovery
and DCGM, which the agent does not own. An earlier annotation-driven path
(``tiercast.io/mig-layout``) had none of that and was removed.

By hand, on a drained node (``--desired-file`` with a mig-parted file), it applies a
layout as ``nvidia-mig-parted apply`` would, then the device plugin must be restarted
by whoever runs it:

* GPUs already in the desired layout are left alone, so applying twice changes nothing;
* it refuses while compute processes run on a GPU it would change, or while the node
  is not cordoned (``--assume-cordoned`` when drained by hand);
* it destroys compute and GPU instances, switches MIG mode, creates the instances at
  placements from :func:`scaler.catalog.mig.place`, then reads the GPUs again and verifies the
  result against the request, reporting success or NVML's error by name.

On a machine without the NVIDIA driver it exits with one line (status 1).
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from forecaster.errors import BadInputError, TemporaryError
from forecaster.secrets import remember
from scaler.agent.nvml import FakeNvml, NvmlBackend, NvmlError, PynvmlBackend
from scaler.catalog.mig import Layout, config_name, parse_mig_parted_entry, place
from scaler.kube_access import load_credentials

log = logging.getLogger(__name__)

# --- reading the node -----------------------------------------------------------------


def current_layouts(backend: NvmlBackend) -> dict[int, Layout]:
    """The layout of each MIG-capable GPU now: ``whole`` with MIG off, else its instances."""
    out: dict[int, Layout] = {}
    for g in backend.gpus():
        if g.model is None:
            continue
        if not g.mig_current:
            out[g.index] = Layout(whole=True)
            continue
        counts: dict[str, int] = {}
        for gi in backend.gpu_instances(g.index):
            counts[gi.profile] = counts.get(gi.profile, 0) + 1
        out[g.index] = Layout.of(counts)
    return out


def read_state(backend: NvmlBackend) -> dict[str, Any]:
    """Everything the agent knows about the node, as JSON-ready values."""
    gpus = []
    for g in backend.gpus():
        instances = backend.gpu_instances(g.index) if g.mig_current else []
        gpus.append(
            {
                **asdict(g),
                "gpu_instances": [asdict(i) for i in instances],
                "processes": [asdict(p) for p in backend.processes(g.index)],
            }
        )
    return {"gpus": gpus}


class _StateCollector:
    """Reads NVML on every scrape, so /metrics is never older than the scrape."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["gpu", "uuid", "model"]
        util = GaugeMetricFamily(
            "tiercast_gpu_utilization_percent",
            "GPU utilization (absent in MIG mode)",
            labels=labels,
        )
        used = GaugeMetricFamily("tiercast_gpu_memory_used_bytes", "GPU memory used", labels=labels)
        total = GaugeMetricFamily("tiercast_gpu_memory_total_bytes", "GPU memory", labels=labels)
        mig = GaugeMetricFamily("tiercast_gpu_mig_enabled", "1 when MIG mode is on", labels=labels)
        pending = GaugeMetricFamily(
            "tiercast_gpu_mig_pending_enabled", "MIG mode after the next GPU reset", labels=labels
        )
        procs = GaugeMetricFamily(
            "tiercast_gpu_compute_processes", "Compute processes on the GPU", labels=labels
        )
        inst_labels = ["gpu", "uuid", "gpu_instance", "profile", "start"]
        inst = GaugeMetricFamily(
            "tiercast_mig_instance_info", "One series per GPU instance", labels=inst_labels
        )
        inst_used = GaugeMetricFamily(
            "tiercast_mig_instance_memory_used_bytes",
            "Memory used in the instance",
            labels=inst_labels,
        )
        inst_total = GaugeMetricFamily(
            "tiercast_mig_instance_memory_total_bytes", "Memory of the instance", labels=inst_labels
        )
        inst_procs = GaugeMetricFamily(
            "tiercast_mig_instance_compute_processes",
            "Processes in the instance",
            labels=inst_labels,
        )
        up = GaugeMetricFamily("tiercast_agent_nvml_up", "1 when the last NVML read worked")
        try:
            state = read_state(self.agent.backend)
            up.add_metric([], 1.0)
        except NvmlError as exc:
            log.warning("NVML read failed: %s", exc)
            state = {"gpus": []}
            up.add_metric([], 0.0)
        for g in state["gpus"]:
            lv = [str(g["index"]), g["uuid"], g["model"] or ""]
            if g["utilization_percent"] is not None:
                util.add_metric(lv, g["utilization_percent"])
            used.add_metric(lv, g["memory_used_bytes"])
            total.add_metric(lv, g["memory_total_bytes"])
            mig.add_metric(lv, float(g["mig_current"]))
            pending.add_metric(lv, float(g["mig_pending"]))
            procs.add_metric(lv, len(g["processes"]))
            for i in g["gpu_instances"]:
                il = [str(g["index"]), g["uuid"], str(i["id"]), i["profile"], str(i["start"])]
                inst.add_metric(il, 1.0)
                if i["memory_used_bytes"] is not None:
                    inst_used.add_metric(il, i["memory_used_bytes"])
                if i["memory_total_bytes"] is not None:
                    inst_total.add_metric(il, i["memory_total_bytes"])
                inst_procs.add_metric(
                    il, sum(1 for p in g["processes"] if p["gpu_instance_id"] == i["id"])
                )
        applies = GaugeMetricFamily(
            "tiercast_agent_applies", "Layout applications by outcome", labels=["outcome"]
        )
        for outcome, n in sorted(self.agent.outcomes.items()):
            applies.add_metric([outcome], n)
        yield from (up, util, used, total, mig, pending, procs, inst, inst_used, inst_total)
        yield from (inst_procs, applies)


# --- applying a layout ----------------------------------------------------------------


class NodeGate(Protocol):
    """Whether the node may be re-partitioned now."""

    def cordoned(self) -> bool: ...


@dataclass
class StaticGate:
    """Cordon state given by the operator (``--assume-cordoned``) or a test."""

    value: bool = False

    def cordoned(self) -> bool:
        return self.value


class KubeNodeGate:
    """Reads ``spec.unschedulable`` of the agent's own node through the Kubernetes API."""

    def __init__(
        self, node: str, kubeconfig: str | None = None, context: str | None = None
    ) -> None:
        self.node = node
        self.kubeconfig = kubeconfig
        self.context = context
        self._api: Any = None

    def api(self) -> Any:
        """The Node client, its credentials loaded as for every client
        (:func:`scaler.kube_access.load_credentials`: in a pod its service account)."""
        if self._api is None:
            from kubernetes import client

            configuration = load_credentials(self.kubeconfig, self.context)
            self._api = client.CoreV1Api(client.ApiClient(configuration))
        return self._api

    def cordoned(self) -> bool:
        return bool(self._read().spec.unschedulable)

    def _read(self) -> Any:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.api().read_node(self.node)
        except ApiException as exc:
            raise TemporaryError(
                f"cannot read node {self.node!r} from the Kubernetes API: {exc.status} {exc.reason}"
            ) from exc


@dataclass
class GpuResult:
    index: int
    outcome: str
    """``unchanged``, ``applied``, ``refused``, ``pending-reset`` or ``failed``."""
    message: str = ""
    current: str = ""
    desired: str = ""


@dataclass
class ApplyReport:
    outcome: str
    """``success`` (every GPU as desired), ``refused`` or ``failed``."""
    message: str
    gpus: list[GpuResult] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def apply_layout(backend: NvmlBackend, desired: dict[int, Layout], gate: NodeGate) -> ApplyReport:
    """Bring every GPU in ``desired`` to its layout; idempotent, refuses unsafe changes."""
    gpus = {g.index: g for g in backend.gpus()}
    current = current_layouts(backend)
    for i in desired:
        if i not in gpus or gpus[i].model is None:
            raise BadInputError(f"desired layout: GPU {i} is not a MIG-capable GPU on this node")
    todo = [i for i in sorted(desired) if current.get(i) != desired[i]]
    results = {
        i: GpuResult(
            i, "unchanged", "already in the desired layout", current[i].spec(), desired[i].spec()
        )
        for i in sorted(desired)
        if i not in todo
    }
    if not todo:
        return ApplyReport("success", "every GPU already has the desired layout", _ordered(results))
    busy = {i: backend.processes(i) for i in todo}
    busy = {i: p for i, p in busy.items() if p}
    refusal = ""
    if busy:
        refusal = "compute processes run on " + ", ".join(
            f"GPU {i} (pid {', '.join(str(p.pid) for p in ps)})" for i, ps in sorted(busy.items())
        )
    elif not gate.cordoned():
        refusal = "the node is not cordoned; cordon and drain it first"
    if refusal:
        for i in todo:
            results[i] = GpuResult(i, "refused", refusal, current[i].spec(), desired[i].spec())
        return ApplyReport("refused", f"refused: {refusal}", _ordered(results))
    for i in todo:
        results[i] = _apply_gpu(backend, i, gpus[i].model or "", desired[i], current[i])
    # Verify against a fresh read, not against what the calls returned.
    after = current_layouts(backend)
    for i in todo:
        r = results[i]
        if r.outcome == "applied" and after.get(i) != desired[i]:
            r.outcome = "failed"
            r.message = f"verification failed: GPU {i} has {after[i].spec()} after applying"
    bad = [r for r in results.values() if r.outcome not in ("applied", "unchanged")]
    if bad:
        first = bad[0]
        return ApplyReport(
            "failed", f"GPU {first.index}: {first.outcome}: {first.message}", _ordered(results)
        )
    return ApplyReport("success", f"applied {len(todo)} GPU(s), verified", _ordered(results))


def _ordered(results: dict[int, GpuResult]) -> list[GpuResult]:
    return [results[i] for i in sorted(results)]


def _apply_gpu(
    backend: NvmlBackend, index: int, model: str, want: Layout, have: Layout
) -> GpuResult:
    res = GpuResult(index, "applied", "", have.spec(), want.spec())
    try:
        for gi in backend.gpu_instances(index):
            for ci in gi.compute_instances:
                backend.destroy_compute_instance(index, gi.id, ci.id)
            backend.destroy_gpu_instance(index, gi.id)
        if not backend.set_mig_mode(index, not want.whole):
            res.outcome = "pending-reset"
            res.message = "MIG mode change is pending a GPU reset (or node reboot)"
            return res
        placed = place(model, want)
        if placed is None:
            raise BadInputError(f"{want.spec()} does not fit a {model}")
        for inst in placed:
            if (inst.start, _size(model, inst.profile)) not in backend.possible_placements(
                index, inst.profile
            ):
                res.outcome = "failed"
                res.message = f"NVML offers no placement at slice {inst.start} for {inst.profile}"
                return res
            gi_id = backend.create_gpu_instance(index, inst.profile, inst.start)
            backend.create_compute_instance(index, gi_id)
        res.message = "created " + (want.spec() if not want.whole else "whole GPU (MIG off)")
    except NvmlError as exc:
        res.outcome = "failed"
        res.message = str(exc)
    return res


def _size(model: str, profile: str) -> int:
    from scaler.catalog.mig import geometry

    return geometry(model).profile(profile).memory_slices


# --- desired layouts --------------------------------------------------------------------


def load_desired(
    text: str, model_of: dict[int, str], config_name_: str | None, source: str
) -> dict[int, Layout]:
    """Parse a mig-parted file (``version: v1``, ``mig-configs``) or one entry, per GPU index."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise BadInputError(f"{source}: not valid YAML or JSON ({exc})") from exc
    entry: Any = data
    if isinstance(data, dict) and "mig-configs" in data:
        configs = data["mig-configs"]
        if not isinstance(configs, dict) or not configs:
            raise BadInputError(f"{source}: 'mig-configs' must be a non-empty mapping")
        if config_name_ is None:
            if len(configs) != 1:
                raise BadInputError(
                    f"{source}: holds {len(configs)} configs; name one with --config-name "
                    f"({', '.join(sorted(configs))})"
                )
            config_name_ = next(iter(configs))
        if config_name_ not in configs:
            raise BadInputError(
                f"{source}: no config {config_name_!r}; it has {', '.join(sorted(configs))}"
            )
        entry = configs[config_name_]
    models = set(model_of.values())
    if len(models) > 1:
        raise BadInputError(f"{source}: this node mixes GPU models {sorted(models)}")
    if not models:
        raise BadInputError(f"{source}: this node has no MIG-capable GPU")
    indexes = sorted(model_of)
    out = parse_mig_parted_entry(next(iter(models)), entry, len(indexes), source)
    return {indexes[k]: lay for k, lay in out.items()}


class Agent:
    """State, metrics and layout application for one node."""

    def __init__(
        self,
        backend: NvmlBackend,
        gate: NodeGate,
        desired_source: Callable[[], str | None] | None = None,
        config_name_: str | None = None,
    ) -> None:
        self.backend = backend
        self.gate = gate
        self.desired_source = desired_source
        self.config_name = config_name_
        self.outcomes: dict[str, int] = {}
        self.last_report: ApplyReport | None = None
        self._applied_text: str | None = None
        self._lock = threading.Lock()

    def state(self) -> dict[str, Any]:
        with self._lock:
            state = read_state(self.backend)
            layouts = current_layouts(self.backend)
        state["layouts"] = {str(i): lay.spec() for i, lay in sorted(layouts.items())}
        state["mig_config"] = (
            config_name([layouts[i] for i in sorted(layouts)]) if layouts else None
        )
        state["last_apply"] = self.last_report.to_dict() if self.last_report else None
        return state

    def reconcile(self) -> ApplyReport | None:
        """Read the desired layout and apply it; None when none is given."""
        if self.desired_source is None:
            return None
        text = self.desired_source()
        if text is None:
            return None
        with self._lock:
            model_of = {g.index: g.model for g in self.backend.gpus() if g.model}
            desired = load_desired(text, model_of, self.config_name, "desired layout")
            report = apply_layout(self.backend, desired, self.gate)
        self.outcomes[report.outcome] = self.outcomes.get(report.outcome, 0) + 1
        self.last_report = report
        level = logging.INFO if report.outcome == "success" else logging.WARNING
        log.log(level, "apply: %s", report.message)
        return report

    def metrics(self) -> bytes:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_StateCollector(self))  # type: ignore[arg-type]
        with self._lock:
            return generate_latest(registry)


def serve(agent: Agent, host: str, port: int, token: str | None = None) -> ThreadingHTTPServer:
    """Start /metrics, /state and /healthz on a background thread; returns the server.

    With ``token``, ``/state`` (process IDs and memory per GPU) answers only a request
    carrying ``Authorization: Bearer <token>``; ``/metrics`` and ``/healthz`` stay open
    for the scraper (the DaemonSet's NetworkPolicy limits who can reach the port).
    Connections are capped and idle ones time out (``scaler.service.telemetry.BoundedHTTPServer``).
    """
    from scaler.serving import IDLE_TIMEOUT_S, BoundedHTTPServer

    class Handler(BaseHTTPRequestHandler):
        timeout = IDLE_TIMEOUT_S

        def do_GET(self) -> None:
            if self.path == "/state" and token is not None:
                given = self.headers.get("Authorization", "")
                if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
                    self.send_error(401, "/state needs Authorization: Bearer <token>")
                    return
            try:
                if self.path == "/metrics":
                    body, ctype = agent.metrics(), "text/plain; version=0.0.4; charset=utf-8"
                elif self.path == "/state":
                    body = json.dumps(agent.state(), indent=2).encode()
                    ctype = "application/json"
                elif self.path == "/healthz":
                    body, ctype = b"ok\n", "text/plain"
                else:
                    self.send_error(404, "try /metrics, /state or /healthz")
                    return
            except NvmlError as exc:
                body, ctype = json.dumps({"error": str(exc)}).encode(), "application/json"
                self.send_response(503)
            else:
                self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http: " + format, *args)

    server = BoundedHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="agent-http").start()
    return server


# --- command line -------------------------------------------------------------------------


def _backend(args: argparse.Namespace) -> NvmlBackend:
    if args.fake_gpus:
        return FakeNvml([m.strip() for m in args.fake_gpus.split(",") if m.strip()])
    return PynvmlBackend()


def run_agent(args: argparse.Namespace) -> int:
    """The agent's loop as ``tiercast agent`` runs it: reconcile, serve, until stopped."""
    backend = _backend(args)
    try:
        node = args.node or os.environ.get("NODE_NAME")
        kube = (
            KubeNodeGate(node, getattr(args, "kubeconfig", None), getattr(args, "context", None))
            if node and not args.assume_cordoned
            else None
        )
        gate: NodeGate = kube if kube is not None else StaticGate(bool(args.assume_cordoned))
        source: Callable[[], str | None] | None = None
        if args.desired_file:
            path = Path(args.desired_file)

            def source() -> str | None:
                try:
                    return path.read_text(encoding="utf-8")
                except FileNotFoundError:
                    return None  # nothing requested yet

        agent = Agent(backend, gate, source, args.config_name)
        if args.once:
            report = agent.reconcile()
            print(json.dumps(agent.state(), indent=2))
            return 0 if report is None or report.outcome == "success" else 1
        host, _, port = args.listen.rpartition(":")
        token = None
        token_file = args.token_file or os.environ.get("TIERCAST_AGENT_TOKEN_FILE")
        if token_file:
            try:
                token = Path(token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise BadInputError(
                    f"--token-file: cannot read {token_file!r} ({exc.strerror or exc})"
                ) from None
            if len(token) < 16:
                raise BadInputError(f"--token-file: {token_file!r} holds under 16 characters")
            remember(token)
        server = serve(agent, host or "127.0.0.1", int(port), token)
        log.warning("tiercast agent serving on %s (/metrics, /state)", args.listen)
        try:
            while True:
                try:
                    agent.reconcile()
                except (BadInputError, TemporaryError) as exc:
                    log.warning("apply skipped: %s", exc)
                time.sleep(args.interval)
        finally:
            server.shutdown()
    finally:
        backend.close()
