"""The package people install: an Apache-2.0 licence everywhere it is declared, and no install line that
cannot work (kgpu is not on PyPI: `pip install kgpu` would fetch nothing, or somebody else's package)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import yaml

from kgpu.cli import output

ROOT = Path(__file__).resolve().parent.parent
# `pip install kgpu`, `pipx install 'kgpu[exporter]'`, ... : a name a registry would have to resolve
BARE_INSTALL = re.compile(r"pipx? install (?:--?[\w-]+ )*['\"]?kgpu(?:\[[\w,]+\])?(?![\w*-]|\.[\w*])")


def test_licence_is_apache_2_everywhere():
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
    assert importlib.metadata.metadata("kgpu")["License-Expression"] == "Apache-2.0"
    assert 'org.opencontainers.image.licenses="Apache-2.0"' in (ROOT / "Dockerfile").read_text()
    manifest = yaml.safe_load((ROOT / "plugins" / "gpu.yaml").read_text())
    assert {"from": "LICENSE", "to": "."} in manifest["spec"]["platforms"][0]["files"]


def test_the_pattern_finds_bare_install_lines():
    for bad in ("pipx install kgpu", "pip install 'kgpu[validate]'", "pipx install --force kgpu", "pip install kgpu."):
        assert BARE_INSTALL.search(bad), bad
    for good in (
        "pipx install dist/kgpu-0.1.0-py3-none-any.whl",
        "pip install kgpu-0.1.0-py3-none-any.whl",
        "pipx install https://github.com/kgpu/kgpu/releases/download/v0.1.0/kgpu-0.1.0-py3-none-any.whl",
        "pip install kgpu-*.whl",
    ):
        assert not BARE_INSTALL.search(good), good


def test_no_install_line_names_kgpu_on_a_registry():
    """What the CLI, the krew plugin and the docs tell people to run installs a wheel or a requirement."""
    places = [*(ROOT / "src" / "kgpu" / "cli").rglob("*.py"), *(ROOT / "plugins").rglob("*"), *(ROOT / "docs").glob("*.md")]
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in places
        if p.is_file()
        for m in BARE_INSTALL.finditer(p.read_text(errors="replace"))
    ]
    assert found == []


def test_missing_extra_line_installs_requirements(capsys):
    import pytest

    with pytest.raises(SystemExit):
        output.require_extra("exporter", "kgpu exporter", ["kgpu_no_such_module"])
    err = capsys.readouterr().err
    assert not BARE_INSTALL.search(err), err
    assert "kgpu[exporter]" in err and "'prometheus-client<1,>=0.20'" in err and "pipx inject kgpu 'bcrypt" in err


def test_numpy_is_loaded_only_by_the_verbs_that_place_pods():
    """numpy is 74 of the base install's 108 MB (docs/simulate.md, Performance): render, init, catalog and
    tke never import it (placement does, and only for the work that needs arrays)."""
    import subprocess
    import sys

    probe = """
import contextlib, io, sys
from kgpu.cli.main import cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        cli.main(sys.argv[1:], standalone_mode=False)
    except SystemExit:
        pass
print("numpy" in sys.modules)
"""
    for args, loads in (
        (["render", "--template", "eks-karpenter"], False),
        (["init", "-o", "yaml"], False),
        (["catalog", "--gpu", "T4"], False),
        (["tke", "match", "--gpu-type", "T4", "--gpus", "1", "--cpu", "4", "--memory", "16Gi"], False),
    ):
        res = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
        assert res.stdout.strip() == str(loads), (args, res.stdout, res.stderr[-500:])
