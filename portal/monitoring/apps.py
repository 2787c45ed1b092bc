from django.apps import AppConfig
from django.conf import settings


class MonitoringConfig(AppConfig):
    name = "portal.monitoring"

    def ready(self) -> None:
        # Imported here, not at module level: models are ready only now.
        from portal.keys.fields import holder_of
        from portal.keys.rotation import register_wrapped_key_holder
        from portal.monitoring.history_counts import refresh_history_snapshot
        from portal.monitoring.models import Subscription
        from portal.monitoring.monitors import run_monitors
        from portal.monitoring.subscriptions import listen
        from portal.orchestration.control.loop import Duty, register_duty

        # Every scheduler runs the monitors with its sweeps, and keeps the history metrics fresh.
        register_duty(Duty("monitors", run_monitors, lambda: settings.WORKER_HEARTBEAT_SECONDS))
        register_duty(
            Duty("history metrics", refresh_history_snapshot, lambda: settings.METRICS_HISTORY_SECONDS)
        )
        # Users' flow subscriptions are served by the event sinks' one sender.
        listen()
        # Master key rotation re-wraps the data keys of the sealed webhook URLs.
        register_wrapped_key_holder(holder_of(Subscription, "webhook_url"))
