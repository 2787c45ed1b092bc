"""An operator following the README's cluster section: SECRET_KEY_FILE names a
file nobody made yet. Every process says so in one line naming the command that
makes it (no traceback); that command makes it (mode 0600) and never replaces it."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(*argv: str, secret_key_file: Path, var: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DJANGO_SETTINGS_MODULE"}}
    env.update(SECRET_KEY_FILE=str(secret_key_file), FLOWPORT_VAR_DIR=str(var))
    return subprocess.run(
        [sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_a_missing_secret_key_file_is_said_and_the_command_named_makes_it(tmp_path):
    key_file = tmp_path / "etc" / "secret_key"

    refused = run("manage.py", "ensure_master_key", secret_key_file=key_file, var=tmp_path / "var")

    assert refused.returncode == 3  # gunicorn halts on a worker that exits 3 while booting
    assert "Traceback" not in refused.stderr, refused.stderr
    command = f".venv/bin/python -m portal.crypto.secret_file {key_file}"
    assert (
        f"SECRET_KEY_FILE names {key_file}, which does not exist. Make it with `{command}`" in refused.stderr
    )

    made = run(
        "-m", "portal.crypto.secret_file", str(key_file), secret_key_file=key_file, var=tmp_path / "var"
    )
    assert made.returncode == 0 and f"Made {key_file} (mode 0600)" in made.stdout
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key = key_file.read_text()
    assert len(key.strip()) >= 50 and key.strip() not in made.stdout + made.stderr

    again = run(
        "-m", "portal.crypto.secret_file", str(key_file), secret_key_file=key_file, var=tmp_path / "var"
    )
    assert again.returncode == 0 and "kept as it is" in again.stdout and key_file.read_text() == key

    started = run("manage.py", "ensure_master_key", secret_key_file=key_file, var=tmp_path / "var")
    assert started.returncode == 0, started.stderr
