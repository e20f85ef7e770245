"""kgpu exporter in place of nvidia_gpu_exporter and dcgm-exporter: their collection-health metrics, and their
recommended XID alerts (run by the real promtool over the series the exporter serves) firing on kgpu's
series."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from fakes.fake_nvml import FakeNvml, make_gpus
from kgpu.cli.exporter_cmd import LogfmtFormatter, configure_logging, dropin_argv, translate
from kgpu.cli.main import cli
from kgpu.exporter.collector import CollectorOptions, GpuCollector
from kgpu.exporter.exposition import TextWriter
from kgpu.exporter.nvml import Nvml
from kgpu.exporter.xid import XidWatcher

# nvidia_gpu_exporter's docs/METRICS.md: "prefer the timestamp and filter to an explicit code allowlist"
NVIDIA_SMI_XID_ALERT = (
    'time() - nvidia_smi_xid_last_timestamp_seconds{xid=~"48|62|64|74|79|95|119|120"} < 300'
)
# NVIDIA/dcgm-exporter#309, the query that motivated the err_code/err_msg labels
DCGM_XID_ALERT = (
    'max(DCGM_FI_DEV_XID_ERRORS{err_code=~"4|8|9|12|13|24|30|31|37|38|43|48|54|74|119|140|143"}) '
    "by (Hostname, DCGM_FI_DRIVER_VERSION, device, gpu, modelName, err_msg)"
)


def samples(collector: GpuCollector) -> list[tuple[str, dict[str, str], float]]:
    text = TextWriter().render(collector.build()).decode()
    return [
        (s.name, dict(s.labels), s.value) for f in text_string_to_metric_families(text) for s in f.samples
    ]


def series(name: str, labels: dict[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def test_collection_health_metrics_as_nvidia_gpu_exporter_serves_them() -> None:
    """last_collect_success_timestamp_seconds, last_collect_duration_seconds and the NVML backend's
    nvml_return_code, without a uuid label: 0 and a timestamp after a good collection; NVML's GpuIsLost (15)
    after a failed one, the timestamp still that of the last success."""
    fake = FakeNvml(make_gpus(1))
    collector = GpuCollector(Nvml(fake), options=CollectorOptions(pods=False), hostname="h")
    good = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples(collector)}
    stamp = good[("nvidia_smi_last_collect_success_timestamp_seconds", ())]
    assert stamp > 1_700_000_000
    assert good[("nvidia_smi_nvml_return_code", ())] == 0
    assert good[("nvidia_smi_last_collect_duration_seconds", ())] >= 0
    fake.gpus[0].lost = True
    bad = {(n, tuple(sorted(labels.items()))): v for n, labels, v in samples(collector)}
    assert bad[("nvidia_smi_last_collect_success", ())] == 0
    assert bad[("nvidia_smi_nvml_return_code", ())] == 15
    assert bad[("nvidia_smi_last_collect_success_timestamp_seconds", ())] == stamp


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is not installed: `make test` unpacks Debian's prometheus package into .cache/deb")
    return path


@pytest.mark.integration
def test_upstream_xid_alerts_fire_on_kgpu_series(tmp_path: Path) -> None:
    """XID 79 (fallen off the bus) on GPU 0 and XID 13 (an application's fault) on GPU 1, at unix time 100:
    nvidia_gpu_exporter's alert (reset-class codes) fires for GPU 0's XID 79 only; the dcgm-exporter query
    (a list with 13, without 79) for GPU 1's XID 13 only, with dcgm-exporter's err_msg text."""
    nvml = Nvml(FakeNvml(make_gpus(2)))
    xid = XidWatcher(nvml)
    collector = GpuCollector(
        nvml, options=CollectorOptions(metrics="all", pods=False), xid=xid, hostname="n1"
    )
    uuids = [d.uuid for d in collector._device_infos()]
    xid.record(uuids[0], 79, when=100.0)
    xid.record(uuids[1], 13, when=100.0)
    wanted = {"nvidia_smi_xid_last_timestamp_seconds", "DCGM_FI_DEV_XID_ERRORS"}
    scraped = [(n, labels, v) for n, labels, v in samples(collector) if n in wanted]
    assert scraped
    rules = {
        "groups": [
            {
                "name": "upstream",
                "rules": [
                    {"alert": "NvidiaSmiXid", "expr": NVIDIA_SMI_XID_ALERT},
                    {"alert": "DcgmXid", "expr": DCGM_XID_ALERT},
                ],
            }
        ]
    }
    dcgm = {labels["UUID"]: labels for n, labels, _ in scraped if n == "DCGM_FI_DEV_XID_ERRORS"}
    dcgm = {u: dcgm[next(k for k in dcgm if k.lower().endswith(u))] for u in uuids}  # by kgpu's uuid
    by = ("Hostname", "DCGM_FI_DRIVER_VERSION", "device", "gpu", "modelName", "err_msg")
    test = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": series(n, labels), "values": f"{v:g}x10"} for n, labels, v in scraped
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "3m",
                        "alertname": "NvidiaSmiXid",
                        "exp_alerts": [
                            {"exp_labels": {"alertname": "NvidiaSmiXid", "uuid": uuids[0], "xid": "79"}}
                        ],
                    },
                    {
                        "eval_time": "3m",
                        "alertname": "DcgmXid",
                        "exp_alerts": [
                            {"exp_labels": {"alertname": "DcgmXid", **{k: dcgm[uuids[1]][k] for k in by}}}
                        ],
                    },
                ],
            }
        ],
    }
    assert {labels["err_msg"] for labels in dcgm.values()} == {
        "GPU has fallen off the bus",
        "Graphics Engine Exception",
    }
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test))
    result = subprocess.run(
        [promtool(), "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- their DaemonSets' command lines ------------------------------------------------------------------

# nvidia_gpu_exporter's Helm chart (charts/nvidia-gpu-exporter/templates/daemonset.yaml) with its default
# values, compute apps on; only the port differs, so that tests can run side by side
NVIDIA_GPU_EXPORTER_ARGS = [
    "--web.listen-address", ":0", "--web.telemetry-path", "/metrics", "--nvidia-smi-command", "nvidia-smi",
    "--query-field-names", "AUTO", "--collect.compute-apps", "--log.level", "info", "--log.format", "logfmt",
]  # fmt: skip
# dcgm-exporter's DaemonSet (its Helm chart's default arguments) and the variables the GPU Operator sets
DCGM_EXPORTER_ARGS = ["-f", "/etc/dcgm-exporter/dcp-metrics-included.csv"]
DCGM_EXPORTER_ENV = {"DCGM_EXPORTER_LISTEN": "127.0.0.1:0", "DCGM_EXPORTER_KUBERNETES": "true"}
# what kgpu's image runs for them: its entrypoint is `kgpu`, and kgpu reads a command line that starts with
# an exporter flag as `kgpu exporter ...` (exporter_cmd.dropin_argv)
ENTRYPOINT = (
    "import sys; from kgpu.cli.exporter_cmd import dropin_argv; from kgpu.cli.main import main; "
    "main(dropin_argv(sys.argv[1:]))"
)


def _serve_as(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, list[str]]:
    """Start kgpu's entrypoint with another exporter's arguments; (process, URL, log lines so far)."""
    import os
    import queue
    import re
    import threading
    import time

    proc = subprocess.Popen(
        [sys.executable, "-c", ENTRYPOINT, *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    stream = proc.stderr
    threading.Thread(target=lambda: [lines.put(ln) for ln in stream], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1)
        except queue.Empty:
            assert proc.poll() is None, "\n".join(seen)
            continue
        seen.append(line.rstrip("\n"))
        found = re.search(r"listening on (https?)://([^ ]+):(\d+) ", line)
        if found:
            host = "127.0.0.1" if found[2] in ("0.0.0.0", "[::]") else found[2]
            return proc, f"{found[1]}://{host}:{found[3]}", seen
    proc.kill()
    raise AssertionError("the exporter never said where it listens:\n" + "\n".join(seen))


def _get(url: str) -> tuple[int, str]:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _stop(proc: subprocess.Popen[str]) -> int:
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()


def test_nvidia_gpu_exporter_daemonset_runs_unchanged() -> None:
    """The chart's arguments start kgpu's exporter (no exit 2): logfmt lines, the flags without a kgpu
    meaning named once, /metrics with the health series, /-/healthy and /-/ready 200 (on a host without
    NVML, as here, the collection fails and says so in the metrics); SIGTERM ends it with 0."""
    proc, url, log = _serve_as(NVIDIA_GPU_EXPORTER_ARGS, {})
    try:
        status, body = _get(url + "/metrics")
        assert status == 200 and "nvidia_smi_last_collect_success " in body
        assert "nvidia_smi_nvml_return_code " in body
        assert _get(url + "/-/healthy")[0] == 200 and _get(url + "/-/ready")[0] == 200
    finally:
        code = _stop(proc)
    assert code == 0
    assert any(
        ln.startswith("ts=") and " level=info " in ln and "listening on http://0.0.0.0:" in ln for ln in log
    )
    ignored = [ln for ln in log if "accepted without effect" in ln]
    assert any("--nvidia-smi-command nvidia-smi (nvidia_gpu_exporter)" in ln for ln in ignored)
    assert any("--query-field-names AUTO (nvidia_gpu_exporter)" in ln for ln in ignored)


def test_dcgm_exporter_daemonset_runs_unchanged() -> None:
    """dcgm-exporter's `-f <counters>` with DCGM_EXPORTER_LISTEN and DCGM_EXPORTER_KUBERNETES: kgpu starts,
    listens where the variable says and names -f as accepted without effect."""
    proc, url, log = _serve_as(DCGM_EXPORTER_ARGS, DCGM_EXPORTER_ENV)
    try:
        assert url.startswith("http://127.0.0.1:")
        status, body = _get(url + "/metrics")
        assert status == 200 and "nvidia_smi_last_collect_success " in body
        assert _get(url + "/-/ready")[0] == 200
    finally:
        assert _stop(proc) == 0
    assert any("--collectors /etc/dcgm-exporter/dcp-metrics-included.csv (dcgm-exporter)" in ln for ln in log)


def test_translation_of_their_flags() -> None:
    """What each DaemonSet's command line becomes: mapped flags in kgpu's terms, the rest noted; dcgm-exporter's
    flags or variables bring its defaults (DCGM names on :9400) unless kgpu's own settings say otherwise."""
    args, notes = translate(NVIDIA_GPU_EXPORTER_ARGS, {})
    assert args == [
        "--web.listen-address", ":0", "--web.telemetry-path", "/metrics", "--processes",
        "--log.level", "info", "--log.format", "logfmt",
    ]  # fmt: skip
    assert [n.split(" (")[0] for n in notes] == [
        "--nvidia-smi-command nvidia-smi",
        "--query-field-names AUTO",
    ]
    args, _ = translate(DCGM_EXPORTER_ARGS, DCGM_EXPORTER_ENV)
    assert args == ["--metrics", "dcgm", "--web.listen-address", "127.0.0.1:0", "--pods"]
    args, _ = translate(["-f", "x.csv"], {})
    assert args == ["--web.listen-address", ":9400", "--metrics", "dcgm"]
    args, _ = translate(["-a", ":9500", "--metrics", "all"], {})
    assert args == ["--web.listen-address", ":9500", "--metrics", "all"]
    args, _ = translate(["-c", "30000", "--debug", "--kubernetes=false", "--web-config-file=/w.yml"], {})
    assert args[4:] == ["--max-age", "30", "--log.level=debug", "--web.config.file", "/w.yml"]
    args, _ = translate(
        ["--collect.interval", "1m30s", "--collect.timeout=0", "--no-collect.compute-apps"], {}
    )
    assert args == ["--max-age", "90", "--timeout", "3600", "--no-processes"]
    assert translate(["--", "--debug"], {})[0] == ["--", "--debug"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--collect.interval", "15"], "--collect.interval (nvidia_gpu_exporter): '15' is not a duration"),
        (["--collect.backend", "demo"], "--collect.backend (nvidia_gpu_exporter): 'demo': kgpu reads NVML"),
        (["-c", "soon"], "--collect-interval (dcgm-exporter): 'soon' is not a number of milliseconds"),
        (["--web.max-requests", "-1"], "--web.max-requests"),
        (["--web.read-header-timeout", "0"], "between 1ms and 1h"),
        (["--log.level", "trace"], "--log.level"),
        (["--no-such-flag"], "No such option '--no-such-flag'"),
        (["--kubernetes=maybe"], "--kubernetes=maybe: true or false"),
        (["-a"], "--address (dcgm-exporter) needs a value"),
    ],
)
def test_bad_flags_are_one_line_usage_errors(args: list[str], fragment: str) -> None:
    result = CliRunner().invoke(cli, ["exporter", *args])
    assert result.exit_code == 2, result.output
    assert fragment in result.stderr and "Traceback" not in result.stderr


def test_dropin_argv_reads_a_command_line_that_starts_with_an_exporter_flag() -> None:
    assert dropin_argv(NVIDIA_GPU_EXPORTER_ARGS) == ["exporter", *NVIDIA_GPU_EXPORTER_ARGS]
    assert dropin_argv(DCGM_EXPORTER_ARGS) == ["exporter", *DCGM_EXPORTER_ARGS]
    assert dropin_argv(["--web.max-requests=10"]) == ["exporter", "--web.max-requests=10"]
    for argv in (["plan"], ["--help"], ["--version"], [], ["--no-such-flag"]):
        assert dropin_argv(argv) == argv


def test_log_formats_and_levels_they_use() -> None:
    """--log.format logfmt writes promlog's key=value lines; --log.level warn is warning."""
    import logging

    record = logging.LogRecord("kgpu.exporter", logging.WARNING, __file__, 1, 'say "%s"', ("hi there",), None)
    line = LogfmtFormatter().format(record)
    assert line.startswith("ts=") and line.endswith(
        ' level=warning caller=kgpu.exporter msg="say \\"hi there\\""'
    )
    configure_logging("warn", "logfmt")
    try:
        assert logging.getLogger().level == logging.WARNING
    finally:
        configure_logging("info", "text")
