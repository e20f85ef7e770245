"""Which pod holds which GPU, from the kubelet's pod-resources API.

The kubelet serves ``v1.PodResourcesLister/List`` (gRPC) on ``/var/lib/kubelet/pod-resources/kubelet.sock``;
the NVIDIA device plugin reports GPU UUIDs (``GPU-...``, or ``MIG-...``) as device ids of ``nvidia.com/gpu``
(and ``nvidia.com/mig-*``) resources. The exporter uses it to label GPUs with pod, namespace and container.

Decisions:

- ``grpcio`` and ``protobuf`` are dependencies of kgpu, so ``pip install kgpu`` gives a node exporter that
  labels pods. Both are imported lazily: ``grpc`` when the socket is first found, ``google.protobuf`` when
  the first answer is decoded. A host that is not a Kubernetes node (no socket) imports neither, creates no
  channel, and logs one info line. Only nodes with the socket pay for them: about 20 MiB of RSS in the
  exporter (25 -> 45 MiB with 8 GPUs under 40 scrapers; grpc's import ~12.5, its channel and threads ~4,
  protobuf and the message classes ~2.5), against a 60 MiB budget.
- The messages are the kubelet's ``pkg/kubelet/apis/podresources/v1/api.proto`` (package ``v1``): the
  ``FileDescriptorProto`` is built here in Python from the table ``_MESSAGES`` and turned into classes by
  the protobuf runtime, in a private descriptor pool (no clash with any other ``v1`` package a process may
  load). No ``protoc`` at build time and no generated ``_pb2`` module. Everything the List answer carries
  is declared (devices with their NUMA topology, CPU ids, memory, DRA resources), so nothing arrives as an
  unknown field, though only pod, namespace, container and device plugin devices are read.
- A device id maps to the exporter's GPU key: ``GPU-<uuid>`` as the exporter's ``uuid`` label (lower case,
  no ``GPU-``), anything else (``MIG-<uuid>``, the older ``MIG-GPU-<uuid>/<gi>/<ci>``) whole in lower case.
  A shared GPU (time-slicing or MPS replicas) is reported as ``<uuid>::<replica>``; the replica suffix is
  dropped, so every pod sharing the GPU is listed under it. Only ``nvidia.com/*`` resources are read.
- The answer is cached for ``ttl`` seconds: pods come and go on a scale of seconds, scrapes may be many per
  second. A failing List (kubelet restarting, permission denied) gives an empty mapping and one warning
  until it works again; the channel reconnects by itself, with its backoff capped at a few seconds so that
  labels come back soon after a kubelet restart.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from kgpu.exporter.nvml import strip_uuid

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
PROTO_FILE = "api.proto"
PROTO_PACKAGE = "v1"
SERVICE = "v1.PodResourcesLister"
LIST_METHOD = f"/{SERVICE}/List"
RECONNECT_BACKOFF_MS = 5000


@dataclass(frozen=True)
class PodRef:
    namespace: str
    pod: str
    container: str
    resource: str


# --- the kubelet's podresources v1 messages --------------------------------------------------------------

# message name -> fields (name, number, type, repeated); a type is a scalar below or another message's name.
_SCALARS = ("string", "int64", "uint64")
_MESSAGES: dict[str, tuple[tuple[str, int, str, bool], ...]] = {
    "ListPodResourcesRequest": (),
    "ListPodResourcesResponse": (("pod_resources", 1, "PodResources", True),),
    "PodResources": (
        ("name", 1, "string", False),
        ("namespace", 2, "string", False),
        ("containers", 3, "ContainerResources", True),
    ),
    "ContainerResources": (
        ("name", 1, "string", False),
        ("devices", 2, "ContainerDevices", True),
        ("cpu_ids", 3, "int64", True),
        ("memory", 4, "ContainerMemory", True),
        ("dynamic_resources", 5, "DynamicResource", True),
    ),
    "ContainerMemory": (
        ("memory_type", 1, "string", False),
        ("size", 2, "uint64", False),
        ("topology", 3, "TopologyInfo", False),
    ),
    "ContainerDevices": (
        ("resource_name", 1, "string", False),
        ("device_ids", 2, "string", True),
        ("topology", 3, "TopologyInfo", False),
    ),
    "TopologyInfo": (("nodes", 1, "NUMANode", True),),
    "NUMANode": (("ID", 1, "int64", False),),
    "DynamicResource": (  # field 1 (class_name) is retired upstream
        ("claim_name", 2, "string", False),
        ("claim_namespace", 3, "string", False),
        ("claim_resources", 4, "ClaimResource", True),
    ),
    "ClaimResource": (
        ("cdi_devices", 1, "CDIDevice", True),
        ("driver_name", 2, "string", False),
        ("pool_name", 3, "string", False),
        ("device_name", 4, "string", False),
    ),
    "CDIDevice": (("name", 1, "string", False),),
}


@dataclass(frozen=True)
class Messages:
    """The message classes (protobuf runtime) of the podresources v1 API that List uses."""

    ListPodResourcesRequest: Any
    ListPodResourcesResponse: Any
    PodResources: Any
    ContainerResources: Any
    ContainerMemory: Any
    ContainerDevices: Any
    TopologyInfo: Any
    NUMANode: Any
    DynamicResource: Any
    ClaimResource: Any
    CDIDevice: Any


def file_descriptor() -> Any:
    """``api.proto`` as a ``google.protobuf.descriptor_pb2.FileDescriptorProto`` (the messages and List)."""
    from google.protobuf import descriptor_pb2

    field_proto = descriptor_pb2.FieldDescriptorProto
    scalar_type = {
        "string": field_proto.TYPE_STRING,
        "int64": field_proto.TYPE_INT64,
        "uint64": field_proto.TYPE_UINT64,
    }
    fdp = descriptor_pb2.FileDescriptorProto(name=PROTO_FILE, package=PROTO_PACKAGE, syntax="proto3")
    fdp.options.go_package = "k8s.io/kubelet/pkg/apis/podresources/v1"
    for message, spec in _MESSAGES.items():
        msg = fdp.message_type.add(name=message)
        for name, number, type_, repeated in spec:
            field = msg.field.add(
                name=name,
                number=number,
                label=field_proto.LABEL_REPEATED if repeated else field_proto.LABEL_OPTIONAL,
            )
            if type_ in _SCALARS:
                field.type = scalar_type[type_]
            else:
                field.type = field_proto.TYPE_MESSAGE
                field.type_name = f".{PROTO_PACKAGE}.{type_}"
    service = fdp.service.add(name=SERVICE.rpartition(".")[2])
    service.method.add(
        name="List",
        input_type=f".{PROTO_PACKAGE}.ListPodResourcesRequest",
        output_type=f".{PROTO_PACKAGE}.ListPodResourcesResponse",
    )
    return fdp


@functools.cache
def messages() -> Messages:
    """The message classes, built once per process (this is where ``google.protobuf`` is imported)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_descriptor())
    classes = {
        f.name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{PROTO_PACKAGE}.{f.name}"))
        for f in fields(Messages)
    }
    return Messages(**classes)


# --- the GPU -> pods mapping ---------------------------------------------------------------------------


def device_key(device_id: str) -> str:
    """The exporter's key for a device plugin device id (see the module's decisions)."""
    text = device_id.strip().split("::", 1)[0]
    return strip_uuid(text) if text[:4].upper() == "GPU-" else text.lower()


def pods_by_device(response: Any) -> dict[str, list[PodRef]]:
    """GPU key -> pods using it, from a ``ListPodResourcesResponse`` message."""
    by_device: dict[str, list[PodRef]] = {}
    for pod in response.pod_resources:
        for container in pod.containers:
            for devices in container.devices:
                resource = devices.resource_name
                if not resource.startswith("nvidia.com/"):
                    continue
                ref = PodRef(pod.namespace, pod.name, container.name, resource)
                for device_id in devices.device_ids:
                    refs = by_device.setdefault(device_key(device_id), [])
                    if ref not in refs:  # replicas of one shared GPU held by one container
                        refs.append(ref)
    return by_device


def decode_list_response(data: bytes) -> dict[str, list[PodRef]]:
    """GPU key -> pods using it, from a serialized ``ListPodResourcesResponse``."""
    return pods_by_device(messages().ListPodResourcesResponse.FromString(data))


# --- the client ----------------------------------------------------------------------------------------

# Returns a ListPodResourcesResponse message, or its serialized bytes.
Lister = Callable[[], Any]


class GrpcLister:
    """Calls List over the kubelet's socket; one channel, reused (it reconnects by itself)."""

    def __init__(self, socket_path: str, timeout: float = 1.0) -> None:
        import grpc

        m = messages()
        self._timeout = timeout
        self._request = m.ListPodResourcesRequest()
        self._channel = grpc.insecure_channel(
            f"unix://{os.path.abspath(socket_path)}",
            options=[("grpc.max_reconnect_backoff_ms", RECONNECT_BACKOFF_MS)],
        )
        self._list = self._channel.unary_unary(
            LIST_METHOD,
            request_serializer=m.ListPodResourcesRequest.SerializeToString,
            response_deserializer=m.ListPodResourcesResponse.FromString,
        )

    def __call__(self) -> Any:
        return self._list(self._request, timeout=self._timeout)

    def close(self) -> None:
        self._channel.close()


def grpc_lister(socket_path: str, timeout: float = 1.0) -> GrpcLister | None:
    """A lister calling List over the kubelet socket, or None (and no grpc import) when the socket is missing."""
    if not os.path.exists(socket_path):
        return None
    return GrpcLister(socket_path, timeout)


def _describe(exc: Exception) -> str:
    """One line for a failed call: a gRPC status as ``CODE: details``, anything else as itself."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{getattr(code(), 'name', code())}: {details()}"
        except Exception:
            pass
    return f"{type(exc).__name__}: {exc}"


class PodResources:
    """Cached GPU -> pods mapping; empty (and quiet) when the kubelet API cannot be reached."""

    def __init__(
        self,
        lister: Lister | None = None,
        *,
        socket_path: str = DEFAULT_SOCKET,
        ttl: float = 10.0,
        timeout: float = 1.0,
    ) -> None:
        self._lister = lister
        self._channel: GrpcLister | None = None  # the lister this object opened, to close
        self._socket_path = socket_path
        self._ttl = ttl
        self._timeout = timeout
        self._lock = threading.Lock()
        self._cache: dict[str, list[PodRef]] = {}
        self._fetched = float("-inf")
        self._said_missing = False
        self._failing = False

    def mapping(self) -> dict[str, list[PodRef]]:
        now = time.monotonic()
        if now - self._fetched < self._ttl:
            return self._cache
        with self._lock:
            if now - self._fetched < self._ttl:
                return self._cache
            self._fetched = now
            try:
                lister = self._connect()
                if lister is None:
                    return self._cache
                answer = lister()
                if isinstance(answer, bytes | bytearray):
                    answer = messages().ListPodResourcesResponse.FromString(bytes(answer))
                self._cache = pods_by_device(answer)
            except Exception as exc:
                if not self._failing:
                    log.warning(
                        "pod-resources: List on %s failed, no pod labels: %s",
                        self._socket_path,
                        _describe(exc),
                    )
                    self._failing = True
                self._cache = {}
            else:
                if self._failing:
                    log.info("pod-resources: List on %s works again", self._socket_path)
                    self._failing = False
            return self._cache

    def _connect(self) -> Lister | None:
        """The lister; None while the socket is missing (said once, at info level)."""
        if self._lister is None:
            self._lister = self._channel = grpc_lister(self._socket_path, self._timeout)
            if self._lister is None:
                if not self._said_missing:
                    log.info(
                        "pod-resources: %s not found (not a Kubernetes node?); no pod labels",
                        self._socket_path,
                    )
                    self._said_missing = True
                return None
        return self._lister

    def close(self) -> None:
        """Close the gRPC channel, if one was opened."""
        with self._lock:
            if self._channel is not None:
                self._channel.close()
                self._channel = self._lister = None
                self._fetched = float("-inf")
