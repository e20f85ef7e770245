"""The byte scan that spares large JSON documents the walk over their decoded value (safeyaml._shallow): it may
only say "within the limits" when the walk would agree; otherwise the walk decides and words the error."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from kgpu.errors import InputError
from kgpu.model.safeyaml import (
    _SCAN_BYTES,
    _SCAN_CHUNK,
    MAX_DEPTH,
    MAX_INT_DIGITS,
    _shallow,
    check_depth,
    load_json,
)

PAD = b" " * (_SCAN_BYTES + 1)


def walk_ok(data: bytes) -> bool:
    try:
        check_depth(msgspec.json.decode(data), "x")
    except InputError:
        return False
    return True


def nested(levels: int, text: str = "") -> bytes:
    return ("[" * levels + json.dumps(text) + "]" * levels).encode()


CASES = [
    nested(MAX_DEPTH), nested(MAX_DEPTH + 1),
    nested(MAX_DEPTH, "]]]]"), nested(MAX_DEPTH + 1, "[[[["),  # brackets inside strings do not count
    nested(MAX_DEPTH + 1, ']]]]\\"]]]'), b'{"a":"\\\\"}', b'["x\\\\\\"[[[[[[["]',  # escaped and unescaped quotes
    b'["' + b"]" * 200 + b'",' + b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1) + b"]",
    b"{\"a\":" + b"{\"b\":" * (MAX_DEPTH - 1) + b"1" + b"}" * MAX_DEPTH,
    b"[" + b"1" * (MAX_INT_DIGITS + 1) + b"]", b"[" + b"1" * MAX_INT_DIGITS + b"]",
    b'["' + b"1" * 300 + b'"]',  # a digit run in a string: not shown, the walk says it is fine
]


@pytest.mark.parametrize("doc", CASES)
def test_the_scan_never_passes_what_the_walk_refuses(doc: bytes) -> None:
    for data in (doc + PAD, PAD + doc):
        if _shallow(data):
            assert walk_ok(data)
    assert not _shallow(nested(MAX_DEPTH + 1) + PAD) and _shallow(nested(MAX_DEPTH) + PAD)


def test_random_documents_agree_with_the_walk() -> None:
    rng = random.Random(20261128)
    for _ in range(300):
        levels = rng.randint(MAX_DEPTH - 8, MAX_DEPTH + 8)
        text = "".join(rng.choice('[]{}"\\ab1') for _ in range(rng.randint(0, 20)))
        data = nested(levels, text) + PAD
        assert _shallow(data) == walk_ok(data), (levels, text)


def test_long_runs_across_a_chunk_boundary_are_seen() -> None:
    for offset in range(-105, 5, 7):
        data = b"[" + b" " * (_SCAN_CHUNK + offset) + b"7" * (MAX_INT_DIGITS + 1) + b"]"
        assert not _shallow(data)


def test_a_large_document_gets_the_walks_words() -> None:
    with pytest.raises(InputError) as err:
        load_json(nested(MAX_DEPTH + 1) + PAD, "big.json")
    assert err.value.message == f"nested deeper than {MAX_DEPTH} levels (depth limit: {MAX_DEPTH})"
    assert load_json(b'{"items": [' + b",".join([b'{"a": [1, 2, "]"]}'] * 10) + b"]}" + PAD, "ok.json")["items"][0]
