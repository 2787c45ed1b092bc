"""What a job's commit published, read back from its spec and TaskStates: the folder of a files
dataset with its files (not the bad records' beside them), a JDBC table, an Iceberg table; only
the committed tasks' succeeded branches, and nothing from a task state that names a folder
outside the branch's publish root."""

from __future__ import annotations

from portal.pipeline.destinations.published import FILES, ICEBERG, JDBC, published


def spec(**properties: str) -> dict:
    return {
        "job_name": "j",
        "execution_id": 7,
        "flow_group": "sales",
        "flow_name": "orders",
        "properties": properties,
    }


def branch(index: int = 0, **fields) -> dict:
    return {
        "index": index,
        "name": f"fork_{index}",
        "status": "SUCCEEDED",
        "format": "PARQUET",
        "records_written": 10,
        "output_files": [],
        **fields,
    }


def task(urn: str, *branches: dict, status: str = "SUCCEEDED", task_id: str = "t0") -> dict:
    return {"task_id": task_id, "dataset_urn": urn, "status": status, "branches": list(branches)}


def test_a_files_dataset_is_its_folder_with_its_files_and_records():
    out = "/work/j/7/t0"
    files = [
        {"path": f"{out}/part-0.parquet"},
        {"path": f"{out}/day=1/part-1.parquet"},
        {"path": f"{out}/_errors/7-t0.jsonl"},
    ]
    found = published(
        spec(**{"data.publisher.final.dir": "/lake/sales/orders"}),
        [
            task("orders", branch(output_dir=out, output_files=files)),
            task("orders", branch(output_dir=out, output_files=[], records_written=5), task_id="t1"),
        ],
    )

    assert [(p.kind, p.location, p.root, p.records) for p in found] == [
        (FILES, "/lake/sales/orders/orders", "/lake/sales/orders", 15)
    ]
    assert found[0].files == ["part-0.parquet", "day=1/part-1.parquet"]  # not the bad records' file


def test_without_the_dataset_subfolder_the_folder_is_the_publish_dir():
    found = published(
        spec(**{"data.publisher.final.dir": "/lake/x", "data.publisher.dataset.subdir": "false"}),
        [task("orders", branch(output_dir="/w"))],
    )
    assert found[0].location == "/lake/x"


def test_a_task_state_pointing_outside_the_publish_root_yields_nothing():
    found = published(
        spec(**{"data.publisher.final.dir": "/lake/sales/orders"}),
        [
            task("orders", branch(output_dir="/w", final_dir="/etc")),
            task("../../etc", branch(output_dir="/w"), task_id="t1"),
        ],
    )
    assert found == []


def test_jdbc_and_iceberg_destinations_are_their_tables():
    jdbc = published(
        spec(**{"writer.jdbc.url": "jdbc:postgresql://db/shop", "writer.jdbc.table": "copy_{table}"}),
        [task("public.orders", branch(format="JDBC", staging_table="stage_1", records_written=4))],
    )
    assert [(p.kind, p.location, p.records, p.files) for p in jdbc] == [(JDBC, "copy_orders", 4, [])]

    lake = published(
        spec(**{"writer.iceberg.catalog.uri": "sqlite:////c.db", "writer.iceberg.warehouse": "/wh"}),
        [task("public.orders", branch(format="ICEBERG", output_dir="/w"))],
    )
    assert [(p.kind, p.location) for p in lake] == [(ICEBERG, "sales.public_orders")]


def test_under_a_full_commit_policy_a_failed_task_publishes_nothing():
    states = [
        task("a", branch(output_dir="/w")),
        task("b", branch(output_dir="/w"), status="FAILED", task_id="t1"),
    ]
    assert published(spec(**{"data.publisher.final.dir": "/lake"}), states) == []
    partial = published(spec(**{"data.publisher.final.dir": "/lake", "job.commit.policy": "partial"}), states)
    assert [p.dataset_urn for p in partial] == ["a"]


def test_a_fork_names_each_branch():
    found = published(
        spec(
            **{
                "data.publisher.final.dir.0": "/lake/a",
                "data.publisher.final.dir.1": "/lake/b",
                "fork.branches": "2",
            }
        ),
        [task("orders", branch(0, output_dir="/w"), branch(1, output_dir="/w", format="CSV"))],
    )
    assert [(p.branch, p.location, p.format) for p in found] == [
        (0, "/lake/a/orders", "PARQUET"),
        (1, "/lake/b/orders", "CSV"),
    ]


def test_a_job_that_never_ran_published_nothing():
    assert published({}, []) == []
    assert published(spec(), [{"task_id": "t0"}]) == []
