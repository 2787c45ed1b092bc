from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "portal.keys"

    def ready(self) -> None:
        # The master key system checks, and the customer keys' access rule.
        from portal.keys import checks, rules  # noqa: F401

        rules.register()
