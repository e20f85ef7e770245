"""A CRD's own validation rules (``x-kubernetes-validations``, CEL), evaluated on create as the API server does.

Mirrors k8s.io/apiextensions-apiserver ``pkg/apiserver/schema/cel/validation.go`` (``Validator``,
``validateExpressions``, ``validateMap``, ``validateArray``), ``compilation.go`` (``compileRule``) and the
request path before it (``pkg/registry/customresource/strategy.go``, ``schema/defaulting``):

- The rules of a packaged CRD version are read once per process (:func:`build`, cached by the caller) into a
  tree that follows the schema (properties, items, additionalProperties, allOf) only where rules sit below;
  each rule is compiled the first time an object reaches it.
- The object is first defaulted and its non-nullable nulls pruned (``defaulting.Default``,
  ``PruneNonNullableNullsWithoutDefaults``), as the API server decodes a request before it validates.
- At each node holding rules, ``self`` is the node's value as ``UnstructuredToVal`` presents it: only the
  declared properties of an object (their names escaped as ``cel.Escape`` does: ``__dot__``, ``__dash__``,
  ``__slash__``, ``__underscores__``, reserved words), every key of a map, ``number`` as a double, ``date-time``
  and ``date`` strings as timestamps, ``byte`` as bytes; at the resource root (and an embedded resource) the
  object's ``apiVersion``, ``kind`` and ``metadata.name`` / ``metadata.generateName``; an object that only
  preserves unknown fields exposes none. A null value is not validated (``obj == nil``).
- Transition rules (those that read ``oldSelf``) are skipped on create, unless ``optionalOldSelf`` is set:
  then ``oldSelf`` is ``optional.none()`` (CRDValidationRatcheting, on by default since 1.30).
- A rule that does not return ``true`` fails with its ``messageExpression`` (a string, trimmed, at most 5 KiB,
  one line, not empty; else the ``message``), its ``message``, or ``failed rule: <rule>``, at the node's path
  plus ``fieldPath``, as the ``reason`` says: ``<path>: Invalid value: "<type>": <message>`` (the schema's
  type, as ``field.Invalid(fldPath, sts.Type, ...)``), ``Forbidden: ...``, ``Required value: ...`` or
  ``Duplicate value: "<type>"``. The root's path prints as ``<nil>``, as ``field.Path`` does.
- An evaluation error is ``<path>: Invalid value: "<type>": <error> evaluating rule: <message or rule>``
  (cel-go's words where they differ from the interpreter's: ``no such key: x``, ``type conversion error from
  'string' to 'int'``).

The interpreter is the compiled CEL kgpu evaluates DRA selectors with (``kgpu.sim.scheduler.plugins.cel``), with
the Kubernetes CEL libraries it implements: ext.Strings (``split``, ``indexOf``, ``lowerAscii``, ...),
library.Lists (``isSorted``, ``indexOf``, ...), library.Regex (``find``, ``findAll``), ext.Sets, ext.Lists,
``quantity`` and ``semver``. The packaged CRDs' 74 rules use ``find`` and ``split`` beyond standard CEL; all
compile. A rule calling a library kgpu does not evaluate (``url``, ``ip``, ``cidr``, ``format``) or syntax the
interpreter lacks (``.?field``) is reported as not evaluated, never as passing or failing.

Cost. The API server stops a rule whose cel-go runtime cost passes 1,000,000 and an object whose rules pass
10,000,000; the interpreter keeps no such count, so each rule's cost is bounded before it runs
(:mod:`kgpu.render.cel_cost`). A rule whose bound passes the limit, or would pass the object's budget, is not
evaluated and is reported as such: a hostile object cannot make validation hang. Objects over 3 MiB, which the
API server refuses before reading them, are refused before any of this (:data:`MAX_REQUEST_BYTES`).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kgpu.errors import MAX_MESSAGE, one_line
from kgpu.render.cel_cost import FREE, OBJECT_BUDGET, PER_CALL_LIMIT, Cost, estimate, measure

MAX_REQUEST_BYTES = 3 * 1024 * 1024  # MaxRequestSizeBytes
MAX_MESSAGE_EXPRESSION_BYTES = 5 * 1024  # MaxEvaluatedMessageExpressionSizeBytes
MAX_DEPTH = 64  # levels of an untyped value (preserve-unknown-fields without a type)

# cel.Escape's reserved words
# fmt: off
_RESERVED = frozenset({
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if", "import",
    "let", "loop", "package", "namespace", "return", "var", "void", "while",
})
# fmt: on
_IDENT = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPABLE = re.compile(r"[a-zA-Z_.\-/][a-zA-Z0-9_.\-/]*")
_ESCAPES = re.compile(r"__|[./-]")
_ESCAPED = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_REASONS = {
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
}
_CONVERSION = re.compile(r"^(int|uint|double): string parse error")

# --- compiled rules --------------------------------------------------------------------------------------


@dataclass(slots=True)
class Rule:
    rule: str
    message: str  # trimmed
    message_expression: str
    reason: str | None
    field_path: str  # normalised, "" when absent or not a valid path of the schema
    optional_old_self: bool
    # compiled on first use (:meth:`prepare`): a process compiles only the rules its objects reach
    prepared: bool = False
    cost: Cost = FREE
    program: Any = None
    message_program: Any = None
    message_cost: Cost | None = None
    uses_old_self: bool = False
    unsupported: str | None = None  # why the interpreter cannot compile it

    @property
    def name(self) -> str:
        """``ruleErrorString``: the message, else the rule."""
        return self.message or self.rule.strip()

    def prepare(self) -> Rule:
        if self.prepared:
            return self
        self.prepared = True
        if not self.rule.strip():
            return self
        self.cost = estimate(self.rule)
        self.program, self.unsupported = _compile(self.rule)
        if self.program is not None:
            self.uses_old_self = "oldSelf" in self.program.variables()
        if self.message_expression:
            self.message_program, _ = _compile(self.message_expression)
            self.message_cost = estimate(self.message_expression)
        return self


@dataclass(slots=True)
class Node:
    """``Validator``: the rules at one schema node and the nodes below that hold rules."""

    schema: dict[str, Any]
    root: bool
    rules: list[Rule] = field(default_factory=list)
    properties: dict[str, Node] = field(default_factory=dict)
    items: Node | None = None
    additional: Node | None = None
    all_of: list[Node] = field(default_factory=list)


def _compile(text: str) -> tuple[Any, str | None]:
    from kgpu.sim.scheduler.plugins.cel import cel

    try:
        return cel.compile(text), None
    except (ValueError, RuntimeError) as exc:
        return None, (str(exc).splitlines() or [type(exc).__name__])[0]


def read_rule(spec: dict[str, Any], schema: dict[str, Any]) -> Rule:
    """One ``x-kubernetes-validations`` entry of the schema node ``schema`` (compiled by :meth:`Rule.prepare`)."""
    text = str(spec.get("rule") or "")
    expr = str(spec.get("messageExpression") or "")
    return Rule(
        rule=text,
        message=str(spec.get("message") or "").strip(),
        message_expression=expr,
        reason=spec.get("reason"),
        field_path=normalise_field_path(str(spec.get("fieldPath") or ""), schema),
        optional_old_self=spec.get("optionalOldSelf") is True,
    )


def _embedded(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("x-kubernetes-embedded-resource") is True


def _build(rules_at: dict[str, Any], shape: dict[str, Any], root: bool) -> Node | None:
    """``validator``: the rules of ``rules_at`` (a schema node, or one of its ``allOf`` entries) on values of
    the schema node ``shape``; None when no rule sits at or below it."""
    node = Node(shape, root)
    for spec in rules_at.get("x-kubernetes-validations") or []:
        if isinstance(spec, dict):
            node.rules.append(read_rule(spec, shape))
    shape_props = shape.get("properties") or {}
    for name, sub in (rules_at.get("properties") or {}).items():
        real = shape_props.get(name)  # rules only on the structural spine
        if isinstance(sub, dict) and isinstance(real, dict):
            found = _build(sub, real, _embedded(real))
            if found is not None:
                node.properties[name] = found
    for key in ("items", "additionalProperties"):
        sub, real = rules_at.get(key), shape.get(key)
        if isinstance(sub, dict) and isinstance(real, dict):
            found = _build(sub, real, _embedded(real))
            if key == "items":
                node.items = found
            else:
                node.additional = found
    for sub in rules_at.get("allOf") or []:
        if isinstance(sub, dict):
            found = _build(sub, shape, root)
            if found is not None:
                node.all_of.append(found)
    if node.rules or node.properties or node.items or node.additional or node.all_of:
        return node
    return None


def build(schema: dict[str, Any]) -> Node | None:
    """The compiled rules of a CRD version's openAPIV3Schema (the caller caches it per process)."""
    return _build(schema, schema, True)


def rules(node: Node | None) -> Iterator[Rule]:
    """Every rule at and below ``node``, compiled."""
    if node is None:
        return
    for rule in node.rules:
        yield rule.prepare()
    for child in (*node.properties.values(), node.items, node.additional, *node.all_of):
        yield from rules(child)


def normalise_field_path(path: str, schema: dict[str, Any]) -> str:
    """``ValidFieldPath``: ``.a.b['c']`` to ``a.b[c]`` (``[c]`` where ``c`` is a key of a map), or "" when the
    path does not name a field of the schema."""
    out, i, here = "", 0, schema
    while i < len(path):
        if path[i] == ".":
            m = re.match(r"[^.\[\]]+", path[i + 1 :])
            if m is None:
                return ""
            name, i = m.group(), i + 1 + m.end()
        elif path.startswith("['", i):
            m = re.match(r"'((?:[^'\\]|\\.)*)'\]", path[i + 1 :])
            if m is None:
                return ""
            name, i = re.sub(r"\\(.)", r"\1", m.group(1)), i + 1 + m.end()
        else:
            return ""
        props, extra = here.get("properties"), here.get("additionalProperties")
        if props is not None:
            if name not in props:
                return ""
            here, out = props[name], f"{out}.{name}" if out else name
        elif isinstance(extra, dict):
            here, out = extra, f"{out}[{name}]"
        else:
            return ""
    return out


# --- the object as the rules see it ----------------------------------------------------------------------


def defaulted(value: Any, schema: Any) -> Any:
    """A copy with the schema's defaults filled in and non-nullable nulls without a default pruned."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        extra = extra if isinstance(extra, dict) else None
        out: dict[str, Any] = {}
        for k, v in value.items():
            sub = props.get(k) if k in props else extra
            if v is None and sub is not None and not sub.get("nullable"):
                if "default" not in sub:
                    continue
                v = sub["default"]
            out[k] = defaulted(v, sub)
        for k, sub in props.items():
            if k not in out and k not in value and isinstance(sub, dict) and sub.get("default") is not None:
                out[k] = defaulted(sub["default"], sub)
        return out
    if isinstance(value, list):
        items = schema.get("items")
        items = items if isinstance(items, dict) else None
        fill = items is not None and not items.get("nullable") and "default" in items
        return [defaulted(items["default"] if v is None and fill else v, items) for v in value]  # type: ignore[index]
    return value


class TooDeep(ValueError):
    pass


def escape(name: str) -> str | None:
    """``cel.Escape``: the CEL field name of a property, or None when it has none."""
    if not name or name[0].isdigit() or not _ESCAPABLE.fullmatch(name):
        return None
    if name in _RESERVED:
        return f"__{name}__"
    if _IDENT.fullmatch(name) and "__" not in name:
        return name
    return _ESCAPES.sub(lambda m: _ESCAPED[m.group()], name)


def _plain(value: Any, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise TooDeep("nested too deeply")
    if isinstance(value, dict):
        return {k: _plain(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v, depth + 1) for v in value]
    return value


def _time(text: str) -> Any:
    """An RFC 3339 time (or a full date) as a timestamp; anything else stays the string it is."""
    try:
        if len(text) == 10:
            return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        return text
    return when if when.tzinfo is not None else text


def view(value: Any, schema: Any, root: bool = False, depth: int = 0) -> Any:
    """``UnstructuredToVal``: the value CEL sees at a schema node."""
    if depth > MAX_DEPTH:
        raise TooDeep("nested too deeply")
    if value is None or not isinstance(schema, dict):
        return _plain(value, depth)
    if schema.get("x-kubernetes-int-or-string"):
        return value
    kind = schema.get("type")
    if kind == "object" and isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if root:
            meta = value.get("metadata")
            head = {k: value[k] for k in ("apiVersion", "kind") if isinstance(value.get(k), str)}
            if isinstance(meta, dict):
                head["metadata"] = {
                    k: meta[k] for k in ("name", "generateName") if isinstance(meta.get(k), str)
                }
            props = {**(props or {}), "apiVersion": {}, "kind": {}, "metadata": {}}
            value = {**value, **head}
        if props is not None:
            out: dict[str, Any] = {}
            for k, v in value.items():
                name = escape(k) if k in props else None
                if name is not None and v is not None:
                    out[name] = view(
                        v, props[k], props[k].get("x-kubernetes-embedded-resource") is True, depth + 1
                    )
            return out
        if isinstance(extra, dict):
            return {k: view(v, extra, False, depth + 1) for k, v in value.items()}
        return {}  # preserve-unknown-fields: the declaration exposes no unknown field
    if kind == "array" and isinstance(value, list):
        items = schema.get("items")
        return [view(v, items, False, depth + 1) for v in value]
    if kind == "string" and isinstance(value, str):
        fmt = schema.get("format")
        if fmt in ("date-time", "date"):
            return _time(value)
        if fmt == "byte":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return value
        return value
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# --- evaluation ------------------------------------------------------------------------------------------


@functools.cache
def _context() -> Any:
    from kgpu.sim.scheduler.plugins.cel import FUNCTIONS, cel
    from kgpu.sim.scheduler.plugins.cel_library import FUNCTIONS as LIBRARY

    ctx = cel.Context()
    for name, fn in {**LIBRARY, **FUNCTIONS}.items():
        ctx.add_function(name, fn)
    return ctx


def child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _go_quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def field_error(path: str, kind: str, detail: str, reason: str | None = None) -> str:
    """``field.Error.Error()`` for the error types a rule produces."""
    where = path or "<nil>"
    label = _REASONS.get(reason or "", "Invalid value")
    if label == "Duplicate value":
        return f"{where}: Duplicate value: {_go_quote(kind)}"
    if label in ("Forbidden", "Required value"):
        return f"{where}: {label}: {detail}"
    return f"{where}: Invalid value: {_go_quote(kind)}: {detail}"


@dataclass(slots=True)
class Outcome:
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # rules not evaluated, and why
    budget: int = OBJECT_BUDGET


def _run(program: Any) -> tuple[Any, Exception | None]:
    """Execute in the shared context (``self`` bound): the result, or the error as the evaluator words it."""
    from kgpu.sim.scheduler.plugins.cel import runtime_error

    try:
        return program.execute(_context()), None
    except (MemoryError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # the interpreter's errors, a panic inside it included: the rule's result
        return None, runtime_error(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))


def _message(rule: Rule, entries: int, longest: int, out: Outcome) -> str:
    """``evalMessageExpression`` where it gives a message; the rule's message otherwise."""
    fallback = rule.message or f"failed rule: {rule.rule.strip()}"
    if rule.message_program is None or rule.message_cost is None:
        return fallback
    cost = rule.message_cost.bound(entries, longest)
    if cost > PER_CALL_LIMIT or cost > out.budget:
        return fallback
    out.budget -= cost
    result, err = _run(rule.message_program)
    if err is not None or not isinstance(result, str):
        return fallback
    text = result.strip()
    if not text or "\n" in text or len(text.encode()) > MAX_MESSAGE_EXPRESSION_BYTES:
        return fallback
    return text


def _evaluate_rules(node: Node, value: Any, path: str, out: Outcome) -> None:
    from kgpu.sim.scheduler.plugins.cel import Unsupported, cel

    prepared = [r.prepare() for r in node.rules]
    live = [r for r in prepared if r.rule.strip() and not (r.uses_old_self and not r.optional_old_self)]
    if not live:
        return
    kind = str(node.schema.get("type") or "")
    where = path or "<nil>"
    ctx = _context()
    try:
        self_value = view(value, node.schema, node.root)
        ctx.add_variable("self", self_value)
    except (TooDeep, RecursionError):
        out.notes.append(f"{where}: {len(live)} CEL rule(s) not evaluated: the value is nested too deeply")
        return
    except (ValueError, TypeError, OverflowError) as exc:  # a value CEL cannot hold (an int over 64 bits)
        why = (str(exc).splitlines() or [type(exc).__name__])[0]
        out.notes.append(one_line(f"{where}: {len(live)} CEL rule(s) not evaluated: {why}", MAX_MESSAGE))
        return
    entries, longest = measure(self_value)
    ctx.add_variable("oldSelf", cel.OptionalValue.none())
    for rule in live:
        if rule.program is None:
            out.notes.append(
                f"{where}: CEL rule {rule.name!r} not evaluated: kgpu's CEL cannot compile it ({rule.unsupported})"
            )
            continue
        cost = rule.cost.bound(entries, longest)
        if cost > PER_CALL_LIMIT:
            out.notes.append(
                f"{where}: CEL rule {rule.name!r} not evaluated: its cost on this object may pass the API "
                f"server's per-expression limit ({PER_CALL_LIMIT:,})"
            )
            continue
        if cost > out.budget:
            out.notes.append(
                f"{where}: CEL rule {rule.name!r} and the rules after it not evaluated: the object's rules "
                f"may pass the API server's budget ({OBJECT_BUDGET:,})"
            )
            out.budget = -1
            return
        out.budget -= cost
        result, err = _run(rule.program)
        if isinstance(err, Unsupported):
            out.notes.append(f"{where}: CEL rule {rule.name!r} not evaluated: {err}")
        elif err is not None:
            text = str(err)
            m = _CONVERSION.match(text)
            if m:
                text = f"type conversion error from 'string' to '{m.group(1)}'"
            if text.startswith("no such overload"):
                detail = (
                    f"'{text}': call arguments did not match a supported operator, function or macro "
                    f"signature for rule: {rule.name}"
                )
            else:
                detail = f"{text} evaluating rule: {rule.name}"
            out.errors.append(field_error(path, kind, detail))
        elif result is not True:
            at = child(path, rule.field_path) if rule.field_path else path
            out.errors.append(field_error(at, kind, _message(rule, entries, longest, out), rule.reason))


def _walk(node: Node, value: Any, path: str, out: Outcome) -> None:
    if value is None or out.budget < 0:
        return
    _evaluate_rules(node, value, path, out)
    for sub in node.all_of:
        _walk(sub, value, path, out)
    if isinstance(value, dict):
        if node.additional is not None:
            for k, v in value.items():
                _walk(node.additional, v, f"{path}[{k}]", out)
        for k, v in value.items():
            sub_node = node.properties.get(k)
            if sub_node is not None:
                _walk(sub_node, v, child(path, k), out)
    elif isinstance(value, list) and node.items is not None:
        for i, v in enumerate(value):
            _walk(node.items, v, f"{path}[{i}]", out)


def evaluate(node: Node | None, schema: dict[str, Any], doc: dict[str, Any]) -> Outcome:
    """Every rule of a CRD version (``node``, from :func:`build` on its ``schema``) on ``doc``, as on create:
    errors in the API server's words, and notes for the rules not evaluated."""
    out = Outcome()
    if node is not None:
        _walk(node, defaulted(doc, schema), "", out)
    return out
