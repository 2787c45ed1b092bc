#!/usr/bin/env bash
# Builds portal/pipeline/jvm/flowport-pipeline.jar (the one-pass fork's Spark file format) against
# the Spark jars of the given Python's PySpark, so the classes match the Spark that loads them.
#   usage: scripts/build-pipeline-jar.sh PYTHON
set -euo pipefail
python=${1:?usage: $0 PYTHON}
root=$(cd "$(dirname "$0")/.." && pwd)
src=$root/portal/pipeline/jvm
jars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
classes=$(mktemp -d)
trap 'rm -rf "$classes"' EXIT
javac -nowarn --release 17 -d "$classes" -cp "$jars/*" "$src"/*.java
jar --create --file "$src/flowport-pipeline.jar.tmp" -C "$classes" .
mv "$src/flowport-pipeline.jar.tmp" "$src/flowport-pipeline.jar"
