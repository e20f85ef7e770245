"""The one reader of users' YAML and JSON: bounded, so that hostile input is an error, never a crash.

Every verb reads its files through :func:`load_documents` / :func:`load_document` (Kubernetes manifests,
profiles, catalog overrides, TKE manifests, node-check's daemon.json). Each limit has a name that the error
message quotes, so a user who hits one knows which and how far:

- ``size``: a file over :data:`MAX_BYTES` is refused before it is parsed.
- ``depth``: collections nested deeper than :data:`MAX_DEPTH` levels. libyaml's composer recurses in C and
  segfaults on 100,000 levels of ``[``; Python's json raises RecursionError. Kubernetes objects nest about 15
  levels deep, so 100 leaves ample room.
- ``alias expansion``: a YAML alias counts every node it stands for; a file whose aliases stand for more
  than :data:`MAX_ALIAS_NODES` nodes is refused (the "billion laughs": ten aliases of ten aliases ... build
  a value that takes gigabytes to print or walk). go-yaml, which the API server uses, refuses "excessive
  aliasing" for the same reason.
- ``integer digits``: integers longer than :data:`MAX_INT_DIGITS` digits; Python itself refuses to convert
  more than 4,300, and no Kubernetes field holds more than an int64 (19 digits).

YAML is composed by PyYAML's Python composer over libyaml's C parser (events come from C; the recursion that
builds nodes is ours, so it can count), then constructed with the safe constructor. JSON goes through
msgspec. Pure: callers pass bytes or text (read from a file object they opened with :func:`read_limited`).

The limits are kgpu's, whatever libyaml is installed: libyaml 0.2.6 (PyYAML 6.0.4's wheels) refuses flow
collections nested 1,000 deep with an error of its own, raised by its scanner while it looks ahead for a
simple key, before the composer has seen a single level. When the C parser fails, the document it failed in
is read again, up to where it failed, by PyYAML's pure-Python parser under the same counting composer; if
that reaches one of kgpu's limits, the limit is the error (:func:`_own_limit`). Only failures pay for it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

import msgspec
import yaml
from yaml._yaml import CParser  # libyaml's event parser: PyYAML's wheels ship it
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from kgpu.errors import InputError

# Sized for the largest cluster Kubernetes supports (150,000 pods, 5,000 nodes: about 700 MiB as a compact
# snapshot, 1-2 GiB as `kubectl get -o json` prints it, indented, with managedFields) with headroom.
MAX_BYTES = 4 * 2**30
MAX_DEPTH = 100
MAX_ALIAS_NODES = 100_000
MAX_INT_DIGITS = 100
_YAML_FALLBACK_BYTES = 4 * 2**20
_CHUNK = 2**20


def read_limited(fh: BinaryIO, limit: int = MAX_BYTES) -> bytes:
    """At most ``limit + 1`` bytes of ``fh`` (so that the caller sees "over the limit"), in memory that
    follows what is there: ``fh.read(n)`` allocates ``n`` bytes before it reads one, which fails under an
    address-space limit (``ulimit -v``) whatever the file holds. A regular file is read in one piece of its
    size; a pipe, a device or a file that grows while it is read, in chunks that double."""
    try:
        st = os.fstat(fh.fileno())
        want = st.st_size + 1 if stat.S_ISREG(st.st_mode) else _CHUNK
    except (AttributeError, OSError, ValueError):  # no file descriptor (a test's in-memory stream)
        want = _CHUNK
    chunks: list[bytes] = []
    total = 0
    while total <= limit:
        chunk = fh.read(min(want, limit + 1 - total))
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = max(_CHUNK, min(total, 64 * _CHUNK))
    return b"".join(chunks)


class LimitExceeded(yaml.YAMLError):
    """A named limit of the reader was exceeded."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(message)
        self.limit = limit
        self.message = message


class _Constructor(SafeConstructor):
    def construct_yaml_int(self, node: ScalarNode) -> int:
        text = str(node.value)
        if sum(ch.isdigit() for ch in text) > MAX_INT_DIGITS:
            raise LimitExceeded(
                "integer digits",
                f"an integer of {sum(ch.isdigit() for ch in text)} digits at line {node.start_mark.line + 1} "
                f"(integer digits limit: {MAX_INT_DIGITS})",
            )
        value: int = super().construct_yaml_int(node)
        return value


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)  # type: ignore[type-var]


class _Composer(Composer):
    """PyYAML's composer, counting depth and the nodes that aliases stand for."""

    #: lines before the text being composed, when it is a slice of a file (see _own_limit)
    line_offset = 0

    def __init__(self) -> None:
        super().__init__()
        self._depth = 0
        self._alias_nodes = 0
        self._open_anchors: list[str] = []  # anchors of the collections being composed
        # id(node) -> (nodes it stands for, its height), for the nodes aliases have repeated
        self._sizes: dict[int, tuple[int, int]] = {}

    def compose_document(self) -> Node | None:
        self._alias_nodes = 0
        self._sizes = {}
        node: Node | None = super().compose_document()
        return node

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        event = self.peek_event()  # type: ignore[attr-defined]
        line = event.start_mark.line + 1 + self.line_offset
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self._open_anchors:
                raise LimitExceeded(
                    "alias expansion", f"alias *{event.anchor} at line {line} refers to itself"
                )
            node = self.anchors.get(event.anchor)
            if node is not None:
                size, height = self._measure(node)
                self._alias_nodes += size
                if self._alias_nodes > MAX_ALIAS_NODES:
                    raise LimitExceeded(
                        "alias expansion",
                        f"aliases stand for more than {MAX_ALIAS_NODES} nodes at line {line} "
                        f"(alias expansion limit: {MAX_ALIAS_NODES})",
                    )
                if self._depth + height > MAX_DEPTH:
                    self._too_deep(line)
            return super().compose_node(parent, index)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            self._too_deep(line)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open_anchors.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            if anchor is not None:
                self._open_anchors.pop()

    @staticmethod
    def _too_deep(line: int) -> None:
        raise LimitExceeded(
            "depth", f"nested deeper than {MAX_DEPTH} levels at line {line} (depth limit: {MAX_DEPTH})"
        )

    def _measure(self, node: Node) -> tuple[int, int]:
        """How many nodes ``node`` stands for, and its height; iterative, memoised per node."""
        memo = self._sizes
        stack: list[tuple[Node, bool]] = [(node, False)]
        while stack:
            current, children_done = stack.pop()
            if id(current) in memo:
                continue
            children = _children(current)
            if not children_done and children:
                stack.append((current, True))
                stack.extend((c, False) for c in children if id(c) not in memo)
                continue
            size, height = 1, 1
            for c in children:
                s, h = memo[id(c)]
                size += s
                height = max(height, h + 1)
            memo[id(current)] = (min(size, MAX_ALIAS_NODES + 1), height)
        return memo[id(node)]


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


class SafeLoader(CParser, _Composer, _Constructor, Resolver):
    """libyaml's parser, the counting composer, the safe constructor."""

    def __init__(self, stream: str | bytes) -> None:
        CParser.__init__(self, stream)
        _Composer.__init__(self)
        _Constructor.__init__(self)
        Resolver.__init__(self)

    # libyaml's CParser brings C versions of these that recurse without a limit; use the counting ones.
    check_node = _Composer.check_node
    get_node = _Composer.get_node
    get_single_node = _Composer.get_single_node


class _PySafeLoader(Reader, Scanner, Parser, _Composer, _Constructor, Resolver):
    """PyYAML's pure-Python reader, scanner and parser under the counting composer (see _own_limit)."""

    def __init__(self, stream: str, line_offset: int) -> None:
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _Composer.__init__(self)
        _Constructor.__init__(self)
        Resolver.__init__(self)
        self.line_offset = line_offset


def _own_limit(data: str | bytes, exc: yaml.YAMLError) -> LimitExceeded | None:
    """The limit of kgpu's that the text up to libyaml's failure reaches, if any (module docstring).

    Only the failing document is read again (from the last ``---`` line before the failure), and only when it
    is at most _YAML_FALLBACK_BYTES long, so that a failure costs at most a few seconds of pure Python.
    """
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is None:
        return None
    text = data if isinstance(data, str) else data.decode("utf-8", "replace")
    end = min(len(text), mark.index + 2)
    start = text.rfind("\n---", 0, end) + 1  # 0 when the failure is in the first document
    if end - start > _YAML_FALLBACK_BYTES:
        return None
    try:  # the pure-Python reader refuses what libyaml let through to its failure (a NUL byte) at once
        loader = _PySafeLoader(text[start:end], line_offset=text.count("\n", 0, start))
    except yaml.YAMLError:
        return None
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            loader.get_data()
    except LimitExceeded as limit:
        return limit
    except (yaml.YAMLError, RecursionError):
        return None
    finally:
        loader.dispose()
    return None


def _yaml_error(exc: yaml.YAMLError, source: str) -> InputError:
    if isinstance(exc, LimitExceeded):
        return InputError(exc.message, where=source)
    mark = getattr(exc, "problem_mark", None)
    at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    return InputError(f"invalid YAML{at}: {problem}", where=source)


def _check_size(data: str | bytes, source: str) -> None:
    if len(data) > MAX_BYTES:
        raise InputError(f"larger than {MAX_BYTES // 2**20} MiB (size limit)", where=source)


def looks_like_json(data: str | bytes) -> bool:
    head = data[:64].lstrip()[:1]
    return head in ("{", "[", b"{", b"[")


def load_json(data: str | bytes, source: str) -> Any:
    """One JSON value, within the reader's limits."""
    _check_size(data, source)
    try:
        value = msgspec.json.decode(data)
    except RecursionError:
        raise InputError(
            f"nested deeper than the reader allows (depth limit: {MAX_DEPTH})", where=source
        ) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"invalid JSON: {exc}", where=source) from None
    except UnicodeDecodeError as exc:  # msgspec checks strings' UTF-8 as it decodes them
        raise InputError(f"not UTF-8 text: {exc.reason} at byte {exc.start}", where=source) from None
    if not (isinstance(data, bytes) and len(data) >= _SCAN_BYTES and _shallow(data)):
        check_depth(value, source)  # exact, and the one that words the error
    return value


_SCAN_BYTES = 4 * 2**20  # documents this large are first scanned as bytes (_shallow)
_SCAN_CHUNK = 16 * 2**20


def _shallow(data: bytes) -> bool:
    """Whether valid JSON ``data`` (msgspec decoded it) is nested at most MAX_DEPTH deep and holds no run of more
    than MAX_INT_DIGITS digits, found on the bytes with numpy: the brackets outside strings counted in order,
    strings found by their quotes that no odd run of backslashes escapes. Several times faster than walking the
    decoded value (a 420 MB snapshot: under a second against 5-8 s). False means "not shown": the walk then
    decides and words it (a long digit run inside a string is no integer)."""
    import numpy as np

    arr = np.frombuffer(data, dtype=np.uint8)
    depth = 0
    in_string = False
    for start in range(0, len(arr), _SCAN_CHUNK):
        # digits: each window reaches MAX_INT_DIGITS into the next chunk, so every long run is inside one
        window = arr[start : start + _SCAN_CHUNK + MAX_INT_DIGITS]
        if _long_digit_run(window):
            return False
        a = arr[start : start + _SCAN_CHUNK]
        quotes = np.flatnonzero(a == 34)
        if len(quotes):
            before = arr[np.maximum(quotes + start - 1, 0)] == 92
            before[quotes + start == 0] = False
            if before.any():  # drop each quote an odd run of backslashes escapes
                odd = [q for q in quotes[before].tolist() if _backslashes(arr, q + start) % 2 == 1]
                if odd:
                    quotes = np.setdiff1d(quotes, np.asarray(odd, dtype=quotes.dtype), assume_unique=True)
        brackets = np.flatnonzero((a == 91) | (a == 123) | (a == 93) | (a == 125))
        if len(brackets):
            # a bracket is inside a string when an odd number of quotes came before it (this chunk's and
            # the earlier chunks', whose parity is ``in_string``)
            outside = ((np.searchsorted(quotes, brackets) + in_string) & 1) == 0
            kept = a[brackets[outside]]
            steps = np.where((kept == 91) | (kept == 123), np.int32(1), np.int32(-1))
            levels = np.cumsum(steps, dtype=np.int32)
            if len(levels):
                if depth + int(levels.max()) > MAX_DEPTH:
                    return False
                depth += int(levels[-1])
        in_string ^= bool(len(quotes) & 1)
    return True


_BLOCK = (MAX_INT_DIGITS + 1) // 2  # a run of more than MAX_INT_DIGITS digits fills some aligned block this long


def _long_digit_run(window: Any) -> bool:
    """Whether ``window`` holds a run of more than MAX_INT_DIGITS digits: aligned blocks first (cheap), the
    runs measured only where a block is all digits."""
    import numpy as np

    digits = (window >= 48) & (window <= 57)
    whole = len(window) // _BLOCK * _BLOCK
    if not digits[:whole].reshape(-1, _BLOCK).all(axis=1).any() and not digits[whole:].all():
        return False
    edges = np.flatnonzero(np.diff(digits.view(np.int8), prepend=np.int8(0), append=np.int8(0)))
    return bool(len(edges)) and int((edges[1::2] - edges[0::2]).max()) > MAX_INT_DIGITS


def _backslashes(arr: Any, at: int) -> int:
    """How many backslashes stand just before position ``at``."""
    n = 0
    while at - n - 1 >= 0 and arr[at - n - 1] == 92:
        n += 1
    return n


def check_depth(value: Any, source: str) -> None:
    """Refuse values nested deeper than MAX_DEPTH, and integers beyond MAX_INT_DIGITS (iteratively).

    Only containers go on the stack: a 50,000-pod snapshot has millions of scalar leaves, and checking them
    where they are found keeps this walk a small part of reading it.
    """
    int_bits = MAX_INT_DIGITS * 3.33

    too_long = InputError(
        f"an integer of more than {MAX_INT_DIGITS} digits (integer digits limit)", where=source
    )

    if not isinstance(value, (dict, list)):
        if isinstance(value, int) and value.bit_length() > int_bits:
            raise too_long
        return
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InputError(
                f"nested deeper than {MAX_DEPTH} levels (depth limit: {MAX_DEPTH})", where=source
            )
        for child in current.values() if isinstance(current, dict) else current:
            kind = type(child)  # the exact types first: nearly every leaf is a str
            if kind is str:
                continue
            if kind is dict or kind is list or isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
            elif isinstance(child, int) and child.bit_length() > int_bits:
                raise too_long


def iter_yaml(data: str | bytes, source: str) -> Iterator[Any]:
    """The documents of a YAML stream, within the reader's limits (empty documents included as None)."""
    _check_size(data, source)
    loader = SafeLoader(data)
    try:
        while loader.check_data():  # type: ignore[no-untyped-call]
            yield loader.get_data()
    except LimitExceeded as exc:
        raise _yaml_error(exc, source) from None
    except yaml.YAMLError as exc:
        raise _yaml_error(_own_limit(data, exc) or exc, source) from None
    except RecursionError:  # pragma: no cover - the depth limit stops composition long before
        raise InputError(
            f"nested deeper than the reader allows (depth limit: {MAX_DEPTH})", where=source
        ) from None
    finally:
        loader.dispose()


def load_documents(data: str | bytes, source: str) -> list[Any]:
    """Every document of a file: a JSON value (one document) or a YAML stream; empty documents dropped."""
    if looks_like_json(data):
        try:
            return [load_json(data, source)]
        except InputError as exc:
            if len(data) > _YAML_FALLBACK_BYTES:
                raise
            json_error = exc
        # YAML's flow style also starts with '{' or '[' ({a: 1}); when that parses, it is what was meant.
        try:
            return [d for d in iter_yaml(data, source) if d is not None]
        except InputError:
            raise json_error from None
    return [d for d in iter_yaml(data, source) if d is not None]


def load_document(data: str | bytes, source: str) -> Any:
    """A file that holds one document (a profile, an override list); None when empty."""
    docs = load_documents(data, source)
    if len(docs) > 1:
        raise InputError(f"expected one YAML document, found {len(docs)}", where=source)
    return docs[0] if docs else None
