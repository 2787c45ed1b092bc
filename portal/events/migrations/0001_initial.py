"""Event moves from monitoring into the events app: the table
(monitoring_event) stays where it is, only Django's idea of its owner moves."""

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("monitoring", "0003_scale_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name="Event",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                help_text="e.g. sla.flow_finish_missed, executor.unhealthy", max_length=64
                            ),
                        ),
                        (
                            "severity",
                            models.CharField(
                                choices=[("INFO", "Info"), ("WARNING", "Warning"), ("ERROR", "Error")],
                                default="WARNING",
                                max_length=8,
                            ),
                        ),
                        ("flow_group", models.CharField(blank=True, max_length=128)),
                        ("flow_name", models.CharField(blank=True, max_length=128)),
                        ("execution_id", models.BigIntegerField(blank=True, null=True)),
                        ("job_name", models.CharField(blank=True, max_length=300)),
                        (
                            "subject",
                            models.CharField(
                                blank=True, help_text="An executor or dataset name.", max_length=200
                            ),
                        ),
                        ("message", models.TextField()),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("dedupe_key", models.CharField(blank=True, max_length=400)),
                        ("delivered_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "delivered_to",
                            models.JSONField(blank=True, default=list, help_text="Sinks that accepted it."),
                        ),
                        ("delivery_attempts", models.PositiveSmallIntegerField(default=0)),
                        ("delivery_lease_until", models.DateTimeField(blank=True, null=True)),
                        ("delivery_error", models.TextField(blank=True)),
                    ],
                    options={
                        "db_table": "monitoring_event",
                        "ordering": ["-created", "-id"],
                        "indexes": [
                            models.Index(fields=["kind", "created"], name="monitoring__kind_5ce2cb_idx"),
                            models.Index(fields=["created"], name="event_created"),
                            models.Index(
                                fields=["delivered_at", "created"], name="monitoring__deliver_6ead07_idx"
                            ),
                        ],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("dedupe_key", ""), _negated=True),
                                fields=("dedupe_key",),
                                name="event_dedupe_key_once",
                            )
                        ],
                    },
                ),
            ],
        ),
    ]
