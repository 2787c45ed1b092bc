"""Which DataWriter a branch gets: ``writer.builder.class``, else ``writer.output.format``.

``writer.output.format(.N)`` names the kind: ``PARQUET`` (default), ``ORC``, ``JSON`` (JSON lines),
``CSV`` (with header), ``AVRO`` (:mod:`~portal.pipeline.destinations.files`), ``JDBC``
(:mod:`~portal.pipeline.destinations.jdbc`) or ``ICEBERG``
(:mod:`~portal.pipeline.destinations.iceberg`); ``writer.builder.class(.N)`` names a custom
:class:`~portal.pipeline.destinations.base.DataWriter` subclass instead (Gobblin's DataWriterBuilder).
"""

from __future__ import annotations

from portal.pipeline.classloading import load_class
from portal.pipeline.destinations.base import DataWriter, WriterContext
from portal.pipeline.destinations.files import AVRO_FILE_FORMAT, FILE_FORMATS, FileDataWriter, avro_available
from portal.pipeline.destinations.iceberg import IcebergDataWriter
from portal.pipeline.destinations.jdbc import JdbcDataWriter
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

ALL_FORMATS = (*FILE_FORMATS, "JDBC", "ICEBERG")


def build_writer(props: Properties, ctx: WriterContext) -> DataWriter:
    custom = props.get("writer.builder.class")
    if custom:
        cls: type[DataWriter] = load_class(custom, props.describe("writer.builder.class"), DataWriter)
        return cls(props, ctx)
    # The allowed formats, the default and the refusal's message are the property schema's.
    fmt = props.get_choice("writer.output.format") or "PARQUET"
    if fmt == "AVRO" and not avro_available(ctx.spark):
        raise ConfigError(
            f"{props.describe('writer.output.format')}: AVRO is not available: this Spark build has no "
            f"{AVRO_FILE_FORMAT} (older Spark versions keep it in the separate spark-avro package, which "
            f"Flowport does not download at run time); use one of "
            f"{', '.join(f for f in ALL_FORMATS if f != 'AVRO')}"
        )
    if fmt == "JDBC":
        return JdbcDataWriter(props, ctx)
    if fmt == "ICEBERG":
        return IcebergDataWriter(props, ctx)
    return FileDataWriter(props, ctx, fmt)
