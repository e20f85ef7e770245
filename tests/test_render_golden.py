"""Golden files: every target of every built-in template renders exactly the reviewed text.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/test_render_golden.py`` and
review the diff.
"""

from __future__ import annotations

import pytest

from kgpu.model.profile import TEMPLATES, builtin_profile
from kgpu.render.stack import render_files
from render_helpers import GOLDEN, UPDATE_GOLDEN

CASES = [(t, name) for t in TEMPLATES for name in render_files(builtin_profile(t))]


@pytest.mark.parametrize(("template", "name"), CASES, ids=[f"{t}/{n}" for t, n in CASES])
def test_golden(template: str, name: str) -> None:
    """The rendered file equals tests/golden/<template>/<file>."""
    text = render_files(builtin_profile(template))[name]
    path = GOLDEN / template / name
    if UPDATE_GOLDEN:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing golden {path}; run UPDATE_GOLDEN=1 pytest {__file__}"
    assert text == path.read_text(encoding="utf-8"), f"{path} is stale; rerun with UPDATE_GOLDEN=1 and review"


def test_no_stale_golden_files() -> None:
    """Every golden file is still produced by some template (none left over from a removed target)."""
    expected = {f"{t}/{n}" for t, n in CASES}
    present = {f"{p.parent.name}/{p.name}" for p in GOLDEN.glob("*/*.yaml")}
    assert present - expected == set()


def test_rendering_is_deterministic() -> None:
    """Two renders of the same profile are byte-identical."""
    for template in TEMPLATES:
        assert render_files(builtin_profile(template)) == render_files(builtin_profile(template))


def test_every_file_is_headed_by_profile_and_version() -> None:
    from kgpu import __version__

    for template in TEMPLATES:
        for name, text in render_files(builtin_profile(template)).items():
            first = text.splitlines()[0]
            assert first.startswith(f"# kgpu {__version__}:"), name
            assert f"profile {template}" in first, name
