from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("monitoring", "0006_subscription_deliveries"),
    ]

    operations = [
        migrations.AddField(
            model_name="metricssnapshot",
            name="slices",
            field=models.JSONField(default=dict),
        ),
    ]
