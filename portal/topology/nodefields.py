"""The connection fields of each data node kind, for the node form: which
node property each field is, and which pipeline keys of the property schema
(`portal.pipeline.schema`, all node-owned) the compiler binds from it, so the
form's help says where a value ends up. A key the schema calls a secret
(`schema.names_secret`) is a password field whose value must be ENC(...)."""

from __future__ import annotations

from dataclasses import dataclass

from portal.pipeline import schema


@dataclass(frozen=True)
class NodeField:
    key: str  # the node property
    label: str
    help: str
    binds: tuple[str, ...] = ()  # pipeline keys set from it (orchestration/jobspecs.py)
    required: bool = False
    placeholder: str = ""

    @property
    def secret(self) -> bool:
        return schema.names_secret(self.key)

    @property
    def help_text(self) -> str:
        parts = [self.help]
        if self.binds:
            parts.append("Sets " + ", ".join(self.binds) + ".")
        if self.secret:
            parts.append("A secret: only as ENC(...) (encrypt it under Keys).")
        return " ".join(parts)


FIELDS: dict[str, tuple[NodeField, ...]] = {
    "files": (
        NodeField(
            "path",
            "Root folder",
            "A local path (relative ones are under FLOWPORT_DATA_DIR), hdfs://… or s3a://…; "
            "a flow publishes under <root>/<flowGroup>/<flowName>/.",
            binds=("source.files.path", "data.publisher.final.dir"),
            required=True,
            placeholder="var/data/lake",
        ),
    ),
    "jdbc": (
        NodeField(
            "url",
            "JDBC URL",
            "Where the database is.",
            binds=("source.jdbc.url", "writer.jdbc.url"),
            required=True,
            placeholder="jdbc:postgresql://db.example.org:5432/sales",
        ),
        NodeField(
            "driver",
            "JDBC driver class",
            "Empty: the PostgreSQL driver.",
            binds=("source.jdbc.driver", "writer.jdbc.driver"),
            placeholder="org.postgresql.Driver",
        ),
    ),
    "iceberg": (
        NodeField(
            "catalog.uri",
            "SQL catalog URL",
            "The Iceberg catalog's database as a SQLAlchemy URL, without a password: sqlite:///catalog.db "
            "(a relative path is under FLOWPORT_DATA_DIR) or postgresql+psycopg://user@host:5432/catalog; "
            "a flow gives the password as writer.iceberg.catalog.password.",
            binds=("writer.iceberg.catalog.uri",),
            required=True,
            placeholder="sqlite:///lake/catalog.db",
        ),
        NodeField(
            "warehouse",
            "Warehouse folder",
            "Where the tables' data and metadata files go (a relative path is under FLOWPORT_DATA_DIR).",
            binds=("writer.iceberg.warehouse",),
            required=True,
            placeholder="lake/warehouse",
        ),
    ),
    "hive": (
        NodeField(
            "metastore.uris",
            "Metastore URIs",
            "The Hive metastore (thrift://host:9083).",
            placeholder="thrift://metastore:9083",
        ),
    ),
    "kafka": (
        NodeField(
            "bootstrap.servers",
            "Bootstrap servers",
            "host:port[,host:port].",
            required=True,
            placeholder="kafka1:9092,kafka2:9092",
        ),
        NodeField("sasl.username", "SASL username", "Empty without SASL."),
        NodeField("sasl.password", "SASL password", "Empty without SASL."),
    ),
    "other": (),
}


def fields_of(kind: str) -> tuple[NodeField, ...]:
    return FIELDS.get(kind, ())


def node_owned(field: NodeField) -> bool:
    """Every pipeline key a node field binds belongs to the portal, never to a flow."""
    return all(schema.owner_of(key) == schema.NODE for key in field.binds)
