"""A cluster's executors connect back to the driver inside the Celery worker: at the address
the operator gave in SPARK_LOCAL_IP, not at the name Spark makes of it (often `localhost`,
which no other host reaches). A local session stays on loopback; no SPARK_LOCAL_IP, Spark's own."""

from __future__ import annotations

import pytest

from portal.pipeline.spark import session


@pytest.mark.parametrize(
    ("master", "local_ip", "expected"),
    [
        ("spark://10.0.0.2:7077", "10.0.0.7", {"spark.driver.host": "10.0.0.7"}),
        ("yarn", " 10.0.0.7 ", {"spark.driver.host": "10.0.0.7"}),
        ("spark://10.0.0.2:7077", "", {}),  # Spark's own choice
        ("local[*]", "10.0.0.7", {}),  # a local driver stays on loopback (get_or_create_spark)
        ("", "10.0.0.7", {}),  # under spark-submit: its configuration decides
    ],
)
def test_the_driver_advertises_spark_local_ip_to_a_cluster(monkeypatch, master, local_ip, expected):
    monkeypatch.setenv("SPARK_LOCAL_IP", local_ip)
    assert session.driver_host_settings(master) == expected
