# Spark standalone daemons (master and workers) serving Flowport's spark-standalone executors.
# Read by Spark's launcher (bin/load-spark-env.sh) from $SPARK_CONF_DIR: the units in
# deploy/systemd (flowport-spark-master, flowport-spark-worker) point SPARK_CONF_DIR at this
# folder; with your own start scripts copy this file to $SPARK_CONF_DIR/spark-env.sh.
# Values already in the environment win (/etc/flowport/spark.env).

# Where a Spark worker keeps each application's folder (its jars, Flowport's zip, executor
# logs): Spark's default is $SPARK_HOME/work, inside the virtualenv when Spark is pip's PySpark.
SPARK_WORKER_DIR="${SPARK_WORKER_DIR:-/var/lib/flowport/spark-work}"

# Every Celery worker start is a new Spark application (about 2.7 MB per application per Spark
# worker): the folders of finished applications are removed, looked for every hour and kept a
# day (appDataTtl, seconds) so a failed application's executor logs can still be read. Options
# of your own in SPARK_WORKER_OPTS come after these, and a later -D wins.
SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=true -Dspark.worker.cleanup.interval=3600 -Dspark.worker.cleanup.appDataTtl=86400 ${SPARK_WORKER_OPTS:-}"

# The address of this host the other hosts reach (master, workers and the Celery workers'
# drivers); set it in /etc/flowport/spark.env on a host with several addresses:
# SPARK_LOCAL_IP=10.0.0.5
export SPARK_WORKER_DIR SPARK_WORKER_OPTS
