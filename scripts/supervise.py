"""`make run`'s launcher: runs supervisord (the command given) so that Ctrl-C
stops the portal and ends `make run` with status 0.

Ctrl-C makes the terminal send SIGINT to its whole foreground process group:
make, honcho, the shell between them and supervisord. supervisord stops its
programs and exits 0, but the shell honcho started dies of the signal
(honcho reports it as status 254) and make prints `Error 254`, then kills
itself with the same signal. So, on a terminal, supervisord runs here in a
process group of its own that becomes the terminal's foreground group: Ctrl-C
reaches supervisord alone, and the terminal is handed back to the group that
had it when supervisord ends. SIGINT or SIGTERM sent to this launcher itself
(no terminal: a test, a container) is passed on to supervisord.

supervisord warns "Supervisor is running as root" (CRIT) when started as root
without a `user`: it cannot know that running the portal as root is meant.
`make run` starts everything as whoever runs it, root or not, so the launcher
says so with `--user <the current user>` (no privileges are dropped or gained;
a deployment that wants another user runs the systemd units in deploy/systemd).

Usage: python scripts/supervise.py SUPERVISORD [ARGS...]
"""

from __future__ import annotations

import os
import pwd
import signal
import subprocess
import sys
from contextlib import suppress
from types import FrameType


def controlling_terminal() -> int | None:
    """stdin's terminal when this process's group is in its foreground (an
    interactive `make run`); None otherwise (no terminal, or in the background)."""
    fd = sys.stdin.fileno() if sys.stdin is not None else -1
    try:
        return fd if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp() else None
    except OSError:
        return None


def hand_terminal(fd: int, group: int) -> None:
    """Make `group` the terminal's foreground group. A process outside the
    foreground group that calls tcsetpgrp gets SIGTTOU, ignored meanwhile."""
    previous = signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        with suppress(OSError):  # the terminal went away: nothing to hand over
            os.tcsetpgrp(fd, group)
    finally:
        signal.signal(signal.SIGTTOU, previous)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    command = [*argv, "--user", pwd.getpwuid(os.getuid()).pw_name]
    terminal = controlling_terminal()
    own_group = os.getpgrp()
    supervisord = subprocess.Popen(command, process_group=0)
    if terminal is not None:
        hand_terminal(terminal, supervisord.pid)

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        with suppress(ProcessLookupError):
            supervisord.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, pass_on)
    try:
        status = supervisord.wait()
    finally:
        if terminal is not None:
            hand_terminal(terminal, own_group)
    if status < 0:  # supervisord itself died of a signal (SIGKILL): say so
        print(f"supervisord ended by signal {signal.Signals(-status).name}", file=sys.stderr)
        return 128 - status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
