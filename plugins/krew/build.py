"""Build the krew archive for `kubectl gpu` reproducibly and keep plugins/gpu.yaml's sha256 true.

    python plugins/krew/build.py            # writes dist/kubectl-gpu-v<version>.tar.gz, prints its sha256
    python plugins/krew/build.py --update   # also rewrites the sha256 and version in plugins/gpu.yaml

The archive holds two small shell scripts that run the installed `kgpu` (krew cannot install a Python
package), `kubectl-gpu` and `kubectl_complete-gpu`, and the project's LICENSE, which krew's submission
checklist asks every archive to carry and every manifest to extract. Fixed mtimes, owners and modes and gzip without a
timestamp make the same sources give the same bytes, so the manifest's sha256 can be checked in a test.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import re
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
MANIFEST = ROOT / "plugins" / "gpu.yaml"
FILES = ("kubectl-gpu", "kubectl_complete-gpu", "LICENSE")
EXECUTABLES = frozenset({"kubectl-gpu", "kubectl_complete-gpu"})


def source(name: str) -> Path:
    """Where an archive member comes from: the shims beside this file, the LICENSE at the top."""
    return ROOT / name if name == "LICENSE" else HERE / name


def version() -> str:
    text = (ROOT / "src" / "kgpu" / "__init__.py").read_text()
    match = re.search(r'__version__\s*=\s*"([^"]+)"', text)
    assert match, "src/kgpu/__init__.py has no __version__"
    return match.group(1)


def archive_bytes() -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name in FILES:
            data = source(name).read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 0
            info.mode = 0o755 if name in EXECUTABLES else 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def sha256() -> str:
    return hashlib.sha256(archive_bytes()).hexdigest()


WHEEL_URL = re.compile(r"/download/v[^/\s]+/kgpu-[^/\s]+-py3-none-any\.whl")


def wheel_url(ver: str) -> str:
    """Where a release publishes kgpu's wheel: what the shim and the manifest's caveats tell people to
    install (kgpu is not on PyPI)."""
    return f"https://github.com/kgpu/kgpu/releases/download/v{ver}/kgpu-{ver}-py3-none-any.whl"


def main(argv: list[str]) -> int:
    if "--update" in argv:  # the shim names the release's wheel: it goes into the archive, so first
        shim = HERE / "kubectl-gpu"
        shim.write_text(WHEEL_URL.sub(f"/download/v{version()}/kgpu-{version()}-py3-none-any.whl", shim.read_text()))
    data = archive_bytes()
    digest = hashlib.sha256(data).hexdigest()
    dest = ROOT / "dist" / f"kubectl-gpu-v{version()}.tar.gz"
    dest.parent.mkdir(exist_ok=True)
    dest.write_bytes(data)
    print(f"{dest.relative_to(ROOT)}  sha256 {digest}")
    if "--update" in argv:
        text = MANIFEST.read_text()
        text = re.sub(r"sha256: [0-9a-f]{64}", f"sha256: {digest}", text)
        text = re.sub(r"version: v[0-9][^\s]*", f"version: v{version()}", text)
        text = WHEEL_URL.sub(f"/download/v{version()}/kgpu-{version()}-py3-none-any.whl", text)
        text = re.sub(
            r"/v[0-9][^/\s]*/kubectl-gpu-v[^\s]*\.tar\.gz",
            f"/v{version()}/kubectl-gpu-v{version()}.tar.gz",
            text,
        )
        MANIFEST.write_text(text)
        print(f"updated {MANIFEST.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
