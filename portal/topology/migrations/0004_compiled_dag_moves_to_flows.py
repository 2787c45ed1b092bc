"""CompiledJobDag and CompiledHop now belong to flows (flows 0006); the
tables and their rows stay."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        # The merges of parallel branches that stood here were empty; their parents directly.
        ("topology", "0002_data_node_grants"),
        ("topology", "0002_scale_refresh"),
        ("flows", "0006_compiled_dag_moves_from_topology"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name="CompiledHop"),
                migrations.DeleteModel(name="CompiledJobDag"),
            ],
        ),
    ]
