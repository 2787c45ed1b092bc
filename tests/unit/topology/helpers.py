"""Small topology builders for tests: real rows through the real services."""

from __future__ import annotations

from portal.topology import services
from portal.topology.models import DataNode, SpecExecutor


def nodes(*names: str, kind: str = "files") -> list[DataNode]:
    def connection(name: str) -> dict[str, str]:
        if kind == "jdbc":
            return {"url": f"jdbc:postgresql://127.0.0.1:5432/{name}"}
        return {"path": f"var/data/{name}"}

    return [
        services.create_data_node({"name": name, "kind": kind, "properties": connection(name)})
        for name in names
    ]


def executor(name: str, *pairs: str, cost: int = 100, **fields) -> SpecExecutor:
    """`executor("x1", "a>b", "b>c")`: an executor with capabilities a→b and b→c."""
    capabilities = [tuple(pair.split(">")) for pair in pairs]
    return services.create_executor(
        {"name": name, "technology": "spark-local", "spark_master": "local[2]", "cost": cost, **fields},
        capabilities=capabilities,
    )
