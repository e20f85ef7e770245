"""CEL expressions parsed as cel-go's parser makes them, for estimating their cost (kgpu.sim.scheduler.plugins.cel_estimate).

The AST is cel-go's: literals, identifiers, field selections (``has()`` as a presence test), calls (operators
as ``_+_``, ``_[_]``, ``@in``; namespaced functions such as ``sets.contains`` as one global name) and list and
map literals, with CEL's macros expanded into comprehensions exactly as cel-go's ``parser/macro.go`` expands
them (``all``, ``exists``, ``exists_one``, ``map`` and ``filter``, the two-variable forms, ``cel.bind``): the
accumulator ``@result``, the loop condition ``@not_strictly_false``, the step and the result, since the
estimate counts each. Nesting is held to cel-go's limits ("max recursion depth exceeded", "expression recursion
limit exceeded: 250"). Evaluation does not use this parser: the CEL interpreter compiles the expression itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_MAX_DEPTH = 250  # cel-go's parser refuses deeper nesting (its default MaxRecursionDepth)
# cel-go's parser visits a binary operator's operands one level deeper each (``1+1+...`` with 250 operators
# and a comparison is refused, 249 are taken): written syntax higher than this is "max recursion depth exceeded"
_MAX_HEIGHT = 251
ACCU = "@result"  # the hidden accumulator cel-go's macros name


class CelParseError(ValueError):
    """The expression does not parse, or nests deeper than cel-go's parser takes."""


# --- the AST, as cel-go's parser builds it (macros expanded) ----------------------------------------------


@dataclass(eq=False, slots=True)
class Lit:
    value: Any
    kind: str  # bool int uint double string bytes null


@dataclass(eq=False, slots=True)
class Ident:
    name: str


@dataclass(eq=False, slots=True)
class Select:
    operand: Any
    field: str
    test_only: bool = False


@dataclass(eq=False, slots=True)
class Call:
    function: str
    args: list[Any]
    target: Any = None


@dataclass(eq=False, slots=True)
class ListLit:
    items: list[Any]


@dataclass(eq=False, slots=True)
class MapLit:
    entries: list[tuple[Any, Any]]


@dataclass(eq=False, slots=True)
class Comp:
    iter_var: str
    iter_var2: str | None
    range: Any
    accu_var: str
    accu_init: Any
    cond: Any
    step: Any
    result: Any


_TOKENS = re.compile(
    r"(?P<ws>\s+|//[^\n]*)"
    r"|(?P<str>(?:[rR][bB]?|[bB][rR]?)?(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"))"
    r"|(?P<num>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d+|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])"
)
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{3}|.)", re.S)
_BINARY = [("||",), ("&&",), ("<", "<=", ">", ">=", "==", "!=", "in"), ("+", "-"), ("*", "/", "%")]
_OP_NAMES = {
    "||": "_||_",
    "&&": "_&&_",
    "<": "_<_",
    "<=": "_<=_",
    ">": "_>_",
    ">=": "_>=_",
    "==": "_==_",
    "!=": "_!=_",
    "in": "@in",
    "+": "_+_",
    "-": "_-_",
    "*": "_*_",
    "/": "_/_",
    "%": "_%_",
}
_NAMESPACES = frozenset({"sets", "lists", "strings", "math", "base64", "cel"})


def _string_literal(text: str) -> Lit:
    prefix = ""
    while text[0] in "rRbB":
        prefix += text[0].lower()
        text = text[1:]
    q = 3 if text[:3] in ("'''", '"""') else 1
    body = text[q:-q]
    if "r" not in prefix:
        body = _ESCAPE.sub(lambda m: "?" if len(m.group()) > 2 else m.group()[1], body)
    if "b" in prefix:
        return Lit(body.encode("utf-8", "surrogatepass"), "bytes")
    return Lit(body, "string")


def _number(text: str) -> Lit:
    """A numeric literal as cel-go reads it: decimal (a leading 0 too) or hexadecimal, in 64-bit ranges."""
    t = text.lower()
    unsigned = t.endswith("u")
    t = t.removesuffix("u")
    if not unsigned and "x" not in t and any(c in t for c in ".e"):
        return Lit(float(t), "double")
    digits = t.lstrip("-")
    try:
        n = int(digits[2:], 16) if digits.startswith("0x") else int(digits, 10)
    except ValueError:
        raise CelParseError(f"invalid {'uint' if unsigned else 'int'} literal") from None
    n = -n if t.startswith("-") else n
    if unsigned:
        if not 0 <= n < 2**64:
            raise CelParseError("invalid uint literal")
        return Lit(n, "uint")
    if not -(2**63) <= n < 2**63:
        raise CelParseError("invalid int literal")
    return Lit(n, "int")


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks: list[tuple[str, str]] = []
        pos = 0
        while pos < len(text):
            m = _TOKENS.match(text, pos)
            if m is None:
                raise CelParseError(f"unexpected character at {pos}")
            pos = m.end()
            if m.lastgroup != "ws":
                kind = m.lastgroup or ""
                self.toks.append((kind if kind != "id" or m.group() not in ("in",) else "op", m.group()))
        self.i = 0
        self.depth = 0
        self.heights: dict[int, int] = {}  # node -> levels of written syntax below it (macro expansions: one)

    def h(self, node: Any, *children: Any) -> Any:
        self.heights[id(node)] = 1 + max((self.heights.get(id(c), 1) for c in children), default=0)
        return node

    def peek(self, k: int = 0) -> tuple[str, str]:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else ("eof", "")

    def take(self, text: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if text is not None and tok[1] != text:
            raise CelParseError(f"expected {text!r}")
        if tok[0] == "eof":
            raise CelParseError("unexpected end")
        self.i += 1
        return tok

    def parse(self) -> Any:
        e = self.expr()
        if self.peek()[0] != "eof":
            raise CelParseError("trailing input")
        if self.heights.get(id(e), 1) > _MAX_HEIGHT:
            raise CelParseError("max recursion depth exceeded")
        return e

    def expr(self) -> Any:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise CelParseError("expression nested too deeply")
        e = self.binary(0)
        if self.peek()[1] == "?":
            self.take()
            a = self.binary(0)
            self.take(":")
            b = self.expr()
            e = self.h(Call("_?_:_", [e, a, b]), e, a, b)
        self.depth -= 1
        return e

    def binary(self, level: int) -> Any:
        if level == len(_BINARY):
            return self.unary()
        e = self.binary(level + 1)
        while self.peek()[0] == "op" and self.peek()[1] in _BINARY[level]:
            op = self.take()[1]
            rhs = self.binary(level + 1)
            e = self.h(Call(_OP_NAMES[op], [e, rhs]), e, rhs)
        return e

    def unary(self) -> Any:
        tok = self.peek()
        if tok[1] == "!" or (tok[1] == "-" and self.peek(1)[0] != "num"):
            ops = 0
            while self.peek()[1] == tok[1]:
                self.take()
                ops += 1
            e = self.member()
            if ops % 2 == 0:
                return e
            return self.h(Call("!_" if tok[1] == "!" else "-_", [e]), e)
        return self.member()

    def member(self) -> Any:
        e = self.primary()
        while True:
            t = self.peek()[1]
            if t == ".":
                self.take()
                name = self.take()[1]
                if self.peek()[1] == "(":
                    args = self.args(")")
                    e = self.h(self.member_call(e, name, args), e, *args)
                else:
                    e = self.h(Select(e, name), e)
            elif t == "[":
                self.take()
                idx = self.expr()
                self.take("]")
                e = self.h(Call("_[_]", [e, idx]), e, idx)
            else:
                return e

    def args(self, close: str) -> list[Any]:
        self.take()
        out: list[Any] = []
        while self.peek()[1] != close:
            out.append(self.expr())
            if self.peek()[1] == ",":
                self.take()
            elif self.peek()[1] != close:
                raise CelParseError(f"expected {close!r}")
        self.take(close)
        return out

    def primary(self) -> Any:
        kind, text = self.take()
        if kind == "op" and text == "-":  # a negative number literal
            kind, text = self.take()
            text = "-" + text
        if kind == "num":
            return _number(text)
        if kind == "str":
            return _string_literal(text)
        if kind == "id":
            if text in ("true", "false"):
                return Lit(text == "true", "bool")
            if text == "null":
                return Lit(None, "null")
            if self.peek()[1] == "(":
                args = self.args(")")
                if text == "has" and len(args) == 1 and isinstance(args[0], Select):
                    return self.h(Select(args[0].operand, args[0].field, True), *args)
                return self.h(Call(text, args), *args)
            return Ident(text)
        if text == "(":
            e = self.expr()
            self.take(")")
            return e
        if text == "[":
            self.i -= 1
            items = self.args("]")
            return self.h(ListLit(items), *items)
        if text == "{":
            entries = []
            while self.peek()[1] != "}":
                k = self.expr()
                self.take(":")
                entries.append((k, self.expr()))
                if self.peek()[1] == ",":
                    self.take()
                elif self.peek()[1] != "}":
                    raise CelParseError("expected '}'")
            self.take("}")
            return self.h(MapLit(entries), *(x for kv in entries for x in kv))
        if text == ".":
            return self.primary()
        raise CelParseError(f"unexpected {text!r}")

    def member_call(self, target: Any, name: str, args: list[Any]) -> Any:
        if isinstance(target, Ident) and (target.name in _NAMESPACES or (target.name, name) == ("ip", "isCanonical")):
            if target.name == "cel" and name == "bind" and len(args) == 3 and isinstance(args[0], Ident):
                return Comp(
                    "#unused",
                    None,
                    ListLit([]),
                    args[0].name,
                    args[1],
                    Lit(False, "bool"),
                    Ident(args[0].name),
                    args[2],
                )
            return Call(f"{target.name}.{name}", args)
        two = len(args) == 3 and isinstance(args[0], Ident) and isinstance(args[1], Ident)
        if name in ("all", "exists", "exists_one", "existsOne") and (len(args) == 2 or two):
            if not isinstance(args[0], Ident):
                raise CelParseError("argument must be a simple name")
            v, v2, p = args[0].name, (args[1].name if two else None), args[-1]
            acc = Ident(ACCU)
            if name == "all":
                return Comp(
                    v,
                    v2,
                    target,
                    ACCU,
                    Lit(True, "bool"),
                    Call("@not_strictly_false", [acc]),
                    Call("_&&_", [Ident(ACCU), p]),
                    Ident(ACCU),
                )
            if name == "exists":
                return Comp(
                    v,
                    v2,
                    target,
                    ACCU,
                    Lit(False, "bool"),
                    Call("@not_strictly_false", [Call("!_", [acc])]),
                    Call("_||_", [Ident(ACCU), p]),
                    Ident(ACCU),
                )
            return Comp(
                v,
                v2,
                target,
                ACCU,
                Lit(0, "int"),
                Lit(True, "bool"),
                Call("_?_:_", [p, Call("_+_", [acc, Lit(1, "int")]), Ident(ACCU)]),
                Call("_==_", [Ident(ACCU), Lit(1, "int")]),
            )
        if name in ("map", "filter") and len(args) in (2, 3) and isinstance(args[0], Ident):
            v = args[0].name
            if name == "filter" and len(args) == 2:
                step: Any = Call(
                    "_?_:_", [args[1], Call("_+_", [Ident(ACCU), ListLit([Ident(v)])]), Ident(ACCU)]
                )
            else:
                step = Call("_+_", [Ident(ACCU), ListLit([args[-1]])])
                if len(args) == 3:
                    step = Call("_?_:_", [args[1], step, Ident(ACCU)])
            return Comp(v, None, target, ACCU, ListLit([]), Lit(True, "bool"), step, Ident(ACCU))
        return Call(name, args, target)


def parse(expression: str) -> Any:
    """The expression's AST with cel-go's macro expansions; raises CelParseError."""
    try:
        return _Parser(expression).parse()
    except (ValueError, OverflowError) as exc:  # a literal Python cannot read: never a traceback
        if isinstance(exc, CelParseError):
            raise
        raise CelParseError(f"invalid literal: {exc}") from None
