"""System checks: the portal refuses to start (runserver, migrate, `manage.py
check`) with a master key file that others can read, one it cannot use, or one
inside the data folder (where a data node could reach it)."""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from portal.crypto.errors import MasterKeyError
from portal.crypto.master import ALLOWED_MODE_BITS, check_mode, key_source, parse_ring, read_ring_file


@register(Tags.security)
def check_master_key(app_configs=None, **kwargs) -> list:  # noqa: C901
    try:
        source = key_source()
    except MasterKeyError as error:
        return [Error(str(error), id="keys.E003")]
    if source.kind == "env":
        try:
            parse_ring(settings.FLOWPORT_MASTER_KEY, "FLOWPORT_MASTER_KEY")
        except MasterKeyError as error:
            return [Error(str(error), id="keys.E002")]
        if not settings.DEBUG:
            return [
                Warning(
                    "The master key comes from FLOWPORT_MASTER_KEY, meant for development.",
                    hint="Use FLOWPORT_MASTER_KEY_FILE (mode 0600) in production; see docs/keys.md.",
                    id="keys.W001",
                )
            ]
        return []
    assert source.path is not None
    data_dir = Path(settings.FLOWPORT_DATA_DIR).resolve()
    if source.path.resolve().is_relative_to(data_dir):
        return [
            Error(
                f"Master key file {source.path} lies inside the data folder {data_dir} "
                "(FLOWPORT_DATA_DIR), where data nodes live.",
                hint="Keep FLOWPORT_MASTER_KEY_FILE outside FLOWPORT_DATA_DIR and every node's path.",
                id="keys.E005",
            )
        ]
    try:
        status = os.stat(source.path)
    except FileNotFoundError:
        if source.explicit:
            return [
                Error(
                    f"Master key file {source.path} (FLOWPORT_MASTER_KEY_FILE) does not exist.",
                    hint="Create it with `manage.py ensure_master_key`, or point the variable at the key.",
                    id="keys.E004",
                )
            ]
        return []  # embedded mode: made on first use or by `manage.py ensure_master_key`
    except OSError as error:
        return [Error(f"Master key file {source.path} cannot be read: {error.strerror}.", id="keys.E002")]
    try:
        check_mode(source.path, status)
    except MasterKeyError as error:
        return [Error(str(error), hint=f"Mode {ALLOWED_MODE_BITS:04o} or narrower.", id="keys.E001")]
    try:
        read_ring_file(source.path)
    except MasterKeyError as error:
        return [Error(str(error), id="keys.E002")]
    return []
