"""Converters: DataFrame -> DataFrame transforms named in ``converter.classes`` (``.N`` per branch).

A converter is constructed with the scoped :class:`~portal.pipeline.properties.Properties` of the
stream it runs in (pre-fork or one branch) and a :class:`ConverterContext`, and transforms a lazy
DataFrame with native Spark expressions — never per-row Python where an expression exists, so a
converter costs nothing but the expression in the single pass the writer makes.

Built-ins (configuration keys are read in the converter's scope, so ``.N`` per branch):

=====================================  =========================================================
``RenameFieldsConverter``              ``converter.rename.fields = old:new,old2:new2``
``DropFieldsConverter``                ``converter.drop.fields = a,b``
``CastFieldsConverter``                ``converter.cast.fields = amount:decimal(12,2),ts:timestamp``
``AddIngestionTimeConverter``          ``converter.ingestion.time.field`` (default ``ingestion_time``):
                                       the task's start time, identical in every branch
``JsonFlattenConverter``               nested structs become top-level ``parent<sep>child`` columns;
                                       ``converter.flatten.separator`` (default ``_``);
                                       ``converter.flatten.json.fields`` lists string columns holding
                                       JSON to parse first (schema from ``converter.flatten.json.schema.<field>``
                                       as DDL, or inferred from the data)
``PurgeFieldsConverter``               ``converter.purge.fields = ssn,email``: values set to null,
                                       columns kept (the schema stays stable for consumers)
=====================================  =========================================================

Unknown fields named in a converter's configuration fail the task with the converter, key and field.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from portal.pipeline.classloading import load_class
from portal.pipeline.errors import ConfigError
from portal.pipeline.properties import Properties

PREFIX = "portal.pipeline.converters."


@dataclass(frozen=True)
class ConverterContext:
    """Per-task facts converters may use; the same for every branch of a task."""

    task_id: str
    dataset_urn: str
    ingestion_time: dt.datetime


class Converter(ABC):
    """Base class; override :meth:`convert`."""

    def __init__(self, props: Properties, context: ConverterContext) -> None:
        self.props = props
        self.context = context

    @property
    def name(self) -> str:
        return type(self).__name__

    @abstractmethod
    def convert(self, df: DataFrame) -> DataFrame:
        """The converted stream."""

    def _check_fields(self, df: DataFrame, names: list[str], key: str) -> None:
        missing = [n for n in names if n not in df.columns]
        if missing:
            raise ConfigError(
                f"{self.name}: field(s) {', '.join(missing)} named in {self.props.describe(key)} "
                f"do not exist (fields: {', '.join(df.columns)})"
            )


class RenameFieldsConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        mapping = self.props.get_mapping("converter.rename.fields")
        self._check_fields(df, list(mapping), "converter.rename.fields")
        return df.withColumnsRenamed(mapping)


class DropFieldsConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        names = self.props.get_list("converter.drop.fields")
        self._check_fields(df, names, "converter.drop.fields")
        return df.drop(*names)


class CastFieldsConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        mapping = self.props.get_mapping("converter.cast.fields")
        self._check_fields(df, list(mapping), "converter.cast.fields")
        casts: dict[str, Column] = {}
        for name, type_name in mapping.items():
            try:
                target = T._parse_datatype_string(type_name)
            except Exception:
                raise ConfigError(f"{self.name}: unknown type '{type_name}' for field '{name}'") from None
            casts[name] = F.col(name).cast(target)
        return df.withColumns(casts)


class AddIngestionTimeConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        field = self.props.get("converter.ingestion.time.field", "ingestion_time") or "ingestion_time"
        return df.withColumn(field, F.lit(self.context.ingestion_time).cast("timestamp"))


class JsonFlattenConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        sep = self.props.get("converter.flatten.separator", "_") or "_"
        json_fields = self.props.get_list("converter.flatten.json.fields")
        self._check_fields(df, json_fields, "converter.flatten.json.fields")
        for name in json_fields:
            ddl = self.props.get(f"converter.flatten.json.schema.{name}")
            if ddl:
                # Parsed here so a bad DDL fails now; from_json takes a DataType as its JSON anyway.
                schema: str | Column = T._parse_datatype_string(ddl).json()
            else:
                sample = df.select(name).where(F.col(name).isNotNull()).first()
                if sample is None:
                    continue
                schema = F.schema_of_json(F.lit(sample[0]))
            df = df.withColumn(name, F.from_json(F.col(name), schema))
        while any(isinstance(f.dataType, T.StructType) for f in df.schema.fields):
            columns: list[Column] = []
            for f in df.schema.fields:
                if isinstance(f.dataType, T.StructType):
                    for child in f.dataType.fields:
                        columns.append(
                            F.col(f"`{f.name}`.`{child.name}`").alias(f"{f.name}{sep}{child.name}")
                        )
                else:
                    columns.append(F.col(f"`{f.name}`"))
            df = df.select(*columns)
        return df


class PurgeFieldsConverter(Converter):
    def convert(self, df: DataFrame) -> DataFrame:
        names = self.props.get_list("converter.purge.fields")
        self._check_fields(df, names, "converter.purge.fields")
        types = dict(df.dtypes)
        return df.withColumns({n: F.lit(None).cast(types[n]) for n in names})


def build_converters(props: Properties, context: ConverterContext) -> list[Converter]:
    """Instantiate ``converter.classes`` of the scope (bare short names resolve to the built-ins)."""
    result = []
    for path in props.get_list("converter.classes"):
        full = path if "." in path else PREFIX + path
        cls = load_class(full, props.describe("converter.classes"), Converter)
        result.append(cls(props, context))
    return result


def apply_converters(df: DataFrame, converters: list[Converter]) -> DataFrame:
    for converter in converters:
        df = converter.convert(df)
    return df
