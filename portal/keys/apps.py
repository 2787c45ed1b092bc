from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "portal.keys"

    def ready(self) -> None:
        # The master key system checks.
        from portal.keys import checks  # noqa: F401
