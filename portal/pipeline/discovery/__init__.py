"""Test connection and discovery, one module per node kind (`files`, `jdbc`, `iceberg`), each
giving its kind's `Probe`; `shapes` the answers every kind gives, `sniffing` how a CSV or
JSON-lines file is typed. Django-free: the portal (`topology.connections`) decides who may ask
and what the question carries (`shapes.Asking`), then asks the kind's probe (`probes.probe_for`)."""
