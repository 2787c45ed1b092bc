from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "portal.keys"

    def ready(self) -> None:
        # The master key system checks, and the flow-save listener.
        from portal.keys import checks, receivers  # noqa: F401
