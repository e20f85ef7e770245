"""The types of a DRA selector's subexpressions, as much as the cost estimator reads of them.

cel-go's estimator (kgpu.sim.scheduler.plugins.cel_estimate) asks the checked types: which overloads an
operator may resolve to, which values are scalars (their size is 1), and what a comprehension's variable ranges
over. This is that part of cel-go's checker for the DRA environment: ``device`` with its ``driver``,
``attributes`` and ``capacity`` maps, literals, the result types of the library functions, and ``dyn`` where
cel-go's checker would infer more than the estimate needs. ``type_name`` gives cel-go's name of a type, for the
API server's "must evaluate to bool" check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kgpu.sim.scheduler.plugins.cel_costs import Est
from kgpu.sim.scheduler.plugins.cel_parse import Call, Comp, Ident, ListLit, Lit, MapLit, Select

DYN: tuple[Any, ...] = ("dyn",)
ANY: tuple[Any, ...] = ("any",)  # an attribute's value: google.protobuf.Any, which the checker treats as dyn
# an empty literal's element type: a type parameter the checker unifies later
FREE: tuple[Any, ...] = ("free",)
SCALARS = frozenset({"bool", "int", "uint", "double", "duration", "timestamp"})
_T = {
    k: (k,) for k in ("bool", "int", "uint", "double", "string", "bytes", "null", "quantity", "semver", "ip", "cidr")
}
_DEVICE = ("device",)
_ATTRS = ("map", _T["string"], ("map", _T["string"], ANY))
_CAPS = ("map", _T["string"], ("map", _T["string"], _T["quantity"]))
_DEVICE_FIELDS = {"driver": _T["string"], "attributes": _ATTRS, "capacity": _CAPS}
_RESULT_TYPES: dict[str, tuple[Any, ...]] = {
    **{
        f: _T["bool"]
        for f in (
            "_&&_",
            "_||_",
            "!_",
            "_<_",
            "_<=_",
            "_>_",
            "_>=_",
            "_==_",
            "_!=_",
            "@in",
            "@not_strictly_false",
            "contains",
            "startsWith",
            "endsWith",
            "matches",
            "isSorted",
            "sets.contains",
            "sets.equivalent",
            "sets.intersects",
            "isSemver",
            "isQuantity",
            "isGreaterThan",
            "isLessThan",
            "isInteger",
            "bool",
            "isIP",
            "isCIDR",
            "ip.isCanonical",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
            "containsIP",
            "containsCIDR",
        )
    },
    **{
        f: _T["int"]
        for f in (
            "size",
            "int",
            "compareTo",
            "major",
            "minor",
            "patch",
            "asInteger",
            "sign",
            "indexOf",
            "lastIndexOf",
            "family",
            "prefixLength",
        )
    },
    **{
        f: _T["string"]
        for f in (
            "string",
            "charAt",
            "lowerAscii",
            "upperAscii",
            "replace",
            "substring",
            "trim",
            "join",
            "format",
            "strings.quote",
            "find",
        )
    },
    "uint": _T["uint"],
    "double": _T["double"],
    "asApproximateFloat": _T["double"],
    "bytes": _T["bytes"],
    "split": ("list", _T["string"]),
    "findAll": ("list", _T["string"]),
    "lists.range": ("list", _T["int"]),
    "semver": _T["semver"],
    "quantity": _T["quantity"],
    "ip": _T["ip"],
    "cidr": _T["cidr"],
    "masked": _T["cidr"],
    "add": _T["quantity"],
    "sub": _T["quantity"],
}
_SAME_LIST = frozenset({"distinct", "flatten", "slice", "sort", "reverse"})


def is_dyn(t: tuple[Any, ...]) -> bool:
    return t[0] in ("dyn", "free", "any")


def _join(a: tuple[Any, ...], b: tuple[Any, ...]) -> tuple[Any, ...]:
    if a[0] == "free":
        return b
    if b[0] == "free":
        return a
    if a[0] == b[0] == "list":
        return ("list", _join(a[1], b[1]))
    return a if a == b else DYN


@dataclass(slots=True)
class Var:
    path: list[str]
    size: Est | None
    entry: tuple[str, Est, Est] | None
    type: tuple[Any, ...]


@dataclass
class TypeChecker:
    """The types of an expression's nodes (by id), with the comprehension variables in scope."""

    types: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    scopes: dict[str, list[Var]] = field(default_factory=dict)

    # -- types --
    def type_of(self, e: Any) -> tuple[Any, ...]:
        t = self.types.get(id(e))
        if t is None:
            t = self.types[id(e)] = self._type(e)
        return t

    def _type(self, e: Any) -> tuple[Any, ...]:
        if isinstance(e, Lit):
            return _T.get(e.kind, (e.kind,))
        if isinstance(e, Ident):
            v = self.peek(e.name)
            if v is not None:
                return v.type
            return _DEVICE if e.name == "device" else DYN
        if isinstance(e, Select):
            if e.test_only:
                return _T["bool"]
            o = self.type_of(e.operand)
            if o == _DEVICE:
                return _DEVICE_FIELDS.get(e.field, DYN)
            return o[2] if o[0] == "map" else DYN
        if isinstance(e, ListLit):
            elem: tuple[Any, ...] | None = None
            for it in e.items:
                t = self.type_of(it)
                elem = t if elem is None else _join(elem, t)
            return ("list", elem or FREE)
        if isinstance(e, MapLit):
            k: tuple[Any, ...] | None = None
            v2: tuple[Any, ...] | None = None
            for a, b in e.entries:
                ta, tb = self.type_of(a), self.type_of(b)
                k = ta if k is None else _join(k, ta)
                v2 = tb if v2 is None else _join(v2, tb)
            return ("map", k or FREE, v2 or FREE)
        if isinstance(e, Comp):
            return self._comp_type(e)
        assert isinstance(e, Call)
        f = e.function
        args = [self.type_of(a) for a in e.args]
        if f == "_[_]":
            c = args[0]
            return c[1] if c[0] == "list" else c[2] if c[0] == "map" else DYN
        if f in ("_+_", "_-_", "_*_", "_/_", "_%_"):
            a, b = args
            if a[0] == "list" or b[0] == "list":
                ea = a[1] if a[0] == "list" else None
                eb = b[1] if b[0] == "list" else None
                return ("list", _join(ea, eb) if ea and eb else (ea or eb or FREE))
            return a if a == b else b if is_dyn(a) else a if is_dyn(b) else DYN
        if f == "-_":
            return args[0]
        if f == "_?_:_":
            return _join(args[1], args[2])
        if f == "dyn":
            return DYN
        if f in _SAME_LIST:
            target = self.type_of(e.target) if e.target is not None else (args[0] if args else DYN)
            return target if target[0] == "list" else ("list", DYN)
        if f in ("sum", "min", "max") and e.target is not None:
            target = self.type_of(e.target)
            if target[0] == "list" and target[1][0] == "free":
                return _T["int"]  # an empty list's element type unifies with the first overload's, list(int)
            return target[1] if target[0] == "list" else DYN
        return _RESULT_TYPES.get(f, DYN)

    def _iter_types(self, e: Comp) -> list[tuple[str, tuple[Any, ...]]]:
        rt = self.type_of(e.range)
        first = rt[1] if rt[0] in ("list", "map") else DYN
        if e.iter_var2 is None:
            return [(e.iter_var, first)]
        second = rt[1] if rt[0] == "list" else rt[2] if rt[0] == "map" else DYN
        return [(e.iter_var, _T["int"] if rt[0] == "list" else first), (e.iter_var2, second)]

    def _accu_type(self, e: Comp) -> tuple[Any, ...]:
        """The accumulator's type (the iteration variables in scope): the init's, or for ``map`` and
        ``filter`` a list of what the step appends."""
        t = self.type_of(e.accu_init)
        if t[0] != "list":
            return t
        step = e.step
        if isinstance(step, Call) and step.function == "_?_:_":
            step = step.args[1]
        if (
            isinstance(step, Call)
            and step.function == "_+_"
            and isinstance(step.args[1], ListLit)
            and len(step.args[1].items) == 1
        ):
            return ("list", _join(t[1], self.type_of(step.args[1].items[0])))
        return t

    def _comp_type(self, e: Comp) -> tuple[Any, ...]:
        pushed = self._iter_types(e)
        for name, t in pushed:
            self.push(name, Var([], None, None, t))
        accu = self._accu_type(e)
        for name, _ in pushed:
            self.pop(name)
        if e.result is not None and isinstance(e.result, Ident) and e.result.name == e.accu_var:
            return accu
        self.push(e.accu_var, Var([], None, None, accu))
        t = self.type_of(e.result)
        self.pop(e.accu_var)
        return t

    # -- scopes --
    def peek(self, name: str) -> Var | None:
        s = self.scopes.get(name)
        return s[-1] if s else None

    def push(self, name: str, var: Var) -> None:
        self.scopes.setdefault(name, []).append(var)

    def pop(self, name: str) -> None:
        self.scopes[name].pop()


_TYPE_NAMES = {
    "null": "null_type",
    "quantity": "kubernetes.Quantity",
    "semver": "kubernetes.Semver",
    "ip": "net.IP",
    "cidr": "net.CIDR",
    "device": "kubernetes.DRADevice",
    "any": "google.protobuf.Any",
}


def type_name(t: tuple[Any, ...], inner: bool = False) -> str | None:
    """cel-go's name of a type, or None where this checker does not know it (dyn, a type parameter); inside a
    list or map those are ``dyn``, as cel-go names an empty list's type ``list(dyn)``."""
    if t[0] in ("dyn", "free"):
        return "dyn" if inner else None
    if t[0] == "list":
        return f"list({type_name(t[1], True)})"
    if t[0] == "map":
        return f"map({type_name(t[1], True)}, {type_name(t[2], True)})"
    return _TYPE_NAMES.get(t[0], str(t[0]))
