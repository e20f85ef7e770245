"""Pod labels from the kubelet's pod-resources API, against a real gRPC server on a unix socket.

The fake kubelet below is a ``grpc.server`` serving ``v1.PodResourcesLister/List`` with messages built from
the same classes the exporter decodes with; the exporter reaches it through ``PodResources(socket_path=...)``
as it reaches the kubelet's socket on a node.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from prometheus_client.parser import text_string_to_metric_families

from fakes.fake_nvml import FakeMig, FakeNvml, make_gpus
from kgpu.exporter import podresources
from kgpu.exporter.app import ExporterConfig, build
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.podresources import PodRef, PodResources, device_key, messages
from kgpu.exporter.server import serve_in_thread

M = messages()
LOGGER = "kgpu.exporter.podresources"

# make_gpus(2): GPU 0 and GPU 1, in the device plugin's form and in the exporter's uuid label form.
GPU0, GPU1 = "GPU-5D1B2D6E-0000-4A5B-8C9D-000000000000", "GPU-5D1B2D6E-0001-4A5B-8C9D-000000000001"
UUID0, UUID1 = GPU0[4:].lower(), GPU1[4:].lower()


def container(name: str, *devices: tuple[str, list[str]], cpus: tuple[int, ...] = ()) -> Any:
    return M.ContainerResources(
        name=name,
        devices=[M.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in devices],
        cpu_ids=list(cpus),
    )


def pod(namespace: str, name: str, *containers: Any) -> Any:
    return M.PodResources(namespace=namespace, name=name, containers=list(containers))


def response(*pods: Any) -> Any:
    return M.ListPodResourcesResponse(pod_resources=list(pods))


class FakeKubelet:
    """``v1.PodResourcesLister/List`` on a unix socket; counts calls; answers ``response`` or ``error``."""

    def __init__(self, socket_path: str) -> None:
        self.socket_path = socket_path
        self.response = response()
        self.error: grpc.StatusCode | None = None
        self.calls = 0
        self._lock = threading.Lock()
        self.server = grpc.server(ThreadPoolExecutor(max_workers=2))
        handler = grpc.method_handlers_generic_handler(
            "v1.PodResourcesLister",
            {
                "List": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=M.ListPodResourcesRequest.FromString,
                    response_serializer=M.ListPodResourcesResponse.SerializeToString,
                )
            },
        )
        self.server.add_generic_rpc_handlers((handler,))
        assert self.server.add_insecure_port("unix:" + socket_path)
        self.server.start()

    def _list(self, request: Any, context: grpc.ServicerContext) -> Any:
        assert isinstance(request, M.ListPodResourcesRequest)
        with self._lock:
            self.calls += 1
        if self.error is not None:
            context.abort(self.error, "kubelet says no")
        return self.response

    def stop(self) -> None:
        self.server.stop(None).wait()


@pytest.fixture
def socket_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory for the socket: tmp_path, or a shorter one where tmp_path would pass sun_path's limit."""
    if len(str(tmp_path / "kubelet.sock")) < 100:
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(prefix="kgpu-") as short:
        yield Path(short)


@pytest.fixture
def kubelet(socket_dir: Path) -> Iterator[FakeKubelet]:
    k = FakeKubelet(str(socket_dir / "kubelet.sock"))
    yield k
    k.stop()


@pytest.fixture
def pods_of(kubelet: FakeKubelet) -> Iterator[Any]:
    """``pods_of(ttl)``: a PodResources on the fake kubelet's socket (closed after the test)."""
    made: list[PodResources] = []

    def make(ttl: float = 0.0) -> PodResources:
        p = PodResources(socket_path=kubelet.socket_path, ttl=ttl)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def scrape(collector: GpuCollector) -> dict[str, list[dict[str, str]]]:
    """name -> label sets, from the text exposition the server sends."""
    text = TextWriter().render(collector.build()).decode()
    out: dict[str, list[dict[str, str]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append(dict(s.labels))
    return out


# --- the messages ----------------------------------------------------------------------------------------


def test_descriptor_is_the_kubelet_api() -> None:
    """Field numbers and types as in the kubelet's podresources/v1/api.proto, in package v1."""
    fdp = podresources.file_descriptor()
    assert isinstance(fdp, descriptor_pb2.FileDescriptorProto)
    assert (fdp.name, fdp.package, fdp.syntax) == ("api.proto", "v1", "proto3")
    F = descriptor_pb2.FieldDescriptorProto
    fields = {
        (m.name, f.name): (f.number, f.label == F.LABEL_REPEATED, f.type, f.type_name)
        for m in fdp.message_type
        for f in m.field
    }
    assert fields[("ListPodResourcesResponse", "pod_resources")] == (
        1,
        True,
        F.TYPE_MESSAGE,
        ".v1.PodResources",
    )
    assert fields[("PodResources", "name")] == (1, False, F.TYPE_STRING, "")
    assert fields[("PodResources", "namespace")] == (2, False, F.TYPE_STRING, "")
    assert fields[("PodResources", "containers")] == (3, True, F.TYPE_MESSAGE, ".v1.ContainerResources")
    assert fields[("ContainerResources", "name")] == (1, False, F.TYPE_STRING, "")
    assert fields[("ContainerResources", "devices")] == (2, True, F.TYPE_MESSAGE, ".v1.ContainerDevices")
    assert fields[("ContainerResources", "cpu_ids")] == (3, True, F.TYPE_INT64, "")
    assert fields[("ContainerDevices", "resource_name")] == (1, False, F.TYPE_STRING, "")
    assert fields[("ContainerDevices", "device_ids")] == (2, True, F.TYPE_STRING, "")
    assert fields[("ContainerDevices", "topology")] == (3, False, F.TYPE_MESSAGE, ".v1.TopologyInfo")
    (service,) = fdp.service
    assert f"/{fdp.package}.{service.name}/{service.method[0].name}" == podresources.LIST_METHOD
    assert M.ListPodResourcesResponse.DESCRIPTOR.full_name == "v1.ListPodResourcesResponse"


def test_wire_bytes() -> None:
    """The bytes the kubelet (Go, proto3) sends: tag/length-prefixed strings, packed cpu_ids."""
    msg = response(pod("n", "p", container("c", ("r", ["d"]), cpus=(1, 2))))
    assert msg.SerializeToString() == (
        b"\x0a\x17"  # pod_resources (1)
        b"\x0a\x01p\x12\x01n"  # name (1), namespace (2)
        b"\x1a\x0f"  # containers (3)
        b"\x0a\x01c"  # name (1)
        b"\x12\x06\x0a\x01r\x12\x01d"  # devices (2): resource_name (1), device_ids (2)
        b"\x1a\x02\x01\x02"  # cpu_ids (3), packed
    )


@pytest.mark.parametrize(
    ("device_id", "key"),
    [
        ("GPU-ABCDEF01-0000-0000-0000-000000000000", "abcdef01-0000-0000-0000-000000000000"),
        ("gpu-abcdef01-0000-0000-0000-000000000000", "abcdef01-0000-0000-0000-000000000000"),
        ("MIG-4F7C1B2A-0000-5C3D-8E9F-000000000000", "mig-4f7c1b2a-0000-5c3d-8e9f-000000000000"),
        (
            "MIG-GPU-ABCDEF01-0000-0000-0000-000000000000/1/0",
            "mig-gpu-abcdef01-0000-0000-0000-000000000000/1/0",
        ),
        ("GPU-ABCDEF01-0000-0000-0000-000000000000::3", "abcdef01-0000-0000-0000-000000000000"),
    ],
)
def test_device_key(device_id: str, key: str) -> None:
    """GPU uuids in the exporter's uuid-label form, MIG uuids whole in lower case, shared-GPU replicas merged."""
    assert device_key(device_id) == key


def test_decode_serialized_response() -> None:
    """The bytes form, and a lister that hands bytes instead of a message."""
    raw = response(pod("ml", "trainer-0", container("main", ("nvidia.com/gpu", [GPU0])))).SerializeToString()
    expected = {UUID0: [PodRef("ml", "trainer-0", "main", "nvidia.com/gpu")]}
    assert podresources.decode_list_response(raw) == expected
    assert PodResources(lambda: raw).mapping() == expected
    assert PodResources(lambda: b"").mapping() == {}


# --- against a real gRPC server ---------------------------------------------------------------------------


def test_mapping_from_kubelet(kubelet: FakeKubelet, pods_of: Any) -> None:
    """GPU and MIG devices of nvidia.com resources map to their containers; other resources are ignored."""
    kubelet.response = response(
        pod(
            "ml",
            "trainer-0",
            container("main", ("nvidia.com/gpu", [GPU0]), ("example.com/fpga", ["fpga-0"]), cpus=(2, 3)),
            container("sidecar", ("example.com/nic", ["GPU-00000000-0000-0000-0000-0000000000ff"])),
        ),
        pod(
            "serve",
            "infer-1",
            container("a", ("nvidia.com/mig-1g.10gb", ["MIG-AAAA"])),
            container("b", ("nvidia.com/mig-3g.40gb", ["MIG-BBBB"])),
        ),
        pod("serve", "shared-0", container("w", ("nvidia.com/gpu", [GPU1 + "::0", GPU1 + "::1"]))),
        pod("serve", "shared-1", container("w", ("nvidia.com/gpu", [GPU1 + "::2"]))),
        pod("kube-system", "no-devices", M.ContainerResources(name="c")),
    )
    assert pods_of().mapping() == {
        UUID0: [PodRef("ml", "trainer-0", "main", "nvidia.com/gpu")],
        "mig-aaaa": [PodRef("serve", "infer-1", "a", "nvidia.com/mig-1g.10gb")],
        "mig-bbbb": [PodRef("serve", "infer-1", "b", "nvidia.com/mig-3g.40gb")],
        UUID1: [
            PodRef("serve", "shared-0", "w", "nvidia.com/gpu"),
            PodRef("serve", "shared-1", "w", "nvidia.com/gpu"),
        ],
    }
    assert kubelet.calls == 1


def test_ttl_cache(kubelet: FakeKubelet, pods_of: Any) -> None:
    """Within ttl the kubelet is asked once; with ttl 0 on every call, seeing pods come and go."""
    kubelet.response = response(pod("ml", "a", container("c", ("nvidia.com/gpu", [GPU0]))))
    cached = pods_of(ttl=3600)
    for _ in range(5):
        assert set(cached.mapping()) == {UUID0}
    assert kubelet.calls == 1

    fresh = pods_of(ttl=0)
    assert set(fresh.mapping()) == {UUID0}
    kubelet.response = response()
    assert fresh.mapping() == {}
    assert kubelet.calls == 3
    assert set(cached.mapping()) == {UUID0}  # still within its ttl
    assert kubelet.calls == 3


def test_error_status_warns_once_and_recovers(
    kubelet: FakeKubelet, pods_of: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing List: empty mapping, one warning however many scrapes; labels return when it works again."""
    kubelet.response = response(pod("ml", "a", container("c", ("nvidia.com/gpu", [GPU0]))))
    kubelet.error = grpc.StatusCode.PERMISSION_DENIED
    pods = pods_of(ttl=0)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for _ in range(4):
            assert pods.mapping() == {}
    assert kubelet.calls == 4
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage().endswith("failed, no pod labels: PERMISSION_DENIED: kubelet says no")

    kubelet.error = None
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert set(pods.mapping()) == {UUID0}
    assert [r.levelno for r in caplog.records] == [logging.INFO]


def test_collector_keeps_serving_when_list_fails(kubelet: FakeKubelet, pods_of: Any) -> None:
    """The kubelet answering an error costs the pod series only."""
    kubelet.error = grpc.StatusCode.UNAVAILABLE
    collector = GpuCollector(Nvml(FakeNvml(make_gpus(2))), pods=pods_of(), hostname="h")
    s = scrape(collector)
    assert "nvidia_smi_gpu_pod_info" not in s
    assert s["nvidia_smi_last_collect_success"] == [{}]
    assert len(s["nvidia_smi_temperature_gpu"]) == 2


def test_kubelet_restart(socket_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The kubelet goes away (socket removed) and comes back: one warning, then the labels return."""
    path = str(socket_dir / "kubelet.sock")
    first = FakeKubelet(path)
    first.response = response(pod("ml", "a", container("c", ("nvidia.com/gpu", [GPU0]))))
    pods = PodResources(socket_path=path, ttl=0)
    try:
        assert set(pods.mapping()) == {UUID0}
        first.stop()
        Path(path).unlink(missing_ok=True)
        with caplog.at_level(logging.INFO, logger=LOGGER):
            assert pods.mapping() == {}
            assert pods.mapping() == {}
        assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1

        second = FakeKubelet(path)
        second.response = response(pod("ml", "b", container("c", ("nvidia.com/gpu", [GPU1]))))
        try:
            deadline = time.monotonic() + 20
            while pods.mapping() == {} and time.monotonic() < deadline:
                time.sleep(0.1)
            assert set(pods.mapping()) == {UUID1}
        finally:
            second.stop()
    finally:
        pods.close()


# --- no kubelet -------------------------------------------------------------------------------------------


def test_missing_socket_is_quiet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No socket: empty mapping, one info line however often asked, no gRPC channel."""

    def no_channel(*_a: object, **_k: object) -> None:
        raise AssertionError("a channel was opened for a missing socket")

    monkeypatch.setattr(grpc, "insecure_channel", no_channel)
    pods = PodResources(socket_path=str(tmp_path / "kubelet.sock"), ttl=0)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        for _ in range(3):
            assert pods.mapping() == {}
    assert [(r.levelno, "not found" in r.getMessage()) for r in caplog.records] == [(logging.INFO, True)]


def test_missing_socket_imports_neither_grpc_nor_protobuf(tmp_path: Path) -> None:
    """A host that is not a Kubernetes node never pays for grpc or protobuf (a fresh interpreter)."""
    code = (
        "import sys\n"
        "from kgpu.exporter.collector import GpuCollector\n"
        "from kgpu.exporter.podresources import PodResources\n"
        f"assert PodResources(socket_path={str(tmp_path / 'kubelet.sock')!r}, ttl=0).mapping() == {{}}\n"
        "print(sorted(m for m in sys.modules if m == 'grpc' or m.startswith(('grpc.', 'google.protobuf'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_socket_appearing_later(socket_dir: Path) -> None:
    """The exporter may start before the kubelet: the socket is looked for again on the next refresh."""
    path = str(socket_dir / "kubelet.sock")
    pods = PodResources(socket_path=path, ttl=0)
    assert pods.mapping() == {}
    k = FakeKubelet(path)
    k.response = response(pod("ml", "a", container("c", ("nvidia.com/gpu", [GPU0]))))
    try:
        assert set(pods.mapping()) == {UUID0}
    finally:
        pods.close()
        k.stop()


# --- through the collector and the server -----------------------------------------------------------------


def test_collector_gpu_pod_info(kubelet: FakeKubelet, pods_of: Any) -> None:
    """nvidia_smi_gpu_pod_info for a whole GPU and for MIG devices, per container."""
    gpus = make_gpus(2)
    gpus[1].mig_mode = (1, 1)
    gpus[1].migs = [
        FakeMig("MIG-AAAA", 1, 0, "NVIDIA H100 80GB HBM3 MIG 1g.10gb", 10 * 2**30, 2 * 2**30),
        FakeMig("MIG-BBBB", 2, 0, "NVIDIA H100 80GB HBM3 MIG 3g.40gb", 40 * 2**30, 5 * 2**30),
    ]
    kubelet.response = response(
        pod("ml", "trainer-0", container("main", ("nvidia.com/gpu", [GPU0])), container("log", ("cpu", []))),
        pod("serve", "infer-1", container("a", ("nvidia.com/mig-1g.10gb", ["MIG-AAAA"]))),
        pod("serve", "infer-2", container("b", ("nvidia.com/mig-3g.40gb", ["MIG-BBBB"]))),
        pod("other", "fpga", container("x", ("example.com/fpga", [GPU1]))),
    )
    collector = GpuCollector(
        Nvml(FakeNvml(gpus)), options=CollectorOptions(pods=True), pods=pods_of(), hostname="h"
    )
    info = scrape(collector)["nvidia_smi_gpu_pod_info"]
    assert sorted(info, key=lambda d: d["pod"]) == [
        {
            "uuid": UUID1,
            "mig_uuid": "MIG-AAAA",
            "namespace": "serve",
            "pod": "infer-1",
            "container": "a",
            "resource": "nvidia.com/mig-1g.10gb",
        },
        {
            "uuid": UUID1,
            "mig_uuid": "MIG-BBBB",
            "namespace": "serve",
            "pod": "infer-2",
            "container": "b",
            "resource": "nvidia.com/mig-3g.40gb",
        },
        {
            "uuid": UUID0,
            "mig_uuid": "",
            "namespace": "ml",
            "pod": "trainer-0",
            "container": "main",
            "resource": "nvidia.com/gpu",
        },
    ]


def test_collector_without_pods_option_asks_nobody(kubelet: FakeKubelet, pods_of: Any) -> None:
    """--no-pods: no pod series and no List call."""
    kubelet.response = response(pod("ml", "a", container("c", ("nvidia.com/gpu", [GPU0]))))
    collector = GpuCollector(
        Nvml(FakeNvml(make_gpus(1))), options=CollectorOptions(pods=False), pods=pods_of(), hostname="h"
    )
    assert "nvidia_smi_gpu_pod_info" not in scrape(collector)
    assert kubelet.calls == 0


def test_dcgm_names_carry_pod_labels(kubelet: FakeKubelet, pods_of: Any) -> None:
    """--metrics dcgm with pods: dcgm-exporter's namespace/pod/container labels; empty on a free GPU."""
    kubelet.response = response(pod("ml", "trainer-0", container("main", ("nvidia.com/gpu", [GPU0]))))
    collector = GpuCollector(
        Nvml(FakeNvml(make_gpus(2))),
        options=CollectorOptions(metrics="dcgm", pods=True),
        pods=pods_of(),
        hostname="h",
    )
    temps = {d["UUID"]: d for d in scrape(collector)["DCGM_FI_DEV_GPU_TEMP"]}
    assert {k: temps[GPU0][k] for k in ("namespace", "pod", "container")} == {
        "namespace": "ml",
        "pod": "trainer-0",
        "container": "main",
    }
    assert {k: temps[GPU1][k] for k in ("namespace", "pod", "container")} == {
        "namespace": "",
        "pod": "",
        "container": "",
    }


def test_exporter_serves_pod_labels(kubelet: FakeKubelet) -> None:
    """The exporter as `kgpu exporter --pod-resources-socket PATH` wires it: /metrics over HTTP."""
    kubelet.response = response(pod("ml", "trainer-0", container("main", ("nvidia.com/gpu", [GPU1]))))
    config = ExporterConfig(listen="127.0.0.1:0", xid=False, pod_resources_socket=kubelet.socket_path)
    server, _ = build(config, lib=FakeNvml(make_gpus(2)))
    serve_in_thread(server)
    try:
        with urllib.request.urlopen(server.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    (line,) = [x for x in text.splitlines() if x.startswith("nvidia_smi_gpu_pod_info{")]
    for label in (f'uuid="{UUID1}"', 'namespace="ml"', 'pod="trainer-0"', 'container="main"'):
        assert label in line
    assert kubelet.calls == 1
