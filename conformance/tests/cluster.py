"""A real cluster on 127.0.0.1: etcd, kube-apiserver, kube-scheduler and kwok, built by conformance/build.sh.

The API server serves TLS with a generated CA and authenticates client certificates; RBAC is on. Two
kubeconfigs are written, as a user would have them: ``admin`` (group system:masters) and ``viewer`` (no
permissions until the test grants some). kwok runs the nodes annotated ``kwok.x-k8s.io/node: fake``,
makes them Ready and moves their pods through kwok's own stages, plus two stages of our own that finish
the pods ``kgpu run`` creates (exit 0 for the built-in tests, exit 1 for ``--image``), since a fake node
runs no container. Everything started is stopped again, also when a start fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

KWOK_STAGES = [  # kwok's own stage files (read from its Go module): node lifecycle, pod lifecycle
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat/node-heartbeat.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-complete.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
]


def _run_stage(name: str, exit_code: int, tests_op: str) -> dict[str, Any]:
    phase = "Succeeded" if exit_code == 0 else "Failed"
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
            "selector": {"matchExpressions": [
                {"key": '.metadata.labels["app.kubernetes.io/name"]', "operator": "In", "values": ["kgpu-run"]},
                {"key": '.metadata.labels["kgpu.dev/test"]', "operator": tests_op, "values": ["image"]},
                {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"},
                {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            ]},
            "delay": {"durationMilliseconds": 1500},
            "next": {"statusTemplate": (
                "{{ $now := Now }}\ncontainerStatuses:\n{{ range $index, $item := .spec.containers }}\n"
                "- image: {{ $item.image | Quote }}\n  name: {{ $item.name | Quote }}\n  ready: false\n"
                "  restartCount: 0\n  state:\n    terminated:\n"
                f"      exitCode: {exit_code}\n      reason: {'Completed' if exit_code == 0 else 'Error'}\n"
                "      startedAt: {{ $now | Quote }}\n      finishedAt: {{ $now | Quote }}\n{{ end }}\n"
                f"phase: {phase}\n"
            )},
        },
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """A CA, the API server's serving certificate (127.0.0.1), two client certificates, an SA key."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
             "-days", "2", "-subj", "/CN=kgpu-conformance-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n")
    for name, subj, ext in [("apiserver", "/CN=kube-apiserver", ["-extfile", "san.ext"]),
                            ("admin", "/O=system:masters/CN=kgpu-admin", []),
                            ("viewer", "/CN=kgpu-viewer", [])]:
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subj, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                 "-out", f"{name}.crt", "-days", "2", *ext, cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)


def write_kubeconfig(path: Path, server: str, d: Path, user: str, namespace: str = "default") -> Path:
    """Client certificate by file path, relative to the kubeconfig, as kubeadm-style configs have it."""
    cfg = {
        "apiVersion": "v1", "kind": "Config", "current-context": f"{user}@kgpu-conformance",
        "clusters": [{"name": "kgpu-conformance", "cluster": {"server": server, "certificate-authority": "pki/ca.crt"}}],
        "contexts": [{"name": f"{user}@kgpu-conformance",
                      "context": {"cluster": "kgpu-conformance", "user": user, "namespace": namespace}}],
        "users": [{"name": user, "user": {"client-certificate": f"pki/{user}.crt", "client-key": f"pki/{user}.key"}}],
    }
    path.write_text(yaml.safe_dump(cfg))
    return path


class LocalCluster:
    def __init__(self, bin_dir: Path, work: Path, kwok_module: Path) -> None:
        self.bin = bin_dir
        self.work = work
        self.kwok_module = kwok_module
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.server = ""

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> LocalCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self) -> None:
        pki = self.work / "pki"
        pki.mkdir(parents=True)
        make_pki(pki)
        etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
        self._spawn("etcd", [str(self.bin / "kube" / "etcd"), "--data-dir", str(self.work / "etcd"),
                             "--listen-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{etcd_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-cluster", f"default=http://127.0.0.1:{peer_port}",
                             "--unsafe-no-fsync", "--log-level", "warn"])
        self._spawn("kube-apiserver", [
            str(self.bin / "kube" / "kube-apiserver"), "--etcd-servers", f"http://127.0.0.1:{etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", str(api_port),
            "--tls-cert-file", str(pki / "apiserver.crt"), "--tls-private-key-file", str(pki / "apiserver.key"),
            "--client-ca-file", str(pki / "ca.crt"), "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(pki / "sa.pub"),
            "--service-account-signing-key-file", str(pki / "sa.key"),
            "--service-cluster-ip-range", "10.96.0.0/16",
            # No controller-manager runs: nothing would create the `default` ServiceAccount, nor lift the
            # not-ready taint the TaintNodesByCondition admission puts on new nodes (kwok makes them Ready).
            "--disable-admission-plugins", "ServiceAccount,TaintNodesByCondition",
            "--enable-priority-and-fairness=false", "--v=0"])
        self.server = f"https://127.0.0.1:{api_port}"
        self.admin = write_kubeconfig(self.work / "admin.kubeconfig", self.server, pki, "admin")
        self.viewer = write_kubeconfig(self.work / "viewer.kubeconfig", self.server, pki, "viewer")
        self._wait_ready()
        self._spawn("kube-scheduler", [str(self.bin / "kube" / "kube-scheduler"), "--kubeconfig", str(self.admin),
                                       "--leader-elect=false", "--bind-address", "127.0.0.1",
                                       "--secure-port", str(free_port()), "--v=1"])
        stages = [doc for rel in KWOK_STAGES for doc in yaml.safe_load_all((self.kwok_module / rel).read_text()) if doc]
        stages += [_run_stage("kgpu-run-pass", 0, "NotIn"), _run_stage("kgpu-run-fail", 1, "In")]
        config = self.work / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(stages))
        self._spawn("kwok", [str(self.bin / "kwok" / "kwok"), "--kubeconfig", str(self.admin), "--config", str(config),
                             "--manage-all-nodes=false",
                             "--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node=fake",
                             "--node-ip", "127.0.0.1", "--cidr", "10.244.0.0/16",
                             "--server-address", f"127.0.0.1:{free_port()}"])

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.work / f"{name}.log").open("wb")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((name, proc))
        time.sleep(0.3)
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited at start: {self.tail(name)}")

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.work / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _wait_ready(self, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for name, proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited: {self.tail(name)}")
            try:
                if self.request("GET", "/readyz").get("_text", "").strip() == "ok":
                    # The bootstrap controller creates the default namespace shortly after readiness.
                    self.request("GET", "/api/v1/namespaces/default")
                    return
            except (OSError, urllib.error.URLError, ValueError) as exc:
                last = str(exc)
            time.sleep(0.5)
        raise RuntimeError(f"kube-apiserver not ready after {timeout}s ({last}): {self.tail('kube-apiserver')}")

    def stop(self) -> None:
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for _, proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self.procs.clear()
        shutil.rmtree(self.work / "etcd", ignore_errors=True)

    # --- admin requests (test set-up only; kgpu talks through its own client) --------------------------

    def _context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.work / "pki" / "ca.crt"))
        ctx.load_cert_chain(str(self.work / "pki" / "admin.crt"), str(self.work / "pki" / "admin.key"))
        return ctx

    def request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, context=self._context(), timeout=30) as resp:
            text = resp.read().decode()
        try:
            out: dict[str, Any] = json.loads(text)
        except ValueError:
            out = {"_text": text}
        return out

    def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        api, kind = obj["apiVersion"], obj["kind"]
        plural = {"Node": "nodes", "Pod": "pods", "DaemonSet": "daemonsets", "Namespace": "namespaces",
                  "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
                  "ServiceAccount": "serviceaccounts", "PriorityClass": "priorityclasses"}[kind]
        base = f"/api/{api}" if "/" not in api else f"/apis/{api}"
        ns = obj.get("metadata", {}).get("namespace")
        if ns and kind not in ("Node", "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass"):
            base += f"/namespaces/{ns}"
        return self.request("POST", f"{base}/{plural}", obj)

    def get(self, path: str) -> dict[str, Any]:
        return self.request("GET", path)

    def wait_for(self, what: str, check: Any, timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what}")


def start_cluster(bin_dir: Path, work: Path) -> LocalCluster:
    """A started LocalCluster with the binaries under ``bin_dir`` and kwok's stage files from its Go module."""
    kwok_dir = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"],
                              cwd=Path(__file__).parents[1] / "kwok", capture_output=True, text=True,
                              check=True).stdout.strip()
    return LocalCluster(bin_dir, work, Path(kwok_dir)).start()


def unscheduled_message(pod: dict[str, Any]) -> str:
    """The message of the pod's PodScheduled=False condition (kube-scheduler's FailedScheduling words)."""
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return str(cond.get("message", ""))
    return ""
