"""Which pod holds which GPU, from the kubelet's pod-resources API.

The kubelet serves ``v1.PodResourcesLister/List`` on ``/var/lib/kubelet/pod-resources/kubelet.sock``; the
NVIDIA device plugin reports GPU UUIDs (``GPU-...``, or ``MIG-...``) as device ids of ``nvidia.com/gpu``
(and ``nvidia.com/mig-*``) resources. The exporter uses it to label GPUs with pod, namespace and container.

Decisions:

- ``grpcio`` is optional: kgpu does not depend on it. Without it, or without the socket (a host that is not a
  Kubernetes node), the mapping is empty and the exporter says so once in its log, quietly.
- No protobuf runtime either: the request is the empty message and the response is decoded by the small
  wire-format reader below, for the handful of fields we read (field numbers from the kubelet's
  ``pkg/kubelet/apis/podresources/v1/api.proto``):
  ``ListPodResourcesResponse{1: repeated PodResources}``,
  ``PodResources{1: name, 2: namespace, 3: repeated ContainerResources}``,
  ``ContainerResources{1: name, 2: repeated ContainerDevices}``,
  ``ContainerDevices{1: resource_name, 2: repeated device_ids}``.
- The answer is cached for ``ttl`` seconds: pods come and go on a scale of seconds, scrapes may be many per
  second.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kgpu.exporter.nvml import strip_uuid

log = logging.getLogger(__name__)

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
LIST_METHOD = "/v1.PodResourcesLister/List"


@dataclass(frozen=True)
class PodRef:
    namespace: str
    pod: str
    container: str
    resource: str


# --- protobuf wire format (just what List needs) -------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) pairs of one message; length-delimited values as bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            yield number, value
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ValueError("truncated field")
            yield number, buf[pos : pos + length]
            pos += length
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        else:
            raise ValueError(f"unsupported wire type {wire}")


def decode_list_response(data: bytes) -> dict[str, list[PodRef]]:
    """GPU uuid (kgpu form: lower case, no ``GPU-``; MIG uuids kept whole, lower case) -> pods using it."""
    by_device: dict[str, list[PodRef]] = {}
    for n1, pod_raw in _fields(data):
        if n1 != 1 or not isinstance(pod_raw, bytes):
            continue
        name = namespace = ""
        containers: list[bytes] = []
        for n2, v2 in _fields(pod_raw):
            if not isinstance(v2, bytes):
                continue
            if n2 == 1:
                name = v2.decode()
            elif n2 == 2:
                namespace = v2.decode()
            elif n2 == 3:
                containers.append(v2)
        for craw in containers:
            cname = ""
            devices: list[bytes] = []
            for n3, v3 in _fields(craw):
                if n3 == 1 and isinstance(v3, bytes):
                    cname = v3.decode()
                elif n3 == 2 and isinstance(v3, bytes):
                    devices.append(v3)
            for draw in devices:
                resource = ""
                ids: list[str] = []
                for n4, v4 in _fields(draw):
                    if n4 == 1 and isinstance(v4, bytes):
                        resource = v4.decode()
                    elif n4 == 2 and isinstance(v4, bytes):
                        ids.append(v4.decode())
                if not resource.startswith("nvidia.com/"):
                    continue
                for device_id in ids:
                    key = strip_uuid(device_id) if device_id.upper().startswith("GPU-") else device_id.lower()
                    by_device.setdefault(key, []).append(PodRef(namespace, name, cname, resource))
    return by_device


# --- encoding, for tests and fakes: the inverse of the above ------------------------------------------


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _enc_bytes(number: int, payload: bytes) -> bytes:
    return _enc_varint(number << 3 | 2) + _enc_varint(len(payload)) + payload


def encode_list_response(pods: list[tuple[str, str, list[tuple[str, str, list[str]]]]]) -> bytes:
    """``[(namespace, pod, [(container, resource, [device ids])])]`` as a ListPodResourcesResponse."""
    out = b""
    for namespace, pod, containers in pods:
        body = _enc_bytes(1, pod.encode()) + _enc_bytes(2, namespace.encode())
        for cname, resource, ids in containers:
            dev = _enc_bytes(1, resource.encode()) + b"".join(_enc_bytes(2, i.encode()) for i in ids)
            body += _enc_bytes(3, _enc_bytes(1, cname.encode()) + _enc_bytes(2, dev))
        out += _enc_bytes(1, body)
    return out


# --- the client ----------------------------------------------------------------------------------------

Lister = Callable[[], bytes]


def grpc_lister(socket_path: str, timeout: float = 1.0) -> Lister | None:
    """A function calling List over the kubelet socket, or None when grpcio or the socket is missing."""
    if not os.path.exists(socket_path):
        return None
    try:
        grpc = importlib.import_module("grpc")
    except ImportError:
        return None
    channel = grpc.insecure_channel(f"unix://{socket_path}")
    call = channel.unary_unary(
        LIST_METHOD, request_serializer=lambda _req: b"", response_deserializer=lambda raw: raw
    )

    def list_raw() -> bytes:
        result: bytes = call(b"", timeout=timeout)
        return result

    return list_raw


class PodResources:
    """Cached GPU -> pods mapping; empty (and quiet) when the kubelet API cannot be reached."""

    def __init__(
        self, lister: Lister | None = None, *, socket_path: str = DEFAULT_SOCKET, ttl: float = 10.0
    ) -> None:
        self._lister = lister
        self._socket_path = socket_path
        self._resolved = lister is not None
        self._ttl = ttl
        self._lock = threading.Lock()
        self._cache: dict[str, list[PodRef]] = {}
        self._fetched = float("-inf")
        self._warned = False

    def mapping(self) -> dict[str, list[PodRef]]:
        now = time.monotonic()
        if now - self._fetched < self._ttl:
            return self._cache
        with self._lock:
            if now - self._fetched < self._ttl:
                return self._cache
            self._fetched = now
            if not self._resolved:
                self._lister = grpc_lister(self._socket_path)
                self._resolved = self._lister is not None
                if self._lister is None:
                    if not self._warned:
                        log.info("pod-resources: %s or grpcio missing; no pod labels", self._socket_path)
                        self._warned = True
                    return self._cache
            assert self._lister is not None
            try:
                self._cache = decode_list_response(self._lister())
            except Exception as exc:
                if not self._warned:
                    log.warning("pod-resources List failed: %s", exc)
                    self._warned = True
                self._cache = {}
            return self._cache
