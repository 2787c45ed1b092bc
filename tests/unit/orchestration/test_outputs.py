"""Where an execution's data went: each dataset named with its node, its folder relative to the
node (the server's path for staff only), its files and records, on the page and in the API; and
the first rows of it, for the flow's owners, from the files the execution delivered."""

from __future__ import annotations

import pytest
from django.test import Client

from portal.orchestration import outputs
from tests.deliveries import files_delivery

pytestmark = pytest.mark.django_db


@pytest.fixture
def data_dir(tmp_path, settings):
    settings.FLOWPORT_DATA_DIR = str(tmp_path / "data")
    return tmp_path / "data"


def test_the_page_says_which_folder_of_which_node_with_files_and_records(owner, data_dir):
    delivery = files_delivery(data_dir, owner, rows=30, files=2)
    browser = Client()
    browser.force_login(owner)

    page = browser.get(delivery.page).content.decode()

    assert "Where the data went" in page
    assert "folder <code>sales/orders/orders</code>" in page
    assert "2 parquet files" in page and '<td data-label="Records">30</td>' in page
    assert str(data_dir) not in page  # an owner who is not staff never reads the server's layout
    assert f'href="{delivery.preview()}"' in page


def test_staff_also_see_the_absolute_folder(owner, staff, data_dir):
    delivery = files_delivery(data_dir, owner)
    browser = Client()
    browser.force_login(staff)

    page = browser.get(delivery.page).content.decode()

    assert f"on the server: <code>{delivery.folder}</code>" in page


def test_the_api_names_the_outputs_too(owner, data_dir):
    delivery = files_delivery(data_dir, owner, rows=5, files=1)
    browser = Client()
    browser.force_login(owner)
    e = delivery.execution

    body = browser.get(
        f"/api/flowexecutions/{e.execution_id}?flowGroup={e.flow_group}&flowName={e.flow_name}"
    ).json()

    assert body["outputs"] == [
        {
            "jobName": delivery.job.job_name,
            "datasetUrn": "orders",
            "node": "lake",
            "kind": "files",
            "format": "PARQUET",
            "where": "sales/orders/orders",
            "absolutePath": "",
            "files": 1,
            "records": 5,
            "previewUrl": delivery.preview(),
        }
    ]


def test_the_preview_shows_the_first_twenty_rows_with_values_cut(owner, data_dir):
    delivery = files_delivery(data_dir, owner, rows=30, files=2)
    browser = Client()
    browser.force_login(owner)

    response = browser.get(delivery.preview())

    assert response.status_code == 200
    found = response.context["preview"]
    assert found.columns == ["id", "customer", "note"]
    assert [row[0] for row in found.rows] == [str(i) for i in range(1, 21)]  # across both files
    assert found.rows[0][2] == "x" * 59 + "…"
    page = response.content.decode()
    assert '<td data-label="customer">customer 1</td>' in page
    assert str(data_dir) not in page


def test_a_preview_of_files_a_later_run_removed_says_they_are_gone(owner, data_dir):
    delivery = files_delivery(data_dir, owner, files=1)
    for part in delivery.folder.iterdir():
        part.unlink()
    browser = Client()
    browser.force_login(owner)

    response = browser.get(delivery.preview())

    assert response.status_code == 404
    assert "no longer there" in response.content.decode()


def test_a_dataset_the_execution_did_not_deliver_is_not_found(owner, data_dir):
    delivery = files_delivery(data_dir, owner)
    browser = Client()
    browser.force_login(owner)

    assert browser.get(delivery.preview(1)).status_code == 404
    assert browser.get(delivery.preview().replace(delivery.job.job_name, "other-job")).status_code == 404


def test_someone_who_may_not_change_the_flow_sees_no_rows(owner, outsider, data_dir):
    delivery = files_delivery(data_dir, owner)
    browser = Client()
    browser.force_login(outsider)

    response = browser.get(delivery.preview())

    assert response.status_code in (403, 404)
    assert "customer 1" not in response.content.decode()
    with pytest.raises(Exception, match="owners and staff"):
        outputs.preview(delivery.execution, delivery.job.job_name, 0, outsider)


def test_columns_beyond_the_twelfth_are_counted_not_shown(owner, data_dir):
    columns = {f"c{i}": [i] for i in range(15)}
    delivery = files_delivery(data_dir, owner, rows=1, files=1, columns=columns)

    found = outputs.preview(delivery.execution, delivery.job.job_name, 0, owner)

    assert found.columns == [f"c{i}" for i in range(12)] and found.more_columns == 3


def test_staff_read_the_absolute_folder_in_the_api(owner, staff, data_dir):
    delivery = files_delivery(data_dir, owner, files=1)
    browser = Client()
    browser.force_login(staff)
    e = delivery.execution

    body = browser.get(
        f"/api/flowexecutions/{e.execution_id}?flowGroup={e.flow_group}&flowName={e.flow_name}"
    )

    assert body.json()["outputs"][0]["absolutePath"] == str(delivery.folder)
    assert body.json()["outputs"][0]["where"] == "sales/orders/orders"
