"""The property sets pipeline stories write again and again: a whole JDBC table read, a Parquet
folder or a JDBC table written, a change log merged by key."""

from __future__ import annotations

from pathlib import Path

JDBC_SOURCE = "portal.pipeline.sources.jdbc.JdbcSource"


def whole_table(url: str, user: str, table: str, **extra: str) -> dict[str, str]:
    """Read all of ``table`` each run (no watermark)."""
    return {
        "source.class": JDBC_SOURCE,
        "source.jdbc.url": url,
        "source.conn.username": user,
        "source.jdbc.tables": table,
        "extract.is.full": "true",
        **extra,
    }


def into_parquet(folder: Path) -> dict[str, str]:
    return {"writer.output.format": "parquet", "data.publisher.final.dir": str(folder)}


def into_table(url: str, user: str, table: str, **extra: str) -> dict[str, str]:
    return {
        "writer.output.format": "jdbc",
        "writer.jdbc.url": url,
        "writer.jdbc.username": user,
        "writer.jdbc.table": table,
        **extra,
    }


def change_log_merged_into(url: str, user: str, table: str) -> dict[str, str]:
    """A change data capture flow's destination: ``table`` merged by ``id`` in the log's order,
    its deletes applied."""
    return into_table(
        url,
        user,
        table,
        **{
            "writer.write.mode": "merge",
            "extract.primary.key.fields": "id",
            "extract.delta.fields": "_cdc_position",
            "writer.merge.delete.column": "_cdc_deleted",
        },
    )
