"""Command line: ``python -m portal.pipeline run jobspec.json`` prints the TaskStates as JSON.

``run`` options: ``--master`` (default ``$SPARK_MASTER`` or ``local[*]``; ``--master ""`` keeps the
master spark-submit set), ``--with-commit-plan`` (print ``{"task_states": [...], "commit_plan":
{...}}`` instead), ``--output URI`` (also write that JSON to a path or Hadoop URI: how a driver in
cluster deploy mode hands its TaskStates back), ``--master-key-file PATH`` (decrypt ``ENC(...)``
properties in this process with the portal's master key ring, kept on an ACL-protected shared
filesystem; the JobSpec file itself holds only ciphertext).  ``plan jobspec.json
taskstates.json`` prints the commit plan of saved TaskStates.  Spark's own logging goes to stderr,
so stdout is only JSON (stderr also says how long the SparkSession took to start).  The exit status is 0 when every task SUCCEEDED, 1 otherwise, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m portal.pipeline")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a job and print its TaskStates")
    run.add_argument("jobspec")
    run.add_argument("--master", default=os.environ.get("SPARK_MASTER", "local[*]"))
    run.add_argument("--with-commit-plan", action="store_true")
    run.add_argument("--output", default="")
    run.add_argument("--master-key-file", default="")
    plan = sub.add_parser("plan", help="print the commit plan for saved TaskStates")
    plan.add_argument("jobspec")
    plan.add_argument("taskstates")
    args = parser.parse_args(argv)

    from portal.pipeline.destinations.commitplan import plan_commit

    with open(args.jobspec, encoding="utf-8") as fh:
        spec = json.load(fh)
    if args.command == "plan":
        with open(args.taskstates, encoding="utf-8") as fh:
            states = json.load(fh)
        print(json.dumps(plan_commit(spec, states), indent=2))
        return 0

    from portal.pipeline import fs, run_job
    from portal.pipeline.spark.session import get_or_create_spark

    name = str(spec.get("job_name", "job"))
    if args.master_key_file:
        spec = _decrypted(spec, args.master_key_file)
    started = time.monotonic()
    spark = get_or_create_spark(args.master, f"flowport:{name}")
    # What a cold run pays before any work (the benchmark reports its share).
    print(f"flowport: SparkSession started in {time.monotonic() - started:.2f} s", file=sys.stderr)
    try:
        states = run_job(spark, spec)
        output: object = states
        if args.with_commit_plan:
            output = {"task_states": states, "commit_plan": plan_commit(spec, states)}
        text = json.dumps(output, indent=2)
        if args.output:
            fs.write_text(args.output, text)
    finally:
        spark.stop()
    print(text)
    return 0 if all(s["status"] == "SUCCEEDED" for s in states) else 1


def _decrypted(spec: dict[str, Any], master_key_file: str) -> Any:
    """The JobSpec with its ENC(...) properties decrypted and, for column rules, the flow owner's
    customer key unwrapped into ``column_key`` (this process's memory only)."""
    # Only this path decrypts; a run from a plain JobSpec file never loads the crypto.
    from pathlib import Path

    from portal.crypto.encrypted import decrypt_properties, unwrap_flow_key
    from portal.crypto.master import read_ring_file
    from portal.pipeline.columnrules import needs_key
    from portal.pipeline.jobspec import JobSpec

    ring = read_ring_file(Path(master_key_file))
    properties = spec.get("properties") or {}
    decrypted = JobSpec.from_dict({**spec, "properties": decrypt_properties(properties, ring=ring)})
    if needs_key(properties):
        decrypted.column_key = unwrap_flow_key(properties, "columns.encrypt", ring=ring)
    return decrypted


if __name__ == "__main__":
    sys.exit(main())
