"""CommitSteps: idempotent publish actions the orchestration layer stores and runs (exactly-once seed).

Each step is JSON (``to_dict``/``CommitStep.from_dict``) so it can sit in the CommitStepStore, and
has ``verify() -> bool`` ("already done?") and ``execute()``.  :class:`CommitSequence` runs
``if not step.verify(): step.execute()`` for each step, so running it again after a crash finishes
the remaining steps and a second complete run changes nothing.

* ``fs_rename`` (:class:`FsRenameCommitStep`): task output file -> job output.  Local paths via
  ``os``, Hadoop URIs (and ``file://``) via the active Spark JVM's FileSystem.  verify: destination
  present with the same content (same bytes as a still-present source, or the recorded size) ->
  True; destination present with different content -> :class:`CommitConflictError` (never
  overwritten); neither present -> CommitConflictError (the task output was lost).
* ``jdbc_publish`` (:class:`JdbcPublishCommitStep`): appends the rows of the staging table(s) to the
  target table and records a marker row keyed by (execution id, job, dataset, branch) in the marker
  table, in ONE PostgreSQL transaction, then drops the staging tables in it (MySQL/MariaDB and SQLite
  destinations: :mod:`portal.pipeline.jdbc_targets`).  verify: the marker
  exists (with the same target and row count -> True; otherwise CommitConflictError).  The password
  is not in the step: ``password_property`` names the job property holding it, and
  ``from_dict(data, properties)`` resolves it.  With ``merge_keys`` (``writer.jdbc.write.mode=upsert``
  on ``extract.primary.key.fields``) the rows are upserted on the keys instead of appended
  (``ON CONFLICT`` / ``ON DUPLICATE KEY``), the latest by ``merge_order`` winning within a run.
  With ``evolve`` (``schema.evolution.policy=evolve``) the target first takes the staging table's
  new and wider columns (:mod:`portal.pipeline.target_evolution`).
* ``high_watermark``: executed by the state store on the orchestration side — register its class
  with :func:`register_step_type`; ``from_dict`` refuses unknown types.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from psycopg import sql

from portal.pipeline import fs, jdbc_modes, pgconn, target_evolution
from portal.pipeline.dialects import POSTGRESQL
from portal.pipeline.errors import CommitConflictError, ConfigError
from portal.pipeline.jdbc_targets import JdbcTarget

_REGISTRY: dict[str, type[CommitStep]] = {}


def register_step_type(cls: type[CommitStep]) -> type[CommitStep]:
    """Make ``cls`` (with a ``type`` class attribute) loadable by :meth:`CommitStep.from_dict`."""
    _REGISTRY[cls.type] = cls
    return cls


class CommitStep(ABC):
    """One idempotent publish action."""

    type: ClassVar[str] = ""

    @abstractmethod
    def verify(self) -> bool:
        """True when the step's effect is already in place."""

    @abstractmethod
    def execute(self) -> None:
        """Do the step (callers run it only when :meth:`verify` is False)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON form, with a ``type`` key."""

    @classmethod
    @abstractmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        """Rebuild a step from its JSON form."""

    @staticmethod
    def from_dict(data: Mapping[str, Any], properties: Mapping[str, str] | None = None) -> CommitStep:
        """Rebuild a step; ``properties`` (the job's resolved properties) supply secrets."""
        step_type = data.get("type")
        cls = _REGISTRY.get(str(step_type))
        if cls is None:
            raise ConfigError(
                f"unknown commit step type '{step_type}' (known: {', '.join(sorted(_REGISTRY))}; "
                "register others with register_step_type)"
            )
        return cls.build(data, properties)


@register_step_type
class FsRenameCommitStep(CommitStep):
    type = "fs_rename"

    def __init__(
        self, src: str, dst: str, size: int | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        self.src, self.dst, self.size = src, dst, size
        self.extra = extra or {}

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        extra = {k: v for k, v in data.items() if k not in ("type", "src", "dst", "size")}
        return cls(data["src"], data["dst"], data.get("size"), extra)

    def to_dict(self) -> dict[str, Any]:
        return {**self.extra, "type": self.type, "src": self.src, "dst": self.dst, "size": self.size}

    def verify(self) -> bool:
        if fs.exists(self.dst):
            if fs.exists(self.src):
                if fs.digest(self.src) == fs.digest(self.dst):
                    return True
                raise CommitConflictError(
                    f"cannot publish {self.src}: {self.dst} exists with different content"
                )
            if self.size is not None and fs.size(self.dst) != int(self.size):
                raise CommitConflictError(
                    f"{self.dst} exists with {fs.size(self.dst)} bytes, expected {self.size} from {self.src}"
                )
            return True
        if not fs.exists(self.src):
            raise CommitConflictError(
                f"cannot publish {self.src}: it does not exist and {self.dst} was not written"
            )
        return False

    def execute(self) -> None:
        if self.verify():
            return
        fs.rename(self.src, self.dst)


class SecretBearingStep(CommitStep):
    """A step stored as plain ``FIELDS`` whose one secret (a database or catalog password) is
    never stored: the step names the job property holding it (``password_property``), and
    :meth:`build` takes it from the job's resolved properties again."""

    FIELDS: ClassVar[tuple[str, ...]] = ()
    REQUIRED: ClassVar[tuple[str, ...]] = ()

    def __init__(self, data: Mapping[str, Any], password: str | None = None) -> None:
        missing = [k for k in self.REQUIRED if data.get(k) in (None, "")]
        if missing:
            raise ConfigError(f"{self.type} step is missing {', '.join(missing)}")
        self.data: dict[str, Any] = {k: data.get(k) for k in self.FIELDS}
        self.data["branch"] = int(self.data.get("branch") or 0)
        self.password = password

    @classmethod
    def build(cls, data: Mapping[str, Any], properties: Mapping[str, str] | None) -> CommitStep:
        key = data.get("password_property")
        return cls(data, (properties or {}).get(key) if key else None)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.data}


@register_step_type
class JdbcPublishCommitStep(SecretBearingStep):
    type = "jdbc_publish"
    FIELDS = (
        "dataset_urn",
        "branch",
        "url",
        "user",
        "password_property",
        "target_table",
        "marker_table",
        "staging_tables",
        "rows",
        "execution_id",
        "job_name",
        "merge_keys",
        "merge_order",
        "evolve",
        "write_mode",
        "delete_column",
        "replace_range",
    )

    REQUIRED = ("url", "target_table", "staging_tables", "execution_id", "job_name")

    def __init__(self, data: Mapping[str, Any], password: str | None = None) -> None:
        super().__init__(data, password)
        self.data["marker_table"] = self.data["marker_table"] or "flowport_publish_marker"

    def _connect(self) -> Any:
        return pgconn.connect(self.data["url"], self.data["user"], self.password)

    def _merge(self) -> tuple[list[str], str | None]:
        """Upsert keys (empty: append) and the column whose latest value wins within a run."""
        return list(self.data.get("merge_keys") or []), self.data.get("merge_order")

    def _mode(self) -> str:
        """The write mode (steps stored before write modes existed: merge when they carry keys)."""
        return self.data.get("write_mode") or ("merge" if self.data.get("merge_keys") else "append")

    def _key(self) -> tuple[int, str, str, int]:
        d = self.data
        return int(d["execution_id"]), str(d["job_name"]), str(d["dataset_urn"]), int(d["branch"])

    def _marker(self, conn: Any) -> tuple[str, int] | None:
        exists = conn.execute("SELECT to_regclass(%s)", (self.data["marker_table"],)).fetchone()[0]
        if exists is None:
            return None
        row = conn.execute(
            sql.SQL(
                "SELECT target_table, rows FROM {} WHERE execution_id=%s AND job_name=%s AND dataset_urn=%s AND branch=%s"
            ).format(pgconn.table_ident(self.data["marker_table"])),
            self._key(),
        ).fetchone()
        return (row[0], int(row[1])) if row else None

    def _same(self, marker: tuple[str, int]) -> bool:
        target, rows = marker
        if target == self.data["target_table"] and (
            self.data["rows"] is None or rows == int(self.data["rows"])
        ):
            return True
        raise CommitConflictError(
            f"publish marker {self._key()} in {self.data['marker_table']} records {rows} row(s) into {target}, "
            f"but this step publishes {self.data['rows']} row(s) into {self.data['target_table']}"
        )

    def _before(self, mode: str) -> list[str]:
        """What goes before the rows of an existing target: emptied (overwrite), or a backfill's
        range of it deleted (an appending backfill replaces what it reads again)."""
        if mode == "overwrite":
            return [jdbc_modes.clear(POSTGRESQL, self.data["target_table"])]
        span = self.data.get("replace_range")
        if mode == "append" and span:
            statement = jdbc_modes.range_delete(
                POSTGRESQL, self.data["target_table"], span["column"], span.get("low"), span.get("high")
            )
            return [statement] if statement else []
        return []

    def _after(self, dialect: Any, mode: str, columns: list[str]) -> list[str]:
        """What follows the staged rows' move: a merge's deletes, or the whole of a history."""
        keys, order = self._merge()
        d = self.data
        if mode == "merge":
            return jdbc_modes.merge_deletes(
                dialect, d["target_table"], d["staging_tables"], columns, keys, order, d.get("delete_column")
            )
        if mode == "history":
            return jdbc_modes.history(
                dialect, d["target_table"], d["staging_tables"], columns, keys, order,
                d.get("delete_column"), dt.datetime.now(dt.UTC),
            )  # fmt: skip
        return []

    def _other_dialect(self) -> JdbcTarget | None:
        """MySQL/MariaDB and SQLite destinations publish through :mod:`portal.pipeline.jdbc_targets`."""
        url = str(self.data["url"])
        return (
            None if url.startswith("jdbc:postgresql:") else JdbcTarget(url, self.data["user"], self.password)
        )

    def verify(self) -> bool:
        target = self._other_dialect()
        if target is not None:
            with target.connect() as conn:
                marker = target.marker(conn, self.data["marker_table"], self._key())
                if marker is not None and self._same(marker):
                    for staging in self.data["staging_tables"]:  # left by a crash after the commit
                        target.drop(conn, staging)
                    return True
                return False
        with self._connect() as conn:
            marker = self._marker(conn)
            return marker is not None and self._same(marker)

    def execute(self) -> None:
        d = self.data
        target = self._other_dialect()
        if target is not None:
            done = target.publish(
                d["marker_table"],
                d["target_table"],
                list(d["staging_tables"]),
                d["rows"],
                self._key(),
                merge=self._merge(),
                evolve=bool(d.get("evolve")),
                mode=self._mode(),
                delete_column=d.get("delete_column"),
                replace_range=d.get("replace_range"),
            )
            if done is not None:
                self._same(done)
            return
        marker_table = pgconn.table_ident(d["marker_table"])
        target_ident = pgconn.table_ident(d["target_table"])
        with self._connect() as conn, conn.transaction():
            conn.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {} (execution_id bigint NOT NULL, job_name text NOT NULL, "
                    "dataset_urn text NOT NULL, branch int NOT NULL, target_table text NOT NULL, rows bigint NOT NULL, "
                    "published_at timestamptz NOT NULL DEFAULT now(), "
                    "PRIMARY KEY (execution_id, job_name, dataset_urn, branch))"
                ).format(marker_table)
            )
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (repr(self._key()),))
            marker = self._marker(conn)
            if marker is not None and self._same(marker):
                return
            total = 0
            mode = self._mode()
            keys, order = self._merge()
            target = d["target_table"]
            columns: list[str] = []
            swapped: set[str] = set()
            for index, staging in enumerate(d["staging_tables"]):
                if conn.execute("SELECT to_regclass(%s)", (staging,)).fetchone()[0] is None:
                    raise CommitConflictError(f"staging table {staging} is gone and no publish marker exists")
                staging_ident = pgconn.table_ident(staging)
                # Quoted as the table is created: a mixed-case name is not folded to lower case.
                target_name = POSTGRESQL.quote(target)
                new = conn.execute("SELECT to_regclass(%s)", (target_name,)).fetchone()[0] is None
                conn.execute(
                    sql.SQL("CREATE TABLE IF NOT EXISTS {} (LIKE {})").format(target_ident, staging_ident)
                )
                if new and mode == "merge":
                    conn.execute(POSTGRESQL.unique_index(target, keys))
                if new and mode == "history":
                    for statement in jdbc_modes.history_columns(POSTGRESQL, target):
                        conn.execute(statement)
                if d.get("evolve"):  # schema.evolution.policy=evolve: new and wider columns first
                    target_evolution.evolve(POSTGRESQL, conn.execute, target, staging)
                columns = [
                    r[0]
                    for r in conn.execute(
                        sql.SQL("SELECT * FROM {} LIMIT 0").format(staging_ident)
                    ).description
                    or []
                ]
                total += conn.execute(sql.SQL("SELECT count(*) FROM {}").format(staging_ident)).fetchone()[0]
                if index == 0 and mode == "overwrite" and jdbc_modes.swappable(conn, target_name, staging):
                    for statement in jdbc_modes.swap(target, staging):
                        conn.execute(statement)
                    swapped.add(staging)  # the target now: its rows are not copied again
                    continue
                if index == 0 and not new:
                    for statement in self._before(mode):
                        conn.execute(statement)
                if mode != "history":
                    conn.execute(
                        POSTGRESQL.move_rows(target, staging, columns, keys if mode == "merge" else [], order)
                    )
            for statement in self._after(POSTGRESQL, mode, columns):
                conn.execute(statement)
            for staging in d["staging_tables"]:
                if staging not in swapped:
                    conn.execute(sql.SQL("DROP TABLE {}").format(pgconn.table_ident(staging)))
            if d["rows"] is not None and total != int(d["rows"]):
                raise CommitConflictError(
                    f"staging tables of {d['dataset_urn']} hold {total} row(s), expected {d['rows']}; not published"
                )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (execution_id, job_name, dataset_urn, branch, target_table, rows) "
                    "VALUES (%s, %s, %s, %s, %s, %s)"
                ).format(marker_table),
                (*self._key(), d["target_table"], total),
            )


class CommitSequence:
    """The steps of one dataset, run in order; safe to run again (each step is verified first)."""

    def __init__(self, steps: list[CommitStep], dataset_urn: str = "") -> None:
        self.steps = steps
        self.dataset_urn = dataset_urn

    @classmethod
    def from_dicts(
        cls,
        steps: list[Mapping[str, Any]],
        properties: Mapping[str, str] | None = None,
        dataset_urn: str = "",
    ) -> CommitSequence:
        return cls([CommitStep.from_dict(s, properties) for s in steps], dataset_urn)

    def run(self) -> int:
        """Execute every step not yet done; returns how many were executed."""
        executed = 0
        for step in self.steps:
            if not step.verify():
                step.execute()
                executed += 1
        return executed


# The Iceberg and replacing files destinations' steps register themselves (their modules need the
# classes above).
from portal.pipeline import iceberg as _iceberg  # noqa: E402,F401
from portal.pipeline import replace as _replace  # noqa: E402,F401
