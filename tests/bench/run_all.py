"""`make bench`: run every tests/bench/bench_*.py script in its own process and
print its figures. Benchmarks report ratios against a reference measured in the
same run; they are not tests and never gate CI.

    python tests/bench/run_all.py [name-filter]
"""

from __future__ import annotations

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
        result = subprocess.run([sys.executable, str(script)], cwd=HERE.parents[1], check=False)
        print(f"--- {script.stem}: exit {result.returncode} in {time.monotonic() - started:.1f}s", flush=True)
        failures += result.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
