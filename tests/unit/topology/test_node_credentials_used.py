"""Alice registers her MariaDB database with its user and password, once. Test connection and
discovery then connect with them without her typing them again (MariaDB checks passwords, so a
wrong stored one is refused by the server itself)."""

from __future__ import annotations

import os

import pymysql
import pytest

from tests.builders.api import api_client_for
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def shop():
    """A database and an account with a password on the machine's MariaDB."""
    name = f"alice_creds_{os.getpid()}"  # a database of hers by the default USER_NODE_DATABASES
    admin = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True)
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}`")
        cursor.execute(f"CREATE TABLE `{name}`.orders (id BIGINT PRIMARY KEY, placed DATETIME)")
        cursor.execute(f"DROP USER IF EXISTS '{name}'@'%'")
        cursor.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'right-password'")
        cursor.execute(f"GRANT ALL ON `{name}`.* TO '{name}'@'%'")
    yield name
    with admin.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"DROP USER IF EXISTS '{name}'@'%'")
    admin.close()


@pytest.mark.parametrize(("password", "works"), [("right-password", True), ("wrong-password", False)])
def test_test_connection_and_discovery_use_the_nodes_stored_account(
    shop, master_key, data_dir, password, works
):
    alice = api_client_for(UserFactory(username="alice"))
    body = {
        "name": "shop",
        "kind": "jdbc",
        "properties": {"url": f"jdbc:mariadb://127.0.0.1:3306/{shop}", "user": shop},
        "secrets": {"password": password},
    }
    made = alice.post("/api/datanodes", body, format="json")
    assert made.status_code == 201, made.content
    tested = alice.post("/api/datanodes/shop/test", {}, format="json").json()
    assert tested["ok"] is works, tested
    found = alice.post("/api/datanodes/shop/discover", {}, format="json").json()
    assert found["ok"] is works, found
    if works:
        assert [d["name"] for d in found["datasets"]] == [f"{shop}.orders"]
    else:
        assert "Access denied" in found["message"]
