"""Column rules on real data: a CSV read by the real file source on Spark, one column dropped, one
hashed, one encrypted under a customer key; the published Parquet read back and decrypted as the
key's owner would, with the documented command."""

from __future__ import annotations

import hashlib
import hmac
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from portal.crypto import client
from portal.pipeline import run_job
from portal.pipeline.columnrules import rule_problems
from portal.pipeline.columns import ColumnDecryptError, decrypt_value
from portal.pipeline.jobcheck import job_property_problems
from portal.pipeline.jobspec import JobSpec

from .helpers import NOW, publish, read, spec, write_csv

WRAPPED = "stands-for-the-wrapped-key"  # the save's check only asks whether the flow has one


def _props(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.path": str(tmp_path / "landing"),
        "source.files.format": "csv",
        "data.publisher.final.dir": str(tmp_path / "lake"),
        "columns.drop": "note",
        "columns.hash": "email",
        "columns.encrypt": "ssn,amount",
        "encrypt.wrapped.key": WRAPPED,
        **extra,
    }


def test_drop_hash_and_encrypt_in_the_one_pass_and_the_owner_decrypts_back(
    spark: SparkSession, tmp_path: Path
) -> None:
    write_csv(
        tmp_path / "landing" / "people" / "p.csv",
        "id,email,ssn,amount,note",
        ["1,ann@example.org,123-45-6789,10.5,hello", "2,bob@example.org,,20,bye"],
        mtime=NOW - 60,
    )
    key = client.generate_key()
    job = JobSpec.from_dict(spec(tmp_path, _props(tmp_path)))
    job = replace(job, column_key=key)

    states = run_job(spark, job)

    assert states[0]["status"] == "SUCCEEDED", states[0]["error"]
    publish(job.to_dict(), states, {})
    rows = sorted(read(spark, tmp_path / "lake" / "people").collect(), key=lambda r: r.id)
    assert rows[0].__fields__ == ["id", "email", "ssn", "amount"]  # note dropped
    salt = hmac.new(key, b"flowport/column-hash-salt/v1", hashlib.sha256).hexdigest()
    assert rows[0].email == hashlib.sha256((salt + "ann@example.org").encode()).hexdigest()
    assert rows[1].ssn is None  # NULL stays NULL
    assert decrypt_value(key, "ssn", rows[0].ssn) == "123-45-6789"
    assert decrypt_value(key, "amount", rows[1].amount) == "20.0"
    assert "123-45-6789" not in rows[0].ssn and rows[0].ssn != rows[1].amount
    with pytest.raises(ColumnDecryptError, match="another column"):
        decrypt_value(key, "amount", rows[0].ssn)
    with pytest.raises(ColumnDecryptError, match="another customer key"):
        decrypt_value(client.generate_key(), "ssn", rows[0].ssn)

    key_file = tmp_path / "my.key"
    key_file.write_text(client.encode_key(key))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "portal.pipeline.columns",
            "decrypt",
            "--key-file",
            str(key_file),
            "--column",
            "ssn",
        ],
        input=rows[0].ssn + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout == "123-45-6789\n"


def test_a_run_without_the_key_fails_before_reading(spark: SparkSession, tmp_path: Path) -> None:
    write_csv(tmp_path / "landing" / "people" / "p.csv", "id,email,ssn,amount,note", ["1,a,b,1,c"])

    state = run_job(spark, spec(tmp_path, _props(tmp_path)))[0]

    assert state["status"] == "FAILED"
    assert "customer key (encrypt.wrapped.key, unwrapped by the worker) is not available" in state["error"]
    assert state["records_extracted"] == 0


def test_the_save_refuses_rules_it_cannot_run() -> None:
    assert rule_problems({"columns.hash": "a", "columns.encrypt": "a,b", "encrypt.wrapped.key": "w"}) == [
        "column 'a' is in both columns.hash and columns.encrypt: give it one rule"
    ]
    assert "add a customer key under Keys first" in rule_problems({"columns.encrypt": "ssn"})[0]
    assert rule_problems({"columns.hash": "email", "columns.hash.secret": "ENC(x)"}) == []
    assert "columns.hash needs a salt" in rule_problems({"columns.hash": "email"})[0]
    props = {
        "source.class": "portal.pipeline.sources.files.FileSource",
        "source.files.format": "csv",
        "columns.encrypt": "ssn",
    }
    assert any("columns.encrypt encrypts" in p for p in job_property_problems(props))
    assert not any("columns." in p for p in job_property_problems(props, first_hop=False))
