"""Spark resources per job: a job running as its own application (spark-submit)
is sized to what its flow asks for, else to its quota; inside a worker's shared
session its tasks run in its owner's FAIR pool, weighted and with the job's
cores as minShare; a job asking past its quota today does not start."""

from __future__ import annotations

import threading
import time

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model

from portal.flows.models import FlowConfig
from portal.orchestration.models import FlowExecution
from portal.orchestration.worker import executor as worker
from portal.orchestration.worker import quota_spark, sparkctx
from portal.orchestration.worker.submit import sized_conf, submit_argv
from portal.quotas.models import Quota
from portal.topology.models import SpecExecutor
from tests.builders.quotas import one_hop_flow, run, the_job
from tests.factories import UserFactory
from tests.integration.crash_harness import RecordingPipeline, World
from tests.unit.topology.helpers import executor, nodes

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    nodes("a", "b")
    executor("x1", "a>b")
    return UserFactory(username="alice")


def test_a_submitted_job_is_sized_to_its_quota_where_its_flow_asks_nothing(alice):
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_cores_per_job=4, max_memory_mb_per_job=2048)
    job = the_job(run(one_hop_flow(alice, "f"), alice))
    assert quota_spark.spark_sizing(job) == {"cores": 4, "memory_mb": 2048}
    spec = {"job_name": "j", "execution_id": 1, "spark_master": "yarn", "spark_sizing": {"cores": 4}}
    spec["spark_conf"] = {"spark.executor.cores": "2", "spark.executor.memory": "4g"}
    argv = submit_argv(
        {**spec, "spark_sizing": quota_spark.spark_sizing(job)}, "s", "o", deploy_mode="cluster"
    )
    confs = {argv[n + 1] for n, arg in enumerate(argv) if arg == "--conf"}
    assert {
        "spark.cores.max=4",  # a standalone master
        "spark.executor.cores=2",
        "spark.executor.instances=2",  # YARN and Kubernetes: 2 executors of 2 cores
        "spark.dynamicAllocation.maxExecutors=2",
        "spark.executor.memory=2048m",  # each JVM: the executor's 4g is cut to the quota
    } <= confs
    assert not any(conf.startswith("spark.driver.memory=") for conf in confs)  # Spark's 1g is lower


def test_the_flows_own_request_sizes_its_job_below_the_quota(alice):
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_cores_per_job=4, max_memory_mb_per_job=2048)
    flow = one_hop_flow(alice, "f")
    flow.properties = {**flow.properties, "flow.spark.cores": "1", "flow.spark.memory": "512m"}
    flow.save()
    job = the_job(run(flow, alice))
    assert quota_spark.spark_sizing(job) == {"cores": 1, "memory_mb": 512}
    conf = sized_conf(
        {"spark.dynamicAllocation.minExecutors": "3", "spark.executor.memory": "256m"},
        {"cores": 1, "memory_mb": 512},
    )
    assert conf == {
        "spark.cores.max": "1",
        "spark.driver.cores": "1",
        "spark.executor.instances": "1",
        "spark.dynamicAllocation.maxExecutors": "1",
        "spark.dynamicAllocation.minExecutors": "1",  # never above the maximum, or Spark refuses to start
        "spark.executor.memory": "256m",  # the executor keeps its lower setting
        "spark.driver.memory": "512m",
    }
    assert sized_conf({"spark.executor.memory": "4g"}, {}) == {"spark.executor.memory": "4g"}  # no quota


def test_a_job_asking_past_a_quota_lowered_since_the_save_does_not_start(alice):
    flow = one_hop_flow(alice, "f")
    flow.properties = {**flow.properties, "flow.spark.cores": "4"}
    flow.save()
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, max_cores_per_job=8)
    job = the_job(run(flow, alice))
    assert quota_spark.sizing_refusal(job) == ""  # within her own quota
    x1 = SpecExecutor.objects.get(name="x1")
    Quota.objects.create(scope=Quota.Scope.EXECUTOR, executor=x1, max_cores_per_job=2)
    assert quota_spark.sizing_refusal(job) == (
        "Not started: the flow asks for more Spark than its quota allows: "
        "flow.spark.cores: 4 cores is above executor x1's quota of 2 cores per job; set it lower"
    )


def test_without_any_quota_a_job_asking_past_the_default_one_through_spark_conf_does_not_start(alice):
    """Saved before the default quota existed (or written around the save): the worker refuses."""
    flow = one_hop_flow(alice, "f")
    FlowConfig.objects.filter(pk=flow.pk).update(
        properties={**flow.properties, "flow.spark.conf.spark.executor.memory": "500g"}
    )
    job = the_job(run(flow, alice))
    assert not Quota.objects.exists()
    assert quota_spark.sizing_refusal(job) == (
        "Not started: the flow asks for more Spark than its quota allows: "
        "flow.spark.conf.spark.executor.memory: 512000 MiB is above alice (the default quota)'s quota "
        "of 2048 MiB per job; set it lower"
    )


def test_in_a_shared_session_the_owners_pool_has_her_weight_and_her_jobs_cores_as_min_share(alice):
    job = the_job(run(one_hop_flow(alice, "f"), alice))
    assert quota_spark.spark_pool(job) is None  # no quotas: one pool per task, as ever
    Quota.objects.create(scope=Quota.Scope.DEFAULT, max_concurrent_jobs=10)
    assert quota_spark.spark_pool(job) == quota_spark.PoolShape("owner-alice")
    Quota.objects.create(scope=Quota.Scope.USER, user=alice, weight=3, max_cores_per_job=2)
    shape = quota_spark.spark_pool(job)
    assert shape == quota_spark.PoolShape("owner-alice.w3.c2", weight=3, min_share=2)

    spark = sparkctx.session_for(settings.SPARK_MASTER)
    assert sparkctx.fair_pool(spark, shape) == "owner-alice.w3.c2"
    assert sparkctx.fair_pool(spark, shape) == "owner-alice.w3.c2"  # made once
    context = spark.sparkContext._jsc.sc()
    pool = context.getPoolForName("owner-alice.w3.c2").get()
    assert (pool.weight(), pool.minShare(), str(pool.schedulingMode())) == (3, 2, "FAIR")
    names = [context.getAllPools().apply(n).name() for n in range(context.getAllPools().size())]
    assert names.count("owner-alice.w3.c2") == 1

    def slow_job() -> None:  # a job's thread, as the pipeline sets it up
        spark.sparkContext.setLocalProperty("spark.scheduler.pool", "owner-alice.w3.c2")
        spark.sparkContext.parallelize(range(2), 2).foreach(lambda _: time.sleep(3))

    thread = threading.Thread(target=slow_job)
    thread.start()
    running = 0
    for _ in range(100):
        running = max(running, pool.runningTasks())
        if running:
            break
        time.sleep(0.1)
    thread.join(60)
    assert running >= 1  # the job's tasks ran in that pool


@pytest.fixture
def world(tmp_path, monkeypatch, settings):
    """The worker's execute_job in-process, on its own SparkSession (tests.integration.crash_harness)."""
    settings.FLOWPORT_LOG_DIR = str(tmp_path / "logs")
    settings.FLOWPORT_WORK_DIR = str(tmp_path / "work")
    pipeline = RecordingPipeline()
    monkeypatch.setattr(worker, "run_job", pipeline)
    return World(tmp_path, pipeline)


def _job_of_the_flow(world: World):
    job = world.new_job()
    FlowExecution.objects.filter(pk=job.execution_id).update(
        flow=FlowConfig.objects.get(flow_name="landing-to-lake")
    )
    return job


@pytest.mark.django_db(transaction=True)
def test_the_worker_runs_a_job_in_its_owners_sized_pool_and_refuses_one_asking_past_its_quota(world):
    owner = get_user_model().objects.get(username="eo-owner")
    Quota.objects.create(scope=Quota.Scope.USER, user=owner, weight=2, max_cores_per_job=1)
    world.landing.add("orders", 3)
    assert world.run(_job_of_the_flow(world)) == "committed"
    assert world.pipeline.specs[-1].extra["scheduler_pool"] == "owner-eo-owner.w2.c1"
    pool = (
        sparkctx.session_for(settings.SPARK_MASTER)
        .sparkContext._jsc.sc()
        .getPoolForName("owner-eo-owner.w2.c1")
    )
    assert (pool.get().weight(), pool.get().minShare()) == (2, 1)

    # The flow asks for 4 cores (saved before staff lowered the quota to 1): it does not start.
    flow = FlowConfig.objects.get(flow_name="landing-to-lake")
    FlowConfig.objects.filter(pk=flow.pk).update(properties={**flow.properties, "flow.spark.cores": "4"})
    refused = _job_of_the_flow(world)
    ran = len(world.pipeline.specs)
    assert world.run(refused) == "failed"
    refused.refresh_from_db()
    assert refused.message.startswith(
        "Not started: the flow asks for more Spark than its quota allows: "
        "flow.spark.cores: 4 cores is above eo-owner's quota of 1 cores per job"
    )
    assert len(world.pipeline.specs) == ran  # nothing was pulled


def test_with_no_quota_at_all_a_submitted_job_is_sized_to_the_default_quota(alice, settings):
    """No quota rows: an owner still has the default (QUOTA_DEFAULT_*), at submit as at save."""
    settings.QUOTA_DEFAULT_MAX_CORES_PER_JOB, settings.QUOTA_DEFAULT_MAX_MEMORY_MB_PER_JOB = 2, 1024
    assert not Quota.objects.exists()
    job = the_job(run(one_hop_flow(alice, "f"), alice))
    assert quota_spark.spark_sizing(job) == {"cores": 2, "memory_mb": 1024}
