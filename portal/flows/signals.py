"""Flow catalog events: the one listener mechanism (Django signals).

Sent by `flows.services` inside the saving transaction, so a listener that
writes rows (the scheduler's actions, the compiler's job DAG) commits or rolls
back together with the flow. Receivers get `action` ("add", "update",
"secrets" — the same secrets stored anew by a key rotation —, "delete") and `flow`.
"""

from django.dispatch import Signal

flow_catalog_changed = Signal()

# Sent by `flows.services.set_paused` inside its transaction when a flow is
# paused or resumed (`flow`, `paused`): the scheduler withdraws the ticks it
# wrote ahead for a paused flow.
flow_pause_changed = Signal()

# Sent by `flows.deletion.impact` (`flow`) before a flow is deleted, to learn from the apps above
# the catalog what goes with it. A receiver returns a dict with any of `readers` (the keys
# "group/name" of the flows whose recorded runs read what this flow wrote: lineage) and
# `watermarked` (the dataset.urns this flow has a stored watermark for).
flow_deletion_asked = Signal()
