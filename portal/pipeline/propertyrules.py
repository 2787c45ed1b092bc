"""Who may set which job property: the pipeline's property schema.

A flow reaches data only through its data nodes, so every key that says *where* data is read or
written (paths, JDBC URLs and drivers, Spark conf, the hop keys) belongs to the portal, which sets
it from the node the administrator configured. Flow owners and templates set everything else. The
web tier refuses a non-user key at save (400 naming it); the worker checks the same schema again
(it trusts nothing the web tier sent).

Also here, because both tiers need the same answer: which keys name pluggable classes, which key
names say "secret" (their values must be ``ENC(...)``), and the limits on keys and values.
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from portal.crypto.secretnames import names_secret
from portal.pipeline import node_relative
from portal.pipeline.classloading import ClassLoadError, check_class_path

USER, NODE = "user", "node"

# Keys the portal sets from the data nodes and the compiler (optionally with a ``.N`` branch suffix).
NODE_KEYS = frozenset(
    {
        "source.files.path",
        "source.jdbc.url",
        "source.jdbc.driver",
        "writer.jdbc.url",
        "writer.jdbc.driver",
        "writer.iceberg.catalog.uri",
        "writer.iceberg.warehouse",
        "data.publisher.final.dir",
        "writer.staging.dir",
        "writer.output.dir",
        "qualitychecker.row.err.file",
        "job.work.dir",
        "flow.group",
        "flow.name",
        "job.name",
    }
)
NODE_PREFIXES = (
    "flowport.hop.",
    "flowport.executor",
    "spark.",
    "source.jdbc.driver.",
    "source.jdbc.url.",
    "writer.jdbc.url.",
)
_BRANCH = re.compile(r"\.\d+\Z")

# Keys whose value is a pluggable class (or a comma list of them; bare names are built-ins).
CLASS_KEYS = frozenset({"source.class", "fork.operator.class", "writer.builder.class"})
CLASS_LIST_KEYS = frozenset(
    {"converter.classes", "qualitychecker.row.policies", "qualitychecker.task.policies"}
)

MAX_KEY_LENGTH = 256
MAX_VALUE_LENGTH = 64 * 1024
# C0 controls and DEL; tab, newline and carriage return are allowed in values (SQL, lists).
_CONTROL_IN_KEY = re.compile(r"[\x00-\x1f\x7f]")
_CONTROL_IN_VALUE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SAFE_URN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:=-]{0,254}\Z")
# An Iceberg namespace or table name: it becomes a folder under the warehouse.
ICEBERG_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}\Z")


def base_key(key: str) -> str:
    """``writer.staging.dir.1`` -> ``writer.staging.dir``."""
    return _BRANCH.sub("", key)


@functools.lru_cache(maxsize=8192)  # pure; a recompile batch asks it of the same keys per flow
def owner_of(key: str) -> str:
    """``node`` for keys only the portal sets from data nodes, else ``user``."""
    if key.startswith(NODE_PREFIXES):
        return NODE
    return NODE if base_key(key) in NODE_KEYS else USER


def control_problems(properties: Mapping[str, object]) -> list[str]:
    """Control characters (a null byte included) in keys or values."""
    problems = []
    for key, value in properties.items():
        if not isinstance(key, str):
            continue
        if _CONTROL_IN_KEY.search(key):
            problems.append(
                f"key {key.encode('unicode_escape').decode()[:60]!r} contains a control character"
            )
        elif isinstance(value, str) and _CONTROL_IN_VALUE.search(value):
            problems.append(f"{key!r}: the value contains a control character (a null byte or similar)")
    return problems


def refused_keys(properties: Iterable[str]) -> list[str]:
    """The keys of ``properties`` that a flow owner or a template may not set."""
    return sorted(k for k in properties if isinstance(k, str) and owner_of(k) == NODE)


def refused_message(key: str, where: str = "a flow") -> str:
    return (
        f"{key!r} is set by the portal from the flow's data nodes; {where} may not set it (docs/security.md)"
    )


def class_problems(properties: Mapping[str, object]) -> list[str]:
    """Class-path properties naming a class outside the allowed packages (nothing is imported)."""
    problems = []
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str) or not value.strip():
            continue
        base = base_key(key)
        if base in CLASS_KEYS:
            paths = [value.strip()]
        elif base in CLASS_LIST_KEYS:
            paths = [p.strip() for p in value.split(",") if "." in p.strip()]
        else:
            continue
        for path in paths:
            try:
                check_class_path(path, key)
            except ClassLoadError as error:
                problems.append(str(error))
    return problems


def clear_secret_keys(
    properties: Mapping[str, object], looks_encrypted: Callable[[object], bool]
) -> list[str]:
    """Keys named like a secret (:func:`portal.crypto.secretnames.names_secret`) whose non-empty
    value is not ``ENC(...)``."""
    return sorted(
        key
        for key, value in properties.items()
        if isinstance(key, str)
        and names_secret(key)
        and isinstance(value, str)
        and value.strip()
        and not looks_encrypted(value)
    )


def urn_problems(properties: Mapping[str, object]) -> list[str]:
    """``dataset.urn`` becomes a folder name under the publish dir: no separators, no ``..``."""
    problems = []
    for key, value in properties.items():
        if not (isinstance(key, str) and base_key(key) == "dataset.urn" and isinstance(value, str)):
            continue
        if value and (not _SAFE_URN.match(value) or ".." in value):
            problems.append(
                f"{key!r} must be a plain name (letters, digits, '_', '.', ':', '=', '-'; no '/' or '..')"
            )
    return problems


def clear_secret_message(key: str) -> str:
    return (
        f"{key!r} names a secret (password, secret, token, credential, private/api/access key) but is given "
        "in clear; give it as ENC(...) (docs/keys.md)"
    )


def user_property_problems(
    properties: Mapping[str, object],
    looks_encrypted: Callable[[object], bool],
    where: str = "a flow",
    *,
    secrets: bool = True,
) -> list[str]:
    """Everything the schema refuses in properties a user (flow owner or template author) gives.
    ``secrets=False`` leaves the clear-secret check to the caller (the flow save words it with
    the templates' declared list)."""
    problems = control_problems(properties)
    problems += [refused_message(key, where) for key in refused_keys(properties)]
    problems += class_problems(properties)
    if secrets:
        problems += [clear_secret_message(key) for key in clear_secret_keys(properties, looks_encrypted)]
    problems += urn_problems(properties)
    problems += node_relative.problems(properties)
    return problems


# --- The declared keys: type, default, allowed values, description, when required -------------------
#
# Every key the pipeline reads is declared here once; `Properties` parses typed values with
# `parse_value` (so the worker's message is this module's), the portal checks the same values and
# required keys at save (`portal.pipeline.jobcheck`), the flow form shows the descriptions, and
# docs/properties.md is generated from this table (`python -m portal.pipeline.propertyrules`).

STRING, INT, NUMBER, BOOL, LIST, MAPPING, CHOICE, CLASS, CLASSES = (
    "string",
    "int",
    "number",
    "bool",
    "list",
    "mapping",
    "choice",
    "class",
    "classes",
)
TRUE_WORDS = frozenset({"true", "yes", "1", "on"})
FALSE_WORDS = frozenset({"false", "no", "0", "off", ""})
# Families read per fork branch with a ``.N`` suffix (portal.pipeline.properties).
BRANCH_SCOPED_PREFIXES = ("converter.", "qualitychecker.", "writer.", "data.publisher.")

# What a job is made of, for "when required": its source kind and each branch's writer kind.
SOURCE_FILES, SOURCE_JDBC, WRITER_FILES, WRITER_JDBC, WRITER_ICEBERG = (
    "source:files",
    "source:jdbc",
    "writer:files",
    "writer:jdbc",
    "writer:iceberg",
)
FILES_SOURCE_CLASS = "portal.pipeline.sources.files.FileSource"
JDBC_SOURCE_CLASS = "portal.pipeline.sources.jdbc.JdbcSource"
SOURCE_CDC = "source:cdc"
CDC_SOURCE_CLASS = "portal.pipeline.sources.cdc.CdcSource"


@dataclass(frozen=True)
class PropertySpec:
    """One key. ``required_for`` names the job kinds that need it (``source:files``,
    ``source:jdbc``, ``writer:jdbc``); ``unless`` a ``key=value`` that waives it. A ``<N>`` or
    ``<name>`` in the key stands for a number or a name."""

    key: str
    type: str
    description: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    required_for: tuple[str, ...] = ()
    unless: str = ""
    minimum: float | None = None
    maximum: float | None = None

    @property
    def owner(self) -> str:
        return owner_of(self.key.replace("<N>", "0").replace("<name>", "x"))

    @property
    def per_branch(self) -> bool:
        return self.key.startswith(BRANCH_SCOPED_PREFIXES)


def _s(key: str, type_: str, description: str, **kwargs: Any) -> PropertySpec:
    return PropertySpec(key, type_, description, **kwargs)


FILE_SOURCE_FORMATS = ("avro", "csv", "json", "jsonl", "orc", "parquet")
WRITER_FORMATS = ("AVRO", "CSV", "ICEBERG", "JDBC", "JSON", "ORC", "PARQUET")
# Gobblin's names are accepted too (commitplan.commit_policy maps them).
COMMIT_POLICIES = (
    "full",
    "partial",
    "successful",
    "commit_on_full_success",
    "commit_on_partial_success",
    "commit_successful_tasks",
)
SCHEMA_EVOLUTION_POLICIES = ("evolve", "freeze", "discard_columns")  # portal.pipeline.schema.drift

SPECS: tuple[PropertySpec, ...] = (
    # job
    _s("source.class", CLASS, "The source: a Source subclass; set from the source data node's kind."),
    _s("job.commit.policy", CHOICE, "When a job's output is published: full (every task succeeded), "
       "partial (per dataset), successful (what succeeded).", default="full", choices=COMMIT_POLICIES),
    _s("schema.evolution.policy", CHOICE, "What a changed source schema does: evolve (add columns, widen "
       "types, also at a JDBC destination), freeze (fail the dataset with the diff), discard_columns "
       "(drop new columns). Unset: not enforced (the schema is still recorded).",
       choices=SCHEMA_EVOLUTION_POLICIES),
    _s("job.work.dir", STRING, "The job's working folder (set by the portal)."),
    _s("job.name", STRING, "The job's name (set by the compiler)."),
    _s("flow.group", STRING, "The flow's group (set by the compiler)."),
    _s("flow.name", STRING, "The flow's name (set by the compiler)."),
    _s("mr.job.max.mappers", INT, "At most this many tasks run at once."),
    _s("numbers.per.run", INT, "Test source only: how many numbers each run emits."),
    _s("dataset.urn", STRING, "The dataset's name (a folder under the publish dir)."),
    _s("flowport.hop.source.kind", STRING, "Kind of the hop's source data node (set by the compiler)."),
    _s("flowport.hop.destination.kind", STRING, "Kind of the hop's destination data node (set by the compiler)."),
    _s("spark.jars", STRING, "Extra jars on the Spark classpath (set from the executor)."),
    # files source
    _s("source.files.path", STRING, "The folder the file source reads (set from the source data node).",
       required_for=(SOURCE_FILES,)),
    _s("source.files.format", CHOICE, "Format of the source files.", choices=FILE_SOURCE_FORMATS,
       required_for=(SOURCE_FILES,)),
    _s("source.files.dataset.level", INT, "0: the folder is one dataset; 1: one dataset per sub-folder.",
       default="1"),
    _s("source.files.datasets", LIST, "Only these sub-folders (level 1); all by default. Plain folder "
       "names: no '/', '..', '%' or absolute paths."),
    _s("source.files.folder", STRING, "Read this folder below the source node's root instead of the root "
       "(its sub-folders are the datasets): an upstream flow's own output, <flowGroup>/<flowName>. A "
       "relative path: no '..', '%' or absolute paths."),
    _s("source.files.glob", STRING, "Only files whose names match this glob (a later hop reads branch 0 "
       "of a forked first hop with it; set by the compiler). A name pattern: no '/', '..' or '%'."),
    _s("source.files.option.<name>", STRING, "A Spark reader option from the allowed list (docs/pipeline.md); "
       "avroSchemaUrl names a file inside the source data node."),
    _s("source.files.settle.seconds", NUMBER, "Leave out files modified in the last N seconds.", default="0"),
    _s("source.files.workunit.max.bytes", INT, "Bytes of files per work unit.", default=str(1 << 30)),
    _s("source.files.workunit.max.files", INT, "Files per work unit (0: no limit).", default="0"),
    _s("source.files.csv.header", BOOL, "CSV files start with a header line.", default="true"),
    _s("source.files.csv.infer.schema", BOOL, "Infer CSV column types (else strings).", default="true"),
    _s("source.files.csv.delimiter", STRING, "CSV field delimiter.", default=","),
    _s("source.schema", STRING, "The source's schema as a Spark DDL string (skips inference)."),
    _s("errors.max.count", INT, "CSV/JSON files: bad records (that do not parse, have the wrong number of "
       "fields or a value of the wrong type) set aside per task before the task fails; with "
       "errors.max.fraction unset too, 0.", minimum=0),
    _s("errors.max.fraction", NUMBER, "CSV/JSON files: the share of the records read (0 to 1) that may "
       "be bad and set aside before the task fails.", minimum=0, maximum=1),
    # column rules (job-wide; the source picker sets them)
    _s("columns.drop", LIST, "Columns not delivered."),
    _s("columns.hash", LIST, "Columns delivered as the hex SHA-256 of salt + value."),
    _s("columns.hash.secret", STRING, "The salt of columns.hash; give it as ENC(...). Unset: derived "
       "from the flow owner's customer key."),
    _s("columns.encrypt", LIST, "Columns delivered AES-256-GCM encrypted under the flow owner's "
       "customer key (base64; decrypt with python -m portal.pipeline.columns)."),
    # jdbc source
    _s("source.jdbc.url", STRING, "JDBC URL of the source database (set from the source data node).",
       required_for=(SOURCE_JDBC,)),
    _s("source.jdbc.driver", STRING, "JDBC driver class (set from the source data node).",
       default="org.postgresql.Driver"),
    _s("source.jdbc.arrow", CHOICE, "PostgreSQL: read with COPY into Arrow batches (ADBC) instead of Spark's "
       "JDBC reader. auto: where the Python workers then write the Parquet themselves (one plain "
       "Parquet branch); true: always; false: never.", default="auto", choices=("auto", "true", "false")),
    _s("source.jdbc.tables", LIST, "Tables to read, comma-separated: names, or patterns such as public.* "
       "(one dataset per table, matched again at every run).", required_for=(SOURCE_JDBC,)),
    _s("source.jdbc.tables.exclude", LIST, "Tables (names or patterns) left out of source.jdbc.tables."),
    _s("source.jdbc.fetchsize", INT, "Rows fetched per round trip.", default="10000"),
    _s("source.jdbc.partition.column", STRING, "Numeric column the read is split on "
       "(default: the first primary key field)."),
    _s("source.jdbc.ranges", INT, "Watermark ranges per table per run.", default="1"),
    _s("source.jdbc.num.partitions", INT, "Spark partitions of a read (default: the cluster's parallelism)."),
    # change data capture (portal.pipeline.sources.cdc)
    _s("source.cdc.tables", LIST, "Change data capture (source.class portal.pipeline.sources.cdc.CdcSource "
       "on a PostgreSQL or MariaDB node): the tables whose changes are read from the log, schema.table, "
       "one dataset each.", required_for=(SOURCE_CDC,)),
    _s("source.cdc.max.changes", INT, "PostgreSQL: about this many log messages one run reads from the slot "
       "(whole transactions), read further when another destination holds the slot behind what this one has, "
       "and at most about this many new changes delivered; the rest waits for the next run. Unset: everything "
       "up to the run's start.", minimum=1),
    _s("source.cdc.snapshot.chunk.size", INT, "Rows per chunk of a table's first read (its snapshot): a table with a "
       "primary key is read in chunks ordered by its key, each in a short transaction of its own, while its "
       "changes keep flowing; a table without one is read whole in one run.", default="10000", minimum=1),
    _s("source.cdc.snapshot.chunks.per.run", INT, "Chunks of a snapshot one run reads at most per table; the "
       "next run goes on after the last key committed.", default="20", minimum=1),
    _s("source.cdc.resnapshot", BOOL, "Drop the flow's replication slot and read the tables again from a "
       "new snapshot at every run while set (once: the flow page's 'Take a new snapshot'); the slot is kept "
       "while another destination of the flow reads on from it.", default="false"),
    _s("source.cdc.alert.lag.bytes", INT, "Raise cdc.slot_lagging when the destination is more than this many "
       "bytes of log behind the server (default CDC_ALERT_LAG_BYTES, 1 GiB; 0: never).", minimum=0),
    _s("source.cdc.alert.lag.seconds", INT, "Raise cdc.slot_lagging when the destination is more than this "
       "many seconds behind the server (default CDC_ALERT_LAG_SECONDS; 0: never).", minimum=0),
    _s("source.cdc.alert.inactive.seconds", INT, "Raise cdc.slot_inactive when no run read the slot for this "
       "long while the server keeps log for it (default CDC_ALERT_INACTIVE_SECONDS, a day; 0: never).",
       minimum=0),
    _s("source.conn.username", STRING, "Database user."),
    _s("source.conn.password", STRING, "Database password; give it as ENC(...)."),
    _s("extract.is.full", BOOL, "Read whole tables each run (no watermark).", default="false"),
    _s("extract.delta.fields", LIST, "The watermark column (numeric, date or timestamp).",
       required_for=(SOURCE_JDBC,), unless="extract.is.full=true"),
    _s("extract.primary.key.fields", LIST, "Key columns that recognise rows already delivered."),
    _s("extract.lookback", STRING, "Re-read this far behind the watermark (300, 30s, 5m, 2h, 1d)."),
    _s("extract.lookback.max.keys", INT, "At most this many keys in a lookback window.", default="100000"),
    # converters (per branch)
    _s("converter.classes", CLASSES, "Converters, in order (built-in names or classes)."),
    _s("converter.drop.fields", LIST, "Fields the drop converter removes."),
    _s("converter.purge.fields", LIST, "Fields the purge converter empties."),
    _s("converter.rename.fields", MAPPING, "old:new pairs for the rename converter."),
    _s("converter.cast.fields", MAPPING, "field:type pairs for the cast converter."),
    _s("converter.flatten.json.fields", LIST, "JSON string fields the flatten converter expands."),
    _s("converter.flatten.json.schema.<name>", STRING, "Spark DDL schema of a flattened JSON field."),
    _s("converter.flatten.separator", STRING, "Separator of flattened field names.", default="_"),
    _s("converter.ingestion.time.field", STRING, "Field the ingestion-time converter adds."),
    # quality (per branch)
    _s("qualitychecker.row.policies", CLASSES, "Row policies (NotNull, Regex, Range or classes)."),
    _s("qualitychecker.row.notnull.fields", LIST, "Fields the NotNull row policy checks."),
    _s("qualitychecker.row.regex.field", STRING, "Field the Regex row policy checks."),
    _s("qualitychecker.row.regex.pattern", STRING, "Pattern the Regex row policy checks."),
    _s("qualitychecker.row.range.field", STRING, "Field the Range row policy checks."),
    _s("qualitychecker.row.range.min", NUMBER, "Lowest value the Range row policy accepts."),
    _s("qualitychecker.row.range.max", NUMBER, "Highest value the Range row policy accepts."),
    _s("qualitychecker.row.err.file", STRING, "Where refused rows are written (set by the portal)."),
    _s("qualitychecker.task.policies", CLASSES, "Task policies (RowCount or classes)."),
    _s("qualitychecker.task.rowcount.min", INT, "Fewest rows a task may write."),
    _s("qualitychecker.task.rowcount.max", INT, "Most rows a task may write."),
    # fork
    _s("fork.branches", INT, "Number of fork branches.", default="1"),
    _s("fork.operator.class", CLASS, "Fork operator (identity by default, or RouteByField)."),
    _s("fork.branch.name.<N>", STRING, "Name of branch N.", default="fork_<N>"),
    _s("fork.route.field", STRING, "Field the RouteByField operator routes on."),
    _s("fork.route.values.<N>", LIST, "Values routed to branch N."),
    _s("fork.sensitive.fields", LIST, "Example fork: fields kept from the public branch."),
    _s("fork.one.pass", BOOL, "Write all branches in one pass over the data.", default="true"),
    # writer and publisher (per branch)
    _s("writer.builder.class", CLASS, "A custom DataWriter class (replaces writer.output.format)."),
    _s("writer.output.format", CHOICE, "Format written; JDBC for a jdbc destination, ICEBERG for an "
       "iceberg one.", default="PARQUET",
       choices=WRITER_FORMATS),
    _s("writer.codec", STRING, "Compression codec of written files."),
    _s("writer.partition.columns", LIST, "Columns the output is partitioned by."),
    _s("writer.file.max.records", INT, "Records per written file."),
    _s("writer.target.file.size", INT, "Target bytes per written file."),
    _s("writer.staging.dir", STRING, "Staging folder (set by the portal)."),
    _s("writer.output.dir", STRING, "Output folder (set by the portal)."),
    _s("writer.jdbc.url", STRING, "JDBC URL of the destination (set from the destination data node).",
       required_for=(WRITER_JDBC,)),
    _s("writer.jdbc.driver", STRING, "JDBC driver of the destination (set from the destination data node)."),
    _s("writer.jdbc.table", STRING, "Destination table; {table} in it is each dataset's own table name "
       "(copy_{table}, analytics.{table}: one target per table of a whole schema). Left out: {table}, "
       "each dataset into a table named as its source table.", default="{table}"),
    _s("writer.jdbc.username", STRING, "Destination database user."),
    _s("writer.jdbc.password", STRING, "Destination database password; give it as ENC(...)."),
    _s("writer.jdbc.batchsize", INT, "Rows per insert batch."),
    _s("writer.write.mode", CHOICE, "How the destination takes a run's rows: append; overwrite (a full "
       "refresh replacing the dataset at once); merge (upsert on extract.primary.key.fields, the "
       "latest row wins); history (SCD type 2: valid_from/valid_to/is_current per key).",
       default="append", choices=("append", "overwrite", "merge", "history")),
    _s("writer.merge.delete.column", STRING, "merge/history: a boolean column; a row with it true "
       "deletes (merge) or closes (history) its key."),
    _s("writer.jdbc.write.mode", CHOICE, "append, or upsert: merge on extract.primary.key.fields "
       "(older form of writer.write.mode=merge).",
       default="append", choices=("append", "upsert")),
    _s("writer.jdbc.marker.table", STRING, "Table holding the exactly-once commit markers."),
    _s("writer.iceberg.catalog.uri", STRING, "SQL catalog of the Iceberg destination, a SQLAlchemy URL "
       "without password (set from the destination data node).", required_for=(WRITER_ICEBERG,)),
    _s("writer.iceberg.warehouse", STRING, "Warehouse folder of the Iceberg destination's tables (set "
       "from the destination data node).", required_for=(WRITER_ICEBERG,)),
    _s("writer.iceberg.catalog.password", STRING, "Password of the Iceberg catalog's database; give it "
       "as ENC(...)."),
    _s("writer.iceberg.namespace", STRING, "Iceberg namespace of the destination table (default: the "
       "flow group)."),
    _s("writer.iceberg.table", STRING, "Iceberg table (default: the dataset URN, '.' and ':' as '_'); "
       "{table} in it is the dataset's table name."),
    _s("writer.iceberg.write.mode", CHOICE, "append, or merge: upsert on extract.primary.key.fields "
       "(the latest row per key by extract.delta.fields wins; older form of writer.write.mode=merge).", default="append",
       choices=("append", "merge")),
    _s("data.publisher.final.dir", STRING, "Where a files destination publishes (set by the portal).",
       required_for=(WRITER_FILES,)),
    _s("data.publisher.dataset.subdir", BOOL, "Publish each dataset in its own sub-folder.", default="true"),
)  # fmt: skip
_BY_KEY = {spec.key: spec for spec in SPECS}
_PATTERNS = [
    (re.compile("^" + re.escape(spec.key).replace("<N>", r"\d+").replace("<name>", r"[^.]+") + r"\Z"), spec)
    for spec in SPECS
    if "<" in spec.key
]


def spec_for(key: str) -> PropertySpec | None:
    """The declared key ``key`` is (a branch suffix ``.N`` of a per-branch key dropped)."""
    spec = _BY_KEY.get(key)
    if spec is None and key.startswith(BRANCH_SCOPED_PREFIXES):
        spec = _BY_KEY.get(base_key(key))
    if spec is None:
        spec = next((spec for pattern, spec in _PATTERNS if pattern.match(key)), None)
    return spec


def parse_value(spec: PropertySpec | None, value: str, named: str) -> object:  # noqa: C901
    """The typed value, or ValueError with the message the pipeline and the save both give.
    ``named`` is how the key is named in the message (``'writer.codec.1' for branch 1 (…)``)."""
    kind = spec.type if spec else STRING
    if kind == INT:
        try:
            whole = int(value)
        except ValueError:
            raise ValueError(f"property {named} must be an integer, got '{value}'") from None
        return _within(spec, whole, named)
    if kind == NUMBER:
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"property {named} must be a number, got '{value}'") from None
        return _within(spec, number, named)
    if kind == BOOL:
        lowered = value.lower()
        if lowered in TRUE_WORDS or lowered in FALSE_WORDS:
            return lowered in TRUE_WORDS
        raise ValueError(f"property {named} must be true or false, got '{value}'")
    if kind == CHOICE and spec is not None:
        folded = {choice.lower(): choice for choice in spec.choices}
        if value.lower() not in folded:
            raise ValueError(f"unknown value '{value}' in {named} (supported: {', '.join(spec.choices)})")
        return folded[value.lower()]
    if kind == MAPPING:
        result: dict[str, str] = {}
        for item in (part.strip() for part in value.split(",")):
            if not item:
                continue
            left, sep, right = item.partition(":")
            if not sep or not left.strip() or not right.strip():
                raise ValueError(f"property {named}: expected 'name:value' pairs, got '{item}'")
            result[left.strip()] = right.strip()
        return result
    return value


def _within(spec: PropertySpec | None, number: float, named: str) -> Any:
    """``number`` when inside the key's declared bounds, else ValueError saying them."""
    if spec is None or (spec.minimum is None and spec.maximum is None):
        return number
    low, high = spec.minimum, spec.maximum
    if (low is not None and number < low) or (high is not None and number > high):
        if high is None:
            raise ValueError(f"property {named} must be at least {low:g}, got {number:g}")
        raise ValueError(f"property {named} must be between {low:g} and {high:g}, got {number:g}")
    return number


def value_problems(properties: Mapping[str, object]) -> list[str]:
    """Values of declared keys the pipeline would refuse (a ``${…}`` left for a later layer is not
    judged)."""
    problems = []
    for key, value in sorted(properties.items(), key=lambda item: str(item[0])):
        spec = spec_for(key) if isinstance(key, str) else None
        if spec is None or not isinstance(value, str) or not value.strip() or "${" in value:
            continue
        try:
            parse_value(spec, value.strip(), f"'{key}'")
        except ValueError as error:
            problems.append(str(error))
    return problems


def missing_message(named: str, spec: PropertySpec | None) -> str:
    """What the pipeline says of a required key that is not set (the save says the same)."""
    unless = f" (unless {spec.unless})" if spec is not None and spec.unless else ""
    return f"missing required property {named}{unless}"


def required_specs(kind: str) -> list[PropertySpec]:
    return [spec for spec in SPECS if kind in spec.required_for]


# How alike a key must be to a known one to be taken for its misspelling (difflib's ratio):
# `source.file.fromat` is 0.92 like `source.files.format`; unrelated custom keys stay far below.
MISSPELT_CUTOFF = 0.85
_PLAIN_KEYS = tuple(sorted({spec.key for spec in SPECS if "<" not in spec.key} | NODE_KEYS))


def is_known_key(key: str) -> bool:
    """A key the pipeline or the portal reads (a declared one, a branch's, a node's)."""
    return (
        spec_for(key) is not None
        or key in NODE_KEYS
        or base_key(key) in NODE_KEYS
        or key.startswith(NODE_PREFIXES)
    )


def closest_known_key(key: str, also_known: Iterable[str] = ()) -> str | None:
    """The known key an unknown ``key`` is most likely a misspelling of, or None (a custom
    key: allowed, and nothing like a known one). ``also_known`` adds the caller's own keys."""
    extra = set(also_known)
    if key in extra or is_known_key(key):
        return None
    candidates = [*_PLAIN_KEYS, *sorted(extra)]
    match = difflib.get_close_matches(base_key(key), candidates, n=1, cutoff=MISSPELT_CUTOFF)
    return match[0] if match else None
