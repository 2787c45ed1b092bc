"""A failure message as someone who is not staff reads it: the exception and where it happened,
relative to the data node or work area it happened in, without the server's layout or the frames
of a traceback (portal.orchestration.redaction)."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from portal.orchestration.redaction import (
    FRAMES_HIDDEN,
    HIDDEN_PATH,
    TRACEBACK_HIDDEN,
    Places,
    for_viewer,
    portal_places,
    redact,
    redact_lines,
)
from portal.topology.models import DataNode
from tests.factories import UserFactory

PLACES = Places((("/srv/lake", "lake"), ("/var/lib/flowport/work", "work")))


def a_real_traceback() -> str:
    try:
        Path("/srv/lake/sales/orders/missing.csv").read_text()
    except FileNotFoundError as error:
        return "".join(traceback.format_exception(error))
    raise AssertionError("the file exists")


def test_a_python_traceback_keeps_only_its_exception_line():
    text = redact(a_real_traceback(), PLACES)
    assert text.splitlines() == [
        TRACEBACK_HIDDEN,
        "FileNotFoundError: [Errno 2] No such file or directory: 'lake:sales/orders/missing.csv'",
    ]


def test_chained_tracebacks_keep_each_exception_and_the_words_between_them():
    try:
        try:
            raise KeyError("orders")
        except KeyError as inner:
            raise ValueError("no table orders in /var/lib/flowport/work/sales/orders/task-0") from inner
    except ValueError as error:
        text = redact("".join(traceback.format_exception(error)), PLACES)
    assert text.splitlines() == [
        TRACEBACK_HIDDEN,
        "KeyError: 'orders'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        TRACEBACK_HIDDEN,
        "ValueError: no table orders in work:sales/orders/task-0",
    ]


def test_a_log_tail_cut_inside_a_traceback_loses_its_frames_too():
    tail = a_real_traceback().split("\n", 1)[1]  # the tail began after the header line
    assert tail.startswith("  File ")
    assert redact(tail, PLACES).splitlines()[0] == TRACEBACK_HIDDEN
    assert 'File "' not in redact(tail, PLACES)


def test_java_stack_frames_fold_into_one_line_and_causes_stay():
    text = (
        "org.apache.spark.SparkException: Job aborted\n"
        "\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2898)\n"
        "\tat scala.collection.immutable.List.foreach(List.scala:333)\n"
        "Caused by: java.io.FileNotFoundException: File file:/srv/lake/sales/orders/a.parquet does not exist\n"
        "\tat org.apache.hadoop.fs.RawLocalFileSystem.deprecatedGetFileStatus(RawLocalFileSystem.java:915)\n"
        "\t... 42 more\n"
    )
    assert redact(text, PLACES).splitlines() == [
        "org.apache.spark.SparkException: Job aborted",
        FRAMES_HIDDEN,
        "Caused by: java.io.FileNotFoundException: File lake:sales/orders/a.parquet does not exist",
        FRAMES_HIDDEN,
    ]


@pytest.mark.parametrize(
    ("written", "shown"),
    [
        ("/srv/lake/sales/orders/x.csv", "lake:sales/orders/x.csv"),
        ("file:/srv/lake/sales/orders/x.csv", "lake:sales/orders/x.csv"),
        ("file:///srv/lake/sales/orders/x.csv", "lake:sales/orders/x.csv"),
        ("'/srv/lake'", "'lake:'"),
        ("/srv/lakehouse/secret.csv", HIDDEN_PATH),  # another folder beside the node's root
        ("/opt/flowport/portal/pipeline/task.py", HIDDEN_PATH),
        ("jdbc:sqlite:/var/lib/flowport/flowport.sqlite3", f"jdbc:sqlite:{HIDDEN_PATH}"),
        ("(/etc/passwd)", f"({HIDDEN_PATH})"),
        ("path=/srv/lake/dt=2026-03-01/p.parquet", "path=lake:dt=2026-03-01/p.parquet"),
    ],
)
def test_an_absolute_path_reads_relative_to_its_node_or_not_at_all(written: str, shown: str):
    assert redact(f"failed on {written} today", PLACES) == f"failed on {shown} today"


@pytest.mark.parametrize(
    "kept",
    [
        "jdbc:postgresql://db.example.org:5432/sales?ssl=true",
        "see https://flowport.example.org/executions/sales/orders/1/",
        "hdfs://namenode:8020/lake/sales",
        "3 of 4 tasks, 1/2 branches, and/or a retry",
        "s3a://bucket/lake/x.parquet",
    ],
)
def test_urls_and_ordinary_words_are_kept(kept: str):
    assert redact(kept, PLACES) == kept


def test_a_root_behind_a_symlink_is_recognised_by_either_name(tmp_path: Path):
    real = tmp_path / "disk" / "lake"
    real.mkdir(parents=True)
    (tmp_path / "lake").symlink_to(real)
    places = Places(((str(tmp_path / "lake"), "lake"),))
    assert redact(f"no {real}/sales/orders/x.csv", places) == "no lake:sales/orders/x.csv"
    assert redact(f"no {tmp_path}/lake/sales/orders/x.csv", places) == "no lake:sales/orders/x.csv"


def test_lines_keep_their_ends_so_a_log_streams_through():
    lines = ["2026-03-01T12:00:00Z INFO read /srv/lake/a.csv\r\n", "done\n", "no end"]
    assert list(redact_lines(lines, PLACES)) == [
        "2026-03-01T12:00:00Z INFO read lake:a.csv\r\n",
        "done\n",
        "no end",
    ]


def test_the_places_are_the_nodes_roots_and_the_work_and_log_folders(db, settings, tmp_path: Path):
    settings.FLOWPORT_WORK_DIR = "/var/lib/flowport/work"
    settings.FLOWPORT_LOG_DIR = "/var/log/flowport"
    settings.FLOWPORT_DATA_DIR = tmp_path
    DataNode.objects.create(name="landing", kind="files", properties={"path": "landing"})
    DataNode.objects.create(name="tables", kind="iceberg", properties={"warehouse": "/srv/warehouse"})
    DataNode.objects.create(name="pg", kind="jdbc", properties={"url": "jdbc:postgresql://db/x"})
    places = portal_places()
    text = redact(
        f"{tmp_path}/landing/a.csv /srv/warehouse/t/data /var/lib/flowport/work/sales/orders/t0 "
        "/var/log/flowport/jobs/1/j.1.log",
        places,
    )
    assert text == "landing:a.csv tables:t/data work:sales/orders/t0 logs:jobs/1/j.1.log"


def test_staff_read_every_text_as_written_and_everyone_else_redacted(db):
    text = a_real_traceback()
    assert for_viewer(UserFactory(is_staff=True))(text) == text
    assert for_viewer(UserFactory())(text).startswith(TRACEBACK_HIDDEN)
    assert for_viewer(None)(text).startswith(TRACEBACK_HIDDEN)


def test_a_reader_reads_the_places_once_per_request(db, django_assert_num_queries):
    reader = UserFactory()
    with django_assert_num_queries(1):
        for_viewer(reader)("/srv/lake/a")
        for_viewer(reader)("/srv/lake/b")
