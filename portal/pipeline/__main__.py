"""Command line: ``python -m portal.pipeline run jobspec.json`` prints the TaskStates as JSON.

``run`` options: ``--master`` (default ``$SPARK_MASTER`` or ``local[*]``), ``--with-commit-plan``
(print ``{"task_states": [...], "commit_plan": {...}}`` instead).  ``plan jobspec.json
taskstates.json`` prints the commit plan of saved TaskStates.  Spark's own logging goes to stderr,
so stdout is only JSON.  The exit status is 0 when every task SUCCEEDED, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.pipeline")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job and print its TaskStates")
    run.add_argument("jobspec")
    run.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    run.add_argument("--with-commit-plan", action="store_true")
    plan = sub.add_parser("plan", help="print the commit plan for saved TaskStates")
    plan.add_argument("jobspec")
    plan.add_argument("taskstates")
    args = parser.parse_args(argv)

    from portal.pipeline.publisher import plan_commit

    with open(args.jobspec, encoding="utf-8") as fh:
        spec = json.load(fh)
    if args.command == "plan":
        with open(args.taskstates, encoding="utf-8") as fh:
            states = json.load(fh)
        print(json.dumps(plan_commit(spec, states), indent=2))
        return 0

    from portal.pipeline import run_job
    from portal.pipeline.session import get_or_create_spark

    spark = get_or_create_spark(args.master, f"flowport:{spec.get('job_name', 'job')}")
    try:
        states = run_job(spark, spec)
    finally:
        spark.stop()
    output: object = states
    if args.with_commit_plan:
        output = {"task_states": states, "commit_plan": plan_commit(spec, states)}
    print(json.dumps(output, indent=2))
    return 0 if all(s["status"] == "SUCCEEDED" for s in states) else 1


if __name__ == "__main__":
    sys.exit(main())
