"""CEL device selectors, evaluated the way the DRA allocator does, with a compiled CEL interpreter.

The evaluator is ``common-expression-language`` (PyPI; Python bindings over the Rust ``cel`` crate): a
maintained CEL implementation that compiles an expression once and evaluates it in a few microseconds, with
Python functions for what Kubernetes adds. Measured on this project's 2-core machine: about 30 us per
evaluation including the conversion of the device (``benchmarks/dra_bench.py`` prints the count of real
evaluations against the devices looked at). A hand-written evaluator would need a parser, macros and CEL's
type rules to be trusted; the library's test suite covers CEL's spec conformance.

What DRA selectors see (k8s.io/dynamic-resource-allocation/cel): ``device.driver``, ``device.attributes``
and ``device.capacity`` as maps of domain -> map of name -> value (unqualified names belong to the driver's
domain), ``device.allowMultipleAllocations``. Attribute values are int, bool, string, or a ``semver``
(version attributes); capacities are ``quantity`` values. Kubernetes' CEL libraries are registered as
functions: ``semver(s)`` with ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``,
``patch``; ``quantity(s)`` with ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``,
``asApproximateFloat``, ``sign``, ``isInteger``, ``add``, ``sub``. An expression that calls anything else is
outside the subset: it raises :class:`Unsupported` (a warning naming it, never a silent match).

Results are memoised per expression and the parts of the device the expression can read: the attributes and
capacities whose names appear in it (as identifiers or string literals), unless it enumerates a map (``in``,
``exists``, ``all``, ``size``, ...), in which case every attribute counts. 40,000 GPUs of a few kinds then cost
a few evaluations each.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import math
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from operator import itemgetter
from typing import Any

from kgpu.errors import InputError, quote
from kgpu.model.dra import Device
from kgpu.model.quantity import parse_quantity
from kgpu.sim.scheduler.plugins.cel_bind import Unshadowable, expand
from kgpu.sim.scheduler.plugins.cel_costs import U64
from kgpu.sim.scheduler.plugins.cel_estimate import MAX_COST, analyse
from kgpu.sim.scheduler.plugins.cel_library import FUNCTIONS as LIBRARY
from kgpu.sim.scheduler.plugins.cel_library import CelError
from kgpu.sim.scheduler.plugins.cel_net import FUNCTIONS as NET
from kgpu.sim.scheduler.plugins.cel_parse import CelParseError


def _load_cel() -> Any:
    """The library's compiled module (``cel.cel``) without its package: ``import cel`` also imports the
    library's command line (typer, rich, prompt_toolkit), 0.6 s on this project's machine against 10 ms."""
    spec = importlib.util.find_spec("cel")
    where = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in where:
        for name in sorted(os.listdir(folder)):
            if name.startswith("cel.") and name.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
                ext = importlib.util.spec_from_file_location("cel.cel", os.path.join(folder, name))
                if ext is not None and ext.loader is not None:
                    module = importlib.util.module_from_spec(ext)
                    ext.loader.exec_module(module)
                    return module
    import cel  # the package as installed, whatever its layout

    return cel


cel = _load_cel()
# the library logs each failing Python function (``quantity('x')``) as a warning; the error reaches the pod's
# result, so the log would only repeat it on standard error
_log = logging.getLogger("cel")
_log.addHandler(logging.NullHandler())
_log.propagate = False

_MAX_INT64 = 2**63 - 1
_MIN_INT64 = -(2**63)
_SEMVER = "__semver__"
_QUANTITY = "__quantity__"
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'")
_FUNCTION_ERROR = re.compile(
    r"Function '(\w+)' error: (?:Python function call failed: \w+: )?(.*?)\.?(?: Check function arguments and their types\.)?"
)
_ENUMERATES = re.compile(r"\b(in|exists|exists_one|all|map|filter|size|has)\b")


class CelSyntaxError(ValueError):
    """The expression does not parse: the API server rejects the object."""


class CelNotBool(CelSyntaxError):
    """The selector's type is not bool: the API server refuses the object (Invalid value)."""


class CelTooComplex(CelSyntaxError):
    """The selector's worst-case cost passes the limit: the API server refuses the object."""

    def __init__(self, cost: int) -> None:
        worst = "unbounded" if cost >= U64 else f"{cost:,}"
        super().__init__(f"too complex, exceeds cost limit (estimated worst case {worst}; the limit is {MAX_COST:,})")
        self.cost = cost


class CelRuntimeError(RuntimeError):
    """Evaluation failed on a device (a missing key, a type mismatch, a division by zero, an integer overflow,
    a bad conversion): the allocator returns an error, and the pod's Filter fails on that node."""


class Unsupported(RuntimeError):
    """The expression calls a function kgpu does not evaluate."""


# --- Kubernetes' CEL libraries (k8s.io/apiserver/pkg/cel/library: semver, quantity) ------------------------


def _semver_key(s: str) -> tuple[Any, ...]:
    core, _, rest = s.partition("+")[0].partition("-")
    major, minor, patch = (int(x) for x in core.split("."))
    pre = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in rest.split(".")) if rest else ()
    # a version without pre-release ranks above the same version with one
    return (major, minor, patch, 0 if pre else 1, pre)


def semver_value(s: str) -> dict[str, Any]:
    return {_SEMVER: s}


def quantity_value(milli: int) -> dict[str, Any]:
    """A quantity as CEL holds it: its thousandths, as an int when CEL's 64-bit ints hold them, else as their
    decimal text (Kubernetes' quantities are arbitrary-precision: ``1e400`` is a valid one)."""
    return {_QUANTITY: milli if _MIN_INT64 <= milli <= _MAX_INT64 else str(milli)}


def _semver(s: Any) -> dict[str, Any]:
    if not isinstance(s, str):
        raise TypeError("semver() takes a string")
    try:
        _semver_key(s)
    except ValueError:
        raise ValueError(f"invalid semver: {s}") from None
    return semver_value(s)


def _quantity(s: Any) -> dict[str, Any]:
    if not isinstance(s, str):
        raise TypeError("quantity() takes a string")
    try:
        return quantity_value(int(parse_quantity(s) * 1000))
    except InputError:
        raise ValueError(f"invalid quantity: {quote(s)}") from None


def _kind(v: Any) -> str:
    if isinstance(v, dict):
        if _SEMVER in v:
            return "semver"
        if _QUANTITY in v:
            return "quantity"
    raise TypeError("no such overload")


def _cmp(a: Any, b: Any) -> int:
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        raise TypeError("no such overload")
    if ka == "semver":
        x, y = _semver_key(a[_SEMVER]), _semver_key(b[_SEMVER])
        return (x > y) - (x < y)
    m, n = _q(a), _q(b)
    return (m > n) - (m < n)


def _part(i: int) -> Any:
    def get(v: Any) -> int:
        if _kind(v) != "semver":
            raise TypeError("no such overload")
        return int(_semver_key(v[_SEMVER])[i])

    return get


def _q(v: Any) -> int:
    if _kind(v) != "quantity":
        raise TypeError("no such overload")
    return int(v[_QUANTITY])


def _as_integer(v: Any) -> int:
    m = _q(v)
    if m % 1000 or not _MIN_INT64 <= m // 1000 <= _MAX_INT64:
        raise ValueError("cannot convert value to integer")
    return m // 1000


def _as_float(v: Any) -> float:
    m = _q(v)
    try:
        return float(Fraction(m, 1000))
    except OverflowError:  # beyond a double: Quantity.AsApproximateFloat64 gives an infinity
        return math.inf if m > 0 else -math.inf


def _arith(sign: int) -> Any:
    def op(a: Any, b: Any) -> dict[str, Any]:
        other = b * 1000 if isinstance(b, int) and not isinstance(b, bool) else _q(b)
        return quantity_value(_q(a) + sign * other)

    return op


FUNCTIONS: dict[str, Any] = {
    "semver": _semver,
    "quantity": _quantity,
    "compareTo": _cmp,
    "isGreaterThan": lambda a, b: _cmp(a, b) > 0,
    "isLessThan": lambda a, b: _cmp(a, b) < 0,
    "major": _part(0),
    "minor": _part(1),
    "patch": _part(2),
    "asInteger": _as_integer,
    "asApproximateFloat": _as_float,
    "isInteger": lambda v: _q(v) % 1000 == 0,
    "sign": lambda v: (_q(v) > 0) - (_q(v) < 0),
    "add": _arith(1),
    "sub": _arith(-1),
}


# --- devices as CEL sees them ----------------------------------------------------------------------------


def device_value(driver: str, device: Device) -> dict[str, Any]:
    attrs: dict[str, dict[str, Any]] = {}
    for key, value in device.attributes.items():
        domain, _, name = key.rpartition("/")
        attrs.setdefault(domain, {})[name] = semver_value(value[1]) if isinstance(value, tuple) else value
    caps: dict[str, dict[str, Any]] = {}
    for key, milli in device.capacity.items():
        domain, _, name = key.rpartition("/")
        caps.setdefault(domain, {})[name] = quantity_value(milli)
    return {"driver": driver, "attributes": attrs, "capacity": caps, "allowMultipleAllocations": False}


class Program:
    """One compiled selector and what it can read of a device (for the memo)."""

    __slots__ = ("_program", "cost", "domains", "everything", "expression", "names", "result", "unsupported")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.unsupported = ""  # why kgpu cannot evaluate it (a name cel.bind binds declared again)
        try:
            source = expand(expression)
        except Unshadowable as exc:
            source, self.unsupported = expression, str(exc)
        except ValueError as exc:  # a malformed cel.bind: the API server refuses the object
            raise CelSyntaxError(str(exc)) from None
        try:
            self._program = cel.compile(source)
        except (ValueError, RuntimeError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise CelSyntaxError(first.removeprefix(f"Failed to parse expression '{expression}': ")) from None
        # the API server's worst-case estimate (kgpu.sim.scheduler.plugins.cel_estimate), which it checks when
        # the selector's object is created (kgpu.sim.scheduler.plugins.dynamicresources refuses one over it)
        try:
            self.cost, self.result = analyse(expression)
        except CelParseError as exc:
            raise CelSyntaxError(str(exc)) from None
        names: set[str] = set()
        for tok in _TOKEN.findall(expression):
            names.add(tok[1:-1] if tok[:1] in "\"'" else tok)
        self.names = frozenset(names)
        # the domains it names (string literals with a dot): Kubernetes gives every domain a map, empty for a
        # domain the device has no attribute of, so ``device.attributes['other.com'].x`` fails on the key
        # ``x`` (and ``has()`` is false), not on the domain
        self.domains = frozenset(tok[1:-1] for tok in _TOKEN.findall(expression)
                                 if tok[:1] in "\"'" and "." in tok and "/" not in tok)
        self.everything = bool(_ENUMERATES.search(expression))

    def check(self) -> None:
        """What the API server checks when the selector's object is created, after it compiles: the result's
        type (CelNotBool), then the cost (CelTooComplex: a selector under the limit costs at most the limit at
        run time, as the estimate bounds every evaluation, so none runs long)."""
        if self.result not in (None, "bool", "google.protobuf.Any"):
            raise CelNotBool(f"must evaluate to bool or the unknown type, not {self.result}")
        if self.cost > MAX_COST:
            raise CelTooComplex(self.cost)

    def execute(self, context: Any) -> Any:
        if self.unsupported:
            raise Unsupported(self.unsupported)
        return self._program.execute(context)


def runtime_error(exc: Exception) -> CelRuntimeError | Unsupported:
    """What evaluating a selector raised, as the allocator reports it (cel-go's words where they differ)."""
    if isinstance(exc, (CelRuntimeError, Unsupported)):
        return exc
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, KeyError):
        return CelRuntimeError(f"no such key: {exc.args[0] if exc.args else ''}")
    if isinstance(exc, ZeroDivisionError):
        return CelRuntimeError("modulus by zero" if "modulo" in text else "division by zero")
    if isinstance(exc, OverflowError) and text.startswith("Arithmetic overflow"):
        return CelRuntimeError("integer overflow")
    if "Undefined variable or function" in text:
        return Unsupported(text)
    own = text.partition(f"{CelError.__name__}: ")[2]
    if own:  # a Kubernetes library function's own error (kgpu.sim.scheduler.plugins.cel_library), cel-go's words
        return CelRuntimeError(own.removesuffix(" Check function arguments and their types.").rstrip("."))
    m = _FUNCTION_ERROR.fullmatch(text)
    if m is not None:  # "Function 'int' error: <why>. Check function arguments and their types."
        text = f"{m.group(1)}: {m.group(2)}"
    if isinstance(exc, OverflowError) and "overflow" not in text:
        text = f"integer overflow: {text}"
    return CelRuntimeError(text)


class Evaluator:
    """Compiles selectors once and answers "does this device match", memoised."""

    def __init__(self) -> None:
        self._programs: dict[str, Program] = {}
        self._memo: dict[tuple[Any, ...], bool | Exception] = {}
        self._values: dict[int, tuple[Device, dict[str, Any]]] = {}
        self._layouts: dict[tuple[str, int], tuple[Any, Any]] = {}
        self._layout_ids: dict[tuple[tuple[str, ...], tuple[str, ...]], int] = {}
        self._device_layout: dict[int, tuple[Device, int]] = {}
        self._context = cel.Context()
        for name, fn in {**LIBRARY, **NET, **FUNCTIONS}.items():
            self._context.add_function(name, fn)
        self.evaluations = 0  # real evaluations (memo misses), for the benchmark

    def program(self, expression: str) -> Program:
        p = self._programs.get(expression)
        if p is None:
            p = self._programs[expression] = Program(expression)
        return p

    def evaluate(self, p: Program, driver: str, device: Device) -> bool | CelRuntimeError | Unsupported:
        """The one place a selector runs on a device: True or False, or the error evaluating it (a division
        by zero, an integer overflow, a conversion that fails, a missing key, a device CEL cannot hold)."""
        self.evaluations += 1
        try:
            out = p.execute(self._with_device(driver, device, p))
        except MemoryError:
            raise
        except Exception as exc:  # whatever the interpreter or a library function raises: the pod's result
            return runtime_error(exc)
        if not isinstance(out, bool):
            return CelRuntimeError(f"expression must return bool, got {type(out).__name__}")
        return out

    def matches(self, expression: str, driver: str, device: Device) -> bool:
        """Whether ``device`` (of ``driver``) matches; raises CelRuntimeError or Unsupported."""
        p = self._programs.get(expression) or self.program(expression)
        attrs, caps = device.attributes, device.capacity
        if p.everything:
            key: tuple[Any, ...] = (expression, driver, device.name, _freeze(attrs), _freeze(caps))
        else:
            # devices of one driver share their attribute names (a layout): what the expression reads is
            # found once per layout, then read by qualified name
            held = self._device_layout.get(id(device))
            if held is None or held[0] is not device:
                shape = (tuple(attrs), tuple(caps))
                held = self._device_layout[id(device)] = (device, self._layout_ids.setdefault(shape, len(self._layout_ids)))
            lay = (expression, held[1])
            reads = self._layouts.get(lay)
            if reads is None:
                reads = self._layouts[lay] = _reads(p, attrs, caps)
            key = (lay, driver, reads[0](attrs), reads[1](caps))
        hit = self._memo.get(key)
        if hit is None:
            self._memo[key] = hit = self.evaluate(p, driver, device)
        if isinstance(hit, Exception):
            raise hit
        return hit

    def results(self, expression: str, driver: str, devices: Sequence[Device]) -> list[bool | Exception]:
        """``matches`` for each device, in one pass: True, False, or the CelRuntimeError / Unsupported
        evaluating it raised (the caller decides when it counts)."""
        p = self._programs.get(expression) or self.program(expression)
        out: list[bool | Exception] = []
        if p.everything:
            for d in devices:
                try:
                    out.append(self.matches(expression, driver, d))
                except (CelRuntimeError, Unsupported) as exc:
                    out.append(exc)
            return out
        memo, layouts, held_of, ids = self._memo, self._layouts, self._device_layout, self._layout_ids
        last_id, reads = -1, None
        for d in devices:
            attrs, caps = d.attributes, d.capacity
            held = held_of.get(id(d))
            if held is None or held[0] is not d:
                held = held_of[id(d)] = (d, ids.setdefault((tuple(attrs), tuple(caps)), len(ids)))
            lid = held[1]
            if lid != last_id:
                lay = (expression, lid)
                reads = layouts.get(lay)
                if reads is None:
                    reads = layouts[lay] = _reads(p, attrs, caps)
                last_id = lid
            assert reads is not None
            key = (lay, driver, reads[0](attrs), reads[1](caps))
            hit = memo.get(key)
            if hit is None:
                memo[key] = hit = self.evaluate(p, driver, d)
            out.append(hit)
        return out

    def _with_device(self, driver: str, device: Device, p: Program) -> Any:
        cached = self._values.get(id(device))
        if cached is None or cached[0] is not device:
            cached = self._values[id(device)] = (device, device_value(driver, device))
        value = cached[1]
        if p.domains and not (p.domains <= value["attributes"].keys() and p.domains <= value["capacity"].keys()):
            value = {**value, "attributes": {**{d: {} for d in p.domains}, **value["attributes"]},
                     "capacity": {**{d: {} for d in p.domains}, **value["capacity"]}}
        self._context.add_variable("device", value)
        return self._context


def _reads(p: Program, attrs: dict[str, Any], caps: dict[str, int]) -> tuple[Any, Any]:
    """Getters of the attribute and capacity values whose unqualified name appears in the expression."""
    return readers(p.names, attrs, caps)


def readers(names: frozenset[str], attrs: dict[str, Any], caps: dict[str, int]) -> tuple[Any, Any]:
    """Getters of the values, in devices laid out as ``attrs`` and ``caps``, of the attributes and
    capacities whose unqualified name is one of ``names``: each returns a tuple."""
    return (_getter(tuple(k for k in attrs if k.rpartition("/")[2] in names)),
            _getter(tuple(k for k in caps if k.rpartition("/")[2] in names)))


def _getter(keys: tuple[str, ...]) -> Any:
    if not keys:
        return lambda d: ()
    get = itemgetter(*keys)
    return get if len(keys) > 1 else (lambda d: (get(d),))


def _freeze(d: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(d.items()))
