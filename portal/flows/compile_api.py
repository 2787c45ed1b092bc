"""Compile endpoints of the flow catalog (dry-run compile, compiled job DAG)."""

urlpatterns: list = []
