"""A job's bad records (`portal.pipeline.badrows`): how many its tasks set aside, and their
JSON-lines files read back for the execution page's download."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import PurePath
from typing import Any

from portal.pipeline import badrows, fs


def _is_bad_records_file(real: str, execution_id: int) -> bool:
    """Is the file actually reached one the pipeline names for this run's bad records? The
    recorded paths come from the run (whose folders a flow's properties choose), so the
    download is decided on the real path, symlinks followed: ``_errors/<run>-<task>.jsonl``
    published beside a dataset, or ``<run>/<task>/bad_records.jsonl`` in the err folder."""
    path = PurePath(real)
    published = (
        path.parent.name == badrows.FOLDER
        and path.name.startswith(f"{execution_id}-")
        and path.suffix == ".jsonl"
    )
    kept = path.name == "bad_records.jsonl" and path.parent.parent.name == str(execution_id)
    return published or kept


def files(task_states: list[dict[str, Any]] | None, execution_id: int) -> list[str]:
    """The files the tasks wrote them to that this host can read (a published one, or the err
    folder's when the task failed on them), as the real paths opened."""
    found = []
    for state in task_states or []:
        for path in state.get("bad_records_files") or []:
            if not fs.is_local(path):
                continue
            real = os.path.realpath(fs.local_path(path))
            if os.path.isfile(real) and _is_bad_records_file(real, execution_id):
                found.append(real)
    return found


def lines(paths: list[str]) -> Iterator[bytes]:
    """The files' JSON lines, one after the other."""
    for path in paths:
        with open(path, "rb") as fh:
            yield from fh
