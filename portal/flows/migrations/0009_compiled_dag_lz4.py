"""Compiled DAGs (a few KB of JSON each, rewritten for every affected flow on
a topology change) are compressed with lz4 instead of pglz on PostgreSQL:
the background recompile's UPDATE costs about half as much in the database.
A server built without lz4, or older than PostgreSQL 14, keeps pglz."""

from django.db import migrations

LZ4 = """
DO $$
BEGIN
    ALTER TABLE topology_compiledjobdag ALTER COLUMN dag SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported OR syntax_error THEN
    NULL;
END $$;
"""
PGLZ = "ALTER TABLE topology_compiledjobdag ALTER COLUMN dag SET COMPRESSION pglz"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(LZ4)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql" and schema_editor.connection.pg_version >= 140000:
        schema_editor.execute(PGLZ)


class Migration(migrations.Migration):
    dependencies = [("flows", "0008_compile_verdict_on_the_flow_only")]

    operations = [migrations.RunPython(forwards, backwards, elidable=True)]
