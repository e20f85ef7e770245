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

Unknown fields are errors, as in exporter-toolkit. Go-specific settings (cipher_suites, curve_preferences,
prefer_server_cipher_suites, http2) have no OpenSSL equivalent here and are refused rather than ignored.
Checking a bcrypt hash costs tens of milliseconds by design, so a successful (user, password) pair is
remembered by its SHA-256, as exporter-toolkit does, and a scrape every few seconds costs nothing.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ssl
import threading
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


class WebConfigError(ValueError):
    """The web configuration file is unusable; the message names the file and the field."""


@dataclass
class WebConfig:
    ssl_context: ssl.SSLContext | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash
    headers: dict[str, str] = field(default_factory=dict)
    _good: set[bytes] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header passes; always true without ``basic_auth_users``."""
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
        import bcrypt

        try:
            ok = bcrypt.checkpw(password.encode("utf-8"), hashed)
        except ValueError:  # not a bcrypt hash
            return False
        if ok:
            with self._lock:
                self._good.add(key)
        return ok


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WebConfigError(f"{where}: must be a mapping")
    return value


def load_web_config(path: str) -> WebConfig:
    """Read and check ``path``; every problem is a WebConfigError naming the file and field."""
    import yaml

    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WebConfigError(f"{path}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise WebConfigError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
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
        config.headers[str(name)] = str(value)
    users = _mapping(top.get("basic_auth_users"), f"{path}: basic_auth_users")
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"{path}: basic_auth_users.{user}: expected a bcrypt hash ($2y$...)")
        config.users[str(user)] = hashed.encode()
    if config.users:
        try:
            import bcrypt  # noqa: F401
        except ImportError:
            raise WebConfigError(
                f"{path}: basic_auth_users needs bcrypt: pip install 'kgpu[exporter]'"
            ) from None
    return config


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
    for key, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        if key in tls:
            version = TLS_VERSIONS.get(str(tls[key]))
            if version is None:
                raise WebConfigError(f"{where}.{key}: {tls[key]!r} is not one of {', '.join(TLS_VERSIONS)}")
            setattr(ctx, attr, version)
    cert, key_file = base / str(tls["cert_file"]), base / str(tls["key_file"])
    try:
        ctx.load_cert_chain(cert, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise WebConfigError(f"{where}: cert_file {cert} / key_file {key_file}: {exc}") from None
    auth = str(tls.get("client_auth_type", "NoClientCert"))
    if auth not in CLIENT_AUTH:
        hint = "RequestClientCert and RequireAnyClientCert accept unverified certificates, which OpenSSL does not"
        if auth in ("RequestClientCert", "RequireAnyClientCert"):
            raise WebConfigError(f"{where}.client_auth_type: {auth} not supported ({hint})")
        raise WebConfigError(f"{where}.client_auth_type: {auth!r} is not one of {', '.join(CLIENT_AUTH)}")
    ctx.verify_mode = CLIENT_AUTH[auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        if not tls.get("client_ca_file"):
            raise WebConfigError(f"{where}: client_auth_type {auth} needs client_ca_file")
        ca = base / str(tls["client_ca_file"])
        try:
            ctx.load_verify_locations(ca)
        except (OSError, ssl.SSLError) as exc:
            raise WebConfigError(f"{where}: client_ca_file {ca}: {exc}") from None
    return ctx
