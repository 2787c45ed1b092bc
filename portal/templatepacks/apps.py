from django.apps import AppConfig


class TemplatepacksConfig(AppConfig):
    name = "portal.templatepacks"
