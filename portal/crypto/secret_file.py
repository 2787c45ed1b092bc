"""Secret files (`NAME_FILE`, Docker/K8s style) and the command that makes one:

    .venv/bin/python -m portal.crypto.secret_file /etc/flowport/secret_key

writes a new random key (mode 0600, never over an existing file: a new
SECRET_KEY signs every session and password-reset link out) and prints only
its path. Django-free, so it runs before there are settings to load: a
`SECRET_KEY_FILE` that names a missing file stops every portal process at
start with a message naming this command (settings.env_secret), not a
traceback."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

MAKE_COMMAND = ".venv/bin/python -m portal.crypto.secret_file"


class SecretFileError(Exception):
    """A `NAME_FILE` that names no readable file, said so an operator can fix it."""


def read_secret_file(name: str, path: str) -> str:
    """The secret in `path`, for the variable `name`; a clear SecretFileError otherwise."""
    try:
        return Path(path).read_text().strip()
    except FileNotFoundError:
        hint = f" Make it with `{MAKE_COMMAND} {path}`." if name == "SECRET_KEY" else ""
        raise SecretFileError(f"{name}_FILE names {path}, which does not exist.{hint}") from None
    except OSError as error:
        raise SecretFileError(
            f"{name}_FILE names {path}, which this process cannot read: {error.strerror}."
        ) from None


def make_secret_file(path: Path) -> bool:
    """Write a new random key to `path` (mode 0600, its folder made); False when it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as handle:
        handle.write(secrets.token_urlsafe(50) + "\n")
    return True


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(f"usage: {MAKE_COMMAND} PATH  (then SECRET_KEY_FILE=PATH on every web node)", file=sys.stderr)
        return 2
    path = Path(argv[0])
    if make_secret_file(path):
        print(f"Made {path} (mode 0600): set SECRET_KEY_FILE={path} for every web node (and copy it there).")
    else:
        print(f"{path} exists; kept as it is (a new key would sign every session out).")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
