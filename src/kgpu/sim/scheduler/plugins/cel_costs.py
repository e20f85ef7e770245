"""cel-go's cost arithmetic, and the estimates Kubernetes and cel-go's extensions give their library functions.

Sizes and costs are ``[min, max]`` pairs of unsigned 64-bit integers that saturate (cel-go ``checker/cost.go``:
``SizeEstimate``, ``CostEstimate``, ``multiplyByCostFactor`` rounding up). The library estimates mirror
k8s.io/apiserver ``pkg/cel/library/cost.go`` (``CostEstimator.EstimateCallCost``: ext.Strings, library.Lists,
library.Regex, quantity and semver) and the overload estimators of cel-go's ``ext/sets.go`` and ``ext/lists.go``,
which cel-go consults before Kubernetes' estimator. :class:`LibraryCosts` is a part of the estimator in
kgpu.sim.scheduler.plugins.cel_estimate, which gives it the types, sizes and paths it reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kgpu.sim.scheduler.plugins.cel_parse import Call, Lit

U64 = 2**64 - 1
STRING_FACTOR = 0.1  # common.StringTraversalCostFactor
REGEX_FACTOR = 0.25  # common.RegexStringLengthCostFactor
LIST_CREATE = 10  # common.ListCreateBaseCost
MAP_CREATE = 30  # common.MapCreateBaseCost


# --- sizes and costs: [min, max] pairs with cel-go's saturating arithmetic --------------------------------


@dataclass(frozen=True, slots=True)
class Est:
    lo: int
    hi: int

    def add(self, o: Est) -> Est:
        return Est(min(self.lo + o.lo, U64), min(self.hi + o.hi, U64))

    def mul(self, o: Est) -> Est:
        return Est(min(self.lo * o.lo, U64), min(self.hi * o.hi, U64))

    def factor(self, f: float) -> Est:
        return Est(_by_factor(self.lo, f), _by_factor(self.hi, f))

    def union(self, o: Est) -> Est:
        return Est(min(self.lo, o.lo), max(self.hi, o.hi))


def _by_factor(x: int, f: float) -> int:
    xf = float(x)
    if xf > 0 and f > 0 and xf > U64 / f:
        return U64
    c = math.ceil(xf * f)
    return U64 if c >= 2.0**64 else int(c)


def fixed(n: int) -> Est:
    return Est(n, n)


UNKNOWN = Est(0, U64)
ZERO = fixed(0)


class LibraryCosts:
    """The library functions' estimates; the estimator supplies the methods below that raise."""

    def type_of(self, e: Any) -> tuple[Any, ...]:
        raise NotImplementedError

    def size(self, e: Any) -> Est | None:
        raise NotImplementedError

    def node_path(self, e: Any) -> list[str]:
        raise NotImplementedError

    def estimate_size(self, path: list[str]) -> Est | None:
        raise NotImplementedError

    def library_cost(self, e: Call) -> tuple[Est, Est | None] | None:
        """Kubernetes' estimates for its libraries (library/cost.go) and ext.Lists' (cel-go ext/lists.go)."""
        f, args, target = e.function, e.args, e.target
        if f in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf") and target is not None:
            tt = self.type_of(target)
            if tt[0] in ("list", "map"):  # a type with parameters: its first is the element (or key) type
                el = fixed(1)
                if tt[1][0] in ("string", "bytes"):
                    el = el.add(
                        self.lib_size([*self.node_path(target), "@items"], None).factor(STRING_FACTOR)
                    )
                return self.lib_size(self.node_path(target), target).mul(el), None
            return self.lib_size(self.node_path(target), target).factor(STRING_FACTOR), None
        if f in ("lowerAscii", "upperAscii", "substring", "trim") and target is not None:
            s = self.lib_size(self.node_path(target), target)
            return s.factor(STRING_FACTOR), s
        if f == "replace" and target is not None and len(args) >= 2:
            return self.replace_cost(target, args)
        if f == "split" and target is not None:
            s = self.lib_size(self.node_path(target), target)
            hi = s.hi
            if len(args) > 1 and isinstance(args[1], Lit) and args[1].kind == "int":
                hi = args[1].value % 2**64
            return s.factor(2 * STRING_FACTOR), Est(0, hi)
        if f == "join" and target is not None:
            ls = self.lib_size(self.node_path(target), target)
            tt = self.type_of(target)
            sz = ZERO
            if tt[0] == "list":
                sz = ls.mul(self.lib_size([*self.node_path(target), "@items"], None))
            if args:
                sep = self.lib_size(self.node_path(args[0]), args[0])
                sz = sz.add(sep.mul(Est(max(ls.lo - 1, 0), max(ls.hi - 1, 0))))
            return sz.factor(STRING_FACTOR), sz
        if f in ("find", "findAll") and target is not None and args:
            s = self.lib_size(self.node_path(target), target)
            strc = s.add(fixed(1)).factor(STRING_FACTOR)
            rc = self.lib_size(self.node_path(args[0]), args[0]).factor(REGEX_FACTOR)
            return strc.mul(rc), Est(0, s.hi)
        if f in ("cidr", "isIP", "isCIDR", "ip", "ip.isCanonical") and (args or f == "ip"):
            if f == "ip" and target is not None:
                return fixed(1), None  # a CIDR's address: a field
            factor = 2 * STRING_FACTOR if f == "ip.isCanonical" else STRING_FACTOR
            return self.lib_size(self.node_path(args[0]), args[0]).factor(factor), None
        if f in ("containsIP", "containsCIDR") and target is not None and args:
            both = Est(8, 32)  # two addresses of 4 or 16 bytes compared
            cost = both.factor(STRING_FACTOR)
            if f == "containsCIDR":  # the base masked and the bits compared
                cost = cost.add(Est(4, 16).factor(STRING_FACTOR)).add(fixed(1))
            kind = self.type_of(args[0])[0]
            if kind in ("string", "dyn", "any"):  # the string overload parses it first
                parsed = cost.add(self.lib_size(self.node_path(args[0]), args[0]).factor(STRING_FACTOR))
                # a dyn argument keeps both overloads, and cel-go takes the union of their estimates
                cost = parsed if kind == "string" else cost.union(parsed)
            return cost, None
        if f in ("quantity", "isQuantity", "semver", "isSemver") and args:
            return self.lib_size(self.node_path(args[0]), args[0]).factor(STRING_FACTOR), None
        if f in (
            "sign",
            "asInteger",
            "isInteger",
            "asApproximateFloat",
            "isGreaterThan",
            "isLessThan",
            "compareTo",
            "add",
            "sub",
            "major",
            "minor",
            "patch",
            "masked",
            "prefixLength",
            "family",
            "isUnspecified",
            "isLoopback",
            "isLinkLocalMulticast",
            "isLinkLocalUnicast",
            "isGlobalUnicast",
        ):
            return fixed(1), None
        if f == "_==_" and len(args) == 2:
            a, b = self.type_of(args[0]), self.type_of(args[1])
            if a == b and a[0] in ("quantity", "semver", "ip", "cidr"):
                return fixed(1), None
            return None
        return None

    def extension_cost(self, e: Call) -> tuple[Est, Est | None] | None:
        """The overload estimators cel-go's extensions register (ext/sets.go, ext/lists.go): consulted first."""
        f, args, target = e.function, e.args, e.target
        if f in ("sets.contains", "sets.intersects", "sets.equivalent") and target is None and len(args) == 2:
            a = self.lib_size(self.node_path(args[0]), args[0])
            b = self.lib_size(self.node_path(args[1]), args[1])
            return a.mul(b).factor(2.0 if f == "sets.equivalent" else 1.0).add(fixed(1)), None
        if f == "lists.range" and target is None and len(args) == 1:
            n = self.int_value(args[0], U64)
            return self.allocating(1, fixed(n))
        if f == "slice" and target is not None and len(args) == 2:
            sz = self.lib_size(self.node_path(target), target)
            start = self.int_value(args[0], 0)
            end = self.int_value(args[1], sz.hi)
            return self.allocating(1, fixed((end - start) % 2**64))
        if f == "flatten" and target is not None and len(args) <= 1:
            depth = self.int_value(args[0], U64) if args else 1
            return self.allocating(float(depth), self.lib_size(self.node_path(target), target))
        if f == "reverse" and target is not None and not args and self.type_of(target)[0] == "list":
            return self.allocating(1, self.lib_size(self.node_path(target), target))
        if f == "distinct" and target is not None and not args:
            s = self.lib_size(self.node_path(target), target)
            return self.allocating(2.0, s.mul(s))
        if f == "sort" and target is not None and not args:
            s = self.lib_size(self.node_path(target), target)
            return self.allocating(2.0, s.mul(s))
        return None

    @staticmethod
    def int_value(e: Any, default: int) -> int:
        if isinstance(e, Lit) and e.kind == "int":
            return max(int(e.value), 0)
        return default

    @staticmethod
    def allocating(factor: float, size: Est) -> tuple[Est, Est | None]:
        # ext/lists.go estimateAllocatingListCall: a step per element, the call, the list's creation
        return size.factor(factor).add(fixed(1 + LIST_CREATE)), size

    def lib_size(self, path: list[str], e: Any) -> Est:
        """library.CostEstimator.sizeEstimate: the node's computed size, else the declared one, else unknown."""
        if e is not None:
            s = self.size(e)
            if s is not None:
                return s
        est = self.estimate_size(path)
        return UNKNOWN if est is None else est

    def replace_cost(self, target: Any, args: list[Any]) -> tuple[Est, Est | None]:
        sz = self.lib_size(self.node_path(target), target)
        old = self.lib_size(self.node_path(args[0]), args[0])
        new = self.lib_size(self.node_path(args[1]), args[1])
        if old.lo == 0:
            count_hi, kept_hi = (sz.hi + 1 if sz.hi < U64 else sz.hi), sz.hi
        elif new.hi <= old.lo:
            count_hi, kept_hi = 0, sz.hi
        else:
            count_hi, kept_hi = math.ceil(sz.hi / old.lo), 0
        if old.hi == 0:
            count_lo, kept_lo = (sz.lo + 1 if sz.lo < U64 else sz.lo), sz.lo
        elif old.hi <= new.lo:
            count_lo, kept_lo = 0, sz.lo
        else:
            count_lo, kept_lo = math.ceil(sz.lo / old.hi), 0
        size = Est(count_lo, count_hi).mul(new).add(Est(kept_lo, kept_hi))
        return sz.factor(2 * STRING_FACTOR), size
