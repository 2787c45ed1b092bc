"""An Apache Iceberg destination: one Iceberg commit publishes a run's rows and its watermark.

``writer.output.format=ICEBERG`` (a branch writer) names a SQL catalog (``writer.iceberg.catalog.uri``,
a SQLAlchemy URL: ``sqlite:////var/lake/catalog.db`` embedded, ``postgresql+psycopg://…`` in
production; ``writer.iceberg.catalog.password`` as ENC(...) when the database wants one), a
warehouse (``writer.iceberg.warehouse``, a local folder) and a table
(``writer.iceberg.namespace``, default the flow group; ``writer.iceberg.table``, default the
dataset URN; ``{table}`` in it is the dataset's table name, :mod:`portal.pipeline.destinations.table_templates`).

Why the files go through Spark and not through pyiceberg's Arrow writer: the Spark workers write the
run's Parquet files in parallel exactly as a files destination does (standard UTC microsecond
timestamps, see :mod:`portal.pipeline.spark.session`), so nothing of a run is held in one process's memory
for an append. The publish step (``iceberg_commit``, :class:`IcebergCommitStep`, one per dataset and
branch) then

* moves the files into the table's ``data/flowport-<job>-<execution>/`` folder (a move that is a
  no-op once done, so a retry after a crash finds them there), and
* makes ONE catalog commit (one pyiceberg transaction) in the branch's write mode
  (:mod:`portal.pipeline.destinations.write_modes`): ``add_files`` for ``append``; for ``overwrite`` a delete of
  every row and ``add_files``; for ``merge`` Iceberg row-level changes on ``extract.primary.key.fields``
  (the stored rows of the run's keys deleted, the latest row of the run per key by the first
  ``extract.delta.fields`` appended unless its ``writer.merge.delete.column`` is true: MERGE INTO's
  update, insert and delete; a change-data-capture flow's changes are applied so); for ``history`` the table's rows and the run's computed as SCD type 2
  (:mod:`portal.pipeline.destinations.tablemerge`) replace the table's. The rows are read into Arrow on the
  committing worker for a merge or a history only. New columns of the run are added to the table
  schema in the same commit; readers see the table before or after it, never between.

The commit's snapshot summary carries ``flowport.job``, ``flowport.execution-id``,
``flowport.dataset``, ``flowport.branch``, ``flowport.flow``, ``flowport.rows``,
``flowport.watermark`` (the plain value) and ``flowport.run-digest`` (of the watermark and row
count: what makes an attempt's commit its own); the table properties get
``flowport.run.<job>.<dataset>.<branch>`` (``<execution id>:<digest>``) and
``flowport.watermark.<job>.<dataset>`` (JSON: flow, execution id and the whole watermark) in the same
commit. The table is therefore its own publish marker: ``verify`` finds the run in the table,
so a retry never commits twice, with or without the commit-step log; and when the state store
missed a committed run's watermark, :func:`committed_watermarks` gives it back.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from portal.pipeline import fs, landing, usernode, watermarks
from portal.pipeline.destinations import table_templates, tablemerge, write_modes
from portal.pipeline.destinations.base import SecretBearingStep, WriterContext, register_step_type
from portal.pipeline.destinations.files import FileDataWriter
from portal.pipeline.errors import CommitConflictError, ConfigError
from portal.pipeline.jobspec import JobSpec
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import ICEBERG_NAME

log = logging.getLogger(__name__)
_CATALOG_LOCK = threading.Lock()

FORMAT = "ICEBERG"
COMMIT_ATTEMPTS = 5
MODES = write_modes.MODES
CATALOG_NAME = "flowport"


def table_name(value: str) -> str:
    """A dataset URN as an Iceberg table name: ``public.orders`` -> ``public_orders``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", value)[:128] or "dataset"


def _checked_name(props: Properties, key: str, value: str) -> str:
    if not ICEBERG_NAME.match(value):
        raise ConfigError(
            f"{props.describe(key)} must be a plain name (letters, digits, '_', '-'), got '{value}'"
        )
    return value


def with_password(uri: str, password: str | None) -> str:
    """The catalog URL with its password put in (only in memory, never stored or logged), and
    PostgreSQL spoken through psycopg 3 (SQLAlchemy's bare ``postgresql://`` means psycopg2, which
    Flowport does not ship)."""
    from sqlalchemy.engine import make_url

    url = make_url(uri)
    if url.drivername == "postgresql":
        url = url.set(drivername="postgresql+psycopg")
    if password:
        url = url.set(password=password)
    return url.render_as_string(hide_password=False)


def uri_has_password(uri: str) -> bool:
    """Whether a catalog URL carries a password of its own (refused: it belongs in an ENC(...) key)."""
    try:
        from sqlalchemy.engine import make_url

        return bool(make_url(uri).password)
    except Exception:
        return False


def warehouse_uri(warehouse: str) -> str:
    """pyiceberg wants a URI; a local folder is ``file://<absolute path>``."""
    if "://" in warehouse:
        return warehouse
    return "file://" + os.path.abspath(warehouse)


def _local(location: str) -> str:
    return location[len("file://") :] if location.startswith("file://") else location


def _judged_catalog(judge: Callable[[Any, Any], None]) -> Any:
    """pyiceberg's SqlCatalog whose engine judges every connection as it opens, before the catalog's
    first query: ``_init_catalog`` is where pyiceberg (0.12) first uses the engine it has just made,
    so the listeners go on there, ahead of SQLAlchemy's own first-connect queries.

    Its FileIO is the catalog's confined one whatever a table's metadata says (pyiceberg would let
    a table's properties choose it), and a table it loads lies in the warehouse
    (:mod:`portal.pipeline.destinations.iceberg_confine`)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.exceptions import NoSuchTableError
    from pyiceberg.io import load_file_io
    from sqlalchemy import event

    from portal.pipeline.destinations import iceberg_confine

    class JudgedSqlCatalog(SqlCatalog):
        def _init_catalog(self) -> None:
            event.listen(self.engine, "first_connect", judge, insert=True)
            event.listen(self.engine, "connect", judge, insert=True)
            super()._init_catalog()

        def _load_file_io(self, properties: Any = None, location: str | None = None) -> Any:
            return load_file_io(dict(self.properties), location)

        def _convert_orm_to_iceberg(self, orm_table: Any) -> Any:
            warehouse = self.properties[iceberg_confine.WAREHOUSE_PROPERTY]
            identifier = f"{orm_table.table_namespace}.{orm_table.table_name}"
            iceberg_confine.confine(orm_table.metadata_location or "", warehouse, "the table's metadata")
            try:
                table = super()._convert_orm_to_iceberg(orm_table)
            except (iceberg_confine.IcebergLocationError, NoSuchTableError):
                raise
            except Exception:
                raise iceberg_confine.unreadable_metadata(identifier) from None
            return iceberg_confine.checked_table(table, warehouse)

    return JudgedSqlCatalog


def load_catalog(
    uri: str,
    password: str | None,
    warehouse: str,
    *,
    create: bool = True,
    portal: Sequence[landing.Landing] | None = None,
    what: str = "writer.iceberg.catalog.uri",
    bounds: usernode.Bounds | None = None,
) -> Any:
    """The SQL catalog; ``create``: its own tables are created on first use (a look only, as the
    portal's Test connection takes, creates nothing). Two first uses at once (the per-dataset
    commits of one job, or two workers) race to create those tables: one lock in this process, and
    the loser of a race between processes builds the catalog again, the tables now there.
    Every connection of the catalog is judged as it opens (:mod:`portal.pipeline.landing`):
    ``portal`` are the portal's own databases (default: this process's), ``what`` names the node,
    ``bounds`` a user-made node's (:mod:`portal.pipeline.usernode`)."""
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    from portal.pipeline.destinations import iceberg_confine

    own = tuple(landing.portal_databases() if portal is None else portal)

    def judge(dbapi_connection: Any, _record: Any) -> None:
        raw = getattr(dbapi_connection, "driver_connection", dbapi_connection)
        landing.check(raw, what, portal=own, bounds=bounds)
        if landing.dbapi_engine(raw) == landing.POSTGRESQL and not raw.autocommit:
            raw.rollback()  # the questions' transaction; SQLAlchemy begins its own

    catalog_class = _judged_catalog(judge)

    def build() -> Any:
        return catalog_class(
            CATALOG_NAME,
            uri=with_password(uri, password),
            warehouse=warehouse_uri(warehouse),
            init_catalog_tables=str(create).lower(),
            **iceberg_confine.catalog_properties(warehouse_uri(warehouse)),
        )

    with _CATALOG_LOCK:
        try:
            return build()
        except (IntegrityError, OperationalError, ProgrammingError):
            return build()


class IcebergDataWriter(FileDataWriter):
    """Writes the branch's Parquet files with Spark, like a files destination; the Iceberg commit is
    the publish step's (:class:`IcebergCommitStep`)."""

    def __init__(self, props: Properties, ctx: WriterContext) -> None:
        # FileDataWriter's own __init__ wants data.publisher.final.dir, which an Iceberg table has not.
        self.props, self.ctx = props, ctx
        self.format = FORMAT
        self.staging_dir = self._task_path("writer.staging.dir", "task-staging")
        self.output_dir = self._task_path("writer.output.dir", "task-output")
        self.partition_columns = []
        if props.get_list("writer.partition.columns"):
            raise ConfigError(
                f"{props.describe('writer.partition.columns')}: an Iceberg destination takes no Hive-style "
                "folders (their columns would leave the data files)"
            )
        uri = props.require("writer.iceberg.catalog.uri")
        warehouse = props.require("writer.iceberg.warehouse")
        self.spec = table_spec(props, ctx.jobspec, ctx.dataset_urn)
        # Before anything is read: where the catalog's connections land (the commit's do the same).
        catalog = load_catalog(
            uri,
            props.get("writer.iceberg.catalog.password"),
            warehouse,
            create=False,
            portal=landing.portal_databases(ctx.jobspec.extra),
            what=landing.node_what(ctx.jobspec.extra, "destination", "writer.iceberg.catalog.uri"),
            bounds=usernode.from_spec(ctx.jobspec.extra, "destination"),
        )
        catalog.engine.dispose()

    @property
    def final_dir(self) -> str | None:
        return None

    @property
    def spark_format(self) -> str:
        return "parquet"


def table_spec(props: Properties, spec: JobSpec, dataset_urn: str) -> dict[str, Any]:
    """Where a branch's rows go and how (checked before any data is read)."""
    namespace = props.get("writer.iceberg.namespace") or props.get("flow.group") or spec.flow_group
    key = "writer.iceberg.table"
    named = props.get(key)  # ``{table}`` in it: the dataset's table name put in
    table = (
        table_templates.resolve(named, dataset_urn, props.describe(key)) if named else table_name(dataset_urn)
    )
    props.get_choice("writer.iceberg.write.mode")  # the schema's values and message
    fields = write_modes.resolve(props, FORMAT).step_fields()
    return {
        "namespace": _checked_name(props, "writer.iceberg.namespace", namespace or "flowport"),
        "table": _checked_name(props, "writer.iceberg.table", table),
        "mode": fields.pop("write_mode"),
        **fields,
    }


def _existing_key(props: Properties, key: str) -> str | None:
    for name in props.candidates(key):
        if props.raw.get(name):
            return name
    return None


def add_branch(
    steps: dict[int, dict[str, Any]], spec: JobSpec, urn: str, bprops: Properties, branch: dict[str, Any]
) -> None:
    """Gather one committed task's branch into the dataset's ``iceberg_commit`` step of that branch."""
    step = steps.setdefault(
        branch["index"],
        {
            "type": IcebergCommitStep.type,
            "dataset_urn": urn,
            "branch": branch["index"],
            "catalog_uri": bprops.require("writer.iceberg.catalog.uri"),
            "password_property": _existing_key(bprops, "writer.iceberg.catalog.password"),
            "warehouse": bprops.require("writer.iceberg.warehouse"),
            **table_spec(bprops, spec, urn),
            "execution_id": spec.execution_id,
            "job_name": spec.job_name,
            "flow": f"{spec.flow_group}/{spec.flow_name}",
            "user_node": usernode.spec_entry(spec.extra, "destination"),
            "files": [],
            "rows": 0,
            "watermark": None,
        },
    )
    base = (branch.get("output_dir") or "").rstrip("/")
    for f in branch["output_files"]:
        step["files"].append({"src": f["path"], "relative": f["path"][len(base) :].lstrip("/\\")})
    step["rows"] += int(branch["records_written"])


def finish_steps(
    steps: dict[int, dict[str, Any]], watermark: str | None, backfill: bool
) -> list[dict[str, Any]]:
    """The dataset's Iceberg steps, each carrying the watermark it checks in (none for a backfill)."""
    for step in steps.values():
        step["watermark"] = None if backfill else watermark
    return [steps[i] for i in sorted(steps)]


def _run_key(job: str, urn: str, branch: int) -> str:
    return f"flowport.run.{job}.{urn}.{branch}"


def _watermark_key(job: str, urn: str) -> str:
    return f"flowport.watermark.{job}.{urn}"


@register_step_type
class IcebergCommitStep(SecretBearingStep):
    """One Iceberg commit of one dataset's branch; see the module docstring."""

    type = "iceberg_commit"
    FIELDS = (
        "dataset_urn",
        "branch",
        "catalog_uri",
        "password_property",
        "warehouse",
        "namespace",
        "table",
        "mode",
        "merge_keys",
        "merge_order",
        "delete_column",
        "execution_id",
        "job_name",
        "flow",
        "files",
        "rows",
        "watermark",
        "user_node",  # a judged login's bounds (portal.pipeline.usernode), else None
    )

    REQUIRED = ("catalog_uri", "warehouse", "namespace", "table", "execution_id", "job_name")

    def __init__(self, data: Mapping[str, Any], password: str | None = None) -> None:
        super().__init__(data, password)
        self.data["files"] = list(self.data["files"] or [])

    # -- the table ----------------------------------------------------------------------------------

    def catalog(self) -> Any:
        return load_catalog(
            self.data["catalog_uri"],
            self.password,
            self.data["warehouse"],
            bounds=usernode.from_step(self.data),
        )

    @property
    def identifier(self) -> tuple[str, str]:
        return (self.data["namespace"], self.data["table"])

    def _load(self, catalog: Any) -> Any | None:
        from pyiceberg.exceptions import NoSuchTableError

        try:
            return catalog.load_table(self.identifier)
        except NoSuchTableError:
            return None

    def _create(self, catalog: Any, schema: Any) -> Any:
        """The table, made from the run's schema on the first run (a concurrent creator may win)."""
        from pyiceberg.exceptions import TableAlreadyExistsError
        from sqlalchemy.exc import IntegrityError

        # A concurrent commit may make the namespace between pyiceberg's look and its insert.
        with contextlib.suppress(IntegrityError):
            catalog.create_namespace_if_not_exists(self.data["namespace"])
        try:
            return catalog.create_table(self.identifier, schema=schema)
        except TableAlreadyExistsError:
            return catalog.load_table(self.identifier)

    def summary(self) -> dict[str, str]:
        d = self.data
        props = {
            "flowport.job": str(d["job_name"]),
            "flowport.execution-id": str(d["execution_id"]),
            "flowport.dataset": str(d["dataset_urn"]),
            "flowport.branch": str(d["branch"]),
            "flowport.flow": str(d["flow"] or ""),
            "flowport.rows": str(int(d["rows"] or 0)),
        }
        if d["watermark"] is not None:
            props["flowport.watermark"] = watermarks.value_of(str(d["watermark"])) or ""
        props["flowport.run-digest"] = self.digest
        return props

    @property
    def digest(self) -> str:
        """Names this commit's content: a redelivered attempt of the same execution that reads another
        range (after the state store caught up) is another commit, the same range the same one."""
        d = self.data
        text = json.dumps([d["watermark"], int(d["rows"] or 0)])
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def run_mark(self) -> str:
        return f"{self.data['execution_id']}:{self.digest}"

    def _landed(self, table: Any) -> bool:
        """Whether this run's commit is in the table (its run property, or a snapshot naming it)."""
        d = self.data
        if table.properties.get(_run_key(d["job_name"], d["dataset_urn"], d["branch"])) == self.run_mark:
            return True
        wanted = self.summary()
        keys = (
            "flowport.job",
            "flowport.execution-id",
            "flowport.dataset",
            "flowport.branch",
            "flowport.run-digest",
        )
        for snapshot in table.metadata.snapshots:
            summary = snapshot.summary.additional_properties if snapshot.summary else {}
            if all(summary.get(k) == wanted[k] for k in keys):
                return True
        return False

    def target_identity(self) -> tuple[str, bool]:
        """``namespace.table`` and whether the catalog has it (portal.topology.tables records owners by it)."""
        catalog = self.catalog()
        return ".".join(self.identifier), bool(catalog.table_exists(self.identifier))

    def verify(self) -> bool:
        table = self._load(self.catalog())
        return table is not None and self._landed(table)

    # -- the commit ---------------------------------------------------------------------------------

    def _moves(self, location: str) -> list[tuple[str, str]]:
        """Where the run's files go: under the table's location, each checked to be in the
        warehouse as it resolves (the moves bypass pyiceberg's FileIO, and replace what is there)."""
        from portal.pipeline.destinations import iceberg_confine

        d = self.data
        warehouse = warehouse_uri(d["warehouse"])
        folder = (
            f"{_local(location).rstrip('/')}/data/flowport-{d['job_name']}-{d['execution_id']}-{self.digest}"
        )
        moves = [
            (f["src"], f"{folder}/branch_{d['branch']}/{_flat(f['relative'], f['src'])}") for f in d["files"]
        ]
        for _src, dst in moves:
            iceberg_confine.confine(dst, warehouse, "the run's data files")
        return moves

    def _arrow_schema(self, paths: list[str]) -> Any:
        import pyarrow.parquet as pq

        return pq.read_schema(paths[0]) if paths else None

    def execute(self) -> None:
        """One commit; retried on a concurrent commit to the same table (another dataset of the job,
        committed by the per-dataset thread pool, or another flow), which Iceberg refuses until the
        table is read again: each retry starts from the table as it now is."""
        from pyiceberg.exceptions import CommitFailedException
        from sqlalchemy.exc import OperationalError

        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            try:
                self._commit_once()
                return
            except (CommitFailedException, OperationalError) as error:
                if attempt == COMMIT_ATTEMPTS or (
                    isinstance(error, OperationalError) and "locked" not in str(error)
                ):
                    raise
                log.info(
                    "Iceberg commit of %s refused (%s); reading the table again",
                    self.data["dataset_urn"],
                    error,
                )
                time.sleep(0.1 * attempt)

    def _commit_once(self) -> None:  # noqa: C901
        import pyarrow.parquet as pq

        catalog = self.catalog()
        table = self._load(catalog)
        if table is not None and self._landed(table):
            return
        d = self.data
        present = [f["src"] for f in d["files"] if fs.exists(f["src"])]
        schema = self._arrow_schema(present)
        if table is None:
            if (
                schema is None
            ):  # no rows and no table yet: nothing to publish; the state store has the watermark
                return
            table = self._create(catalog, schema)
        rows, paths, replace = None, [], d["mode"] in ("overwrite", "history")
        if d["mode"] in ("append", "overwrite"):
            for src, dst in self._moves(table.location()):
                if fs.exists(src):
                    fs.delete(dst)  # an earlier attempt's copy the table never took (it has not landed)
                    fs.rename(src, dst)
                elif not fs.exists(dst):
                    raise CommitConflictError(
                        f"cannot publish {src}: it does not exist and {dst} was not written"
                    )
                paths.append(dst)
            schema = self._arrow_schema(paths)
        elif d["mode"] == "history":
            run = [pq.read_table(p) for p in present]
            if run:
                import pyarrow as pa

                stored = table.scan().to_arrow() if table.current_snapshot() is not None else None
                rows = tablemerge.history(
                    stored,
                    pa.concat_tables(run, promote_options="permissive"),
                    list(d["merge_keys"]),
                    d["merge_order"],
                    d.get("delete_column"),
                    dt.datetime.now(dt.UTC),
                )
            schema = rows.schema if rows is not None else None
        else:
            rows = _latest_per_key([pq.read_table(p) for p in present], d["merge_keys"], d["merge_order"])
            schema = rows.schema if rows is not None else None
        with table.transaction() as tx:
            if schema is not None:
                self._evolve(tx, schema)
            if replace and schema is not None and table.current_snapshot() is not None:
                from pyiceberg.expressions import AlwaysTrue

                tx.delete(AlwaysTrue(), snapshot_properties=self.summary())  # the same commit: never half
            if d["mode"] == "history" and rows is not None:
                tx.append(rows, snapshot_properties=self.summary())
                rows = None
            if paths:
                tx.add_files(
                    ["file://" + p if p.startswith("/") else p for p in paths],
                    snapshot_properties=self.summary(),
                )
            if rows is not None and len(rows):
                self._merge(tx, rows)
            marks = {_run_key(d["job_name"], d["dataset_urn"], d["branch"]): self.run_mark}
            if d["watermark"] is not None:
                marks[_watermark_key(d["job_name"], d["dataset_urn"])] = json.dumps(
                    {"execution_id": int(d["execution_id"]), "watermark": d["watermark"], "flow": d["flow"]}
                )
            tx.set_properties(**marks)

    def _merge(self, tx: Any, rows: Any) -> None:
        """A merge as Iceberg row-level changes in the commit's transaction: every stored row of a
        key the run brings is deleted, then the run's latest row of each key is appended unless its
        ``delete_column`` is true (MERGE INTO's matched-update, not-matched-insert and
        matched-delete). Not pyiceberg's ``upsert``: it reads the stored rows in the schema of the
        table's last snapshot, so a column added in this same commit (a source's schema change)
        breaks it. A change log's rows are whole rows, so replacing a key's row is its update."""
        import pyarrow.compute as pc

        keys = list(self.data["merge_keys"])
        if tx.table_metadata.current_snapshot_id is not None:
            tx.delete(_key_filter(rows, keys), snapshot_properties=self.summary())
        column = self.data.get("delete_column")
        if column and column in rows.column_names:
            rows = rows.filter(pc.invert(pc.fill_null(pc.cast(rows[column], "bool"), False)))
        if len(rows):
            tx.append(_in_table_order(rows, tx.table_metadata.schema()), snapshot_properties=self.summary())

    @staticmethod
    def _evolve(tx: Any, schema: Any) -> None:
        """Columns the run has and the table not are added (types widened where Iceberg allows), and
        the name mapping that reads Spark's files (they carry no field ids) follows."""
        from pyiceberg.table import TableProperties

        known = {f.name for f in tx.table_metadata.schema().fields}
        if all(name in known for name in schema.names) and tx.table_metadata.name_mapping() is not None:
            return
        with tx.update_schema() as update:
            update.union_by_name(schema)
        tx.set_properties(
            **{
                TableProperties.DEFAULT_NAME_MAPPING: tx.table_metadata.schema().name_mapping.model_dump_json()
            }
        )


def _flat(relative: str, src: str) -> str:
    """A task's file under the run's folder: the task-output path below the execution (unique)."""
    parts = src.replace("\\", "/").split("/")
    task = next((p for p in parts if p.startswith("task_")), "")
    return f"{task}/{relative}" if task else relative


def _key_filter(rows: Any, keys: list[str]) -> Any:
    """The Iceberg expression matching the stored rows of the run's keys (``In`` on one key)."""
    from pyiceberg.expressions import And, EqualTo, In, Or

    if len(keys) == 1:
        values = {v for v in rows[keys[0]].to_pylist() if v is not None}
        return In(keys[0], values)  # type: ignore[call-arg,arg-type]
    # pyiceberg's stubs name the term and literals as keywords; at run time they are positional.
    matches = [
        And(*(EqualTo(k, row[k]) for k in keys))  # type: ignore[call-arg,arg-type]
        for row in rows.select(keys).to_pylist()
    ]
    return matches[0] if len(matches) == 1 else Or(*matches)


def _in_table_order(rows: Any, schema: Any) -> Any:
    """A merge's rows with the table's columns in the table's order: a column the table gained
    earlier (``union_by_name`` adds at the end) and the run lacks comes as NULLs, so an upsert
    after a schema change compares like with like (pyiceberg casts to the table's order)."""
    import pyarrow as pa

    target = schema.as_arrow()
    columns = []
    for field in target:
        if field.name in rows.column_names:
            columns.append(rows[field.name])
        else:
            columns.append(pa.nulls(len(rows), field.type))
    return pa.Table.from_arrays(columns, names=[f.name for f in target])


def _latest_per_key(tables: list[Any], keys: list[str], order: str | None) -> Any | None:
    """The run's rows with one row per key: the latest by ``order`` (then the last read) wins."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tables:
        return None
    rows = pa.concat_tables(tables, promote_options="permissive")
    rows = rows.append_column("__fp_pos", pa.array(range(len(rows)), pa.int64()))
    sort = [(order, "ascending")] if order and order in rows.column_names else []
    rows = rows.sort_by([*sort, ("__fp_pos", "ascending")])
    rows = rows.set_column(
        rows.column_names.index("__fp_pos"), "__fp_pos", pa.array(range(len(rows)), pa.int64())
    )
    last = rows.group_by(keys).aggregate([("__fp_pos", "max")])["__fp_pos_max"]
    return rows.filter(pc.is_in(rows["__fp_pos"], value_set=last)).drop_columns(["__fp_pos"])


def committed_watermarks(  # noqa: C901
    properties: Mapping[str, str], job_name: str, flow: str, bounds: usernode.Bounds | None = None
) -> dict[str, tuple[int, str]]:
    """Per dataset, (execution id, watermark) of the last Iceberg commit of this job of ``flow``
    (``group/name``) into each Iceberg table its branches name: the truth when the state store missed
    a committed run's watermark. A named table (``writer.iceberg.table``) is read alone; tables named
    after their datasets are found by listing the branch's namespace (the datasets are not known
    before the source plans)."""
    props = Properties(dict(properties))
    count = props.get_int("fork.branches", 1) or 1
    found: dict[str, tuple[int, str]] = {}
    prefix = f"flowport.watermark.{job_name}."
    for index in range(count):
        bprops = props.for_branch(index, count, f"fork_{index}")
        if (bprops.get("writer.output.format") or "").upper() != FORMAT:
            continue
        catalog = load_catalog(
            bprops.require("writer.iceberg.catalog.uri"),
            bprops.get("writer.iceberg.catalog.password"),
            bprops.require("writer.iceberg.warehouse"),
            bounds=bounds,
        )
        namespace = bprops.get("writer.iceberg.namespace") or bprops.get("flow.group") or flow.split("/")[0]
        if not namespace:
            continue
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        named = bprops.get("writer.iceberg.table")
        named = None if table_templates.has_placeholder(named) else named  # one table per dataset
        try:  # a named table alone; tables named after their datasets: the namespace's
            identifiers = [(namespace, named)] if named else catalog.list_tables(namespace)
        except NoSuchNamespaceError:
            continue
        for identifier in identifiers:
            try:
                table = catalog.load_table(identifier)
            except NoSuchTableError:
                continue
            for key, value in table.properties.items():
                if not key.startswith(prefix):
                    continue
                mark = json.loads(value)
                if mark.get("flow") != flow:
                    continue
                urn = key[len(prefix) :]
                if urn not in found or found[urn][0] < int(mark["execution_id"]):
                    found[urn] = (int(mark["execution_id"]), str(mark["watermark"]))
    return found
