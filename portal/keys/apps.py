from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "portal.keys"

    def ready(self) -> None:
        # The master key system checks (a flow's secrets are checked by flows.services.validate_flow).
        from portal.keys import checks  # noqa: F401
