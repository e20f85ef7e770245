"""kgpu's reader limits fire with kgpu's words, whichever libyaml does the parsing (model/safeyaml.py)."""

from __future__ import annotations

import pytest

from kgpu.errors import InputError
from kgpu.model.safeyaml import MAX_DEPTH, load_documents


def _error(data: bytes) -> str:
    with pytest.raises(InputError) as info:
        load_documents(data, "f.yaml")
    return str(info.value)


@pytest.mark.parametrize(("head", "opener"), [(b"a: ", b"["), (b"a: ", b"{a: "), (b"", b"- ")])
@pytest.mark.parametrize("levels", [MAX_DEPTH + 1, 1_500, 100_000])
def test_depth_limit_is_kgpus_at_any_depth(head: bytes, opener: bytes, levels: int) -> None:
    """Flow nesting past libyaml's own limit (1,000 in libyaml 0.2.6) still names kgpu's limit; block too."""
    assert _error(head + opener * levels + b"x") == (
        f"f.yaml: nested deeper than {MAX_DEPTH} levels at line 1 (depth limit: {MAX_DEPTH})"
    )


def test_depth_limit_in_a_later_document_names_its_line() -> None:
    data = b"x: 1\n---\ny: 2\n---\nb:\n  c: " + b"[" * 5_000
    assert _error(data) == f"f.yaml: nested deeper than {MAX_DEPTH} levels at line 6 (depth limit: {MAX_DEPTH})"


def test_nesting_within_the_limit_is_read() -> None:
    """Every node counts, the scalar too: a mapping, 98 lists and the 1 are 100 levels."""
    lists = MAX_DEPTH - 2
    (doc,) = load_documents(b"a: " + b"[" * lists + b"1" + b"]" * lists, "f.yaml")
    depth, value = 0, doc["a"]
    while isinstance(value, list):
        depth, value = depth + 1, value[0]
    assert (depth, value) == (lists, 1)
    assert "depth limit" in _error(b"a: " + b"[" * (lists + 1) + b"1" + b"]" * (lists + 1))


def test_other_syntax_errors_keep_their_position() -> None:
    message = _error(b"a: 1\nb: [1, 2\n")
    assert message.startswith("f.yaml: invalid YAML at line ") and "depth limit" not in message
