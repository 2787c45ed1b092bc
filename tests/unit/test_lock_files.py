"""`make` installs from the lock files; a top-level pin changed in
requirements*.txt without `make lock` would be silently ignored. Each pin
must stand in its lock file at the same version, and every locked package
carries hashes (pip's --require-hashes refuses the install otherwise)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#\\]+)", re.MULTILINE)


def _name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(path: Path) -> dict[str, str]:
    return {_name(name): version for name, version in PIN.findall(path.read_text())}


def _locked(path: Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of each entry of a pip-compile lock."""
    entries = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        match = PIN.match(block)
        if match:
            entries[_name(match[1])] = (match[2], block.count("--hash=sha256:"))
    return entries


@pytest.mark.parametrize(
    ("source", "lock"),
    [("requirements.txt", "requirements.lock"), ("requirements-dev.txt", "requirements-dev.lock")],
)
def test_every_top_level_pin_is_locked_at_its_version_with_hashes(source, lock):
    locked = _locked(ROOT / lock)
    stale = {n: v for n, v in _pins(ROOT / source).items() if locked.get(n, ("missing",))[0] != v}
    assert stale == {}, f"{source} pins these differently from {lock}: run `make lock`"
    assert [n for n, (_, hashes) in locked.items() if hashes == 0] == []


def test_the_dev_lock_keeps_the_runtime_locks_versions():
    runtime, dev = _locked(ROOT / "requirements.lock"), _locked(ROOT / "requirements-dev.lock")
    assert {n: v for n, (v, _) in runtime.items() if dev.get(n, ("",))[0] != v} == {}


def test_a_stale_pin_is_noticed(tmp_path):
    (tmp_path / "requirements.txt").write_text("Django==5.2.19\ncelery==5.7.1  # bumped\n")
    (tmp_path / "requirements.lock").write_text(
        "celery==5.7.0 \\\n    --hash=sha256:aa\n    # via -r requirements.txt\n"
        "django==5.2.19 \\\n    --hash=sha256:bb \\\n    --hash=sha256:cc\n"
    )
    locked = _locked(tmp_path / "requirements.lock")
    assert locked == {"celery": ("5.7.0", 1), "django": ("5.2.19", 2)}
    assert _pins(tmp_path / "requirements.txt")["celery"] != locked["celery"][0]
