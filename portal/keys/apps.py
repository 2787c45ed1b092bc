from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "portal.keys"
