from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"

    def ready(self) -> None:
        # Registers the ldap_error receiver that notices directory outages.
        from portal.accounts import (
            backends,  # noqa: F401
            schema,  # noqa: F401  (OpenAPI auth descriptions)
        )
