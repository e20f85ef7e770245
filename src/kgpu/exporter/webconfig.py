"""TLS and basic auth from a Prometheus exporter-toolkit web configuration file (``--web.config.file``).

The same file node_exporter and nvidia_gpu_exporter read, so a drop-in replacement keeps its secrets::

    tls_server_config:
      cert_file: server.crt          # relative paths are relative to this file
      key_file: server.key
      client_auth_type: RequireAndVerifyClientCert   # or NoClientCert (default), VerifyClientCertIfGiven
      client_ca_file: ca.crt
      min_version: TLS12
    http_server_config:
      headers: {X-Frame-Options: deny}
    basic_auth_users:
      prometheus: $2y$10$...         # bcrypt hashes, as `htpasswd -nBC 10 "" | tr -d ':'` prints them

Unknown fields are errors, as in exporter-toolkit, and so is a file no scrape could ever pass, refused at
start rather than answering every scrape with a failed handshake or a 401: a ``min_version`` above
``max_version`` (the defaults are exporter-toolkit's, TLS12 to TLS13, so ``max_version: TLS11`` alone is
one); a version range this OpenSSL completes no handshake in (TLS10 to TLS11 under OpenSSL 3's default
security level), found by a handshake in memory with the most permissive client; a ``client_ca_file``
without a ``client_auth_type`` that asks for certificates (exporter-toolkit: "client CA's have been
configured without a Client Auth Policy"); a bcrypt hash that is truncated, has a cost outside 4 to 31,
characters outside bcrypt's alphabet, or a last salt or hash character bcrypt never writes (no password
can match it; exporter-toolkit checks each hash with ``bcrypt.Cost`` before it serves); a user name
holding ``:`` (basic auth splits user and password at the first one: that user can never log in).

Go-specific settings (cipher_suites, curve_preferences, prefer_server_cipher_suites, http2) have no
OpenSSL equivalent here and are refused rather than ignored.
Response headers are exporter-toolkit's allow-list (``Strict-Transport-Security``, ``X-Content-Type-Options:
nosniff``, ``X-Frame-Options: deny|sameorigin``, ``X-XSS-Protection``, ``Content-Security-Policy``), and a
value with a control character (CR or LF would end the header and start another, or the body) is refused.
The file is read with kgpu's bounded YAML reader (aliases that expand beyond its limit are an error).
A passphrase-protected key is refused with a message instead of OpenSSL's prompt on the terminal.

Checking a bcrypt hash costs tens of milliseconds by design, so a successful (user, password) pair is
remembered by its SHA-256, as exporter-toolkit does, and a scrape every few seconds costs nothing. Checks
that do need bcrypt run one at a time (exporter-toolkit's bcrypt mutex), and only a few requests may wait
for one; the rest are told to retry (429) at once, so that a flood of wrong passwords holds neither the CPU
nor the connection slots that scrapers with remembered credentials need.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import re
import ssl
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
UNSUPPORTED = {
    "cipher_suites",
    "curve_preferences",
    "prefer_server_cipher_suites",
    "client_allowed_sans",
    "http2",
}


# exporter-toolkit's configurable response headers, with the values it allows where it restricts them
HEADERS: dict[str, tuple[str, ...]] = {
    "Strict-Transport-Security": (),
    "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"),
    "X-XSS-Protection": (),
    "Content-Security-Policy": (),
}
_BAD_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters but HTAB
BUSY = "busy"  # check(): the password checks are saturated, retry
BCRYPT_WAITERS = 4  # requests that may wait for the bcrypt check; more are answered 429 at once
BCRYPT_WAIT = 2.0  # seconds one may wait
# $2a$/$2b$/$2x$/$2y$, a cost of 04 to 31, 22 characters of salt (16 bytes: the last one carries 2 bits, so
# it is one of ".Oeu") and 31 of hash (23 bytes: the last one carries 4 bits)
_BCRYPT = re.compile(r"\$2[abxy]\$(\d\d)\$([./A-Za-z0-9]{22})([./A-Za-z0-9]{31})")
_BCRYPT_ALPHABET = re.compile(r"[./A-Za-z0-9]*")
_BCRYPT_CHARS = "./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


class WebConfigError(ValueError):
    """The web configuration file is unusable; the message names the file and the field."""


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: dict[str, str] = field(default_factory=dict)
    _good: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    _bcrypt: threading.Lock = field(default_factory=threading.Lock)
    _waiters: threading.BoundedSemaphore = field(
        default_factory=lambda: threading.BoundedSemaphore(BCRYPT_WAITERS)
    )

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes; always true without ``basic_auth_users``."""
        return self.check(header) is True

    def check(self, header: str | None) -> bool | str:
        """True when the header passes, False when not, :data:`BUSY` when the password could not be
        checked now because other checks hold the bcrypt slot (the client should retry)."""
        if not self.users:
            return True
        if not header or header[:6].lower() != "basic ":
            return False
        try:
            user, _, password = (
                base64.b64decode(header[6:].strip(), validate=True).decode("utf-8").partition(":")
            )
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(user.encode() + b"\0" + password.encode() + b"\0" + hashed).digest()
        with self._lock:
            if any(hmac.compare_digest(key, k) for k in self._good):
                return True
        if not self._waiters.acquire(blocking=False):
            return BUSY
        try:
            if not self._bcrypt.acquire(timeout=BCRYPT_WAIT):
                return BUSY
            try:
                ok = _checkpw(password, hashed)
            finally:
                self._bcrypt.release()
        finally:
            self._waiters.release()
        if ok:
            with self._lock:
                self._good.add(key)
        return ok


def _checkpw(password: str, hashed: bytes) -> bool:
    import bcrypt

    try:
        return bool(bcrypt.checkpw(password.encode("utf-8"), hashed))
    except ValueError:  # not a bcrypt hash
        return False


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: must be a mapping")
    return value


def load_web_config(path: str) -> WebConfig:
    """Read and check ``path``; every problem is a WebConfigError naming the file and field."""
    from kgpu.errors import InputError
    from kgpu.model.safeyaml import load_document

    file = Path(path)
    try:
        data = load_document(file.read_bytes(), path)
    except OSError as exc:
        raise WebConfigError(f"{path}: {exc.strerror or exc}") from None
    except InputError as exc:
        raise WebConfigError(exc.line().replace("error: ", "", 1)) from None
    top = _mapping(data, path)
    unknown = set(top) - {"tls_server_config", "http_server_config", "basic_auth_users"}
    if unknown:
        raise WebConfigError(f"{path}: unknown field {sorted(unknown)[0]!r}")
    config = WebConfig()
    tls = _mapping(top.get("tls_server_config"), f"{path}: tls_server_config")
    if tls:
        config.ssl_context = _ssl_context(tls, file.parent, f"{path}: tls_server_config")
    http = _mapping(top.get("http_server_config"), f"{path}: http_server_config")
    for key in http:
        if key != "headers":
            raise WebConfigError(f"{path}: http_server_config.{key}: not supported by kgpu exporter")
    for name, value in _mapping(http.get("headers"), f"{path}: http_server_config.headers").items():
        where = f"{path}: http_server_config.headers"
        allowed = HEADERS.get(name) if isinstance(name, str) else None
        if allowed is None:
            raise WebConfigError(
                f"{where}: header {str(name)[:80]!r} can not be configured (one of: {', '.join(HEADERS)})"
            )
        if not isinstance(value, str):
            raise WebConfigError(f"{where}.{name}: must be a string, got {type(value).__name__}")
        if _BAD_VALUE.search(value) or len(value) > 4096:
            raise WebConfigError(
                f"{where}.{name}: a header value must be one line of at most 4096 characters "
                "without control characters (CR and LF would break the response)"
            )
        if allowed and value not in allowed:
            raise WebConfigError(f"{where}.{name}: {value[:80]!r} is not one of {', '.join(allowed)}")
        config.headers[name] = value
    users = _mapping(top.get("basic_auth_users"), f"{path}: basic_auth_users")
    for user, hashed in users.items():
        where = f"{path}: basic_auth_users.{str(user)[:80]}"
        if ":" in str(user):
            raise WebConfigError(
                f"{where}: a user name holding ':' can never log in (basic auth splits the user from the "
                "password at the first ':')"
            )
        config.users[str(user)] = _bcrypt_hash(hashed, where).encode()
    if config.users:
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise WebConfigError(
                f"{path}: basic_auth_users needs bcrypt: pip install 'kgpu[exporter]'"
            ) from None
    return config


def _bcrypt_hash(hashed: Any, where: str) -> str:
    """``hashed`` when it is a bcrypt hash some password can match; otherwise a WebConfigError saying why."""
    if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2x$", "$2y$")):
        raise WebConfigError(f"{where}: expected a bcrypt hash ($2y$...)")
    found = _BCRYPT.fullmatch(hashed)
    if found is None:
        if not _BCRYPT_ALPHABET.fullmatch(hashed[7:]) or hashed[6:7] != "$":
            raise WebConfigError(
                f"{where}: not a bcrypt hash: after $2y$NN$ it holds only letters, digits, '.' and '/'"
            )
        raise WebConfigError(
            f"{where}: a bcrypt hash has 60 characters, this one {len(hashed)} (cut short when copied?): "
            "no password can match it"
        )
    cost, salt, digest = found.groups()
    if not 4 <= int(cost) <= 31:
        raise WebConfigError(f"{where}: bcrypt cost {cost} is outside 04 to 31")
    if salt[-1] not in ".Oeu" or _BCRYPT_CHARS.index(digest[-1]) % 4:
        raise WebConfigError(
            f"{where}: the last character of the bcrypt {'salt' if salt[-1] not in '.Oeu' else 'hash'} is "
            "not one bcrypt writes (the hash was edited?): no password can match it"
        )
    return hashed


class _Encrypted(Exception):
    """The key file wants a passphrase."""


def _no_passphrase() -> bytes:
    raise _Encrypted


def _ssl_context(tls: dict[str, Any], base: Path, where: str) -> ssl.SSLContext:
    for key in tls:
        if key in UNSUPPORTED:
            raise WebConfigError(f"{where}.{key}: not supported by kgpu exporter (OpenSSL's defaults apply)")
        if key not in TLS_KEYS:
            raise WebConfigError(f"{where}: unknown field {key!r}")
    if not tls.get("cert_file") or not tls.get("key_file"):
        raise WebConfigError(f"{where}: cert_file and key_file are both required")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    versions = {"min_version": "TLS12", "max_version": "TLS13"}  # exporter-toolkit's defaults
    for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        if key in tls:
            version = TLS_VERSIONS.get(str(tls[key]))
            if version is None:
                raise WebConfigError(f"{where}.{key}: {tls[key]!r} is not one of {', '.join(TLS_VERSIONS)}")
            versions[key] = str(tls[key])
            # TLS10 and TLS11 are the user's choice (refused below if unusable)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                setattr(ctx, attr, version)
    low, high = versions["min_version"], versions["max_version"]
    if TLS_VERSIONS[low] > TLS_VERSIONS[high]:
        field = "max_version" if "max_version" in tls else "min_version"
        raise WebConfigError(
            f"{where}.{field}: max_version {high} is below min_version {low} (TLS12 to TLS13 unless set): "
            "no TLS version is left for a scrape"
        )
    cert, key_file = base / str(tls["cert_file"]), base / str(tls["key_file"])
    try:
        # a passphrase-protected key calls the password callback instead of prompting on the terminal
        ctx.load_cert_chain(cert, key_file, password=_no_passphrase)
    except _Encrypted:
        raise WebConfigError(
            f"{where}.key_file: {key_file} is protected by a passphrase, which exporter-toolkit's web "
            "config cannot give: store the key unencrypted (openssl pkey -in KEY -out KEY.plain), "
            "readable by the exporter only"
        ) from None
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(f"{where}: cert_file {cert} / key_file {key_file}: {exc}") from None
    auth = str(tls.get("client_auth_type", "NoClientCert"))
    if auth not in CLIENT_AUTH:
        hint = "RequestClientCert and RequireAnyClientCert accept unverified certificates, which OpenSSL does not"
        if auth in ("RequestClientCert", "RequireAnyClientCert"):
            raise WebConfigError(f"{where}.client_auth_type: {auth} not supported ({hint})")
        raise WebConfigError(f"{where}.client_auth_type: {auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if ctx.verify_mode == ssl.CERT_NONE and tls.get("client_ca_file"):
        raise WebConfigError(
            f"{where}.client_ca_file: given without a client_auth_type that asks for certificates "
            "(VerifyClientCertIfGiven or RequireAndVerifyClientCert), as exporter-toolkit requires"
        )
    if ctx.verify_mode != ssl.CERT_NONE:
        if not tls.get("client_ca_file"):
            raise WebConfigError(f"{where}: client_auth_type {auth} needs client_ca_file")
        ca = base / str(tls["client_ca_file"])
        try:
            ctx.load_verify_locations(ca)
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"{where}: client_ca_file {ca}: {exc}") from None
    failure = _handshake_failure(ctx)
    if failure is not None:
        if "min_version" in tls or "max_version" in tls:
            raise WebConfigError(
                f"{where}.min_version: no TLS handshake from {low} to {high} succeeds with "
                f"{ssl.OPENSSL_VERSION} ({failure}): no scrape could pass"
            )
        raise WebConfigError(f"{where}: cert_file {cert}: a TLS handshake with it fails ({failure})")
    return ctx


def _handshake_failure(server: ssl.SSLContext) -> str | None:
    """Why no client at all can complete a handshake with ``server`` (None when one can): a handshake in
    memory with a client that takes any version, cipher and certificate OpenSSL knows. A server that asks
    for a client certificate is satisfied as far as the handshake goes once it gets to asking."""
    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    with contextlib.suppress(ValueError, ssl.SSLError):
        client.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
        client.maximum_version = ssl.TLSVersion.MAXIMUM_SUPPORTED
        client.set_ciphers("ALL:@SECLEVEL=0")
    pipes = [(ssl.MemoryBIO(), ssl.MemoryBIO()) for _ in range(2)]  # (incoming, outgoing) of each side
    sides = [
        client.wrap_bio(pipes[0][0], pipes[0][1], server_side=False),
        server.wrap_bio(pipes[1][0], pipes[1][1], server_side=True),
    ]
    done = [False, False]
    try:
        for _ in range(8):  # a TLS 1.2 handshake takes 2 round trips, TLS 1.3 one and a half
            for i, side in enumerate(sides):
                if not done[i]:
                    with contextlib.suppress(ssl.SSLWantReadError):
                        side.do_handshake()
                        done[i] = True
                pipes[1 - i][0].write(pipes[i][1].read())
            if all(done):
                return None
    except ssl.SSLError as exc:
        if exc.reason == "PEER_DID_NOT_RETURN_A_CERTIFICATE":
            return None
        return str(exc.reason or exc)
    return "the handshake did not finish"
