"""The exporter's Prometheus conventions: --web.listen-address / --web.telemetry-path, KGPU_EXPORTER_*
environment variables, gzip, TLS and basic auth from an exporter-toolkit web config file, JSON logs, and an
XID watcher that backs off when NVML is gone for good."""

from __future__ import annotations

import base64
import gzip
import http.client
import json
import logging
import shutil
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import click
import pytest
from click.testing import CliRunner

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.exporter_cmd import JsonFormatter
from kgpu.cli.exporter_cmd import command as exporter_command
from kgpu.cli.main import cli
from kgpu.exporter.collector import GpuCollector
from kgpu.exporter.nvml import Nvml, NvmlUnavailable
from kgpu.exporter.server import ExporterHTTPServer, accepts_gzip, make_server, serve_in_thread
from kgpu.exporter.webconfig import WebConfig, WebConfigError, load_web_config
from kgpu.exporter.xid import XidWatcher


def start(**kwargs) -> ExporterHTTPServer:  # type: ignore[no-untyped-def]
    srv = make_server(GpuCollector(Nvml(FakeNvml(make_gpus(2))), hostname="h"), "127.0.0.1:0", **kwargs)
    serve_in_thread(srv)
    return srv


@pytest.fixture
def stop() -> Iterator[list[ExporterHTTPServer]]:
    servers: list[ExporterHTTPServer] = []
    yield servers
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def get(srv: ExporterHTTPServer, path: str, headers: dict[str, str] | None = None, context=None):  # type: ignore[no-untyped-def]
    host, port = srv.server_address[:2]
    conn = (
        http.client.HTTPSConnection(str(host), int(port), context=context, timeout=5)
        if context
        else http.client.HTTPConnection(str(host), int(port), timeout=5)
    )
    conn.request("GET", path, headers=headers or {})
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp, body


def test_accept_encoding_parsing():
    assert accepts_gzip("gzip")
    assert accepts_gzip("deflate, gzip;q=0.5")
    assert accepts_gzip("*")
    assert not accepts_gzip("gzip;q=0")
    assert not accepts_gzip("identity")
    assert not accepts_gzip(None)


def test_gzip_when_asked_and_the_same_metrics(stop):
    srv = start(max_age=5)
    stop.append(srv)
    plain, body = get(srv, "/metrics")
    packed, zbody = get(srv, "/metrics", {"Accept-Encoding": "gzip"})
    assert plain.getheader("Content-Encoding") is None and packed.getheader("Content-Encoding") == "gzip"
    assert packed.getheader("Vary") == "Accept-Encoding"
    assert gzip.decompress(zbody) == body  # the reused collection, compressed
    assert len(zbody) * 4 < len(body)
    print(f"gzip: {len(body)} -> {len(zbody)} bytes")


def test_telemetry_path(stop):
    srv = start(telemetry_path="/gpu/metrics")
    stop.append(srv)
    assert get(srv, "/gpu/metrics")[0].status == 200
    assert get(srv, "/metrics")[0].status == 404
    assert b'href="/gpu/metrics"' in get(srv, "/")[1]


def _web(tmp_path: Path, text: str) -> WebConfig:
    path = tmp_path / "web.yml"
    path.write_text(text)
    return load_web_config(str(path))


def test_basic_auth(tmp_path: Path, stop):
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    web = _web(
        tmp_path,
        f"basic_auth_users:\n  prometheus: '{hashed}'\nhttp_server_config:\n  headers: {{X-Frame-Options: deny}}\n",
    )
    srv = start(web=web)
    stop.append(srv)

    def auth(user: str, password: str) -> dict[str, str]:
        return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}

    resp, _ = get(srv, "/metrics")
    assert resp.status == 401 and resp.getheader("WWW-Authenticate", "").startswith("Basic")
    assert get(srv, "/metrics", auth("prometheus", "wrong"))[0].status == 401
    assert get(srv, "/metrics", auth("nobody", "s3cret"))[0].status == 401
    ok, body = get(srv, "/metrics", auth("prometheus", "s3cret"))
    assert ok.status == 200 and b"nvidia_smi_" in body and ok.getheader("X-Frame-Options") == "deny"
    t = time.perf_counter()
    assert get(srv, "/metrics", auth("prometheus", "s3cret"))[0].status == 200  # remembered, no bcrypt again
    assert time.perf_counter() - t < 1.0


def openssl() -> str:
    path = shutil.which("openssl")
    if path is None:
        pytest.fail("openssl is not installed (Debian's openssl package)")
    return path


def _certs(d: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by the CA."""

    def run(*args: str) -> None:
        subprocess.run([openssl(), *args], cwd=d, check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=kgpu test CA",
    )
    for name, ext in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={name}",
        )
        (d / f"{name}.ext").write_text(ext + "\n")
        run(
            "x509",
            "-req",
            "-in",
            f"{name}.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            f"{name}.crt",
            "-days",
            "2",
            "-extfile",
            f"{name}.ext",
        )


def test_tls_with_client_certificates(tmp_path: Path, stop):
    _certs(tmp_path)
    web = _web(
        tmp_path,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS12\n",
    )
    srv = start(web=web)
    stop.append(srv)
    assert srv.url.startswith("https://127.0.0.1:")
    client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    client.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    resp, body = get(srv, "/metrics", context=client)
    assert resp.status == 200 and b"nvidia_smi_" in body
    anonymous = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        get(srv, "/metrics", context=anonymous)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        get(srv, "/metrics")  # plain HTTP to a TLS port
    assert get(srv, "/healthz", context=client)[0].status == 200  # still serving after the bad clients


def test_a_silent_client_does_not_block_the_tls_server(tmp_path: Path, stop):
    import socket

    _certs(tmp_path)
    web = _web(tmp_path, "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n")
    srv = start(web=web)
    stop.append(srv)
    host, port = srv.server_address[:2]
    silent = socket.create_connection((str(host), int(port)))  # connects, never says hello
    try:
        client = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
        assert get(srv, "/metrics", context=client)[0].status == 200
    finally:
        silent.close()


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("tls_server_config:\n  cert_file: a.crt\n", "cert_file and key_file"),
        ("basic_auth_user:\n  a: b\n", "unknown field 'basic_auth_user'"),
        ("basic_auth_users:\n  a: plain\n", "basic_auth_users.a: expected a bcrypt hash"),
        (
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [X]\n",
            "cipher_suites: not supported",
        ),
        ("tls_server_config: [1]\n", "tls_server_config: must be a mapping"),
        ("a: [", "invalid YAML"),
    ],
)
def test_web_config_errors_name_the_field(tmp_path: Path, text: str, field: str):
    with pytest.raises(WebConfigError, match=field.replace("(", r"\(")):
        _web(tmp_path, text)


def test_cli_bad_web_config_is_one_line_and_exit_2(tmp_path: Path):
    path = tmp_path / "web.yml"
    path.write_text("basic_auth_users:\n  a: plain\n")
    res = CliRunner().invoke(cli, ["exporter", "--web.config.file", str(path)])
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {path}: basic_auth_users.a: expected a bcrypt hash ($2y$...)"


def test_every_exporter_flag_has_a_kgpu_exporter_environment_variable():
    options = [p for p in exporter_command.params if isinstance(p, click.Option) and p.name != "help"]
    assert len(options) >= 14
    for p in options:
        assert isinstance(p.envvar, str) and p.envvar.startswith("KGPU_EXPORTER_"), p.name
    names = {p.envvar for p in options}
    assert {
        "KGPU_EXPORTER_WEB_LISTEN_ADDRESS",
        "KGPU_EXPORTER_WEB_TELEMETRY_PATH",
        "KGPU_EXPORTER_LOG_FORMAT",
    } <= names


def test_environment_variables_are_read_and_flags_win():
    res = CliRunner().invoke(cli, ["exporter"], env={"KGPU_EXPORTER_WEB_LISTEN_ADDRESS": "nowhere"})
    assert res.exit_code == 2 and "--web.listen-address" in res.output and "nowhere" in res.output
    res = CliRunner().invoke(
        cli, ["exporter", "--web.telemetry-path", "/"], env={"KGPU_EXPORTER_WEB_TELEMETRY_PATH": "/m"}
    )
    assert res.exit_code == 2 and "'/'" in res.output


def test_old_flag_spellings_still_parse():
    res = CliRunner().invoke(
        cli, ["exporter", "--listen", "bad", "--log-level", "debug", "--log-format", "json"]
    )
    assert res.exit_code == 2 and "bad" in res.output


def test_json_log_lines():
    record = logging.LogRecord(
        "kgpu.exporter.xid", logging.WARNING, __file__, 1, "XID watcher: %s", ("gone",), None
    )
    entry = json.loads(JsonFormatter().format(record))
    assert entry["level"] == "warning" and entry["msg"] == "XID watcher: gone"
    assert entry["caller"] == "kgpu.exporter.xid" and entry["ts"].endswith("Z")


class Gone(FakeNvml):
    """NVML that never initialises again: the driver was removed."""

    def nvmlInit(self) -> None:  # type: ignore[override]
        self.init_calls += 1
        raise self.NVMLError(9)  # NVML_ERROR_DRIVER_NOT_LOADED


def test_xid_watcher_backs_off_and_logs_twice_when_nvml_is_gone(caplog):
    watcher = XidWatcher(Nvml(FakeNvml(make_gpus(1))), retry_s=5, max_retry_s=300)
    assert [watcher.retry_delay(n) for n in (1, 2, 3, 6, 7, 20)] == [5, 10, 20, 160, 300, 300]

    nvml = Nvml(Gone(make_gpus(1)))
    watcher = XidWatcher(nvml, retry_s=0.001, max_retry_s=0.016)
    caplog.set_level(logging.DEBUG, logger="kgpu.exporter.xid")
    watcher.start()
    try:
        deadline = time.monotonic() + 10
        while watcher.failures < 25:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        watcher.stop()
    loud = [r for r in caplog.records if r.name == "kgpu.exporter.xid" and r.levelno >= logging.INFO]
    assert len(loud) == 2, [r.getMessage() for r in loud]
    assert "backing off" in loud[1].getMessage()
    assert threading.active_count() >= 1


def test_nvml_gone_error_is_nvml_unavailable():
    with pytest.raises(NvmlUnavailable):
        Nvml(Gone(make_gpus(1))).ensure_init()
