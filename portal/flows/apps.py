from django.apps import AppConfig


class FlowsConfig(AppConfig):
    name = "portal.flows"

    def ready(self) -> None:
        # Connects the flows' template access re-check to template pack changes (packflows.py)
        # and the topology's questions about the flows over a node (compiler/usernodes.py).
        from portal.flows import packflows, rules  # noqa: F401
        from portal.flows.compiler import usernodes  # noqa: F401
        from portal.flows.rewrap import HOLDER
        from portal.keys.rotation import register_wrapped_key_holder

        # Master key rotation re-wraps the flows' wrapped keys (rewrap.py).
        register_wrapped_key_holder(HOLDER)
        rules.register()
