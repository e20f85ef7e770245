"""``cel.bind`` (cel-go ext.Bindings, which the DRA selector environment adds) for an interpreter without it.

``cel.bind(name, init, body)`` evaluates ``body`` with ``name`` standing for the value of ``init``
(k8s.io/dynamic-resource-allocation/cel/compile.go enables it so that a domain is named once:
``cel.bind(dra, device.attributes["dra.example.com"], dra.oneBool && dra.anotherBool)``). CEL has no side
effects, so the body with every free use of ``name`` replaced by ``(init)`` has the same value. ``expand``
rewrites the expression's text that way, innermost binding first, before it is compiled. A use is an
identifier token ``name`` not preceded by ``.`` (a field of that name is no use). Where a comprehension in
the body declares the same name (``list.all(name, ...)``), the rewrite would be wrong: ``Unshadowable`` is
raised and the selector is not evaluated (the caller's warning).

One difference remains: cel-go evaluates ``init`` once, before the body, so an error there (a missing
attribute) is the result even when the body does not use ``name``; the rewritten expression evaluates it
only where it is used.
"""

from __future__ import annotations

import re

# strings (with their prefixes: raw, bytes, triple quotes), identifiers, numbers, and any other character
_TOKENS = re.compile(
    r"""(?P<str>(?:[rRbB]{1,2})?(?:\"\"\"(?:[^\\]|\\.)*?\"\"\"|'''(?:[^\\]|\\.)*?'''|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'))"""
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<ws>\s+)|(?P<other>.)",
    re.DOTALL,
)
_MACROS = frozenset(
    {
        "all",
        "exists",
        "exists_one",
        "existsOne",
        "map",
        "filter",
        "sortBy",
        "transformList",
        "transformMap",
        "transformMapEntry",
    }
)
MAX_BINDINGS = 64
# Each use of a name gets a copy of its ``init``, so nested bindings that use the name before twice double the
# text at every level: the rewrite stops at this size (the API server's own limit on a selector is 10 KiB).
MAX_TEXT = 64 * 1024


class Unshadowable(ValueError):
    """The rewrite cannot express the bindings (the body declares the bound name again, or the rewritten
    text would pass MAX_TEXT): kgpu does not evaluate the selector; the API server takes it."""


def _tokens(text: str) -> list[str]:
    return [m.group(0) for m in _TOKENS.finditer(text)]


def _significant(toks: list[str], i: int, step: int) -> int:
    """The index of the next token from ``i`` (exclusive) in direction ``step`` that is not whitespace."""
    j = i + step
    while 0 <= j < len(toks) and toks[j].isspace():
        j += step
    return j


def _closing(toks: list[str], open_at: int) -> tuple[int, list[tuple[int, int]]]:
    """The index of the ``)`` matching ``toks[open_at]`` and the argument spans (start, end) between them."""
    depth, start, spans = 0, open_at + 1, []
    for j in range(open_at, len(toks)):
        t = toks[j]
        if t in "([{":
            depth += 1
        elif t in ")]}":
            depth -= 1
            if depth == 0:
                spans.append((start, j))
                return j, spans
        elif t == "," and depth == 1:
            spans.append((start, j))
            start = j + 1
    raise ValueError("unbalanced parentheses")


def _find_bind(toks: list[str]) -> int:
    """The index of ``cel`` in the last ``cel . bind (`` of the tokens (the innermost comes last), or -1."""
    for i in range(len(toks) - 1, -1, -1):
        if toks[i] != "cel":
            continue
        prev = _significant(toks, i, -1)
        if prev >= 0 and toks[prev] == ".":
            continue
        dot = _significant(toks, i, 1)
        bind = _significant(toks, dot, 1)
        paren = _significant(toks, bind, 1)
        if paren < len(toks) and toks[dot] == "." and toks[bind] == "bind" and toks[paren] == "(":
            return i
    return -1


def _substitute(body: list[str], name: str, value: str) -> list[str]:
    out = []
    uses = sum(1 for t in body if t == name)
    if uses * len(value) > MAX_TEXT:
        raise Unshadowable(f"cel.bind: written out, the expression passes {MAX_TEXT:,} characters")
    for j, t in enumerate(body):
        if t == name:
            prev = _significant(body, j, -1)
            if prev >= 0 and body[prev] == ".":
                out.append(t)  # a field of that name
                continue
            nxt = _significant(body, j, 1)
            if nxt < len(body) and body[nxt] == "," and prev >= 0 and body[prev] == "(":
                macro = _significant(body, prev, -1)
                if macro >= 0 and body[macro] in _MACROS:
                    raise Unshadowable(f"cel.bind: {name!r} is declared again in {body[macro]}()")
            out.append(value)
            continue
        out.append(t)
    return out


def expand(expression: str) -> str:
    """The expression with every ``cel.bind`` replaced by its body with the name substituted (module
    docstring); the expression itself when it has none. ValueError (Unshadowable) where it cannot."""
    if "bind" not in expression:
        return expression
    toks = _tokens(expression)
    for _ in range(MAX_BINDINGS + 1):
        at = _find_bind(toks)
        if at < 0:
            return "".join(toks)
        paren = _significant(toks, _significant(toks, _significant(toks, at, 1), 1), 1)
        close, spans = _closing(toks, paren)
        if len(spans) != 3:  # not the macro: a call of a function cel-go does not declare
            raise ValueError("undeclared reference to 'cel' (in container '')")
        name = "".join(toks[spans[0][0] : spans[0][1]]).strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError("cel.bind() variable names must be simple identifiers")
        init = "(" + "".join(toks[spans[1][0] : spans[1][1]]).strip() + ")"
        body = _substitute(toks[spans[2][0] : spans[2][1]], name, init)
        text = "".join([*toks[:at], "(", "".join(body).strip(), ")", *toks[close + 1 :]])
        if len(text) > MAX_TEXT:
            raise Unshadowable(f"cel.bind: written out, the expression passes {MAX_TEXT:,} characters")
        toks = _tokens(text)
    raise ValueError(f"more than {MAX_BINDINGS} cel.bind calls")
