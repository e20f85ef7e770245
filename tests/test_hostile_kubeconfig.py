"""A kubeconfig whose cluster ``server`` is not a usable URL is bad input: exit 2 with one line naming the
kubeconfig file, the cluster and the field, before any request; never an httpx.InvalidURL traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kgpu.live import kubeconfig
from kgpu.live.kubeconfig import Access, ClusterError, resolve
from test_live import write_kubeconfig
from test_live_hostile import kgpu, one_error_line


def config(server: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Config", "current-context": "ctx",
        "clusters": [{"name": "c1", "cluster": {"server": server}}],
        "users": [{"name": "u1", "user": {"token": "abc"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c1", "user": "u1"}}],
    }


@pytest.mark.parametrize(
    ("server", "words"),
    [
        ("https://[::1", "Invalid port"),
        ("https://[::1]x:6443", "invalid server URL"),
        ("example.com:6443", "not an http:// or https:// URL with a host"),
        ("ftp://example.com", "not an http:// or https:// URL with a host"),
        ("", "not an http:// or https:// URL with a host"),
    ],
)
@pytest.mark.parametrize("verb", [["snapshot"], ["top"], ["run", "--timeout", "5"]])
def test_a_bad_server_url_is_one_line_naming_file_cluster_and_field(tmp_path: Path, server: str, words: str,
                                                                   verb: list[str]) -> None:
    kc = write_kubeconfig(tmp_path / "kc", config(server))
    res = kgpu([*verb, "--kubeconfig", str(kc)])
    assert res.exit_code == 2, res.output
    line = one_error_line(res)
    assert f"{kc}: clusters[c1].cluster.server" in line and words in line, line


def test_the_password_in_a_bad_server_url_is_never_printed(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", config("https://admin:s3cret@[::1"))
    res = kgpu(["snapshot", "--kubeconfig", str(kc)])
    assert res.exit_code == 2
    line = one_error_line(res)
    assert "s3cret" not in res.output and "s3cret" not in line and "https://[::1" in line


def test_the_file_that_defines_the_cluster_is_named(tmp_path: Path) -> None:
    """Of merged KUBECONFIG files, the one whose cluster entry is used (the first to define it)."""
    first = config("https://[::1")
    del first["users"], first["contexts"], first["current-context"]
    second = config("https://example.com")
    a = write_kubeconfig(tmp_path / "a", first)
    b = write_kubeconfig(tmp_path / "b", second)
    with pytest.raises(ClusterError) as err:
        resolve(Access(), environ={"KUBECONFIG": f"{a}:{b}"})
    assert err.value.where == f"{a}: clusters[c1].cluster.server"


def test_a_good_server_url_still_resolves(tmp_path: Path) -> None:
    kc = write_kubeconfig(tmp_path / "kc", config("https://[::1]:6443"))
    target = resolve(Access(kubeconfig=str(kc)))
    assert target.server == "https://[::1]:6443"


def test_an_in_cluster_server_that_does_not_parse_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("abc")
    (sa / "ca.crt").write_text("")
    (sa / "namespace").write_text("default")
    monkeypatch.setattr(kubeconfig, "IN_CLUSTER_DIR", sa)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "[fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(ClusterError) as err:
        resolve(Access(), environ={"KUBERNETES_SERVICE_HOST": "[fd00::1", "HOME": str(tmp_path)})
    assert "KUBERNETES_SERVICE_HOST" in (err.value.where or "") and "invalid server URL" in err.value.message
