"""The YAML text kgpu writes: every string reads back as the same string in every YAML reader.

PyYAML quotes a string only when *its own* (YAML 1.1, partly implemented) resolver would read the plain
scalar as something else. Other readers of the files kgpu writes resolve more: Kubernetes and eksctl read
YAML through go-yaml, which follows YAML 1.1's full boolean set (``y``, ``n``, ``on``, ``off``, ...), and
YAML 1.2 readers (Helm's, ruamel.yaml, go-yaml v3) take ``1e3`` and ``1.0e3`` as floats and ``0o17`` as an
integer. A label value ``y`` written plain becomes ``true`` in the API server and the object is rejected or,
worse, means something else. So the dumper below learns the union of what YAML 1.1 (the full spec, not only
PyYAML's subset) and YAML 1.2's core schema resolve, and quotes every string that matches any of it.
Quoting more than needed is harmless; quoting less changes meaning. ``tests/test_yaml_quoting.py`` checks it
by round-tripping generated strings through PyYAML, ruamel.yaml's YAML 1.2 reader and its YAML 1.1 reader.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

_DIGITS = list("0123456789")
_NUMBER_START = [*_DIGITS, "-", "+", "."]

# (tag, pattern, possible first characters). The tag only has to differ from str: it makes the emitter
# refuse the plain style for a string that matches.
_EXTRA_RESOLVERS: list[tuple[str, str, list[str]]] = [
    # YAML 1.1 booleans PyYAML leaves out (https://yaml.org/type/bool.html).
    ("tag:yaml.org,2002:bool", r"^(?:y|Y|n|N)$", list("yYnN")),
    # Anything number-like: YAML 1.2 core floats without a dot or with an unsigned exponent (1e3, 1.0e3),
    # YAML 1.1's float as the spec writes it (several dots, underscores: https://yaml.org/type/float.html),
    # and the underscores some 1.2 readers still accept (-_0). A version string such as 1.2.3 is quoted too.
    (
        "tag:yaml.org,2002:float",
        r"^[-+]?[0-9_]*\.?[0-9._]*(?:[eE][-+]?[0-9_]+)?$",
        [*_NUMBER_START, "_", "e", "E"],
    ),
    # YAML 1.2 core octal/hexadecimal (0o17, 0xFF) and binary, with sign and underscores.
    ("tag:yaml.org,2002:int", r"^[-+]?0(?:o[0-7_]+|x[0-9a-fA-F_]+|b[01_]+)$", ["0", "-", "+"]),
    # Special floats in every capitalisation some reader accepts.
    ("tag:yaml.org,2002:float", r"^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$", ["-", "+", "."]),
]


class Dumper(yaml.SafeDumper):
    """Block style, literal blocks for multi-line strings, no aliases, and the extra quoting above."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


for _tag, _pattern, _first in _EXTRA_RESOLVERS:
    Dumper.add_implicit_resolver(_tag, re.compile(_pattern), _first)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


Dumper.add_representer(str, _represent_str)


def dump(data: Any) -> str:
    """One YAML document (no ``---``), keys in the order given."""
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=False, width=120)


def dump_documents(docs: list[dict[str, Any]]) -> str:
    """A multi-document stream, each document headed by ``---``."""
    return "".join("---\n" + dump(doc) for doc in docs)
