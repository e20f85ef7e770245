"""containerd's configuration as each containerd release reads it: ``config.toml``, its imports, their versions.

A containerd config file names its schema with ``version``: 1 (short plugin names), 2 (plugin URIs; the CRI
plugin ``io.containerd.grpc.v1.cri``), 3 (containerd 2.0: the CRI plugin split into
``io.containerd.cri.v1.images`` and ``io.containerd.cri.v1.runtime``), 4 (containerd 2.3: server settings as
plugins). How one host's files are merged, and which of them are migrated to the release's version, changed
three times, and each change decides whether a drop-in keeps the host's own settings or silently drops them.
Every reading below was measured with ``containerd --config F config dump`` of the real releases (the
conformance suite runs them over every config shape) and follows ``cmd/containerd/server/config/config.go``:

- :data:`READ_1X` (1.x): each plugin's section in an imported file replaces the earlier one whole
  (``to.Plugins[k] = v``; containerd#5837); 1.x knows no version 3.
- :data:`READ_20` (2.0-2.2, ``LoadConfig`` at v2.0.14, v2.1.4, v2.2.9): files are merged as written (only
  version 1 files are renamed on load), so the merged config's ``version`` is the last file's that sets one,
  and the CRI migration runs once, over the merged plugins, when that version is below 3. A version 3
  drop-in under a version 2 ``config.toml`` therefore leaves the version 2 CRI settings unmigrated and unread
  (v2.1.4: the sandbox image, the registry ``config_path`` and runc's ``SystemdCgroup`` fall back to their
  defaults, nothing is logged, containerd starts); a version 2 drop-in under a version 3 ``config.toml`` is
  migrated only into the keys the version 3 tables leave unset. A merged version above 3 is refused.
- :data:`READ_23` (2.3.0-2.3.4, ``LoadConfigWithPlugins``): each file is migrated to version 4 on its own
  before the merge (containerd#12608), and a file whose version is higher than ``config.toml``'s is refused
  ("drop-in config version 3 higher than root config version 2", containerd#12891; v2.3.4 exits 1).
- :data:`READ_235` (2.3.5 and later, 2.4): the same without that refusal (reverted by containerd#13939; v2.4.2
  keeps every setting whatever the versions).

A drop-in at ``config.toml``'s own version is read alike by all three 2.x readings: that is what kgpu writes.

The merge is containerd's ``mergeConfig`` (mergo with override): top-level lists gain the items they lack;
``stream_processors``, ``proxy_plugins`` and ``timeouts`` are replaced per key; plugin tables merge key by key
at every depth and every other value in them, lists and empty values too, is replaced (measured: a drop-in's
``cdi_spec_dirs = []`` or ``SystemdCgroup = false`` wins). The CRI migration is ``configMigration`` of
``plugins/cri/images/plugin.go``, ``plugins/cri/runtime/plugin.go`` and ``plugins/cri/cri.go`` (the same at
v2.1.4 and v2.4.2): images settings and the sandbox image overwrite, runtime settings fill only unset keys, and
the grpc plugin keeps only its streaming-server keys.
"""

from __future__ import annotations

import copy
import glob
import os
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kgpu.errors import quote
from kgpu.model.safeyaml import MAX_BYTES, read_limited

CRI_V2 = "io.containerd.grpc.v1.cri"  # version 2: the CRI plugin
CRI_RUNTIME = "io.containerd.cri.v1.runtime"  # version 3 and 4: the CRI runtime half
CRI_IMAGES = "io.containerd.cri.v1.images"  # version 3 and 4: the CRI images half

# Keys of the version 2 CRI section that stay with the grpc plugin in version 3 (plugins/cri/cri.go).
SERVER_KEYS = (
    "disable_tcp_service",
    "stream_server_address",
    "stream_server_port",
    "stream_idle_timeout",
    "enable_tls_streaming",
    "x509_key_pair_streaming",
)
_IMAGE_KEYS = (
    "registry",
    "image_decryption",
    "max_concurrent_downloads",
    "image_pull_progress_timeout",
    "image_pull_with_sync_fs",
    "stats_collect_period",
)
_IMAGE_CONTAINERD_KEYS = ("snapshotter", "disable_snapshot_annotations", "discard_unpacked_layers")
_REPLACED_PER_KEY = ("stream_processors", "proxy_plugins", "timeouts")
# Version 1's short plugin names (v1MigratePluginName); any other name is a grpc plugin.
_V1_NAMES = {
    "cri": CRI_V2,
    "cgroups": "io.containerd.monitor.v1.cgroups",
    "linux": "io.containerd.runtime.v1.linux",
    "scheduler": "io.containerd.gc.v1.scheduler",
    "bolt": "io.containerd.metadata.v1.bolt",
    "task": "io.containerd.runtime.v2.task",
    "opt": "io.containerd.internal.v1.opt",
    "restart": "io.containerd.internal.v1.restart",
    "tracing": "io.containerd.internal.v1.tracing",
    "otlp": "io.containerd.tracing.processor.v1.otlp",
    "aufs": "io.containerd.snapshotter.v1.aufs",
    "btrfs": "io.containerd.snapshotter.v1.btrfs",
    "devmapper": "io.containerd.snapshotter.v1.devmapper",
    "native": "io.containerd.snapshotter.v1.native",
    "overlayfs": "io.containerd.snapshotter.v1.overlayfs",
    "zfs": "io.containerd.snapshotter.v1.zfs",
}


class Malformed(Exception):
    """A runtime config file that cannot be read or does not have the expected shape."""


@dataclass(frozen=True, slots=True)
class Reading:
    """How one range of containerd releases loads config.toml and its imports."""

    label: str  # "containerd 2.0-2.2"
    major: int
    max_version: int  # the highest config version it reads (1.x: 2; it ignores version 3 files)
    per_file: bool  # each file migrated before the merge
    refuses_higher: bool  # a file with a higher version than config.toml's stops it


READ_1X = Reading("containerd 1.x", 1, 2, per_file=False, refuses_higher=False)
READ_20 = Reading("containerd 2.0-2.2", 2, 3, per_file=False, refuses_higher=False)
READ_23 = Reading("containerd 2.3.0-2.3.4", 2, 4, per_file=True, refuses_higher=True)
READ_235 = Reading("containerd 2.3.5 and later", 2, 4, per_file=True, refuses_higher=False)
READINGS_2X = (READ_20, READ_23, READ_235)


def readings(
    major: int | None, minor: int | None = None, patch: int | None = None, config_version: int = 0
) -> list[Reading]:
    """The readings a containerd of this version may make, most specific first. Unknown parts give every
    reading they allow; a ``config.toml`` at version 4 (written only by 2.3 and later) rules out 1.x and
    2.0-2.2 when the version does not say."""
    if major == 1:
        return [READ_1X]
    if major != 2:
        out = [READ_1X, *READINGS_2X]
    elif minor is None:
        out = list(READINGS_2X)
    elif minor <= 2:
        return [READ_20]
    elif minor >= 4:
        return [READ_235]
    elif patch is None:
        return [READ_23, READ_235]
    else:
        return [READ_23 if patch <= 4 else READ_235]
    return [r for r in out if r.max_version >= 4] if config_version >= 4 else out


@dataclass(slots=True)
class Loaded:
    """config.toml with its imports, as one reading loads them."""

    config: dict[str, Any]
    reading: Reading
    files: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)  # settings that take no effect
    lost_why: str = ""  # why, naming the file that causes it
    refused: str = ""  # containerd's own error when it does not start
    ignored: list[str] = field(default_factory=list)  # files at a version above the release's


# --- reading files ------------------------------------------------------------------------------------


def read_text(root: Path, path: str) -> str:
    """A config file under root as text; unreadable, not UTF-8 or too large is Malformed."""
    full = root / path.lstrip("/")
    try:
        with open(full, "rb") as fh:
            data = read_limited(fh)
    except OSError as exc:
        raise Malformed(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise Malformed(f"{path}: larger than {MAX_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Malformed(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_toml(root: Path, path: str) -> dict[str, Any]:
    try:
        return tomllib.loads(read_text(root, path))
    except tomllib.TOMLDecodeError as exc:
        raise Malformed(f"{path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise Malformed(f"{path} is not valid TOML: nested too deep") from None


def table(value: Any, what: str) -> dict[str, Any]:
    """A TOML table / JSON object, or Malformed naming the key; a missing one is empty."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Malformed(f"{what} must be a table, got {type(value).__name__} {quote(value)}")
    return value


def file_version(config: dict[str, Any], path: str) -> int:
    """A file's ``version`` as written; 0 when it has none (containerd reads that as version 1)."""
    raw = config.get("version", 0)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= 100:
        raise Malformed(f"{path}: version must be 1, 2, 3 or 4, got {quote(raw)}")
    return raw


def config_version(root: Path, path: str) -> int:
    """config.toml's version as containerd reads it (a file without one is version 1)."""
    return file_version(read_toml(root, path), path) or 1


def _files(root: Path, path: str) -> list[tuple[str, dict[str, Any]]]:
    """config.toml and its ``imports`` (recursively, each file once, in containerd's order: the file, then
    what it imports, globs sorted), paths taken under root."""
    pending = [path]
    seen: set[str] = set()
    out = []
    while pending:
        current, pending = pending[0], pending[1:]
        if current in seen:
            continue
        seen.add(current)
        config = read_toml(root, current)
        file_version(config, current)
        out.append((current, config))
        imports = config.get("imports") or []
        if not isinstance(imports, list) or not all(isinstance(p, str) for p in imports):
            raise Malformed(f"{current}: imports must be a list of paths, got {quote(imports)}")
        for pattern in imports:
            full = pattern if os.path.isabs(pattern) else os.path.join(os.path.dirname(current), pattern)
            for match in sorted(glob.glob(glob.escape(str(root)) + "/" + full.lstrip("/"))):
                shown = "/" + os.path.relpath(match, root)
                if not os.path.isfile(match):
                    raise Malformed(
                        f"{current}: imports {quote(pattern)} matches {shown}, which is not a file"
                    )
                pending.append(shown)
    return out


# --- merging --------------------------------------------------------------------------------------------


def _merge_tables(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """Plugin tables: tables merge key by key at every depth; any other value is replaced."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        out[key] = _merge_tables(old, value) if isinstance(value, dict) and isinstance(old, dict) else value
    return out


def merge_2x(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """containerd 2.x's ``mergeConfig`` of one file into the config loaded so far."""
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        if key == "plugins" and isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge_tables(old, value)
        elif key in _REPLACED_PER_KEY and isinstance(value, dict) and isinstance(old, dict):
            out[key] = {**old, **value}
        elif isinstance(value, list) and isinstance(old, list):
            out[key] = old + [v for v in value if v not in old]
        elif isinstance(value, dict) and isinstance(old, dict):
            out[key] = _merge_tables(old, value)
        elif value not in ("", 0, False) or key not in out:  # struct fields: empty values do not override
            out[key] = value
    return out


def leaves(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(leaves(value, (*prefix, key)))
        else:
            out[(*prefix, key)] = value
    return out


def _setting(plugin_id: str, path: tuple[str, ...], value: Any) -> str:
    return f'plugins."{plugin_id}".{".".join(path)} = {quote(value)}'


def _merge_1x(base: dict[str, Any], extra: dict[str, Any], lost: list[str]) -> dict[str, Any]:
    """containerd 1.x: as 2.x outside ``plugins``, but each plugin's section in the imported file replaces
    the earlier one whole. Settings of an earlier section that the new one lacks go to ``lost``."""
    out = merge_2x(
        {k: v for k, v in base.items() if k != "plugins"}, {k: v for k, v in extra.items() if k != "plugins"}
    )
    plugins, new = base.get("plugins"), extra.get("plugins")
    if isinstance(plugins, dict) and isinstance(new, dict):
        merged = dict(plugins)
        for plugin_id, section in new.items():
            old = merged.get(plugin_id)
            if isinstance(old, dict) and isinstance(section, dict):
                kept = leaves(section)
                lost += [_setting(plugin_id, p, v) for p, v in leaves(old).items() if p not in kept]
            merged[plugin_id] = section
        out["plugins"] = merged
    elif "plugins" in extra or "plugins" in base:
        out["plugins"] = new if "plugins" in extra else plugins
    return out


# --- migration ------------------------------------------------------------------------------------------


def migrate_v1(config: dict[str, Any]) -> dict[str, Any]:
    """Version 1 -> 2: short plugin names become URIs (``v1Migrate``)."""

    def uri(name: str) -> str:
        if "." in name:
            return name
        if name in _V1_NAMES:
            return _V1_NAMES[name]
        if name.endswith("-service"):
            return "io.containerd.service.v1." + name
        if name in ("windows", "windows-lcow"):
            return "io.containerd.snapshotter.v1." + name
        return "io.containerd.grpc.v1." + name

    out = dict(config)
    plugins = config.get("plugins")
    if isinstance(plugins, dict):
        out["plugins"] = {uri(k): v for k, v in plugins.items()}
    for key in ("disabled_plugins", "required_plugins"):
        names = config.get(key)
        if isinstance(names, list):
            out[key] = [uri(n) if isinstance(n, str) else n for n in names]
    return out


def migrate_cri(plugins: dict[str, Any], shadowed: list[str] | None = None) -> dict[str, Any]:
    """The CRI plugins' version 2 -> 3 migration over one plugins table (a copy is returned). Version 2
    settings that the runtime half does not take because a version 3 table already sets the key go to
    ``shadowed`` when their values differ."""
    src = plugins.get(CRI_V2)
    if not isinstance(src, dict):
        return plugins
    out = copy.deepcopy(plugins)
    src = out[CRI_V2]
    # plugins/cri/images/plugin.go
    images = out[CRI_IMAGES] if isinstance(out.get(CRI_IMAGES), dict) else {}
    pinned = images["pinned_images"] if isinstance(images.get("pinned_images"), dict) else {}
    if "sandbox_image" in src:
        pinned["sandbox"] = src["sandbox_image"]
    if pinned:
        images["pinned_images"] = pinned
    images.update({k: src[k] for k in _IMAGE_KEYS if k in src})
    ctrd = src.get("containerd")
    if isinstance(ctrd, dict) and isinstance(ctrd.get("runtimes"), dict):
        platforms = images["runtime_platform"] if isinstance(images.get("runtime_platform"), dict) else {}
        for name, runtime in ctrd["runtimes"].items():
            if isinstance(runtime, dict) and runtime.get("snapshot"):
                platforms[name] = {"snapshotter": runtime["snapshot"]}
        if platforms:
            images["runtime_platform"] = platforms
        images.update({k: ctrd[k] for k in _IMAGE_CONTAINERD_KEYS if k in ctrd})
    out[CRI_IMAGES] = images
    # plugins/cri/runtime/plugin.go
    runtime = out[CRI_RUNTIME] if isinstance(out.get(CRI_RUNTIME), dict) else {}
    lost = shadowed if shadowed is not None else []

    def fill(dst: dict[str, Any], key: str, value: Any, path: tuple[str, ...]) -> None:
        if key not in dst:
            dst[key] = value
        elif dst[key] != value:
            lost.append(_setting(CRI_V2, (*path, key), value))

    for key, value in src.items():
        if key not in ("cni", "containerd", "sandbox_image", *_IMAGE_KEYS, *SERVER_KEYS):
            fill(runtime, key, value, ())
    if isinstance(src.get("cni"), dict):
        cni = runtime["cni"] if isinstance(runtime.get("cni"), dict) else {}
        for key, value in src["cni"].items():
            if key == "bin_dir":  # Go's []string assertion fails on decoded TOML: always replaced
                cni["bin_dirs"] = [value]
            else:
                fill(cni, key, value, ("cni",))
        runtime["cni"] = cni
    if isinstance(ctrd, dict):
        new = runtime["containerd"] if isinstance(runtime.get("containerd"), dict) else {}
        for key, value in ctrd.items():
            if key not in _IMAGE_CONTAINERD_KEYS:
                fill(new, key, value, ("containerd",))
        runtime["containerd"] = new
        for conf in (new.get("runtimes") or {}).values() if isinstance(new.get("runtimes"), dict) else ():
            if isinstance(conf, dict) and "sandbox_mode" in conf and "sandboxer" not in conf:
                conf["sandboxer"] = conf.pop("sandbox_mode")
    out[CRI_RUNTIME] = runtime
    # plugins/cri/cri.go: the grpc plugin keeps its streaming-server settings only
    out[CRI_V2] = {k: src[k] for k in SERVER_KEYS if k in src}
    return out


def _migrate_file(config: dict[str, Any], version: int) -> dict[str, Any]:
    """One file migrated to version 3 or 4 on its own (2.3 and later)."""
    if version <= 1:
        config = migrate_v1(config)
    plugins = config.get("plugins")
    if version <= 2 and isinstance(plugins, dict):
        config = {**config, "plugins": migrate_cri(plugins)}
    return config


def _unread_v2(plugins: dict[str, Any]) -> list[str]:
    """Version 2 CRI settings that no 2.x plugin reads (left in the grpc plugin unmigrated)."""
    cri = plugins.get(CRI_V2)
    if not isinstance(cri, dict):
        return []
    return [_setting(CRI_V2, p, v) for p, v in leaves(cri).items() if p[0] not in SERVER_KEYS]


# --- loading ------------------------------------------------------------------------------------------


def load(root: Path, path: str, reading: Reading) -> Loaded:
    """config.toml and its imports under root, merged and migrated as ``reading`` does. Raises Malformed for
    a file that cannot be read or parsed, or ``imports`` that are not a list of paths; a configuration the
    release refuses is a :class:`Loaded` with ``refused`` set."""
    files = _files(root, path)
    loaded = Loaded({}, reading, [p for p, _ in files])
    if reading.major == 1:
        for current, config in files:
            if file_version(config, current) >= 3:
                loaded.ignored.append(current)
            lost: list[str] = []
            loaded.config = _merge_1x(loaded.config, config, lost)
            if lost:
                loaded.lost += lost
                loaded.lost_why = (
                    f"importing {current} replaces whole plugin sections (containerd 1.x), which drops "
                    "settings of earlier files"
                )
        return loaded
    if reading.per_file:
        return _load_per_file(files, loaded)
    # 2.0-2.2: merged as written; the merged version is the last file's that sets one
    merged_version, version_from = reading.max_version, ""  # defaultConfig()'s version
    for current, config in files:
        version = file_version(config, current)
        if version > reading.max_version:
            loaded.ignored.append(current)
        if version <= 1:
            config, version = migrate_v1(config), merged_version
        loaded.config = merge_2x(loaded.config, config)
        merged_version, version_from = version, current
    if merged_version > reading.max_version:
        loaded.refused = (
            f"expected containerd config version equal to or less than `{reading.max_version}`, "
            f"got `{merged_version}` ({version_from})"
        )
        return loaded
    plugins = table(loaded.config.get("plugins"), "plugins")
    if merged_version < reading.max_version:
        shadowed: list[str] = []
        loaded.config = {**loaded.config, "plugins": migrate_cri(plugins, shadowed)}
        if shadowed:
            loaded.lost, loaded.lost_why = (
                shadowed,
                f"{reading.label} migrates the merged version 2 settings only into keys that the version 3 "
                "tables leave unset, so these do nothing",
            )
    elif unread := _unread_v2(plugins):
        loaded.lost, loaded.lost_why = (
            unread,
            f"{reading.label} takes the merged version from the last file that sets one ({version_from}: "
            f"version {merged_version}) and then migrates nothing, so these version 2 settings do nothing",
        )
    return loaded


def _load_per_file(files: list[tuple[str, dict[str, Any]]], loaded: Loaded) -> Loaded:
    reading = loaded.reading
    root_version = 0
    merged_version = reading.max_version
    for current, config in files:
        version = file_version(config, current)
        if reading.refuses_higher:
            root_version = root_version or version
            if version > root_version:
                loaded.refused = (
                    f"drop-in config version {version} higher than root config version {root_version} "
                    f"({current})"
                )
                return loaded
        if version < merged_version:
            config, version = _migrate_file(config, version), merged_version
        loaded.config = merge_2x(loaded.config, config)
        merged_version = version
    if merged_version > reading.max_version:
        loaded.refused = (
            f"expected containerd config version equal to or less than `{reading.max_version}`, "
            f"got `{merged_version}`"
        )
    return loaded


def runtime_config(config: dict[str, Any], reading: Reading) -> tuple[str | None, dict[str, Any] | None, str]:
    """(default_runtime_name, runtimes.nvidia, plugin id) of a loaded config; Malformed for keys of the
    wrong type. 1.x reads the version 2 CRI plugin, 2.x (everything migrated) the version 3 runtime plugin."""
    plugin_id = CRI_V2 if reading.major == 1 else CRI_RUNTIME
    plugins = table(config.get("plugins"), "plugins")
    found = plugins.get(plugin_id)
    cri = found if isinstance(found, dict) else {}  # no such section (as before: an array of tables is none)
    ctrd = table(cri.get("containerd"), f'plugins."{plugin_id}".containerd')
    runtimes = table(ctrd.get("runtimes"), f'plugins."{plugin_id}".containerd.runtimes')
    nvidia = runtimes.get("nvidia")
    if nvidia is not None:
        nvidia = table(nvidia, "runtimes.nvidia")
        table(nvidia.get("options"), "runtimes.nvidia.options")
    default = ctrd.get("default_runtime_name")
    if default is not None and not isinstance(default, str):
        raise Malformed(f"default_runtime_name must be a string, got {quote(default)}")
    return default, nvidia, plugin_id
