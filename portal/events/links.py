"""Links that events carry to the pages about them."""

from __future__ import annotations


def execution_path(flow_group: str, flow_name: str, execution_id: int | str) -> str:
    """The execution page (served by the orchestration app, which the events
    app must not import: the path is spelled here)."""
    return f"/executions/{flow_group}/{flow_name}/{execution_id}/"
