"""The worst-case cost of a DRA device selector, estimated before it runs, as the API server estimates it.

The API server compiles each selector of a DeviceClass or ResourceClaim when the object is created
(k8s.io/dynamic-resource-allocation ``cel.CompileCELExpression``) and refuses one whose estimated cost passes
``CELSelectorExpressionMaxCost`` (1,000,000): ``Forbidden: too complex, exceeds cost limit``. The scheduler
evaluates a selector with the same limit at run time. A selector under the limit runs in bounded time (the
estimate is an upper bound of what an evaluation costs); one over it is refused here, before any device is
looked at, so that no verb can be held for minutes by three nested comprehensions.

The estimate follows cel-go's static cost estimator (``checker/cost.go`` of the cel-go release Kubernetes 1.34
pins, v0.26.0) with Kubernetes' own estimates for its libraries (k8s.io/apiserver ``pkg/cel/library/cost.go``,
ext.Lists' estimators) and the sizes the DRA environment declares for a device (a driver name of up to 63
characters, up to 32 attribute and capacity domains and names, attribute values of up to 64): each node's cost
is that of its operands plus its own, a comprehension costs its range's size times its loop, a string
operation costs a tenth per character of the strings' largest sizes. The expression is parsed as cel-go parses
it, macros expanded (kgpu.sim.scheduler.plugins.cel_parse); the library functions' estimates and the
arithmetic are in kgpu.sim.scheduler.plugins.cel_costs. A small type checker
(kgpu.sim.scheduler.plugins.cel_types) gives what the estimator reads of types: which overloads an operator may
resolve to, which values are scalars, and what a comprehension's variable ranges over.

Checked against the real compiler (conformance/kube ``cel-cost``) on drawn selectors: the differential in
conformance/tests/test_cel_cost_differential.py counts every estimate that differs.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from kgpu.sim.scheduler.plugins.cel_costs import (
    LIST_CREATE,
    MAP_CREATE,
    REGEX_FACTOR,
    STRING_FACTOR,
    U64,
    UNKNOWN,
    ZERO,
    Est,
    LibraryCosts,
    fixed,
)
from kgpu.sim.scheduler.plugins.cel_parse import (
    ACCU,
    Call,
    CelParseError,
    Comp,
    Ident,
    ListLit,
    Lit,
    MapLit,
    Select,
    parse,
)
from kgpu.sim.scheduler.plugins.cel_types import (
    SCALARS,
    TypeChecker,
    Var,
    is_dyn,
    type_name,
)

MAX_COST = 1_000_000  # k8s.io/api/resource/v1: CELSelectorExpressionMaxCost

# sizes the DRA environment declares (k8s.io/api/resource/v1 limits; dynamic-resource-allocation/cel/compile.go)
DRIVER_MAX = 63  # DriverNameMaxLength
DOMAIN_MAX = 63  # DeviceMaxDomainLength
ID_MAX = 32  # DeviceMaxIDLength
ATTRIBUTE_MAX = 64  # DeviceAttributeMaxValueLength
ENTRIES_MAX = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice


# the sizes the DRA environment declares along a path from ``device`` (compile.go's sizeEstimator)
_ATTR_VALUE = "attr"
_DECL: dict[str, Any] = {
    "device": {
        "max": 0,
        "fields": {
            "driver": {"max": DRIVER_MAX},
            "attributes": {
                "max": ENTRIES_MAX,
                "key": {"max": DOMAIN_MAX},
                "elem": {"max": ENTRIES_MAX, "key": {"max": ID_MAX}, "elem": _ATTR_VALUE},
            },
            "capacity": {
                "max": ENTRIES_MAX,
                "key": {"max": DOMAIN_MAX},
                "elem": {"max": ENTRIES_MAX, "key": {"max": ID_MAX}, "elem": {"max": 0}},
            },
        },
    },
}
@dataclass
class _Coster(TypeChecker, LibraryCosts):
    paths: dict[int, list[str]] = field(default_factory=dict)
    sizes: dict[int, Est] = field(default_factory=dict)
    entries: dict[int, tuple[str, Est, Est]] = field(default_factory=dict)

    # -- paths --

    def path(self, e: Any) -> list[str]:
        if isinstance(e, Ident):
            v = self.peek(e.name)
            if v is not None:
                return list(v.path)
        return list(self.paths.get(id(e), ()))

    def estimate_size(self, path: list[str]) -> Est | None:
        """compile.go's sizeEstimator: the declared maximum along a path from ``device``."""
        if not path or path[0] != "device":
            return None
        node: Any = _DECL["device"]
        for name in path[1:]:
            if node == _ATTR_VALUE:
                return None
            if name in ("@items", "@values"):
                node = node.get("elem")
            elif name == "@keys":
                node = node.get("key")
            elif name in node.get("fields", {}):
                node = node["fields"][name]
            elif node.get("elem") == _ATTR_VALUE:
                node = _ATTR_VALUE
                continue
            else:
                return None
            if node is None:
                return None
        return Est(0, ATTRIBUTE_MAX if node == _ATTR_VALUE else node["max"])

    def size(self, e: Any) -> Est | None:
        got = self.sizes.get(id(e))
        if got is not None:
            return got
        if isinstance(e, Lit):
            if e.kind in ("string", "bytes"):
                return fixed(len(e.value))
            return fixed(1)
        if isinstance(e, ListLit):
            return fixed(len(e.items))
        if isinstance(e, MapLit):
            return fixed(len(e.entries))
        est = self.estimate_size(self.path(e))
        if est is not None:
            self.sizes[id(e)] = est
            return est
        if self.type_of(e)[0] in SCALARS:
            return fixed(1)
        if isinstance(e, Ident):
            v = self.peek(e.name)
            if v is not None and v.size is not None:
                return v.size
        return None

    def size_or_unknown(self, e: Any) -> Est:
        s = self.size(e)
        return UNKNOWN if s is None else s

    def entry(self, e: Any) -> tuple[str, Est, Est] | None:
        got = self.entries.get(id(e))
        if got is not None:
            return got
        if isinstance(e, Ident):
            v = self.peek(e.name)
            if v is not None:
                return v.entry
        return None

    def node_path(self, e: Any) -> list[str]:
        p = self.path(e)
        return [] if p and p[0] in (ACCU, "__result__") else p

    # -- costs --
    def cost(self, e: Any) -> Est:
        if isinstance(e, Lit):
            return ZERO
        if isinstance(e, Ident):
            v = self.peek(e.name)
            self.paths[id(e)] = list(v.path) if v is not None else [e.name]
            return fixed(1)
        if isinstance(e, Select):
            if e.test_only:  # has(): the presence test is free in Kubernetes' environment
                return self.cost(e.operand)
            total = self.cost(e.operand)
            if self.type_of(e.operand)[0] in ("map", "device"):
                total = total.add(fixed(1))
            self.paths[id(e)] = [*self.path(e.operand), e.field]
            return total
        if isinstance(e, Call):
            return self.cost_call(e)
        if isinstance(e, ListLit):
            total, item = ZERO, (Est(0, 0) if not e.items else Est(U64, 0))
            for it in e.items:
                total = total.add(self.cost(it))
                item = item.union(self.size_or_unknown(it))
            self.entries[id(e)] = ("list", fixed(1), item)
            return total.add(fixed(LIST_CREATE))
        if isinstance(e, MapLit):
            total = ZERO
            ks, vs = (Est(0, 0), Est(0, 0)) if not e.entries else (Est(U64, 0), Est(U64, 0))
            for a, b in e.entries:
                total = total.add(self.cost(a)).add(self.cost(b))
                ks, vs = ks.union(self.size_or_unknown(a)), vs.union(self.size_or_unknown(b))
            self.entries[id(e)] = ("map", ks, vs)
            return total.add(fixed(MAP_CREATE))
        assert isinstance(e, Comp)
        return self.cost_comprehension(e)

    def _local(self, e: Any) -> Var:
        return Var(self.path(e), self.size(e), self.entry(e), self.type_of(e))

    def cost_comprehension(self, e: Comp) -> Est:
        rng = e.range
        bind = (
            isinstance(rng, ListLit)
            and not rng.items
            and isinstance(e.cond, Lit)
            and e.cond.value is False
            and e.accu_var != "__result__"
        )
        total = self.cost(rng).add(self.cost(e.accu_init))
        accu = self._local(e.accu_init)
        if bind:
            self.push(e.accu_var, accu)
            total = total.add(self.cost(e.result))
            self.types[id(e)] = self.type_of(e.result)
            self.pop(e.accu_var)
            s, ent = self.size(e.result), self.entry(e.result)
            if s is not None:
                self.sizes[id(e)] = s
            if ent is not None:
                self.entries[id(e)] = ent
            return total
        self.push(e.accu_var, accu)
        ent = self.entry(rng)
        rt = self.type_of(rng)
        container = (
            ent[0] if ent is not None else ("list" if rt[0] == "list" else "map" if rt[0] == "map" else "")
        )
        base = self.path(rng)
        types = self._iter_types(e)
        if e.iter_var2 is not None:
            self.push(
                e.iter_var,
                Var(
                    [*base, "@indices" if container == "list" else "@keys"],
                    ent[1] if ent else None,
                    None,
                    types[0][1],
                ),
            )
            self.push(
                e.iter_var2,
                Var(
                    [*base, "@items" if container == "list" else "@values"],
                    ent[2] if ent else None,
                    None,
                    types[1][1],
                ),
            )
        elif container == "list":
            self.push(e.iter_var, Var([*base, "@items"], ent[2] if ent else None, None, types[0][1]))
        else:
            self.push(e.iter_var, Var([*base, "@keys"], ent[1] if ent else None, None, types[0][1]))
        accu.type = self._accu_type(e)
        loop = self.cost(e.cond)
        step = self.cost(e.step)
        self.pop(e.iter_var)
        if e.iter_var2 is not None:
            self.pop(e.iter_var2)
        total = total.add(self.cost(e.result))
        self.types[id(e)] = self.type_of(e.result)  # while the accumulator is in scope
        self.pop(e.accu_var)
        count = self.size_or_unknown(rng)
        total = total.add(count.mul(step.add(loop)))
        if isinstance(e.accu_init, Lit):
            s = self.size(e.accu_init)
            if s is not None:
                self.sizes[id(e)] = s
        elif isinstance(e.accu_init, (ListLit, MapLit)):
            self.sizes[id(e)] = count
            se = self.entry(e.step)
            if se is not None:
                self.entries[id(e)] = se
        return total

    def cost_call(self, e: Call) -> Est:
        if e.function == "dyn" and len(e.args) == 1:
            c = self.cost(e.args[0])
            s, ent = self.size(e.args[0]), self.entry(e.args[0])
            if s is not None:
                self.sizes[id(e)] = s
            if ent is not None:
                self.entries[id(e)] = ent
            return fixed(1).add(c)
        arg_costs = [self.cost(a) for a in e.args]
        total = ZERO
        if e.target is not None:
            total = self.cost(e.target)
        overloads = self.overloads(e)
        fn = Est(U64, 0)
        result: Est | None = None
        for ov in overloads:
            c, rs = self.function_cost(e, ov, arg_costs)
            fn = fn.union(c)
            if rs is not None:
                result = rs if result is None else result.union(rs)
            if ov in ("index_list", "index_map") and e.args:
                ent = self.entry(e.args[0])
                result = None if ent is None else ent[2]
                self.paths[id(e)] = [*self.path(e.args[0]), "@items" if ov == "index_list" else "@values"]
            if result is None:
                result = self.size(e)
        if result is not None:
            self.sizes[id(e)] = result
        return total.add(fn)

    def overloads(self, e: Call) -> list[str]:
        """The overloads cel-go's checker keeps for a call (where the estimate depends on which)."""
        f, ts = e.function, [self.type_of(a) for a in e.args]
        kinds = [t[0] for t in ts]
        if f == "_[_]":
            k = kinds[0]
            return (
                ["index_list"]
                if k == "list"
                else ["index_map"]
                if k == "map"
                else ["index_list", "index_map"]
            )
        if f == "@in":
            k = kinds[1]
            return ["in_list"] if k == "list" else ["in_map"] if k == "map" else ["in_list", "in_map"]
        if f == "_+_":
            known = {k for k in kinds if k not in ("dyn", "free", "any")}
            if "string" in known:
                return ["add_string"]
            if "bytes" in known:
                return ["add_bytes"]
            if "list" in known:
                return ["add_list"]
            if known:
                return ["add_other"]
            return ["add_other", "add_string", "add_bytes", "add_list"]
        if f in ("_<_", "_<=_", "_>_", "_>=_"):
            known = {k for k in kinds if k not in ("dyn", "free", "any")}
            if known & {"string", "bytes"}:
                return ["compare_string"]
            if known:
                return ["compare_other"]
            return ["compare_other", "compare_string"]
        if f in ("string", "bytes") and len(ts) == 1 and e.target is None:
            # a conversion from dyn may be any of the type's overloads: cel-go keeps them all
            other = "bytes" if f == "string" else "string"
            conv = f"{other}_to_{f}"
            return [conv] if kinds[0] == other else [f, conv] if is_dyn(ts[0]) else [f]
        return [f]

    def function_cost(self, e: Call, ov: str, arg_costs: list[Est]) -> tuple[Est, Est | None]:
        args_sum = ZERO
        for c in arg_costs:
            args_sum = args_sum.add(c)
        f, args, target = e.function, e.args, e.target
        ext = self.extension_cost(e)
        if ext is not None:
            return ext[0].add(args_sum), ext[1]
        k8s = self.library_cost(e)
        if k8s is not None:
            return k8s[0].add(args_sum), k8s[1]
        if ov == "bytes_to_string":
            sz = self.size_or_unknown(args[0])
            return sz.factor(STRING_FACTOR).add(args_sum), Est(sz.lo // 4, sz.hi)
        if ov == "string_to_bytes":
            sz = self.size_or_unknown(args[0])
            return sz.factor(STRING_FACTOR).add(args_sum), Est(sz.lo, min(sz.hi * 4, U64))
        if f == "strings.quote" and len(args) == 1 and target is None:  # cel-go's ExtQuoteString
            sz = self.size_or_unknown(args[0])
            return sz.factor(STRING_FACTOR).add(args_sum), Est(sz.lo + 2, min(sz.hi * 2 + 2, U64))
        if ov in ("startsWith", "endsWith") and len(args) == 1 and target is not None:
            return self.size_or_unknown(args[0]).factor(STRING_FACTOR).add(args_sum), None
        if ov == "in_list":
            return self.size_or_unknown(args[1]).factor(1).add(args_sum), None
        if ov == "matches" and len(args) == 1 and target is not None:
            s = self.size_or_unknown(target).add(fixed(1)).factor(STRING_FACTOR)
            r = self.size_or_unknown(args[0]).factor(REGEX_FACTOR)
            return s.mul(r).add(args_sum), None
        if ov == "contains" and len(args) == 1 and target is not None:
            s = self.size_or_unknown(target).factor(STRING_FACTOR)
            return s.mul(self.size_or_unknown(args[0]).factor(STRING_FACTOR)).add(args_sum), None
        if f in ("_&&_", "_||_"):
            lhs, rhs = arg_costs
            return Est(lhs.lo, lhs.add(rhs).hi), None
        if f == "_?_:_":
            s = self.size_or_unknown(args[1]).union(self.size_or_unknown(args[2]))
            a, b = self.entry(args[1]), self.entry(args[2])
            if a is not None and b is not None:
                self.entries[id(e)] = (a[0], a[1].union(b[1]), a[2].union(b[2]))
            return arg_costs[0].add(arg_costs[1].union(arg_costs[2])), s
        if ov in ("add_string", "add_bytes", "add_list"):
            s = self.size_or_unknown(args[0]).add(self.size_or_unknown(args[1]))
            a, b = self.entry(args[0]), self.entry(args[1])
            if a is not None and b is not None:
                self.entries[id(e)] = (a[0], a[1].union(b[1]), a[2].union(b[2]))
            if ov == "add_list":
                return fixed(1).add(args_sum), s
            return s.factor(STRING_FACTOR).add(args_sum), s
        if ov in ("compare_string", "_==_", "_!=_"):
            lhs, rhs = self.size_or_unknown(args[0]), self.size_or_unknown(args[1])
            smallest = min(lhs.hi, rhs.hi)
            return Est(1 if smallest > 0 else 0, smallest).factor(STRING_FACTOR).add(args_sum), None
        return fixed(1).add(args_sum), None


def analyse(expression: str) -> tuple[int, str | None]:
    """The selector's worst-case cost (:func:`estimate`) and the name of its result type where this checker
    knows it (``bool``, or what the API server refuses: "must evaluate to bool or the unknown type, not
    int"); None where it does not (dyn)."""
    # the parser and the estimator recurse once per level of the expression: cel-go's limits (250) hold
    # them to about 3,000 Python frames, above the interpreter's default of 1,000 (pure Python frames: no C
    # stack is used for them since Python 3.11)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        tree = parse(expression)
        coster = _Coster()
        return coster.cost(tree).hi, type_name(coster.type_of(tree))
    except RecursionError:
        raise CelParseError("max recursion depth exceeded") from None
    finally:
        sys.setrecursionlimit(limit)


def estimate(expression: str) -> int:
    """The selector's worst-case cost, as the API server's cost estimate gives it (``MaxCost``); raises
    CelParseError where the expression does not parse or nests deeper than cel-go's parser takes."""
    return analyse(expression)[0]
