"""Kubernetes' CEL libraries that DRA device selectors may call, as Python functions for the CEL interpreter.

kube-scheduler compiles device selectors in Kubernetes' CEL environment (k8s.io/apiserver/pkg/cel/environment,
``MustBaseEnvSet``, stored expressions of 1.34): besides the standard definitions (``matches``, ``startsWith``,
``size``, ...) and the ``semver``/``quantity`` libraries (``kgpu.sim.scheduler.plugins.cel``), it holds:

- ``ext.Strings`` version 2 (cel-go ``ext/strings.go``): ``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``,
  ``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``; indices count code points, and an
  index out of range is an error (``index out of range: N``) where cel-go's is;
- ``library.Lists`` (k8s.io/apiserver/pkg/cel/library/lists.go): ``isSorted``, ``sum``, ``min``, ``max``,
  ``indexOf``, ``lastIndexOf`` on lists (``min called on empty list``);
- ``library.Regex`` (regex.go): ``find``, ``findAll`` (Python's ``re``, which agrees with RE2 on the syntax both
  share; a pattern only one of them accepts is said as an error);
- ``ext.Sets``: ``sets.contains``, ``sets.equivalent``, ``sets.intersects``;
- ``ext.Lists`` version 3 (1.34): ``lists.range``, ``distinct``, ``flatten``, ``slice``, ``sort``.

``strings.quote`` and the IP and CIDR libraries are in ``kgpu.sim.scheduler.plugins.cel_net``; ``cel.bind``
is expanded before compiling (``kgpu.sim.scheduler.plugins.cel_bind``). What is not here raises
``Unsupported`` where it is called (a warning naming it, never a silent match): ``format``, the URL and
named-format libraries, ``sortBy`` and the two-variable comprehensions, ``first``/``last`` (optional
values). The differential (conformance/tests/test_dra_differential.py) draws selectors calling these
libraries and compares kgpu's verdicts with the real allocator's CEL.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Any

_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)
# Go's unicode.IsSpace beyond the Latin-1 ones: the Unicode White_Space characters, Z categories
_GO_SPACE = frozenset("\t\n\v\f\r \x85\xa0")


class CelError(ValueError):
    """A library function's error, in cel-go's words (the evaluator reports the text as it is)."""


def _is_space(c: str) -> bool:
    return c in _GO_SPACE or unicodedata.category(c) in ("Zs", "Zl", "Zp")


def _int(v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("no such overload")
    return v


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("no such overload")
    return v


# --- ext.Strings (version 2) -----------------------------------------------------------------------------


def char_at(s: Any, i: Any) -> str:
    text, idx = _str(s), _int(i)
    if idx < 0 or idx > len(text):
        raise CelError(f"index out of range: {idx}")
    return text[idx] if idx < len(text) else ""


def index_of(s: Any, x: Any, offset: Any = None) -> int:
    if isinstance(s, list):
        if offset is not None:
            raise TypeError("no such overload")
        return next((i for i, v in enumerate(s) if _equal(v, x)), -1)
    text, sub = _str(s), _str(x)
    off = 0 if offset is None else _int(offset)
    if sub == "":
        return off
    if off < 0:
        raise CelError(f"index out of range: {off}")
    if off >= len(text):
        return -1
    return text.find(sub, off)


def last_index_of(s: Any, x: Any, offset: Any = None) -> int:
    if isinstance(s, list):
        if offset is not None:
            raise TypeError("no such overload")
        return next((i for i in range(len(s) - 1, -1, -1) if _equal(s[i], x)), -1)
    text, sub = _str(s), _str(x)
    if offset is None:
        if sub == "":
            return len(text)
        if len(text.encode()) < len(sub.encode()):
            return -1
        off = len(text) - 1
    else:
        off = _int(offset)
        if sub == "":
            return off
    if off < 0:
        raise CelError(f"index out of range: {off}")
    if off >= len(text):
        return -1
    off = min(off, len(text) - len(sub))
    if off < 0:
        return -1
    return text.rfind(sub, 0, off + len(sub))


def lower_ascii(s: Any) -> str:
    return "".join(c.lower() if c < "\x80" else c for c in _str(s))


def upper_ascii(s: Any) -> str:
    return "".join(c.upper() if c < "\x80" else c for c in _str(s))


def replace(s: Any, old: Any, new: Any, n: Any = None) -> str:
    text, a, b = _str(s), _str(old), _str(new)
    count = -1 if n is None else _int(n)
    return text.replace(a, b, count if count >= 0 else -1)


def split(s: Any, sep: Any, n: Any = None) -> list[str]:
    text, by = _str(s), _str(sep)
    most = -1 if n is None else _int(n)
    if most == 0:
        return []
    if by == "":  # Go splits into code points; the last piece keeps the rest
        parts = list(text)
        if most > 0 and len(parts) > most:
            parts = [*parts[: most - 1], "".join(parts[most - 1 :])]
        return parts
    return text.split(by, most - 1 if most > 0 else -1)


def substring(s: Any, start: Any, end: Any = None) -> str:
    text, a = _str(s), _int(start)
    if end is None:
        if a < 0 or a > len(text):
            raise CelError(f"index out of range: {a}")
        return text[a:]
    b = _int(end)
    if a > b:
        raise CelError(f"invalid substring range. start: {a}, end: {b}")
    for i in (a, b):
        if i < 0 or i > len(text):
            raise CelError(f"index out of range: {i}")
    return text[a:b]


def trim(s: Any) -> str:
    text = _str(s)
    start, end = 0, len(text)
    while start < end and _is_space(text[start]):
        start += 1
    while end > start and _is_space(text[end - 1]):
        end -= 1
    return text[start:end]


def join(items: Any, sep: Any = "") -> str:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    for v in items:
        if not isinstance(v, str):
            raise CelError(f"join: invalid input: {v}")
    return _str(sep).join(items)


# --- library.Lists ---------------------------------------------------------------------------------------


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _comparable(items: Any) -> list[Any]:
    if not isinstance(items, list):
        raise TypeError("no such overload")
    return items


def is_sorted(items: Any) -> bool:
    values = _comparable(items)
    return all(not values[i] > values[i + 1] for i in range(len(values) - 1))


def sum_of(items: Any) -> Any:
    values = _comparable(items)
    if not values:
        return 0
    total = values[0]
    for v in values[1:]:
        total = total + v
        if isinstance(total, int) and not isinstance(total, bool) and not _MIN_INT64 <= total <= _MAX_INT64:
            raise CelError("integer overflow")
    return total


def _extreme(name: str, pick: Any) -> Any:
    def op(items: Any) -> Any:
        values = _comparable(items)
        if not values:
            raise CelError(f"{name} called on empty list")
        return pick(values)

    return op


# --- library.Regex ---------------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise CelError(f"Illegal regex: {exc}") from None


def find(s: Any, pattern: Any) -> str:
    m = _regex(_str(pattern)).search(_str(s))
    return m.group(0) if m else ""


def find_all(s: Any, pattern: Any, n: Any = None) -> list[str]:
    most = -1 if n is None else _int(n)
    if most == 0:
        return []
    out = [m.group(0) for m in _regex(_str(pattern)).finditer(_str(s))]
    return out if most < 0 else out[:most]


# --- ext.Sets, ext.Lists -----------------------------------------------------------------------------------


def _list(v: Any) -> list[Any]:
    if not isinstance(v, list):
        raise TypeError("no such overload")
    return v


def sets_contains(a: Any, b: Any) -> bool:
    have = _list(a)
    return all(any(_equal(x, y) for x in have) for y in _list(b))


def sets_equivalent(a: Any, b: Any) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Any, b: Any) -> bool:
    have = _list(a)
    return any(any(_equal(x, y) for x in have) for y in _list(b))


def lists_range(n: Any) -> list[int]:
    return list(range(_int(n)))


def distinct(items: Any) -> list[Any]:
    out: list[Any] = []
    for v in _list(items):
        if not any(_equal(v, w) for w in out):
            out.append(v)
    return out


def flatten(items: Any, depth: Any = 1) -> list[Any]:
    d = _int(depth)
    if d < 0:
        raise CelError("level must be non-negative")
    out: list[Any] = []
    for v in _list(items):
        if isinstance(v, list) and d > 0:
            out.extend(flatten(v, d - 1))
        else:
            out.append(v)
    return out


def slice_of(items: Any, start: Any, end: Any) -> list[Any]:
    values, a, b = _list(items), _int(start), _int(end)
    if a < 0 or b < 0:
        raise CelError(f"cannot slice({a}, {b}), negative indexes not supported")
    if a > b:
        raise CelError(f"cannot slice({a}, {b}), start index must be less than or equal to end index")
    if len(values) < b:
        raise CelError(f"cannot slice({a}, {b}), list is length {len(values)}")
    return values[a:b]


def sort(items: Any) -> list[Any]:
    return sorted(_comparable(items))


FUNCTIONS: dict[str, Any] = {
    "charAt": char_at,
    "indexOf": index_of,
    "lastIndexOf": last_index_of,
    "lowerAscii": lower_ascii,
    "upperAscii": upper_ascii,
    "replace": replace,
    "split": split,
    "substring": substring,
    "trim": trim,
    "join": join,
    "isSorted": is_sorted,
    "sum": sum_of,
    "min": _extreme("min", min),
    "max": _extreme("max", max),
    "find": find,
    "findAll": find_all,
    "sets.contains": sets_contains,
    "sets.equivalent": sets_equivalent,
    "sets.intersects": sets_intersects,
    "lists.range": lists_range,
    "distinct": distinct,
    "flatten": flatten,
    "slice": slice_of,
    "sort": sort,
}
