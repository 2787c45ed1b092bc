"""The portal's master keys (Gobblin's "Master Key").

Where they come from (docs/keys.md):

* `FLOWPORT_MASTER_KEY_FILE`: a file readable by its owner only (mode 0600
  or narrower; anything wider is refused). On a shared file system (NFS,
  HDFS fuse, a Kubernetes secret) in a cluster.
* nothing set (embedded mode): `$FLOWPORT_VAR_DIR/master-key`, created with
  mode 0600 on first use or by `manage.py ensure_master_key`.
* `FLOWPORT_MASTER_KEY`: the same text in an environment variable, for
  development only.

The text is either one base64 AES-256 key (its id is `default`) or a key ring:

    {"active": "mk-20250611-3fa2c1", "keys": {"default": "<base64>", "mk-20250611-3fa2c1": "<base64>"}}

The active key wraps new customer keys; every key in the ring unwraps. The
file is re-read when it changes, so `manage.py rotate_master_key` reaches
running web and worker processes without a restart.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import stat
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from portal.crypto import client
from portal.crypto.errors import MasterKeyError

KEY_ID = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
BARE_KEY_ID = "default"
EMBEDDED_FILE_NAME = "master-key"
ALLOWED_MODE_BITS = 0o600


@dataclass(frozen=True)
class MasterKeyRing:
    active_id: str
    keys: dict[str, bytes] = field(repr=False)

    def __repr__(self) -> str:  # never the key bytes
        return f"MasterKeyRing(active_id={self.active_id!r}, ids={sorted(self.keys)!r})"

    @property
    def active_key(self) -> bytes:
        return self.keys[self.active_id]

    def get(self, key_id: str) -> bytes | None:
        return self.keys.get(key_id)

    def with_new_active_key(self) -> MasterKeyRing:
        key_id = new_key_id(self.keys)
        return MasterKeyRing(key_id, {**self.keys, key_id: client.generate_key()})

    def without(self, key_ids: set[str]) -> MasterKeyRing:
        if self.active_id in key_ids:
            raise MasterKeyError(f"The active master key {self.active_id!r} cannot be removed.")
        return MasterKeyRing(self.active_id, {k: v for k, v in self.keys.items() if k not in key_ids})

    def to_text(self) -> str:
        keys = {key_id: client.encode_key(key) for key_id, key in sorted(self.keys.items())}
        return json.dumps({"active": self.active_id, "keys": keys}, indent=2) + "\n"

    def fingerprint(self, key_id: str) -> str:
        """Short public identifier of one key (for commands' output)."""
        return client.key_fingerprint(self.keys[key_id])[:16]


def new_key_id(existing: dict[str, bytes] | None = None) -> str:
    while True:
        key_id = f"mk-{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(3)}"
        if key_id not in (existing or {}):
            return key_id


def new_ring() -> MasterKeyRing:
    key_id = new_key_id()
    return MasterKeyRing(key_id, {key_id: client.generate_key()})


def parse_ring(text: str, source: str) -> MasterKeyRing:  # noqa: C901
    """A ring from a key file's or FLOWPORT_MASTER_KEY's text; errors name
    `source` and what is wrong, never key material."""
    text = text.strip()
    if not text:
        raise MasterKeyError(f"{source} is empty.")
    if not text.startswith("{"):
        try:
            return MasterKeyRing(BARE_KEY_ID, {BARE_KEY_ID: client.load_key(text)})
        except client.EncryptedValueError as error:
            raise MasterKeyError(f"{source}: {error}") from None
    try:
        document = json.loads(text)
    except ValueError:
        raise MasterKeyError(f"{source} is neither a base64 key nor a JSON key ring.") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), dict):
        raise MasterKeyError(f'{source}: a key ring is {{"active": "<id>", "keys": {{"<id>": "<base64>"}}}}.')
    keys: dict[str, bytes] = {}
    for key_id, encoded in document["keys"].items():
        if not KEY_ID.match(key_id):
            raise MasterKeyError(f"{source}: key id {key_id[:70]!r} is not 1-64 letters, digits, '_.-'.")
        if not isinstance(encoded, str):
            raise MasterKeyError(f"{source}: key {key_id!r} must be a base64 string.")
        try:
            keys[key_id] = client.load_key(encoded)
        except client.EncryptedValueError as error:
            raise MasterKeyError(f"{source}: key {key_id!r}: {error}") from None
    active = document.get("active")
    if not keys:
        raise MasterKeyError(f"{source}: the key ring has no keys.")
    if not isinstance(active, str) or active not in keys:
        raise MasterKeyError(
            f"{source}: 'active' must name one of the ring's keys ({', '.join(sorted(keys))})."
        )
    return MasterKeyRing(active, keys)


# --- where the ring comes from -------------------------------------------------------


@dataclass(frozen=True)
class KeySource:
    kind: str  # "file" or "env"
    path: Path | None = None
    explicit: bool = True  # False: the embedded default file, created on first use

    def __str__(self) -> str:
        return "FLOWPORT_MASTER_KEY" if self.kind == "env" else f"master key file {self.path}"


def key_source() -> KeySource:
    from django.conf import settings

    env_text = getattr(settings, "FLOWPORT_MASTER_KEY", "")
    file_setting = getattr(settings, "FLOWPORT_MASTER_KEY_FILE", "")
    if env_text and file_setting:
        raise MasterKeyError("Set FLOWPORT_MASTER_KEY or FLOWPORT_MASTER_KEY_FILE, not both.")
    if env_text:
        return KeySource("env")
    if file_setting:
        return KeySource("file", Path(file_setting))
    return KeySource("file", Path(settings.VAR_DIR) / EMBEDDED_FILE_NAME, explicit=False)


def check_mode(path: Path, status: os.stat_result) -> None:
    if not stat.S_ISREG(status.st_mode):
        raise MasterKeyError(f"Master key file {path} is not a regular file.")
    mode = stat.S_IMODE(status.st_mode)
    if mode & ~ALLOWED_MODE_BITS:
        raise MasterKeyError(
            f"Master key file {path} has permissions {mode:04o}, wider than 0600; "
            f"refusing to use it (chmod 600 {path})."
        )


def read_ring_file(path: Path) -> MasterKeyRing:
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        raise MasterKeyError(f"Master key file {path} does not exist.") from None
    except OSError as error:
        raise MasterKeyError(f"Master key file {path} cannot be read: {error.strerror}.") from None
    with os.fdopen(fd, "rb") as handle:
        check_mode(path, os.fstat(handle.fileno()))
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise MasterKeyError(f"Master key file {path} is not text.") from None
    return parse_ring(text, f"master key file {path}")


def _write_new_file(path: Path, text: str) -> Path:
    """A new file with mode 0600 beside `path`, fully written and synced."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    return temporary


def create_ring_file(path: Path) -> tuple[MasterKeyRing, bool]:
    """(ring, created): a new ring at `path` unless one is there already.
    Safe when several processes race: exactly one file wins."""
    ring = new_ring()
    temporary = _write_new_file(path, ring.to_text())
    try:
        os.link(temporary, path)
    except FileExistsError:
        return read_ring_file(path), False
    finally:
        temporary.unlink()
    return ring, True


def write_ring_file(path: Path, ring: MasterKeyRing) -> None:
    """Replace the ring atomically (readers see the old or the new file)."""
    os.replace(_write_new_file(path, ring.to_text()), path)


_cache: dict[str, tuple[object, MasterKeyRing]] = {}


def get_ring() -> MasterKeyRing:
    """The current master key ring; MasterKeyError when there is none usable."""
    source = key_source()
    if source.kind == "env":
        from django.conf import settings

        text = settings.FLOWPORT_MASTER_KEY
        cached = _cache.get("env")
        if cached is None or cached[0] != text:
            cached = _cache["env"] = (text, parse_ring(text, "FLOWPORT_MASTER_KEY"))
        return cached[1]
    assert source.path is not None
    try:
        status = os.stat(source.path)
    except FileNotFoundError:
        if source.explicit:
            raise MasterKeyError(
                f"Master key file {source.path} (FLOWPORT_MASTER_KEY_FILE) does not exist."
            ) from None
        try:
            return create_ring_file(source.path)[0]
        except OSError as error:
            raise MasterKeyError(
                f"Master key file {source.path} cannot be created: {error.strerror}."
            ) from None
    except OSError as error:
        raise MasterKeyError(f"Master key file {source.path} cannot be read: {error.strerror}.") from None
    check_mode(source.path, status)
    version = (str(source.path), status.st_ino, status.st_mtime_ns, status.st_size)
    cached = _cache.get("file")
    if cached is None or cached[0] != version:
        cached = _cache["file"] = (version, read_ring_file(source.path))
    return cached[1]
