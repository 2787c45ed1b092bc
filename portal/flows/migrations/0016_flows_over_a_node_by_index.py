"""The flows over a data node found by index reads (flows.compiler.usernodes.flows_over), not by
reading the catalog: a btree index on the source, and on PostgreSQL a GIN index on the
destination lists for their containment test (SQLite, the embedded portal, reads the lists).
Measured in tests/bench/bench_scale.py: an executor's change (it serves user-made kinds) spent
15 of its 21 ms reading 100,000 flows."""

from django.db import migrations, models


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(
            "CREATE INDEX IF NOT EXISTS flow_destinations ON flows_flowconfig USING gin (destinations)"
        )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP INDEX IF EXISTS flow_destinations")


class Migration(migrations.Migration):
    dependencies = [("flows", "0015_flowconfig_room_for_hot_updates")]

    operations = [
        migrations.AddIndex(
            model_name="flowconfig", index=models.Index(fields=["source"], name="flow_source")
        ),
        migrations.RunPython(create, drop, elidable=False),
    ]
