"""Random DRA device selectors, well typed in the DRA CEL environment, for the cost-estimate differential.

Drawn to reach every rule of cel-go's estimator that a selector can: comprehensions (the macros, their
two-variable forms, ``cel.bind``) nested over literal lists, ``lists.range``, device maps and the
results of ``split``, ``map`` and ``filter``; string comparisons and functions whose cost depends on the
strings' sizes (declared attribute and name sizes, literals, concatenations); regular expressions; ``in``;
quantities and semantic versions; sizes of everything. Cheap and expensive ones both: a few are far over
the limit, some near it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

DOMAINS = ["dra.example.com", "gpu.nvidia.com", "x"]
NAMES = ["model", "memory", "index", "uuid", "driverVersion", "a"]


@dataclass
class Draw:
    rng: random.Random
    scope: list[tuple[str, str]] = field(default_factory=list)  # (variable, type)
    n: int = 0

    def var(self) -> str:
        self.n += 1
        return f"v{self.n}"

    def pick(self, t: str) -> str | None:
        names = [v for v, vt in self.scope if vt == t]
        return self.rng.choice(names) if names else None

    def lit_str(self) -> str:
        r = self.rng.random()
        n = self.rng.choice([0, 1, 3, 8, 20, 64, 200])
        s = "".join(self.rng.choice("abcxyz019-.") for _ in range(n))
        return f"'{s}'" if r < 0.5 else f'"{s}"'

    def int_list(self, d: int) -> str:
        r = self.rng.random()
        if r < 0.45:
            n = self.rng.choice([0, 1, 2, 5, 10, 30, 100])
            return "[" + ", ".join(str(self.rng.randint(-5, 50)) for _ in range(n)) + "]"
        if r < 0.65:
            return "[" + ", ".join(str(i) for i in range(self.rng.choice([0, 3, 10, 50, 200]))) + "]"
        if r < 0.8 and d > 0:
            v = self.var()
            src = self.int_list(d - 1)
            self.scope.append((v, "int"))
            body = self.int_(d - 1)
            self.scope.pop()
            return f"{src}.map({v}, {body})"
        if d > 0:
            v = self.var()
            src = self.int_list(d - 1)
            self.scope.append((v, "int"))
            body = self.bool_(d - 1)
            self.scope.pop()
            return f"{src}.filter({v}, {body})"
        return "[1, 2, 3]"

    def str_list(self, d: int) -> str:
        r = self.rng.random()
        if r < 0.4:
            n = self.rng.choice([0, 1, 3, 10, 40])
            return "[" + ", ".join(self.lit_str() for _ in range(n)) + "]"
        if r < 0.7:
            return f"{self.str_(d - 1 if d else 0)}.split({self.lit_str()})"
        if r < 0.85:
            return f"{self.str_(0)}.findAll('[a-z]+')"
        return f"device.attributes[{self.rng.choice(DOMAINS)!r}].map(k, k)"

    def dyn_attr(self) -> str:
        dom = self.rng.choice(DOMAINS)
        name = self.rng.choice(NAMES)
        if self.rng.random() < 0.5:
            return f"device.attributes[{dom!r}].{name}"
        return f"device.attributes[{dom!r}][{name!r}]"

    def str_(self, d: int) -> str:
        r = self.rng.random()
        v = self.pick("string")
        if v and r < 0.25:
            return v
        if r < 0.4:
            return self.lit_str()
        if r < 0.5:
            return "device.driver"
        if r < 0.6:
            return f"string({self.dyn_attr()})"
        if d <= 0:
            return self.lit_str()
        r = self.rng.random()
        if r < 0.3:
            return f"{self.str_(d - 1)} + {self.str_(d - 1)}"
        if r < 0.45:
            return f"{self.str_(d - 1)}.{self.rng.choice(['lowerAscii', 'upperAscii', 'trim'])}()"
        if r < 0.55:
            return f"{self.str_(d - 1)}.replace({self.lit_str()}, {self.lit_str()})"
        if r < 0.65:
            return f"{self.str_list(d - 1)}.join({self.lit_str()})"
        if r < 0.75:
            return f"{self.str_(d - 1)}.substring(0)"
        if r < 0.85:
            return f"{self.str_(d - 1)}.find('[0-9]+')"
        return f"({self.bool_(d - 1)} ? {self.str_(d - 1)} : {self.str_(d - 1)})"

    def int_(self, d: int) -> str:
        r = self.rng.random()
        v = self.pick("int")
        if v and r < 0.3:
            return v
        if r < 0.45 or d <= 0:
            return str(self.rng.randint(-3, 100))
        r = self.rng.random()
        if r < 0.25:
            return f"{self.int_(d - 1)} {self.rng.choice(['+', '-', '*'])} {self.int_(d - 1)}"
        if r < 0.4:
            return f"size({self.rng.choice([self.str_(d - 1), self.int_list(d - 1), self.str_list(d - 1)])})"
        if r < 0.5:
            return f"{self.str_(d - 1)}.indexOf({self.lit_str()})"
        if r < 0.6:
            return f"{self.int_list(d - 1)}.sum()"
        if r < 0.7:
            return f"int({self.dyn_attr()})"
        if r < 0.8:
            return f"device.capacity[{self.rng.choice(DOMAINS)!r}].memory.compareTo(quantity('1Gi'))"
        return f"size(device.attributes[{self.rng.choice(DOMAINS)!r}])"

    def bool_(self, d: int) -> str:
        r = self.rng.random()
        v = self.pick("bool")
        if v and r < 0.1:
            return v
        if d <= 0 or r < 0.15:
            return self.rng.choice(
                [
                    "true",
                    "false",
                    f"device.driver == {self.lit_str()}",
                    f"{self.dyn_attr()} == {self.lit_str()}",
                ]
            )
        r = self.rng.random()
        if r < 0.08:
            return f"{self.bool_(d - 1)} && {self.bool_(d - 1)}"
        if r < 0.14:
            return f"{self.bool_(d - 1)} || !({self.bool_(d - 1)})"
        if r < 0.22:
            op = self.rng.choice(["==", "!=", "<", "<=", ">", ">="])
            return f"{self.str_(d - 1)} {op} {self.str_(d - 1)}"
        if r < 0.28:
            op = self.rng.choice(["==", "<", ">="])
            return f"{self.int_(d - 1)} {op} {self.int_(d - 1)}"
        if r < 0.34:
            return f"{self.dyn_attr()} {self.rng.choice(['==', '!='])} {self.dyn_attr()}"
        if r < 0.40:
            f = self.rng.choice(["startsWith", "endsWith", "contains", "matches"])
            arg = "'^[a-z]+[0-9]*$'" if f == "matches" else self.str_(d - 1)
            return f"{self.str_(d - 1)}.{f}({arg})"
        if r < 0.46:
            src = self.rng.choice([self.int_list(d - 1), self.str_list(d - 1)])
            el = (
                self.int_(d - 1)
                if src.startswith(("[", "lists")) and "'" not in src and '"' not in src
                else self.str_(d - 1)
            )
            return f"{el} in {src}"
        if r < 0.50:
            return f"has(device.attributes[{self.rng.choice(DOMAINS)!r}].{self.rng.choice(NAMES)})"
        if r < 0.54:
            cmp = self.rng.choice(["isGreaterThan", "isLessThan"])
            return (
                f"device.capacity[{self.rng.choice(DOMAINS)!r}].memory.{cmp}(quantity("
                f"{self.rng.choice(['1Gi', '40Gi', '500m'])!r}))"
            )
        if r < 0.57:
            return f"semver({self.rng.choice(['1.2.3', '10.0.0-rc.1'])!r}).isLessThan(semver('2.0.0'))"
        if r < 0.60:
            return f"sets.contains({self.int_list(d - 1)}, {self.int_list(d - 1)})"
        if r < 0.63:
            return f"{self.int_list(d - 1)}.isSorted()"
        if r < 0.66:
            v = self.var()
            init = self.int_(d - 1)
            self.scope.append((v, "int"))
            body = self.bool_(d - 1)
            self.scope.pop()
            return f"cel.bind({v}, {init}, {body})"
        if r < 0.70:
            dom = self.rng.choice(DOMAINS)
            k = self.var()
            m = self.rng.choice(["all", "exists", "exists_one"])
            self.scope.append((k, "string"))
            body = self.bool_(d - 1)
            self.scope.pop()
            src = self.rng.choice(
                [
                    f"device.attributes[{dom!r}]",
                    "device.attributes",
                    "device.capacity",
                    f"device.capacity[{dom!r}]",
                ]
            )
            return f"{src}.{m}({k}, {body})"
        if r < 0.74:
            i, val = self.var(), self.var()
            src = self.int_list(d - 1)
            self.scope += [(i, "int"), (val, "int")]
            body = self.bool_(d - 1)
            del self.scope[-2:]
            return f"{src}.{self.rng.choice(['all', 'exists'])}({i}, {val}, {body})"
        if r < 0.78:  # Kubernetes' IP and CIDR libraries, ext.Strings' quote
            ip = f"ip({self.str_(d - 1)})"
            net = f"cidr({self.str_(d - 1)})"
            return self.rng.choice(
                [
                    f"{net}.containsIP({self.rng.choice([ip, self.str_(d - 1)])})",
                    f"{net}.containsCIDR({self.rng.choice([net, self.str_(d - 1)])})",
                    f"{ip}.family() == {self.int_(d - 1)}",
                    f"{ip}.isLoopback() || {net}.prefixLength() > 8",
                    f"isIP({self.str_(d - 1)}) && ip.isCanonical({self.str_(d - 1)})",
                    f"isCIDR({self.str_(d - 1)}) && {net}.masked().ip() == {ip}",
                    f"strings.quote({self.str_(d - 1)}).size() > {self.int_(d - 1)}",
                ]
            )
        if r < 0.90:
            v = self.var()
            if self.rng.random() < 0.6:
                src, t = self.int_list(d - 1), "int"
            else:
                src, t = self.str_list(d - 1), "string"
            self.scope.append((v, t))
            body = self.bool_(d - 1)
            self.scope.pop()
            return f"{src}.{self.rng.choice(['all', 'exists', 'exists_one'])}({v}, {body})"
        return f"({self.bool_(d - 1)} ? {self.bool_(d - 1)} : {self.bool_(d - 1)})"


def selectors(seed: int, n: int) -> list[str]:
    """``n`` selectors; one in ten is not a bool (the API server refuses it: "must evaluate to bool or the
    unknown type, not int"), or an attribute (google.protobuf.Any, which it takes)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        d, draw = rng.choice([1, 2, 3, 4, 5]), Draw(rng)
        if rng.random() < 0.1:
            kind = rng.choice(["int", "str", "int_list", "str_list", "attr"])
            out.append(
                draw.int_(d)
                if kind == "int"
                else draw.str_(d)
                if kind == "str"
                else draw.int_list(d)
                if kind == "int_list"
                else draw.str_list(d)
                if kind == "str_list"
                else draw.dyn_attr()
            )
        else:
            out.append(draw.bool_(d))
    return out
