"""Dataset state: what outlives a run and what both processes read and write. Watermarks per
dataset (the state store), commit steps still due and their exactly-once publish and recovery,
the catch-up with Iceberg tables, job logs, each flow's last run at a glance, lineage, and the
retention that keeps history bounded. Imports nothing else of the app but its models."""
