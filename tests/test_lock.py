"""requirements/dev.lock, what `make test`, `make run` and CI install, agrees with pyproject.toml's ranges."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def _pins() -> dict[str, list[tuple[str, str | None]]]:
    pins: dict[str, list[tuple[str, str | None]]] = {}
    for line in (ROOT / "requirements" / "dev.lock").read_text().splitlines():
        if m := PIN.match(line):
            pins.setdefault(canonicalize_name(m.group(1)), []).append((m.group(2), m.group(3)))
    return pins


def _requirements() -> list[Requirement]:
    """The base dependencies and every extra the dev extra pulls in (kgpu[exporter,validate] and dev itself)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted, todo = {"dev"}, ["dev"]
    while todo:
        for spec in extras[todo.pop()]:
            req = Requirement(spec)
            if canonicalize_name(req.name) == "kgpu":
                new = set(req.extras) - wanted
                wanted |= new
                todo.extend(new)
    reqs = [Requirement(s) for s in project["dependencies"]]
    for extra in sorted(wanted):
        reqs += [r for r in map(Requirement, extras[extra]) if canonicalize_name(r.name) != "kgpu"]
    return reqs


def test_every_dependency_is_pinned_within_its_range() -> None:
    pins = _pins()
    reqs = _requirements()
    assert len(reqs) > 15  # the base install, three extras and the dev tools
    for req in reqs:
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not in requirements/dev.lock: run `make lock`"
        for version, _marker in pins[name]:
            assert req.specifier.contains(version, prereleases=True), (
                f"requirements/dev.lock pins {req.name}=={version}, outside pyproject.toml's {req.specifier}: "
                "run `make lock`"
            )


def test_every_pin_carries_hashes() -> None:
    text = (ROOT / "requirements" / "dev.lock").read_text()
    blocks = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    pinned = [b for b in blocks if "==" in b.split("\n", 1)[0]]
    assert pinned and all("--hash=sha256:" in b for b in pinned)


def test_the_makefile_installs_from_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text()
    assert "LOCK       := requirements/dev.lock" in makefile
    assert re.search(r"pip sync .*--require-hashes \$\(LOCK\)", makefile)
    assert re.search(r"--no-deps -e \.", makefile)
