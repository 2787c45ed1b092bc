from django.apps import AppConfig


class TemplatepacksConfig(AppConfig):
    name = "portal.templatepacks"

    def ready(self) -> None:
        # Models are ready only now; the access rule of template packs.
        from portal.templatepacks import rules

        rules.register()
