from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "portal.accounts"

    def ready(self) -> None:
        # Registers the ldap_error receiver that notices directory outages, and
        # the API tokens' access rule (models are ready only now).
        from portal.accounts import (
            backends,  # noqa: F401
            openapi,  # noqa: F401  (OpenAPI auth descriptions)
            rules,
        )

        rules.register()
