"""`kgpu top`: GPUs per node and pool from the fake API server (allocatable, requested as the scheduler sums
a pod's containers and init containers, finished and unbound pods left out), and the utilisation column
from Debian's real Prometheus scraping kgpu's exporter over the fake NVML; a Prometheus that answers
garbage, slowly or not at all leaves a note and the rest of the view."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from click.testing import CliRunner, Result

from fake_apiserver import CORE, FakeApiServer
from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.main import cli
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.server import make_server, serve_in_thread
from kgpu.render.monitoring import prometheus_config
from snapshot_builders import container, node, pod

GPU_TOL = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def gpu_node(name: str, itype: str, labels: dict[str, str], gpus: int, *, address: str = "10.0.1.17",
             capacity: str = "on-demand", extra: dict[str, str] | None = None) -> dict[str, Any]:
    shape = itype if itype != "p4d.24xlarge" else "p3.8xlarge"  # the builder's shapes have no p4d
    n = node(name, shape, labels=labels, gpus=gpus, capacity_type=capacity)
    for key in ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type"):
        n["metadata"]["labels"][key] = itype
    n["status"]["allocatable"].update(extra or {})
    n["status"]["capacity"].update(extra or {})  # the kubelet's capacity holds what the plugin registered too
    n["status"]["addresses"] = [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}]
    return n


def trainer(name: str, node_name: str | None, gpus: int, *, phase: str | None = None,
            init_gpus: int | None = None, resource: str = "nvidia.com/gpu") -> dict[str, Any]:
    c = container("train", "nvcr.io/nvidia/pytorch:24.05-py3", requests={"cpu": "4", resource: str(gpus)},
                  limits={resource: str(gpus)})
    p = pod(name, "ml", containers=[c], node_name=node_name, tolerations=GPU_TOL, phase=phase)
    if init_gpus is not None:
        p["spec"]["initContainers"] = [container("warmup", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                                                 limits={"nvidia.com/gpu": str(init_gpus)})]
    return p


def cluster() -> list[dict[str, Any]]:
    kp = {"karpenter.sh/nodepool": "gpu-train", "karpenter.sh/capacity-type": "spot"}
    eksctl = {"alpha.eksctl.io/nodegroup-name": "ng-infer", "alpha.eksctl.io/cluster-name": "ml-prod",
              "eks.amazonaws.com/capacityType": "ON_DEMAND"}
    mig = {"alpha.eksctl.io/nodegroup-name": "ng-infer", "nvidia.com/mig.strategy": "mixed"}
    return [
        node("cpu-1", "m5.xlarge", gpu_capacity=None),
        gpu_node("gpu-a", "p3.8xlarge", kp, 4, address="127.0.0.2"),
        gpu_node("gpu-b", "g5.12xlarge", kp, 4, address="127.0.0.1"),
        gpu_node("gpu-c", "g5.xlarge", eksctl, 1, address="10.0.2.9"),
        gpu_node("gpu-m", "p4d.24xlarge", mig, 0, address="10.0.2.10",
                 extra={"nvidia.com/mig-1g.5gb": "14", "nvidia.com/gpu": "0"}),
        trainer("train-0", "gpu-a", 2),
        trainer("train-1", "gpu-a", 1, init_gpus=2),  # init 2 > containers 1: counts 2
        trainer("done-0", "gpu-a", 1, phase="Succeeded"),  # finished: holds nothing
        trainer("pending-0", None, 8),  # not bound: on no node
        trainer("infer-0", "gpu-b", 1),
        trainer("small-0", "gpu-m", 2, resource="nvidia.com/mig-1g.5gb"),
        pod("web", containers=[container("web", "nginx:1.27")], node_name="cpu-1"),
    ]


def kgpu(server: FakeApiServer, tmp_path: Path, *args: str) -> Result:
    kc = tmp_path / "kc"
    kc.write_text(yaml.safe_dump(server.kubeconfig()))
    return CliRunner().invoke(cli, ["top", "--kubeconfig", str(kc), *args],
                              env={"KUBECONFIG": "", "HOME": "/nonexistent"})


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    server = FakeApiServer(cluster(), served=CORE)
    with server.running():
        yield server


def test_gpus_per_node_and_pool(api: FakeApiServer, tmp_path: Path) -> None:
    res = kgpu(api, tmp_path, "-o", "json", "--page-size", "3")
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    nodes = {n["node"]: n for n in data["nodes"]}
    assert set(nodes) == {"gpu-a", "gpu-b", "gpu-c", "gpu-m"}  # cpu-1 has no GPUs
    assert nodes["gpu-a"]["resources"] == {"nvidia.com/gpu": {"allocatable": 4, "requested": 4}}
    assert nodes["gpu-b"]["resources"] == {"nvidia.com/gpu": {"allocatable": 4, "requested": 1}}
    assert nodes["gpu-c"]["resources"] == {"nvidia.com/gpu": {"allocatable": 1, "requested": 0}}
    # the nvidia.com/gpu the kubelet keeps at 0 on a MIG mixed node is not a row
    assert nodes["gpu-m"]["resources"] == {"nvidia.com/mig-1g.5gb": {"allocatable": 14, "requested": 2}}
    assert nodes["gpu-m"]["gpu_kind"] == "mig mixed" and nodes["gpu-a"]["gpu_kind"] == "whole"
    assert (nodes["gpu-a"]["pool"], nodes["gpu-a"]["pool_source"], nodes["gpu-a"]["instance_type"]) == (
        "gpu-train", "karpenter", "p3.8xlarge")
    pools = {p["pool"]: p for p in data["pools"]}
    assert pools["gpu-train"]["nodes"] == 2 and pools["gpu-train"]["capacity_types"] == ["spot"]
    assert pools["gpu-train"]["instance_types"] == ["g5.12xlarge", "p3.8xlarge"]
    assert pools["gpu-train"]["resources"]["nvidia.com/gpu"] == {"allocatable": 8, "requested": 5}
    assert pools["ng-infer"]["source"] == "eksctl" and pools["ng-infer"]["node_names"] == ["gpu-c", "gpu-m"]
    assert pools["ng-infer"]["resources"]["nvidia.com/mig-1g.5gb"] == {"allocatable": 14, "requested": 2}
    assert data["prometheus"] is False and all(n["utilization"] is None for n in data["nodes"])
    # Read-only, and paged.
    assert {r.method for r in api.requests} == {"GET"}
    assert len([r for r in api.requests if r.path == "/api/v1/pods"]) == 3


def test_table_and_pools_only(api: FakeApiServer, tmp_path: Path) -> None:
    res = kgpu(api, tmp_path)
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0] == f"GPU nodes of cluster {api.url} (GPUS: requested / allocatable)"
    assert lines[1].split() == ["NODE", "POOL", "GPU", "KIND", "GPUS", "$/H", "STATUS"]
    # p3.8xlarge spot in us-west-2: the catalog's spot median; p4d.24xlarge on-demand
    from kgpu.catalog import aws_catalog

    spot = aws_catalog().pricing("p3.8xlarge", "us-west-2").spot
    p4d = aws_catalog().pricing("p4d.24xlarge", "us-west-2").on_demand
    assert next(ln for ln in lines if ln.startswith("gpu-a")).split() == [
        "gpu-a", "gpu-train", "V100-SXM2-16GB×4", "whole", "██████████", "4/4", f"${spot:.3f}", "Ready"]
    # the MIG node: its line, then one per MIG profile, the node's name on each
    mig = [ln.split() for ln in lines if ln.startswith("gpu-m")]
    # GFD's labels (the builder's, of a p3) name the GPUs, not the instance type
    assert mig[0][2:] == ["V100-SXM2-16GB×4", "mig", "█░░░░░░░░░", "2/14", f"${p4d:.3f}", "Ready"]
    assert mig[1][2:] == ["1g.5gb", "mig", "█░░░░░░░░░", "2/14", "-", "-"]
    res = kgpu(api, tmp_path, "--pools", "--no-headers")
    assert res.exit_code == 0, res.output
    rows = [ln.split() for ln in res.stdout.splitlines() if ln.strip()]
    assert rows[0][:3] == ["gpu-train", "karpenter", "2"] and rows[0][4] == "5/8"
    assert not any(r[0] == "gpu-a" for r in rows)


def test_bad_quantity_is_one_line_naming_the_object(tmp_path: Path) -> None:
    objs = cluster()
    objs[5]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "four"
    server = FakeApiServer(objs, served=CORE)
    with server.running():
        res = kgpu(server, tmp_path)
    assert res.exit_code == 2
    assert "Pod/ml/train-0.spec.containers[0].resources.limits.nvidia.com/gpu" in res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


# --- Prometheus ----------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def exporter(utils: list[int]) -> Any:
    gpus = make_gpus(len(utils))
    for g, u in zip(gpus, utils, strict=True):
        g.util_gpu = u
    server = make_server(GpuCollector(Nvml(FakeNvml(gpus)), hostname="h"), "127.0.0.1:0")
    serve_in_thread(server)
    return server


def query(base: str, expr: str) -> list[Any]:
    url = f"{base}/api/v1/query?{urllib.parse.urlencode({'query': expr})}"
    with urllib.request.urlopen(url, timeout=5) as resp:
        return list(json.loads(resp.read())["data"]["result"])


@pytest.mark.integration
def test_utilisation_from_a_real_prometheus(api: FakeApiServer, tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus package is needed (make promtool unpacks it into .cache/deb)"
    on_a = exporter([20, 60, 100, 0])  # gpu-a: 4 GPUs, by the ServiceMonitor's node label
    on_b = exporter([90, 70, 80, 80])  # gpu-b: no node label; its instance's host is gpu-b's InternalIP
    targets = [{"targets": [f"127.0.0.1:{on_a.server_address[1]}"], "labels": {"node": "gpu-a"}},
               {"targets": [f"127.0.0.1:{on_b.server_address[1]}"]}]
    config = prometheus_config(targets)
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["scrape_configs"][0]["scrape_interval"] = "1s"
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
            try:
                if len(query(base, "nvidia_smi_utilization_gpu_ratio")) == 8:
                    break
            except OSError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail("the exporters' series never reached Prometheus")
        res = kgpu(api, tmp_path, "--prometheus", base, "-o", "json")
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        nodes = {n["node"]: n for n in data["nodes"]}
        assert data["prometheus"] is True
        assert nodes["gpu-a"]["utilization"] == pytest.approx(0.45) and nodes["gpu-a"]["gpus_reporting"] == 4
        assert nodes["gpu-b"]["utilization"] == pytest.approx(0.8) and nodes["gpu-b"]["gpus_reporting"] == 4
        assert nodes["gpu-c"]["utilization"] is None  # no exporter there
        pool = next(p for p in data["pools"] if p["pool"] == "gpu-train")
        assert pool["utilization"] == pytest.approx(0.625, abs=1e-4)
        table = kgpu(api, tmp_path, "--prometheus", base)
        row = next(ln for ln in table.stdout.splitlines() if ln.startswith("gpu-b"))
        header = table.stdout.splitlines()[1].split()
        assert "UTIL" in header and row.split()[header.index("UTIL") + 1] == "80%"  # the bar is two words
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        on_a.shutdown()
        on_b.shutdown()


class _Hostile(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    answers: ClassVar[dict[str, bytes | None]] = {}

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.server.mode == "unauthorized":  # type: ignore[attr-defined]
            # an error page that quotes the request's headers back, as some proxies' do
            body = (f"401 Unauthorized: bad credentials; request headers: Authorization: "
                    f"{self.headers.get('Authorization')}; user u:S3cr3t-pw").encode()
            self.send_response(401)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        body = self.answers.get(self.server.mode)  # type: ignore[attr-defined]
        if body is None:  # drip forever
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(600):
                    self.wfile.write(b"1\r\n \r\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


_Hostile.answers = {
    "matrix": json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}}).encode(),
    "error": json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}).encode(),
    "deep": b"[" * 100_000 + b"]" * 100_000,
    "value": json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": "gpu-a"}, "value": [1, {"x": 1}]}]}}).encode(),
    "drip": None,
}


@pytest.mark.parametrize(("mode", "words"), [
    ("matrix", "not an instant vector"), ("error", "bad_data: parse error"), ("deep", "not valid"),
    ("value", "value[1] is not a number"), ("drip", "no answer from"),
])
def test_a_hostile_prometheus_leaves_a_note_and_the_view(api: FakeApiServer, tmp_path: Path, mode: str,
                                                         words: str) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    server.mode = mode  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        start = time.monotonic()
        res = kgpu(api, tmp_path, "--prometheus", f"http://u:pw@127.0.0.1:{server.server_address[1]}",
                   "--request-timeout", "1")
        assert time.monotonic() - start < 8
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 0, res.output
    assert words in res.stderr and "note: no utilisation shown" in res.stderr
    assert "pw" not in res.stderr and "Traceback" not in res.output
    assert res.stdout.startswith("GPU nodes of cluster") and "UTIL" not in res.stdout


def test_a_401_that_quotes_the_authorization_header_prints_no_credential(api: FakeApiServer, tmp_path: Path) -> None:
    import base64

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    server.mode = "unauthorized"  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        res = kgpu(api, tmp_path, "--prometheus", f"http://u:S3cr3t-pw@127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert res.exit_code == 0, res.output
    assert "401 Unauthorized" in res.stderr and "note: no utilisation shown" in res.stderr
    secret = base64.b64encode(b"u:S3cr3t-pw").decode()
    assert "S3cr3t" not in res.stderr and secret not in res.stderr and secret[:12] not in res.stderr
    assert "<redacted>" in res.stderr


def test_a_prometheus_url_that_is_not_http_is_bad_input(api: FakeApiServer, tmp_path: Path) -> None:
    res = kgpu(api, tmp_path, "--prometheus", "prometheus:9090")
    assert res.exit_code == 2 and "--prometheus" in res.output and "http://" in res.output
