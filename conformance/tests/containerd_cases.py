"""Host containerd configurations and the real releases' `containerd config dump` of them.

Every case is a host's `/etc/containerd/config.toml` (tests/fixtures/containerd/<shape>/config.toml, as the
bootstrap script leaves it: importing `/etc/containerd/conf.d/*.toml`) with one of kgpu's rendered drop-ins
(or none) in conf.d. `dump` runs a release's `containerd --config F config dump` on a temporary copy, as the
daemon loads it but without one; the imports line and the error messages are written with host paths.

    python conformance/tests/containerd_cases.py BIN_DIR    # rewrite the stored dumps from the binaries

(BIN_DIR: what conformance/build.sh prints.) `make test` compares kgpu's reading of the same files with the
stored dumps (tests/test_containerd_configs.py); `make conformance` compares the stored dumps with fresh ones
(test_containerd_configs.py here), so they can never go stale.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from kgpu.render import onprem

FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "containerd"
# release -> the conformance module (under conformance/, and under build.sh's bin directory) that builds it
RELEASES = {
    "2.1.4": "containerd/v21",
    "2.3.4": "containerd/v23",
    "2.4.2": "containerd/v24",
}
DROPINS = ("none", "v2", "v3", "v4")
HOST_IMPORTS = "/etc/containerd/conf.d/*.toml"


def shapes() -> list[str]:
    return sorted(p.parent.name for p in FIXTURES.glob("*/config.toml"))


def dropin_text(dropin: str) -> str | None:
    """kgpu's rendered drop-in at config version N ("vN"), or None."""
    if dropin == "none":
        return None
    return onprem.containerd_dropin(int(dropin[1:]))


def dump(binary: Path, config: str, dropin: str | None) -> tuple[int, str]:
    """(exit status, the dump on success or containerd's last error line) for config.toml and a drop-in."""
    with tempfile.TemporaryDirectory(prefix="kgpu-containerd-") as tmp:
        etc = Path(tmp) / "etc/containerd"
        (etc / "conf.d").mkdir(parents=True)
        assert HOST_IMPORTS in config, "the shapes import conf.d as the bootstrap writes it"
        (etc / "config.toml").write_text(config.replace(HOST_IMPORTS, f"{tmp}{HOST_IMPORTS}"))
        if dropin is not None:
            (etc / "conf.d/99-nvidia.toml").write_text(dropin)
        result = subprocess.run(
            [str(binary), "--config", str(etc / "config.toml"), "config", "dump"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if result.returncode == 0:
            return 0, result.stdout.replace(tmp, "")
        last = [ln for ln in result.stderr.splitlines() if ln.startswith("containerd: ")]
        return result.returncode, (last[-1] if last else result.stderr.strip()).replace(tmp, "")


def stored(shape: str, release: str, dropin: str) -> tuple[int, str]:
    """The stored dump (exit 0) or refusal (exit 1, the error line) of one case."""
    base = FIXTURES / shape / "dumps" / release
    ok = base / f"{dropin}.toml"
    if ok.exists():
        return 0, ok.read_text()
    return 1, (base / f"{dropin}.refused").read_text().strip()


def default_config(binary: Path) -> str:
    return subprocess.run(
        [str(binary), "config", "default"], capture_output=True, text=True, timeout=60, check=True
    ).stdout


def version_line(binary: Path) -> str:
    out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def write_all(bin_dir: Path) -> None:
    for release, module in RELEASES.items():
        binary = bin_dir / module / "containerd"
        got = re.search(r"\b(\d+\.\d+\.\d+)", version_line(binary))
        assert got and got[1] == release, (binary, version_line(binary))
        (FIXTURES / "defaults").mkdir(exist_ok=True)
        (FIXTURES / "defaults" / f"{release}.toml").write_text(default_config(binary))
        for shape in shapes():
            config = (FIXTURES / shape / "config.toml").read_text()
            out = FIXTURES / shape / "dumps" / release
            out.mkdir(parents=True, exist_ok=True)
            for old in out.iterdir():
                old.unlink()
            for dropin in DROPINS:
                rc, text = dump(binary, config, dropin_text(dropin))
                if rc == 0:
                    (out / f"{dropin}.toml").write_text(text)
                else:
                    (out / f"{dropin}.refused").write_text(text + "\n")


if __name__ == "__main__":
    write_all(Path(sys.argv[1]))
