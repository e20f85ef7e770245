"""An upper estimate of a CEL rule's runtime cost in cel-go's units, before it runs.

The API server stops a rule whose cel-go runtime cost passes 1,000,000 (``PerCallLimit``) and an object
whose rules pass 10,000,000 (``RuntimeCELCostBudget``). The interpreter kgpu evaluates CRD rules with keeps no
such count, so a rule's cost is bounded before it runs, from the expression's tokens with cel-go's per-call
costs (1 per identifier, field access and operator; 0.1 per character a string comparison, ``startsWith`` or
``split`` reads; string length x pattern length / 4 for ``matches`` and ``find``; the list's size for
``in``; 4 per comprehension step besides its body), and from the value's sizes: a token inside ``m`` nested
comprehensions counts ``(N + 1) ** m`` times, ``N`` the number of list items and map entries in ``self``,
and every string is taken to be as long as the longest. That bounds the rules that iterate over the object's
own lists and maps (all the packaged ones); a rule that builds a larger list (``lists.range``, ``split`` of a
long string) and iterates over it is estimated low.

Mirrors the per-call costs of github.com/google/cel-go ``interpreter/runtimecost.go`` (``CostTracker``,
``costCall``) and the limits of k8s.io/apiserver ``pkg/apis/cel/config.go``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

PER_CALL_LIMIT = 1_000_000  # k8s.io/apiserver/pkg/apis/cel: PerCallLimit
OBJECT_BUDGET = 10_000_000  # RuntimeCELCostBudget

_TOKEN = re.compile(
    r"(?P<str>[rRbB]{0,2}(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"))"
    r"|(?P<num>0[xX][0-9a-fA-F]+[uU]?|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?)"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])"
)
# fmt: off
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "transformList", "transformMap",
                     "transformMapEntry", "sortBy"})
# fmt: on
_REGEX_CALLS = frozenset({"matches", "find", "findAll"})
_UNIT_OPS = frozenset({"&&", "||", "!", "-", "*", "/", "%", "["})
_STRING_OPS = frozenset({"==", "!=", "<", ">", "<=", ">=", "+"})
_STEP = 4  # what one comprehension step costs besides its body (the accumulator's update and test)


@dataclass(frozen=True, slots=True)
class Cost:
    """Per nesting level: tokens that cost 1, tokens that read a string, regex calls, ``in`` tests."""

    levels: tuple[tuple[int, int, int, int], ...]
    tokens: int
    longest_literal: int

    def bound(self, entries: int, longest: int) -> int:
        s = max(longest, self.longest_literal)
        string = 1 + math.ceil(0.1 * s)
        regex = math.ceil(0.1 * (s + 1)) * max(1, math.ceil(0.25 * self.longest_literal))
        member = max(entries, self.tokens)
        total = 0
        for level, (unit, strings, regexes, ins) in enumerate(self.levels):
            total += (entries + 1) ** level * (unit + strings * string + regexes * regex + ins * member)
        return total


FREE = Cost((), 0, 0)


def estimate(expression: str) -> Cost:
    """The expression's tokens by comprehension nesting level, for :meth:`Cost.bound`."""
    toks = [(m.lastgroup or "", m.group()) for m in _TOKEN.finditer(expression)]
    counts: list[list[int]] = [[0, 0, 0, 0]]
    parens: list[bool] = []  # one per open parenthesis: whether it opens a comprehension
    longest = 0

    def add(level: int, kind: int, n: int = 1) -> None:
        while len(counts) <= level:
            counts.append([0, 0, 0, 0])
        counts[level][kind] += n

    macro_next = False
    for i, (kind, text) in enumerate(toks):
        level = sum(parens)
        if kind == "str":
            longest = max(longest, len(text))
        elif kind == "id":
            call = i + 1 < len(toks) and toks[i + 1][1] == "("
            method = i > 0 and toks[i - 1][1] == "."
            if text == "in":
                add(level, 3)
            elif call and method and text in _MACROS:
                macro_next = True
                add(level + 1, 0, _STEP)
            elif call and text in _REGEX_CALLS:
                add(level, 2)
            elif call:
                add(level, 1)
            else:
                add(level, 0)
        elif kind == "op":
            if text == "(":
                parens.append(macro_next)
                macro_next = False
            elif text == ")":
                if parens:
                    parens.pop()
            elif text in _STRING_OPS:
                add(level, 1)
            elif text in _UNIT_OPS:
                add(level, 0)
    return Cost(tuple((a, b, c, d) for a, b, c, d in counts), len(toks), longest)


def measure(value: Any) -> tuple[int, int]:
    """(list items and map entries, longest string or key) in a value, without recursion."""
    entries, longest, stack = 0, 0, [value]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            entries += len(v)
            for k, item in v.items():
                if isinstance(k, str) and len(k) > longest:
                    longest = len(k)
                stack.append(item)
        elif isinstance(v, list):
            entries += len(v)
            stack.extend(v)
        elif isinstance(v, (str, bytes)) and len(v) > longest:
            longest = len(v)
    return entries, longest
