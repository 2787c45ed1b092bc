"""Ctrl-C on `make run` ends it cleanly: the command the Makefile's `run` target
runs, under make, on a terminal (a pseudo-terminal here). Ctrl-C stops web,
worker and scheduler, and make exits 0 without "Error" (it used to print
`make: *** [Makefile:73: run] Error 254`); supervisord does not warn that it
runs as root. The stack is left unmigrated: this story is about stopping."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import time
from pathlib import Path

from tests.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def run_recipe_line(port: int) -> str:
    """The Makefile's `run` line that starts supervisord, its variables filled in."""
    recipe = (ROOT / "Makefile").read_text().split("\nrun:", 1)[1].split("\n\n", 1)[0]
    (line,) = [line.strip() for line in recipe.splitlines() if "supervisord -c" in line]
    values = {"VENV": ".venv", "PY": ".venv/bin/python", "BIND": f"127.0.0.1:{port}"}
    return re.sub(r"\$\((\w+)\)", lambda found: values[found.group(1)], line)


def read_until(fd: int, pid: int, wanted: str, seconds: float, seen: list[str]) -> bool:
    """Read the terminal into `seen` until `wanted` shows or the process ends."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if wanted and wanted in "".join(seen):
            return True
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the terminal closed: everything on it has ended
                return False
            if not data:
                return False
            seen.append(data.decode(errors="replace"))
        elif os.waitpid(pid, os.WNOHANG) != (0, 0):
            raise AssertionError("make ended before its output was read")
    return False


def test_ctrl_c_stops_make_run_with_status_0_and_no_error(tmp_path):
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"SHELL := /bin/bash\nrun:\n\tcd {ROOT} && {run_recipe_line(free_port())}\n")
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(FLOWPORT_VAR_DIR=str(tmp_path / "var"), WEB_WORKERS="1", PYTHONUNBUFFERED="1")

    pid, fd = pty.fork()
    if pid == 0:  # the child: make on the terminal, as a person types `make run`
        os.execvpe("make", ["make", "--no-print-directory", "-f", str(makefile), "run"], env)  # noqa: S606
    seen: list[str] = []
    status = None
    try:
        started = read_until(fd, pid, "success: scheduler entered RUNNING state", 120, seen)
        assert started, "".join(seen)[-3000:]
        os.write(fd, b"\x03")  # Ctrl-C: the terminal signals its foreground process group
        read_until(fd, pid, "", 60, seen)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
        if status is None:  # never stopped: end it and what it started
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    output = "".join(seen)

    assert os.waitstatus_to_exitcode(status) == 0, output[-3000:]
    assert "received SIGINT indicating exit request" in output, output[-3000:]
    for process in ("web", "worker", "scheduler"):
        assert f"stopped: {process}" in output, output[-3000:]
    assert "make: ***" not in output, output[-3000:]  # was "make: *** [Makefile:73: run] Error 254"
    assert "running as root" not in output, output[-3000:]
