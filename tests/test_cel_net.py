"""Kubernetes' CEL IP and CIDR libraries, ext.Strings' strings.quote and ext.Bindings' cel.bind in DRA
selectors, through the interpreter as selectors run: values and errors as k8s.io/apiserver's ip.go and
cidr.go give them over Go's net/netip (the cases of their doc comments and netip's parser), cel-go's quote.
The DRA differential checks them against the real allocator."""

from __future__ import annotations

import pytest

from kgpu.model.dra_types import Device
from kgpu.sim.scheduler.plugins.cel import CelRuntimeError, CelSyntaxError, Evaluator, Unsupported
from kgpu.sim.scheduler.plugins.cel_bind import expand

NIC = Device("nic-0", {"net.example.com/ipv4": "10.1.4.5", "net.example.com/rdma": True,
                       "net.example.com/speed": 400}, {})


def run(expression: str) -> bool | CelRuntimeError | Unsupported:
    ev = Evaluator()
    return ev.evaluate(ev.program(expression), "net.example.com", NIC)


@pytest.mark.parametrize("expression", [
    "ip('127.0.0.1').family() == 4 && ip('::1').family() == 6",
    "isIP('127.0.0.1') && isIP('::1') && !isIP('127.0.0.256') && !isIP(':::1') && !isIP('1.2.03.4')",
    "!isIP('fe80::1%eth0') && !isIP('::ffff:1.2.3.4') && isIP('::1.2.3.4')",
    "ip.isCanonical('127.0.0.1') && ip.isCanonical('2001:db8::abcd') && !ip.isCanonical('2001:DB8::ABCD')",
    "!ip.isCanonical('2001:db8::0:0:0:abcd') && ip('2001:db8::0:0:0:abcd') == ip('2001:db8::abcd')",
    "ip('0.0.0.0').isUnspecified() && ip('::').isUnspecified() && !ip('127.0.0.1').isUnspecified()",
    "ip('127.0.0.1').isLoopback() && ip('127.9.9.9').isLoopback() && ip('::1').isLoopback() && !ip('::2').isLoopback()",
    "ip('224.0.0.1').isLinkLocalMulticast() && !ip('224.0.1.1').isLinkLocalMulticast()",
    "ip('ff02::1').isLinkLocalMulticast() && !ip('ff05::1').isLinkLocalMulticast()",
    "ip('169.254.169.254').isLinkLocalUnicast() && ip('fe80::1').isLinkLocalUnicast() && !ip('10.0.0.1').isLinkLocalUnicast()",
    "ip('192.168.1.1').isGlobalUnicast() && ip('2001:db8::1').isGlobalUnicast()",
    "!ip('255.255.255.255').isGlobalUnicast() && !ip('0.0.0.0').isGlobalUnicast() && !ip('ff00::1').isGlobalUnicast()",
    "cidr('192.168.0.0/24').containsIP(ip('192.168.0.1')) && cidr('192.168.0.0/24').containsIP('192.168.0.1')",
    "!cidr('192.168.0.0/24').containsIP('192.168.1.1') && !cidr('::/0').containsIP('1.2.3.4')",
    "cidr('192.168.0.0/24').containsCIDR(cidr('192.168.0.0/25')) && cidr('192.168.0.0/24').containsCIDR('192.168.0.0/24')",
    "!cidr('192.168.0.0/25').containsCIDR('192.168.0.0/24') && !cidr('10.0.0.0/8').containsCIDR('::/0')",
    "cidr('192.168.0.0/24').ip() == ip('192.168.0.0') && cidr('192.168.1.5/24').ip() == ip('192.168.1.5')",
    "cidr('192.168.1.5/24').masked() == cidr('192.168.1.0/24') && cidr('::1/128').prefixLength() == 128",
    "isCIDR('10.0.0.0/8') && !isCIDR('10.0.0.0/33') && !isCIDR('10.0.0.0/08') && !isCIDR('10.0.0.0')",
    "cidr('10.1.0.0/16').containsIP(device.attributes['net.example.com'].ipv4)",
    "strings.quote('single-quote with \"double quote\"') == '\"single-quote with \\\\\"double quote\\\\\"\"'",
    "strings.quote('two escape sequences \\a\\n') == '\"two escape sequences \\\\a\\\\n\"'",
    "cel.bind(n, device.attributes['net.example.com'], n.rdma && n.speed >= 200)",
    "cel.bind(a, 1, cel.bind(b, a + 1, a + b)) == 3 && cel.bind(a, 2, cel.bind(a, a + 1, a * 10)) == 30",
    "[1].all(x, cel.bind(x, 2, x > 1)) && cel.bind(x, {'x': 1}, x.x == 1)",
])
def test_values_are_kubernetes(expression: str) -> None:
    assert run(expression) is True


@pytest.mark.parametrize(("expression", "error"), [
    ("ip('127.0.0.256') == ip('::')", 'IP Address "127.0.0.256" parse error during conversion from string: '
     'ParseAddr("127.0.0.256"): IPv4 field has value >255'),
    ("ip('1.2.03.4') == ip('::')", 'IP Address "1.2.03.4" parse error during conversion from string: '
     'ParseAddr("1.2.03.4"): IPv4 field has octet with leading zero'),
    ("ip(':::1') == ip('::')", 'IP Address ":::1" parse error during conversion from string: ParseAddr(":::1"): '
     'each colon-separated field must have at least one digit (at ":1")'),
    ("ip('abc') == ip('::')", 'IP Address "abc" parse error during conversion from string: ParseAddr("abc"): '
     "unable to parse IP"),
    ("ip('1:2:3:4:5:6:7:8:9') == ip('::')", 'IP Address "1:2:3:4:5:6:7:8:9" parse error during conversion from '
     'string: ParseAddr("1:2:3:4:5:6:7:8:9"): trailing garbage after address (at "9")'),
    ("ip('fe80::1%eth0') == ip('::')", 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ("ip('::ffff:1.2.3.4') == ip('::')", 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ("cidr('10.0.0.0') == cidr('::/0')", "network address parse error during conversion from string: network "
     'address parse error during conversion from string: netip.ParsePrefix("10.0.0.0"): no \'/\''),
    ("cidr('10.0.0.0/33') == cidr('::/0')", "network address parse error during conversion from string: network "
     'address parse error during conversion from string: netip.ParsePrefix("10.0.0.0/33"): prefix length out of range'),
    ("cidr('10.0.0.0/+8') == cidr('::/0')", "network address parse error during conversion from string: network "
     'address parse error during conversion from string: netip.ParsePrefix("10.0.0.0/+8"): bad bits after slash: "+8"'),
])
def test_errors_are_the_librarys_words(expression: str, error: str) -> None:
    out = run(expression)
    assert isinstance(out, CelRuntimeError)
    assert str(out) == error


def test_bind_expansion_keeps_fields_and_strings_of_the_name() -> None:
    assert expand("cel.bind(d, x.d, d.d == 'd')") == "((x.d).d == 'd')"
    assert expand("device.driver == 'cel.bind(a, 1, a)'") == "device.driver == 'cel.bind(a, 1, a)'"


@pytest.mark.parametrize(("expression", "words"), [
    ("cel.bind(1, 2, true)", "cel.bind() variable names must be simple identifiers"),
    ("cel.bind(x)", "undeclared reference to 'cel'"),
])
def test_a_malformed_bind_is_refused_as_the_api_server_refuses_it(expression: str, words: str) -> None:
    with pytest.raises(CelSyntaxError) as err:
        Evaluator().program(expression)
    assert words in str(err.value)


def test_bindings_that_double_the_text_at_every_level_are_not_written_out() -> None:
    """Each of 29 nested bindings uses the one before twice: written out the text would be 2^29 copies.
    kgpu stops at its limit, says so (the dra warning), and does not hang."""
    inner = "x29 > 0"
    for i in range(29, 0, -1):
        inner = f"cel.bind(x{i}, {'1' if i == 1 else f'x{i - 1} + x{i - 1}'}, {inner})"
    out = run(inner)
    assert isinstance(out, Unsupported) and "passes 65,536 characters" in str(out)
