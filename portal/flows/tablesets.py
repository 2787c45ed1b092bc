"""Whole schemas at save: the table patterns of a JDBC source (``source.jdbc.tables = public.*``)
matched against what the source node holds now (topology discovery), so the save refuses a pattern
that matches nothing and the compile shows what the patterns match today. The worker matches them
again at every run (portal.pipeline.sources.jdbc_tables): a table created later joins then."""

from __future__ import annotations

from urllib.parse import urlparse

from portal.flows.compiler import JobSpecPlan
from portal.pipeline import landing, usernode
from portal.pipeline.properties import Properties
from portal.pipeline.propertyrules import base_key
from portal.pipeline.sources import jdbc_tables
from portal.topology import connections
from portal.topology.models import DataNode


def _catalog(node: DataNode, names: list[str]) -> list[jdbc_tables.Table]:
    """Discovery's names as tables, the default schema marked as the worker's catalog query does
    (PostgreSQL's ``public``, MySQL's database of the URL, every SQLite table)."""
    url = (node.properties or {}).get("url", "")
    sub = url.split(":")[1].lower() if url.count(":") >= 2 else ""
    database = urlparse(url[len("jdbc:") :]).path.strip("/")
    default = {"postgresql": "public", "mysql": database, "mariadb": database}
    tables = []
    for name in names:
        schema, _, table = name.rpartition(".")
        if sub == "sqlite" or not schema:
            tables.append(jdbc_tables.Table("main", name, True))
        else:
            tables.append(jdbc_tables.Table(schema, table, schema == default.get(sub)))
    return tables


def table_pattern_problems(job: JobSpecPlan) -> list[str]:
    """Problems of the job's table patterns (a pattern matching nothing), after setting
    ``job.datasets`` to what they match now. Nothing when the job reads no pattern, or when the
    portal cannot ask the node (the worker will; its failure then names the cause)."""
    props = Properties(job.properties)
    entries = props.get_list(jdbc_tables.TABLES_KEY)
    if (
        job.parents
        or props.get("flowport.hop.source.kind") != "jdbc"
        or not jdbc_tables.has_patterns(entries)
    ):
        return []
    node = DataNode.objects.filter(name=job.source_node).first()
    if node is None:
        return []
    found = connections.discover(node, user=props.get("source.conn.username") or "")
    if not found.ok:
        job.datasets_note = (
            f"source.jdbc.tables: not matched at save ({found.message[:300]}); the worker matches at run time"
        )
        return []
    tables = _catalog(node, [d.name for d in found.datasets])
    problems = []
    for entry in entries:
        if jdbc_tables.is_pattern(entry) and not jdbc_tables.matching(entry, tables) and not found.truncated:
            problems.append(
                f"source.jdbc.tables: the pattern '{entry}' matches no table of data node '{node.name}' "
                f"({len(tables)} table(s) there; a pattern without a schema matches the default schema's tables)"
            )
    url = str((node.properties or {}).get("url") or "").lower()
    dialect = "postgresql" if url.startswith("jdbc:postgresql:") else ""  # the worker's names (quoted)
    job.datasets = jdbc_tables.resolve(entries, tables, props.get_list(jdbc_tables.EXCLUDE_KEY), dialect)
    return problems


def database_reach_problems(job: JobSpecPlan, nodes: dict[str, DataNode] | None = None) -> list[str]:
    """A MySQL/MariaDB node reaches only its own database (one connection there reads any database
    of the server by qualified names): the job's table names and patterns naming another database
    than the one its node's URL names are refused at save; the worker asks the open connection
    (portal.pipeline.landing). A later hop's source is its parent's output, so only its writer.
    `nodes`: the data nodes by name, when the caller read them for several jobs."""
    roles = [(job.destination_node, landing.WRITER_NAMES)]
    if not job.parents:
        roles.insert(0, (job.source_node, landing.SOURCE_NAMES))
    if nodes is None:  # else the nodes of every job, read at once by the caller
        nodes = DataNode.objects.in_bulk([name for name, _ in roles], field_name="name")
    problems = []
    for name, keys in roles:
        node = nodes.get(name)
        url = str((node.properties or {}).get("url") or "") if node and node.kind == "jdbc" else ""
        names = {k: v for k, v in job.properties.items() if base_key(k) in keys and isinstance(v, str)}
        if node is not None and node.user_made and url.lower().startswith("jdbc:postgresql:"):
            # A user-made node reads no system catalog (portal.pipeline.usernode; the worker again).
            listed = {
                k: [p.strip() for p in v.split(",") if p.strip()] for k, v in names.items() if "${" not in v
            }
            problems += [usernode.catalog_problem(k, n) for k, n in usernode.catalog_names(listed)]
        if not url.lower().startswith(("jdbc:mysql:", "jdbc:mariadb:")):
            continue
        problems += landing.foreign_problems(landing.url_database(url), f"data node '{name}'", names)
    return problems
