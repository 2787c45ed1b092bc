from django.db import migrations

import portal.keys.fields


def seal_stored(apps, schema_editor):
    """Webhook URLs saved before are sealed in place (the field seals what it writes)."""
    Subscription = apps.get_model("monitoring", "Subscription")
    for subscription in Subscription.objects.exclude(webhook_url="").iterator():
        subscription.save(update_fields=["webhook_url"])


def unseal_stored(apps, schema_editor):
    """Back to plain text, written with SQL because the field would seal it again."""
    Subscription = apps.get_model("monitoring", "Subscription")
    table = schema_editor.quote_name(Subscription._meta.db_table)
    with schema_editor.connection.cursor() as cursor:
        for pk, url in Subscription.objects.exclude(webhook_url="").values_list("pk", "webhook_url"):
            cursor.execute(f"UPDATE {table} SET webhook_url = %s WHERE id = %s", [url, pk])  # noqa: S608 - our table


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0007_metrics_snapshot_slices"),
    ]

    operations = [
        migrations.AlterField(
            model_name="subscription",
            name="webhook_url",
            field=portal.keys.fields.SealedCharField(
                blank=True, help_text="A POST per event (http or https).", max_length=500
            ),
        ),
        migrations.RunPython(seal_stored, unseal_stored),
    ]
