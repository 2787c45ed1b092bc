"""Commit-step stores are named per flow (`…#<flow id>`, so a re-created flow starts fresh): each
existing store gets the id of the flow whose executions wrote its steps, or
else of the flow that has its group/name now; a store of no known flow keeps
its name (staff see it on the dataset pages)."""

from django.db import migrations


def name_by_flow(apps, schema_editor):
    CommitStore = apps.get_model("orchestration", "CommitStore")
    FlowExecution = apps.get_model("orchestration", "FlowExecution")
    FlowConfig = apps.get_model("flows", "FlowConfig")
    for store in CommitStore.objects.exclude(name__contains="#").iterator():
        parts = store.name.split("/", 2)
        if len(parts) != 3:
            continue
        group, name, _ = parts
        executions = [e for e in store.datasets.values_list("execution_id", flat=True) if e is not None]
        flows = set(
            FlowExecution.objects.filter(pk__in=executions, flow_id__isnull=False).values_list(
                "flow_id", flat=True
            )
        )
        if not flows:
            flows = set(
                FlowConfig.objects.filter(flow_group=group, flow_name=name).values_list("pk", flat=True)
            )
        if len(flows) != 1:
            continue
        renamed = f"{store.name}#{flows.pop()}"
        if not CommitStore.objects.filter(name=renamed).exists():
            store.name = renamed
            store.save(update_fields=["name"])


class Migration(migrations.Migration):
    dependencies = [
        # The merges of parallel branches that stood here were empty; their parents directly.
        ("orchestration", "0005_scale_indexes"),
        ("orchestration", "0007_state_per_flow"),
        ("flows", "0001_initial"),
    ]

    operations = [migrations.RunPython(name_by_flow, migrations.RunPython.noop)]
