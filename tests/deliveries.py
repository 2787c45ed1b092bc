"""An execution that delivered a files dataset, as a worker leaves it: a files node, a flow into
it, a COMMITTED job whose spec and TaskStates say what it published, and the published Parquet
files on disk. For the stories of "where did my data go" and of the preview."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from portal.flows.models import FlowConfig
from portal.orchestration.models import ExecutionStatus, FlowExecution, JobExecution, JobStatus
from portal.topology import services, tables
from portal.topology.models import DataNode, DestinationTable
from tests.factories import FlowConfigFactory


@dataclass
class Delivery:
    node: DataNode
    flow: FlowConfig
    execution: FlowExecution
    job: JobExecution
    folder: Path  # where the dataset's files are, absolute

    @property
    def page(self) -> str:
        e = self.execution
        return f"/executions/{e.flow_group}/{e.flow_name}/{e.execution_id}/"

    def preview(self, index: int = 0) -> str:
        return f"{self.page}jobs/{self.job.job_name}/outputs/{index}/"


def files_node(data_dir: Path, name: str = "lake") -> DataNode:
    (data_dir / name).mkdir(parents=True, exist_ok=True)
    return services.create_data_node({"name": name, "kind": "files", "properties": {"path": name}})


def files_delivery(
    data_dir: Path,
    owner: Any,
    *,
    node: DataNode | None = None,
    group: str = "sales",
    name: str = "orders",
    urn: str = "orders",
    execution_id: int = 1_700_000_000_000,
    rows: int = 30,
    files: int = 2,
    columns: dict[str, list[Any]] | None = None,
) -> Delivery:
    """`files` Parquet files of `rows` rows in all under ``<node>/<group>/<name>/<urn>/``
    (the node under `data_dir`, FLOWPORT_DATA_DIR), as one committed job published them."""
    node = node or files_node(data_dir)
    root = data_dir / node.properties["path"]
    flow = FlowConfigFactory(
        owner=owner, flow_group=group, flow_name=name, source="pg-orders", destinations=[node.name]
    )
    final = root / group / name
    folder = final / urn
    folder.mkdir(parents=True, exist_ok=True)
    work = data_dir / "work" / str(execution_id)
    table = pa.table(
        columns
        or {
            "id": list(range(1, rows + 1)),
            "customer": [f"customer {i}" for i in range(1, rows + 1)],
            "note": ["x" * 200] * rows,
        }
    )
    per_file = -(-table.num_rows // files)
    outputs = []
    for index in range(files):
        relative = f"part-{index:05d}.snappy.parquet"
        pq.write_table(table.slice(index * per_file, per_file), folder / relative)
        outputs.append({"path": str(work / relative), "size": (folder / relative).stat().st_size})
    state = {
        "task_id": "t0",
        "dataset_urn": urn,
        "status": "SUCCEEDED",
        "low_watermark": None,
        "actual_high_watermark": "10",
        "branches": [
            {
                "index": 0,
                "name": "fork_0",
                "status": "SUCCEEDED",
                "format": "PARQUET",
                "records_written": table.num_rows,
                "output_dir": str(work),
                "output_files": outputs,
            }
        ],
    }
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group=group,
        flow_name=name,
        execution_id=execution_id,
        trigger=FlowExecution.Trigger.RUN_NOW,
        status=ExecutionStatus.COMMITTED,
    )
    job = JobExecution.objects.create(
        execution=execution,
        job_name=f"{group}.{name}.1-pg-orders-to-{node.name}",
        job_group=group,
        executor="x1",
        queue="executor.x1",
        status=JobStatus.COMMITTED,
        attempt=1,
        processed_count=table.num_rows,
        spec={
            "flow_group": group,
            "flow_name": name,
            "job_name": f"{group}.{name}.1-pg-orders-to-{node.name}",
            "execution_id": execution_id,
            "properties": {
                "flowport.hop.destination": node.name,
                "writer.output.format": "parquet",
                "data.publisher.final.dir": str(final),
            },
        },
        task_states=[state],
    )
    return Delivery(node, flow, execution, job, folder)


def jdbc_delivery(
    node: DataNode,
    owner: Any,
    *,
    group: str = "sales",
    name: str = "orders-db",
    urn: str = "public.orders",
    table: str = "",
    rows: int = 3,
    execution_id: int = 1_700_000_100_000,
) -> Delivery:
    """A committed job that published `rows` rows of `urn` into a table of JDBC `node` (its
    ``writer.jdbc.table`` `table`, else ``{table}``: the source table's name), which the run
    claimed for the flow's owner as it created it (topology.tables)."""
    flow = FlowConfigFactory(
        owner=owner, flow_group=group, flow_name=name, source="pg-orders", destinations=[node.name]
    )
    properties = {"flowport.hop.destination": node.name, "writer.output.format": "jdbc"}
    if table:
        properties["writer.jdbc.table"] = table
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group=group,
        flow_name=name,
        execution_id=execution_id,
        trigger=FlowExecution.Trigger.RUN_NOW,
        status=ExecutionStatus.COMMITTED,
    )
    job_name = f"{group}.{name}.1-pg-orders-to-{node.name}"
    state = {
        "task_id": "t0",
        "dataset_urn": urn,
        "status": "SUCCEEDED",
        "branches": [
            {
                "index": 0,
                "name": "fork_0",
                "status": "SUCCEEDED",
                "format": "JDBC",
                "records_written": rows,
                "staging_table": "flowport_stage_1",
                "output_files": [],
            }
        ],
    }
    job = JobExecution.objects.create(
        execution=execution,
        job_name=job_name,
        job_group=group,
        executor="x1",
        queue="executor.x1",
        status=JobStatus.COMMITTED,
        attempt=1,
        processed_count=rows,
        spec={
            "flow_group": group,
            "flow_name": name,
            "job_name": job_name,
            "execution_id": execution_id,
            "properties": properties,
        },
        task_states=[state],
    )
    named = tables.named_table(
        "jdbc",
        {
            **properties,
            "writer.jdbc.table": table or urn.split(".")[-1],
            "writer.jdbc.url": node.properties.get("url", ""),
        },
        group,
    )
    DestinationTable.objects.get_or_create(
        node=node, name=named, defaults={"owner": owner, "flow": f"{group}/{name}"}
    )
    return Delivery(node, flow, execution, job, Path())


def iceberg_delivery(
    node: DataNode,
    owner: Any,
    *,
    group: str = "sales",
    name: str = "orders-lake",
    urn: str = "orders",
    table: str = "orders",
    rows: int = 30,
    execution_id: int = 1_700_000_200_000,
) -> Delivery:
    """A committed job that published `rows` rows of `urn` into Iceberg table ``<group>.<table>``
    of `node`, claimed for the flow's owner as the run created it."""
    flow = FlowConfigFactory(
        owner=owner, flow_group=group, flow_name=name, source="pg-orders", destinations=[node.name]
    )
    execution = FlowExecution.objects.create(
        flow=flow,
        flow_group=group,
        flow_name=name,
        execution_id=execution_id,
        trigger=FlowExecution.Trigger.RUN_NOW,
        status=ExecutionStatus.COMMITTED,
    )
    job_name = f"{group}.{name}.1-pg-orders-to-{node.name}"
    branch = {
        "index": 0,
        "name": "fork_0",
        "status": "SUCCEEDED",
        "format": "ICEBERG",
        "records_written": rows,
        "output_dir": "/work/out",
        "output_files": [],
    }
    job = JobExecution.objects.create(
        execution=execution,
        job_name=job_name,
        job_group=group,
        executor="x1",
        queue="executor.x1",
        status=JobStatus.COMMITTED,
        attempt=1,
        processed_count=rows,
        spec={
            "flow_group": group,
            "flow_name": name,
            "job_name": job_name,
            "execution_id": execution_id,
            "properties": {
                "flowport.hop.destination": node.name,
                "writer.output.format": "ICEBERG",
                "writer.iceberg.catalog.uri": node.properties["catalog.uri"],
                "writer.iceberg.warehouse": node.properties["warehouse"],
                "writer.iceberg.table": table,
            },
        },
        task_states=[{"task_id": "t0", "dataset_urn": urn, "status": "SUCCEEDED", "branches": [branch]}],
    )
    DestinationTable.objects.get_or_create(
        node=node, name=f"{group}.{table}", defaults={"owner": owner, "flow": f"{group}/{name}"}
    )
    return Delivery(node, flow, execution, job, Path())
