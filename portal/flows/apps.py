from django.apps import AppConfig


class FlowsConfig(AppConfig):
    name = "portal.flows"

    def ready(self) -> None:
        # Connects the compiler to flow catalog events (receivers.py).
        from portal.flows import receivers  # noqa: F401
