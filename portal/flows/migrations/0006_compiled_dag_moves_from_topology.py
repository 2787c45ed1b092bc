"""CompiledJobDag and CompiledHop move from topology into flows (a flow's
compiled result is the flow catalog's): the tables keep their names and rows,
only Django's idea of their owner moves."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        # The merges of parallel branches that stood here were empty; their parents directly.
        ("flows", "0002_flow_group_owners"),
        ("flows", "0003_flow_pause"),
        ("flows", "0003_scale_refresh"),
        ("topology", "0002_data_node_grants"),
        ("topology", "0002_scale_refresh"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="CompiledJobDag",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("status", models.CharField(max_length=16)),
                        ("dag", models.JSONField(default=dict)),
                        ("topology_token", models.UUIDField(blank=True, null=True)),
                        ("revision", models.BigIntegerField(default=0)),
                        ("compiled_at", models.DateTimeField(auto_now=True)),
                        (
                            "flow",
                            models.OneToOneField(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="compiled_dag",
                                to="flows.flowconfig",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "topology_compiledjobdag",
                    },
                ),
                migrations.CreateModel(
                    name="CompiledHop",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("source", models.CharField(max_length=128)),
                        ("destination", models.CharField(max_length=128)),
                        ("executor", models.CharField(max_length=128)),
                        (
                            "flow",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="compiled_hops",
                                to="flows.flowconfig",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "topology_compiledhop",
                        "indexes": [
                            models.Index(fields=["source", "destination"], name="compiledhop_edge"),
                            models.Index(fields=["executor"], name="compiledhop_executor"),
                            models.Index(fields=["destination"], name="compiledhop_destination"),
                        ],
                    },
                ),
            ],
        ),
    ]
