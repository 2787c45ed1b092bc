"""The state store: watermarks by (flow, job, dataset.urn) with history, the
high_watermark commit step, skips, the JobState of each run, and the staff
pages with an audited reset."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import include, path, reverse

import portal.urls
from portal.orchestration.models import DatasetState, FlowExecution, JobExecution, JobState, JobStatus
from portal.orchestration.state import statestore
from portal.orchestration.state.commitstore import CommitStepStore
from portal.orchestration.state.statestore import HighWatermarkCommitStep, PendingCommitSteps
from portal.pipeline.destinations.commit_steps import CommitStep
from tests.unit.tables import assert_cells_name_their_columns, cells_by_label

# The page URLs, mounted as portal/urls.py will mount them (see state_urls).
urlpatterns = [*portal.urls.urlpatterns, path("state/", include("portal.monitoring.state_urls"))]

KEY = {"flow_group": "sales", "flow_name": "orders", "job_name": "sales_orders_hop1"}


def _check_in(urn: str, watermark: str, execution_id: int, **extra) -> DatasetState:
    return statestore.check_in(
        **KEY, dataset_urn=urn, watermark=watermark, execution_id=execution_id, status="COMMITTED", **extra
    )


@pytest.mark.django_db
def test_previous_state_is_by_dataset_urn_so_a_skipped_dataset_keeps_its_watermark():
    _check_in("orders", "100", 1, source_schema='{"type":"struct"}')
    _check_in("customers", "7", 1)
    _check_in("orders", "150", 2)  # the next run pulled only orders
    watermarks, schemas = statestore.previous_state(**KEY)
    assert watermarks == {"orders": "150", "customers": "7"}
    assert schemas == {"orders": '{"type":"struct"}'}
    state = DatasetState.objects.get(dataset_urn="orders")
    assert [(h.previous_watermark, h.watermark, h.execution_id) for h in state.history.all()] == [
        ("100", "150", 2),
        ("", "100", 1),
    ]
    assert statestore.previous_state("sales", "orders", "another_job") == ({}, {})


@pytest.mark.django_db
def test_the_high_watermark_step_is_verified_like_every_other_step():
    data = {
        **KEY,
        "type": "high_watermark",
        "dataset_urn": "orders",
        "value": "42",
        "execution_id": 9,
        "records": 5,
    }
    step = CommitStep.from_dict(data)
    assert isinstance(step, HighWatermarkCommitStep)
    assert step.verify() is False
    step.execute()
    assert step.verify() is True
    state = DatasetState.objects.get(dataset_urn="orders")
    assert (state.watermark, state.execution_id, state.last_status) == ("42", 9, "COMMITTED")
    assert state.history.get().records == 5
    # Flow and job come from the job's properties when the step does not carry them.
    bare = {"type": "high_watermark", "dataset_urn": "x", "value": "1"}
    props = {"flow.group": "g", "flow.name": "f", "job.name": "j"}
    assert CommitStep.from_dict(bare, props).to_dict()["job_name"] == "j"
    with pytest.raises(ValueError, match="missing"):
        CommitStep.from_dict(bare)


@pytest.mark.django_db
def test_a_skip_keeps_the_watermark_and_says_why():
    _check_in("orders", "100", 1)
    statestore.record_skip(**KEY, dataset_urn="orders", execution_id=2, reason="its commit could not finish")
    state = DatasetState.objects.get(dataset_urn="orders")
    assert (state.watermark, state.last_status, state.execution_id) == ("100", "SKIPPED", 1)
    latest = state.history.first()
    assert (latest.status, latest.watermark, latest.execution_id, latest.reason) == (
        "SKIPPED",
        "100",
        2,
        "its commit could not finish",
    )


@pytest.mark.django_db
def test_a_reset_is_audited_and_refused_while_commit_steps_are_unfinished():
    state = _check_in("orders", "100", 1)
    with pytest.raises(ValueError, match="reason"):
        statestore.reset_watermark(state, watermark="50", reason=" ", changed_by="stella")
    statestore.reset_watermark(state, watermark="50", reason="re-pull the bad hour", changed_by="stella")
    state.refresh_from_db()
    assert (state.watermark, state.last_status) == ("50", "RESET")
    row = state.history.first()
    assert (row.previous_watermark, row.watermark, row.status, row.changed_by, row.reason) == (
        "100",
        "50",
        "RESET",
        "stella",
        "re-pull the bad hour",
    )

    store = CommitStepStore()
    store.put_all(
        statestore.store_name_of(state),
        "orders",
        [{"type": "high_watermark", **KEY, "value": "9"}],
        execution_id=3,
    )
    with pytest.raises(PendingCommitSteps, match="unfinished commit step"):
        statestore.reset_watermark(state, watermark="", reason="start over", changed_by="stella")
    state.refresh_from_db()
    assert state.watermark == "50"
    statestore.reset_watermark(
        state, watermark="", reason="start over", changed_by="stella", discard_pending=True
    )
    state.refresh_from_db()
    assert state.watermark == ""
    assert "discarded 1 unfinished commit step(s) of execution 3" in state.history.first().reason
    assert not store.exists(statestore.store_name_of(state), "orders")


@pytest.mark.django_db
def test_each_run_has_its_job_state():
    execution = FlowExecution.objects.create(
        flow_group="sales", flow_name="orders", execution_id=5, trigger="RUN_NOW"
    )
    job = JobExecution.objects.create(
        execution=execution, job_name=KEY["job_name"], job_group="sales", executor="x", queue="q"
    )
    first = statestore.start_job_state(job, 1, "w1")
    statestore.finish_job_state(first, JobStatus.FAILED, "boom")
    second = statestore.start_job_state(job, 2, "w2")
    statestore.finish_job_state(
        second, JobStatus.COMMITTED, "ok", datasets={"orders": {"status": "COMMITTED"}}
    )
    runs = list(JobState.objects.filter(job=job).values_list("attempt", "worker", "status", "message"))
    assert runs == [(1, "w1", "FAILED", "boom"), (2, "w2", "COMMITTED", "ok")]
    assert job.run_states.get(attempt=2).datasets == {"orders": {"status": "COMMITTED"}}


# --- the staff pages ----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_only_staff_see_watermarks(client, owner, staff):
    state = _check_in("orders", "100", 1)
    pages = [reverse("state:list"), reverse("state:dataset", args=[state.pk])]
    for url in pages:
        assert client.get(url).status_code == 302  # to the login page
    client.force_login(owner)
    for url in pages:
        assert client.get(url).status_code == 403
    response = client.post(pages[1], {"watermark": "1", "reason": "x"})
    assert response.status_code == 403
    state.refresh_from_db()
    assert state.watermark == "100"
    client.force_login(staff)
    listing = client.get(pages[0], {"q": "ord"})
    assert listing.status_code == 200 and b"orders" in listing.content
    assert pages[1].encode() not in client.get(pages[0], {"q": "nothing-like-it"}).content


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_staff_see_the_history_and_reset_with_a_reason(client, staff):
    state = _check_in("orders", "100", 1)
    _check_in("orders", "150", 2)
    client.force_login(staff)
    url = reverse("state:dataset", args=[state.pk])
    page = client.get(url).content.decode()
    assert "150" in page and "100" in page and "COMMITTED" in page

    missing = client.post(url, {"watermark": "120"})
    assert missing.status_code == 400
    assert "Give a reason" in missing.content.decode()
    state.refresh_from_db()
    assert state.watermark == "150"

    done = client.post(url, {"watermark": "120", "reason": "orders 121-150 were wrong at the source"})
    assert done.status_code == 302
    state.refresh_from_db()
    assert state.watermark == "120"
    page = client.get(url).content.decode()
    assert "stella" in page and "orders 121-150 were wrong at the source" in page and "RESET" in page


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_reset_page_shows_unfinished_steps_and_needs_them_discarded(client, staff):
    state = _check_in("orders", "100", 1)
    CommitStepStore().put_all(
        statestore.store_name_of(state),
        "orders",
        [{"type": "high_watermark", **KEY, "value": "9"}],
        execution_id=4,
    )
    client.force_login(staff)
    url = reverse("state:dataset", args=[state.pk])
    assert "Unfinished commit steps" in client.get(url).content.decode()
    assert "unfinished commit" in client.get(reverse("state:list")).content.decode()
    refused = client.post(url, {"watermark": "0", "reason": "start over"})
    assert refused.status_code == 400 and "discard them with the reset" in refused.content.decode()
    done = client.post(url, {"watermark": "0", "reason": "start over", "discard_pending": "on"})
    assert done.status_code == 302
    state.refresh_from_db()
    assert state.watermark == "0"


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_the_dataset_page_charts_the_history_and_links_to_the_monitoring_page(client, staff):
    state = _check_in("orders", "100", 1)  # the first run started from nothing
    _check_in("orders", "150", 2)
    client.force_login(staff)
    page = client.get(reverse("state:dataset", args=[state.pk])).content.decode()
    facts = page.split('<dl class="facts">')[1].split("</dl>")[0]  # styled like every other page's facts
    assert "<dt>Watermark</dt><dd><code>150</code>" in facts
    # The monitoring dataset page's chart, drawn by the same code, and a link to that page.
    assert f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="dataset-{state.pk}-watermark"' in page
    dataset_page = reverse("monitoring:dataset", args=["sales", "orders", KEY["job_name"], "orders"])
    assert f'href="{dataset_page}"' in page
    # Newest first; the first run's "From" was nothing and says so, not an empty code pill.
    assert cells_by_label(page)["From"] == ["100", "—"]
    assert "<code></code>" not in page
    assert_cells_name_their_columns(page)


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_each_reset_input_is_described_by_its_help_and_its_errors(client, staff):
    state = _check_in("orders", "100", 1)
    client.force_login(staff)
    url = reverse("state:dataset", args=[state.pk])
    for page in (client.get(url), client.post(url, {"watermark": "120"})):  # the second lacks a reason
        html = page.content.decode()
        described = re.findall(r'aria-describedby="([^"]+)"', html)
        assert described
        for ids in described:
            for element_id in ids.split():
                assert f'id="{element_id}"' in html, element_id
    assert 'aria-describedby="id_reason_helptext id_reason_error"' in html
    assert re.search(r'id="id_reason_error">\s*<p class="error">Give a reason', html)


def _schema(*columns: tuple[str, str]) -> str:
    fields = [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in columns]
    return json.dumps({"type": "struct", "fields": fields})


@pytest.mark.django_db
def test_each_committed_run_keeps_its_schema_and_the_history_says_what_changed():
    _check_in("orders", "10", 1, source_schema=_schema(("id", "integer")))
    _check_in("orders", "20", 2, source_schema=_schema(("id", "integer")))
    statestore.check_in(**KEY, dataset_urn="orders", watermark="20", execution_id=3, status="FAILED")
    state = _check_in("orders", "30", 4, source_schema=_schema(("id", "long"), ("email", "string")))
    history = statestore.schema_history(state)
    assert [(h["execution_id"], h["change"], h["changed"]) for h in history] == [
        (4, "added email (string); changed id integer -> long (widened)", True),
        (2, "no change", False),
        (1, "first recorded", False),
    ]
    assert history[0]["columns"] == [("id", "long"), ("email", "string")]
    assert [h["execution_id"] for h in statestore.schema_history(state, limit=2)] == [4, 2]
