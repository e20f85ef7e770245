"""kgpu.model.names against the cases of k8s.io/apimachinery/pkg/util/validation/validation_test.go (v0.34)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kgpu.model import names

DNS1123_LABEL_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a" * 63,
]  # fmt: skip
DNS1123_LABEL_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "a" * 64,
    "a\n",
]  # fmt: skip

DNS1123_SUBDOMAIN_GOOD = [
    "a", "ab", "abc", "a1", "a-1", "a--1--2--b",
    "0", "01", "012", "1a", "1-a", "1--a--b--2",
    "a.a", "ab.a", "abc.a", "a1.a", "a-1.a", "a--1--2--b.a",
    "a.1", "ab.1", "abc.1", "a1.1", "a-1.1", "a--1--2--b.1",
    "0.a", "01.a", "012.a", "1a.a", "1-a.a", "1--a--b--2",
    "0.1", "01.1", "012.1", "1a.1", "1-a.1", "1--a--b--2.1",
    "a.b.c.d.e", "aa.bb.cc.dd.ee", "1.2.3.4.5", "11.22.33.44.55",
    "a" * 253,
    ".".join(["a" * 63] * 4)[:253].rstrip("."),
]  # fmt: skip
DNS1123_SUBDOMAIN_BAD = [
    "", "A", "ABC", "aBc", "A1", "A-1", "1-A",
    "-", "a-", "-a", "1-", "-1",
    "_", "a_", "_a", "a_b", "1_", "_1", "1_2",
    ".", "a.", ".a", "a..b", "1.", ".1", "1..2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "A.a", "aB.a", "ab.A", "A1.a", "a1.A",
    "A.1", "aB.1", "A1.1", "1A.1",
    "0.A", "01.A", "012.A", "1A.a", "1a.A",
    "A.B.C.D.E", "AA.BB.CC.DD.EE", "a.B.c.d.e", "aa.bB.cc.dd.ee",
    "a@b", "a,b", "a_b", "a;b",
    "a:b", "a%b", "a?b", "a$b",
    "a" * 254,
    "a.b\n",
]  # fmt: skip

C_IDENTIFIER_GOOD = [
    "a", "ab", "abc", "a1", "_a", "a_", "a_b", "a_1", "a__1__2__b", "__abc_123",
    "A", "AB", "AbC", "A1", "_A", "A_", "A_B", "A_1", "A__1__2__B", "__123_ABC",
    "a" * 300,
]  # fmt: skip
C_IDENTIFIER_BAD = [
    "", "1", "123", "1a",
    "-", "a-", "-a", "1-", "-1", "1_", "1_2",
    ".", "a.", ".a", "a.b", "1.", ".1", "1.2",
    " ", "a ", " a", "a b", "1 ", " 1", "1 2",
    "#a#",
    "a\n",
]  # fmt: skip

QUALIFIED_NAME_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "1234",
    "simple/simple",
    "now-with-dashes/simple",
    "now-with-dashes/now-with-dashes",
    "now.with.dots/simple",
    "now-with.dashes-and.dots/simple",
    "1-num.2-num/3-num",
    "1234/5678",
    "1.2.3.4/5678",
    "Uppercase_Is_OK_123",
    "example.com/Uppercase_Is_OK_123",
    "requests.storage-foo",
    "a" * 63,
    "a" * 253 + "/" + "b" * 63,
]
QUALIFIED_NAME_BAD = [
    "nospecialchars%^=@",
    "cantendwithadash-",
    "-cantstartwithadash-",
    "only/one/slash",
    "Example.com/abc",
    "example_com/abc",
    "example.com/",
    "/simple",
    "a" * 64,
    "a" * 254 + "/abc",
    "example.com/" + "b" * 64,
    "",
    "/",
    "simple\n",
]

LABEL_VALUE_GOOD = [
    "simple",
    "now-with-dashes",
    "1-starts-with-num",
    "end-with-num-1",
    "1234",
    "a" * 63,
    "",
]
LABEL_VALUE_BAD = [
    "nospecialchars%^=@",
    "Tama-nui-te-rā.is.Māori.sun",
    "\\backslashes\\are\\bad",
    "-starts-with-dash",
    "ends-with-dash-",
    ".starts.with.dot",
    "ends.with.dot.",
    "a" * 64,
    "simple\n",
]

SYNTAXES: list[tuple[str, Callable[[str], bool], Callable[[str], list[str]], list[str], list[str]]] = [
    ("dns1123_label", names.is_dns1123_label, names.dns1123_label_errors, DNS1123_LABEL_GOOD, DNS1123_LABEL_BAD),
    (
        "dns1123_subdomain",
        names.is_dns1123_subdomain,
        names.dns1123_subdomain_errors,
        DNS1123_SUBDOMAIN_GOOD,
        DNS1123_SUBDOMAIN_BAD,
    ),
    ("c_identifier", names.is_c_identifier, names.c_identifier_errors, C_IDENTIFIER_GOOD, C_IDENTIFIER_BAD),
    ("qualified_name", names.is_qualified_name, names.qualified_name_errors, QUALIFIED_NAME_GOOD, QUALIFIED_NAME_BAD),
    ("label_value", names.is_label_value, names.label_value_errors, LABEL_VALUE_GOOD, LABEL_VALUE_BAD),
]

CASES = [
    pytest.param(valid, errors, value, ok, id=f"{syntax}-{'good' if ok else 'bad'}-{value[:20]!r}-{len(value)}")
    for syntax, valid, errors, good, bad in SYNTAXES
    for ok, values in ((True, good), (False, bad))
    for value in values
]


@pytest.mark.parametrize(("valid", "errors", "value", "ok"), CASES)
def test_predicate_and_errors_agree_with_apimachinery(
    valid: Callable[[str], bool], errors: Callable[[str], list[str]], value: str, ok: bool
) -> None:
    assert valid(value) is ok
    assert (errors(value) == []) is ok


def test_patterns_are_apimachinerys() -> None:
    assert names.DNS1123_LABEL_FMT == "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
    assert names.DNS1123_SUBDOMAIN_FMT == "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    assert names.QUALIFIED_NAME_FMT == "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
    assert names.LABEL_VALUE_FMT == "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?"
    assert names.C_IDENTIFIER_FMT == "[A-Za-z_][A-Za-z0-9_]*"
    assert names.DNS1123_LABEL_PATTERN == "^" + names.DNS1123_LABEL_FMT + "$"
    assert names.DNS1123_SUBDOMAIN_PATTERN == "^" + names.DNS1123_SUBDOMAIN_FMT + "$"


@pytest.mark.parametrize(
    ("errors", "value", "expected"),
    [
        (
            names.dns1123_label_errors,
            "a.b",
            ["must not contain dots"],
        ),
        (
            names.dns1123_label_errors,
            "A",
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
                "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ],
        ),
        (
            names.dns1123_label_errors,
            "a" * 64,
            ["must be no more than 63 characters"],
        ),
        (
            names.dns1123_subdomain_errors,
            "-" * 254,
            [
                "must be no more than 253 characters",
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
                "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
                "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ],
        ),
        (
            names.qualified_name_errors,
            "/",
            ["prefix part must be non-empty", "name part must be non-empty", names.qualified_name_errors("-")[0]],
        ),
        (
            names.qualified_name_errors,
            "a/b/c",
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
                "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
                "and '/' (e.g. 'example.com/MyName')"
            ],
        ),
        (
            names.qualified_name_errors,
            "Example.com/" + "b" * 64,
            [
                "prefix part " + names.dns1123_subdomain_errors("A")[0],
                "name part must be no more than 63 characters",
            ],
        ),
        (
            names.label_value_errors,
            "-" * 64,
            [
                "must be no more than 63 characters",
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and "
                "must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
                "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ],
        ),
        (
            names.c_identifier_errors,
            "1a",
            [
                "a valid C identifier must start with alphabetic character or '_', followed by a string of "
                "alphanumeric characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for "
                "validation is '[A-Za-z_][A-Za-z0-9_]*')"
            ],
        ),
    ],
)
def test_error_texts_are_apimachinerys(errors: Callable[[str], list[str]], value: str, expected: list[str]) -> None:
    assert errors(value) == expected


def test_lengths_count_bytes_as_go_does() -> None:
    # 32 two-byte characters: 64 bytes, over the limit in Go though only 32 characters
    value = "ā" * 32
    assert names.label_value_errors(value)[0] == "must be no more than 63 characters"
    assert not names.is_label_value(value)
