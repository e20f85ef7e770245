"""Kubernetes' CEL IP and CIDR libraries, and ext.Strings' ``strings.quote``, for DRA device selectors.

Behaviour as k8s.io/apiserver v0.34 (pkg/cel/library/ip.go, cidr.go) defines it over Go's net/netip, and
cel-go v0.26 ext/strings.go (``quote``):

- ``ip(s)``, ``isIP(s)``, ``ip.isCanonical(s)``; on an IP: ``family()``, ``isUnspecified()``,
  ``isLoopback()``, ``isLinkLocalMulticast()``, ``isLinkLocalUnicast()``, ``isGlobalUnicast()``.
  Parsing is netip.ParseAddr's (no leading zeros in IPv4 fields, at most 4 hex digits a group, one ``::``,
  an embedded IPv4 address only in the last two groups), with its error words; a zone (``fe80::1%eth0``)
  and an IPv4-mapped IPv6 address (``::ffff:1.2.3.4``) are refused as the library refuses them.
- ``cidr(s)``, ``isCIDR(s)``; on a CIDR: ``containsIP(ip or string)``, ``containsCIDR(cidr or string)``,
  ``ip()``, ``masked()``, ``prefixLength()`` (netip.ParsePrefix: the address is kept as written, not
  masked).
- ``strings.quote(s)``: the string in double quotes with ``\\a \\b \\f \\n \\r \\t \\v \\\\ \\"`` escaped.

An IP or a CIDR is a CEL map holding its canonical text (Addr.String, Prefix.String) under a key no device
attribute has, so two of them compare equal exactly when netip's values do. ``string(ip)`` and
``string(cidr)`` are not available: the interpreter's ``string`` cannot be extended (the selector gets the
``dra`` warning).
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from kgpu.sim.scheduler.plugins.cel_library import CelError

IP_KEY = "__ip__"
CIDR_KEY = "__cidr__"
_HEX = "0123456789abcdefABCDEF"


def _q(s: str) -> str:
    """Go's strconv.Quote, for the ASCII text an address is."""
    return json.dumps(s, ensure_ascii=False)


class _AddrError(ValueError):
    def __init__(self, text: str, msg: str, at: str = "") -> None:
        super().__init__(f"ParseAddr({_q(text)}): {msg}" + (f" (at {_q(at)})" if at else ""))


def _v4_fields(text: str, s: str) -> bytes:
    """netip's parseIPv4Fields over ``s`` (a part of ``text``, which the errors name)."""
    out: list[int] = []
    val = digits = 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and val == 0:
                raise _AddrError(text, "IPv4 field has octet with leading zero")
            val, digits = val * 10 + ord(c) - 48, digits + 1
            if val > 255:
                raise _AddrError(text, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _AddrError(text, "IPv4 field must have at least one digit", s[i:])
            if len(out) == 3:
                raise _AddrError(text, "IPv4 address too long")
            out.append(val)
            val = digits = 0
        else:
            raise _AddrError(text, "unexpected character", s[i:])
    if len(out) < 3:
        raise _AddrError(text, "IPv4 address too short")
    return bytes([*out, val])


def _v6(text: str) -> tuple[bytes, str]:
    """netip's parseIPv6: the 16 bytes and the zone."""
    s, zone = text, ""
    if "%" in s:
        s, _, zone = s.partition("%")
        if not zone:
            raise _AddrError(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis, i = -1, 0
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return bytes(ip), zone
    while i < 16:
        off, acc = 0, 0
        while off < len(s) and s[off] in _HEX:
            acc = (acc << 4) + int(s[off], 16)
            if off > 3:
                raise _AddrError(text, "each group must have 4 or less digits", s)
            if acc > 0xFFFF:
                raise _AddrError(text, "IPv6 field has value >=2^16", s)
            off += 1
        if off == 0:
            raise _AddrError(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _AddrError(
                    text, "embedded IPv4 address must replace the final 2 fields of the address", s
                )
            if i + 4 > 16:
                raise _AddrError(
                    text, "too many hex fields to fit an embedded IPv4 at the end of the address", s
                )
            ip[i : i + 4] = _v4_fields(text, s)
            s, i = "", i + 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _AddrError(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _AddrError(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _AddrError(text, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _AddrError(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _AddrError(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n : 16] = ip[ellipsis:i]
        ip[ellipsis : ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _AddrError(text, "the :: must expand to at least one field of zeros")
    return bytes(ip), zone


def _go_parse_addr(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, str]:
    """netip.ParseAddr: the address and its zone; _AddrError in its words."""
    for c in text:
        if c == ".":
            return ipaddress.IPv4Address(_v4_fields(text, text)), ""
        if c == ":":
            raw, zone = _v6(text)
            return ipaddress.IPv6Address(raw), zone
        if c == "%":
            raise _AddrError(text, "missing IPv6 address")
    raise _AddrError(text, "unable to parse IP")


def parse_addr(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """netip.ParseAddr, then the library's refusals (a zone, an IPv4-mapped IPv6 address); CelError in the
    library's words."""
    try:
        addr, zone = _go_parse_addr(text)
    except _AddrError as exc:
        raise CelError(f"IP Address {_q(text)} parse error during conversion from string: {exc}") from None
    if zone:
        raise CelError(f"IP address {_q(text)} with zone value is not allowed")
    if addr.version == 6 and addr.ipv4_mapped is not None:
        raise CelError(f"IPv4-mapped IPv6 address {_q(text)} is not allowed")
    return addr


def _addr_text(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    return str(a) if a.version == 4 else a.compressed  # Addr.String: RFC 5952 for IPv6


def _ip(v: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if not (isinstance(v, dict) and isinstance(v.get(IP_KEY), str)):
        raise TypeError("no such overload")
    return ipaddress.ip_address(v[IP_KEY])


def ip_value(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> dict[str, str]:
    return {IP_KEY: _addr_text(a)}


def _str(v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError("no such overload")
    return v


def to_ip(s: Any) -> dict[str, str]:
    """``ip(string)``, and on a CIDR ``ip()`` (its address: the interpreter calls both by the one name)."""
    if isinstance(s, dict) and isinstance(s.get(CIDR_KEY), str):
        return ip_value(_cidr(s)[0])
    return ip_value(parse_addr(_str(s)))


def is_ip(s: Any) -> bool:
    try:
        parse_addr(_str(s))
    except CelError:
        return False
    return True


def is_canonical(s: Any) -> bool:
    text = _str(s)
    return _addr_text(parse_addr(text)) == text


def _link_local_multicast(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    b = a.packed
    if a.version == 4:
        return b[:3] == b"\xe0\x00\x00"  # 224.0.0.0/24
    return b[0] == 0xFF and (b[1] & 0x0F) == 0x02  # ff02::/16 in any flags (netip: v6u16(0)&0xff0f == 0xff02)


def _global_unicast(a: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if a.version == 4 and int(a) in (0, 0xFFFFFFFF):
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


# --- CIDR ------------------------------------------------------------------------------------------------


def parse_prefix(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    """netip.ParsePrefix (the address as written), then the library's refusal of IPv4-mapped addresses."""
    pre = "network address parse error during conversion from string: "

    def fail(msg: str) -> CelError:
        # stringToCIDR wraps parseCIDR's error, which already says what it is: the words twice, as Kubernetes
        return CelError(f"{pre}{pre}netip.ParsePrefix({_q(text)}): {msg}")

    head, slash, bits_text = text.rpartition("/")
    if not slash:
        raise fail("no '/'")
    try:
        addr, zone = _go_parse_addr(head)
    except _AddrError as exc:
        raise fail(str(exc)) from None
    if zone:
        raise fail("IPv6 zones cannot be present in a prefix")
    # strconv.Atoi after refusing a sign or a leading zero; past int64 it fails too
    if not (bits_text.isascii() and bits_text.isdigit()) or (len(bits_text) > 1 and bits_text[0] == "0"):
        raise fail(f"bad bits after slash: {_q(bits_text)}")
    bits = int(bits_text)
    if bits > 2**63 - 1:
        raise fail(f"bad bits after slash: {_q(bits_text)}")
    if bits < 0 or bits > (32 if addr.version == 4 else 128):
        raise fail("prefix length out of range")
    if addr.version == 6 and addr.ipv4_mapped is not None:
        raise CelError(f"{pre}IPv4-mapped IPv6 address {_q(text)} is not allowed")
    return addr, bits


def _cidr(v: Any) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    if not (isinstance(v, dict) and isinstance(v.get(CIDR_KEY), str)):
        raise TypeError("no such overload")
    head, _, bits = v[CIDR_KEY].rpartition("/")
    return ipaddress.ip_address(head), int(bits)


def _cidr_value(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, bits: int) -> dict[str, str]:
    return {CIDR_KEY: f"{_addr_text(addr)}/{bits}"}


def to_cidr(s: Any) -> dict[str, str]:
    return _cidr_value(*parse_prefix(_str(s)))


def is_cidr(s: Any) -> bool:
    try:
        parse_prefix(_str(s))
    except CelError:
        return False
    return True


def _network(addr: ipaddress.IPv4Address | ipaddress.IPv6Address, bits: int) -> Any:
    return ipaddress.ip_network(f"{addr}/{bits}", strict=False)


def contains_ip(c: Any, other: Any) -> bool:
    addr, bits = _cidr(c)
    if isinstance(other, str):  # cidrContainsIPString: a string that is no IP is "no such overload"
        if not is_ip(other):
            raise TypeError("no such overload")
        other = to_ip(other)
    ip = _ip(other)
    return ip.version == addr.version and ip in _network(addr, bits)  # Prefix.Contains: same family only


def contains_cidr(c: Any, other: Any) -> bool:
    addr, bits = _cidr(c)
    oaddr, obits = parse_prefix(other) if isinstance(other, str) else _cidr(other)
    if oaddr.version != addr.version:
        return False
    # Overlaps and bits <= other's bits: the other prefix lies inside this one
    return bits <= obits and _network(oaddr, obits).subnet_of(_network(addr, bits))


def masked(c: Any) -> dict[str, str]:
    addr, bits = _cidr(c)
    return _cidr_value(_network(addr, bits).network_address, bits)


def quote(s: Any) -> str:
    """ext.Strings' strings.quote."""
    table = {
        "\a": "\\a",
        "\b": "\\b",
        "\f": "\\f",
        "\n": "\\n",
        "\r": "\\r",
        "\t": "\\t",
        "\v": "\\v",
        "\\": "\\\\",
        '"': '\\"',
    }
    return '"' + "".join(table.get(c, c) for c in _str(s)) + '"'


FUNCTIONS: dict[str, Any] = {
    "ip": to_ip,
    "isIP": is_ip,
    "ip.isCanonical": is_canonical,
    "family": lambda v: _ip(v).version,
    "isUnspecified": lambda v: _ip(v).is_unspecified,
    "isLoopback": lambda v: _ip(v).is_loopback,
    "isLinkLocalMulticast": lambda v: _link_local_multicast(_ip(v)),
    "isLinkLocalUnicast": lambda v: _ip(v).is_link_local,
    "isGlobalUnicast": lambda v: _global_unicast(_ip(v)),
    "cidr": to_cidr,
    "isCIDR": is_cidr,
    "containsIP": contains_ip,
    "containsCIDR": contains_cidr,
    "prefixLength": lambda v: _cidr(v)[1],
    "masked": masked,
    "strings.quote": quote,
}
