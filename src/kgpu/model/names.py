"""Kubernetes name syntaxes, as k8s.io/apimachinery/pkg/util/validation (validation.go) defines them.

One home for the DNS-1123 label and subdomain, the qualified name (a label key), the label value and the C
identifier. Each syntax comes as its regular expression (``*_FMT``, unanchored as in Go; ``*_PATTERN``,
anchored, for pydantic and JSON Schema; a compiled ``re.Pattern`` to use with ``fullmatch``), its length
limit, a predicate (``is_*``) and the list of apimachinery's error strings (``*_errors``: empty when
valid). Lengths are counted in bytes as Go counts them; a value that passes the pattern is ASCII, so the
predicates may count characters.
"""

from __future__ import annotations

import re

QUALIFIED_NAME_MAX_LENGTH = 63
LABEL_VALUE_MAX_LENGTH = 63
DNS1123_LABEL_MAX_LENGTH = 63
DNS1123_SUBDOMAIN_MAX_LENGTH = 253

QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + QUALIFIED_NAME_FMT + ")?"
DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
C_IDENTIFIER_FMT = "[A-Za-z_][A-Za-z0-9_]*"

QUALIFIED_NAME_PATTERN = "^" + QUALIFIED_NAME_FMT + "$"
LABEL_VALUE_PATTERN = "^" + LABEL_VALUE_FMT + "$"
DNS1123_LABEL_PATTERN = "^" + DNS1123_LABEL_FMT + "$"
DNS1123_SUBDOMAIN_PATTERN = "^" + DNS1123_SUBDOMAIN_FMT + "$"
C_IDENTIFIER_PATTERN = "^" + C_IDENTIFIER_FMT + "$"

# Match with fullmatch: Python's "$" also matches before a final newline, Go's does not.
QUALIFIED_NAME = re.compile(QUALIFIED_NAME_FMT)
LABEL_VALUE = re.compile(LABEL_VALUE_FMT)
DNS1123_LABEL = re.compile(DNS1123_LABEL_FMT)
DNS1123_SUBDOMAIN = re.compile(DNS1123_SUBDOMAIN_FMT)
C_IDENTIFIER = re.compile(C_IDENTIFIER_FMT)

QUALIFIED_NAME_ERR_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
LABEL_VALUE_ERR_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character"
)
DNS1123_LABEL_ERR_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character"
)
DNS1123_SUBDOMAIN_ERR_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character"
)
EMPTY_ERROR = "must be non-empty"
C_IDENTIFIER_ERR_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_'"
)


def is_dns1123_label(value: str) -> bool:
    """IsDNS1123Label: lower case alphanumerics and '-', alphanumeric at both ends, at most 63."""
    return len(value) <= DNS1123_LABEL_MAX_LENGTH and DNS1123_LABEL.fullmatch(value) is not None


def is_dns1123_subdomain(value: str) -> bool:
    """IsDNS1123Subdomain: DNS-1123 labels joined by '.', at most 253."""
    return len(value) <= DNS1123_SUBDOMAIN_MAX_LENGTH and DNS1123_SUBDOMAIN.fullmatch(value) is not None


def is_qualified_name(value: str) -> bool:
    """IsQualifiedName (a label or annotation key): an optional DNS-1123 subdomain prefix and '/', then a
    name of at most 63 alphanumerics, '-', '_' or '.', alphanumeric at both ends."""
    prefix, slash, name = value.rpartition("/")
    if slash and not is_dns1123_subdomain(prefix):  # a second '/' leaves one in the prefix
        return False
    return len(name) <= QUALIFIED_NAME_MAX_LENGTH and QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(value: str) -> bool:
    """IsValidLabelValue: empty, or a qualified name's name part (at most 63)."""
    return len(value) <= LABEL_VALUE_MAX_LENGTH and LABEL_VALUE.fullmatch(value) is not None


def is_c_identifier(value: str) -> bool:
    """IsCIdentifier: the format only, not the length."""
    return C_IDENTIFIER.fullmatch(value) is not None


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _size(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def dns1123_label_errors(value: str) -> list[str]:
    errs = []
    if _size(value) > DNS1123_LABEL_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_LABEL_MAX_LENGTH))
    if not DNS1123_LABEL.fullmatch(value):
        if DNS1123_SUBDOMAIN.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(DNS1123_LABEL_ERR_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def dns1123_subdomain_errors(value: str) -> list[str]:
    errs = []
    if _size(value) > DNS1123_SUBDOMAIN_MAX_LENGTH:
        errs.append(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH))
    if not DNS1123_SUBDOMAIN.fullmatch(value):
        errs.append(regex_error(DNS1123_SUBDOMAIN_ERR_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def qualified_name_errors(value: str) -> list[str]:
    errs = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part " + EMPTY_ERROR)
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return [
            "a qualified name "
            + regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part " + EMPTY_ERROR)
    elif _size(name) > QUALIFIED_NAME_MAX_LENGTH:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_LENGTH))
    if not QUALIFIED_NAME.fullmatch(name):
        errs.append(
            "name part "
            + regex_error(QUALIFIED_NAME_ERR_MSG, QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
        )
    return errs


def label_value_errors(value: str) -> list[str]:
    errs = []
    if _size(value) > LABEL_VALUE_MAX_LENGTH:
        errs.append(max_len_error(LABEL_VALUE_MAX_LENGTH))
    if not LABEL_VALUE.fullmatch(value):
        errs.append(regex_error(LABEL_VALUE_ERR_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def c_identifier_errors(value: str) -> list[str]:
    if not C_IDENTIFIER.fullmatch(value):
        return [regex_error(C_IDENTIFIER_ERR_MSG, C_IDENTIFIER_FMT, "my_name", "MY_NAME", "MyName")]
    return []
