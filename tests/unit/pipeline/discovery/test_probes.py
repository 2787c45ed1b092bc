"""Each node kind the pipeline knows has its probe, found by the kind's name, and a probe answers
without Django: the portal only says what a question carries (`shapes.Asking`)."""

from __future__ import annotations

import sqlite3

from portal.pipeline.discovery import probes
from portal.pipeline.discovery.shapes import Asking
from portal.pipeline.nodekinds import KINDS


def test_every_kind_has_a_probe_and_nothing_else_does():
    assert set(probes.PROBES) == set(KINDS)
    assert probes.probe_for("kafka") is None


def test_a_probe_answers_a_question_with_no_portal_behind_it(tmp_path):
    (tmp_path / "lake" / "orders").mkdir(parents=True)
    (tmp_path / "lake" / "orders" / "a.csv").write_text("id,at\n1,2026-01-01 10:00:00\n")
    files = probes.probe_for("files")
    asking = Asking(name="lake", properties={"path": "lake"}, timeout=5, data_dir=str(tmp_path))

    assert files is not None and files.test(asking).ok  # a relative root is under the data dir
    found = files.discover(asking)
    assert [(d.name, [(c.name, c.type) for c in d.columns]) for d in found.datasets] == [
        ("orders/a.csv", [("id", "bigint"), ("at", "timestamp")])
    ]

    with sqlite3.connect(tmp_path / "shop.db") as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, changed TIMESTAMP)")
    jdbc = probes.probe_for("jdbc")
    shop = Asking(name="shop", properties={"url": f"jdbc:sqlite:{tmp_path}/shop.db"}, timeout=5, data_dir="/")
    assert jdbc is not None and jdbc.test(shop).message == "Connected; 1 schema(s)."
    items = jdbc.discover(shop).datasets[0]
    assert items.primary_key == ["id"] and items.watermark_candidate_names == ["id", "changed"]
    nowhere = Asking(name="x", properties={"url": "jdbc:db2://h/x"}, timeout=5, data_dir="/")
    assert "cannot test jdbc:db2 URLs" in jdbc.test(nowhere).message
