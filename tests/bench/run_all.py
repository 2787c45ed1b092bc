"""`make bench`: run every tests/bench/bench_*.py script in its own process and
print its figures. Benchmarks report ratios against a reference measured in the
same run; they are not tests and never gate CI.

    python tests/bench/run_all.py [name-filter]

bench_extract.py runs its non-Flowport contenders (dlt, connectorx) with the Python of the
benchmark-only virtualenv ``BENCH_VENV`` (default ``.venv-bench``), which ``make bench`` creates
from tests/bench/requirements-bench.txt; it stops with that message when the virtualenv is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    wanted = argv[1] if len(argv) > 1 else ""
    scripts = sorted(p for p in HERE.glob("bench_*.py") if wanted in p.stem)
    failures = 0
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        started = time.monotonic()
        env = {
            **os.environ,
            "BENCH_VENV": os.environ.get("BENCH_VENV") or str(HERE.parents[1] / ".venv-bench"),
        }
        result = subprocess.run([sys.executable, str(script)], cwd=HERE.parents[1], env=env, check=False)
        print(f"--- {script.stem}: exit {result.returncode} in {time.monotonic() - started:.1f}s", flush=True)
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
