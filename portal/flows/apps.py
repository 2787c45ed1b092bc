from django.apps import AppConfig


class FlowsConfig(AppConfig):
    name = "portal.flows"
