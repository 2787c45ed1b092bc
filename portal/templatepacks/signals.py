"""Template pack events: one Django signal, the same mechanism as
`flows.signals` and `topology.signals`.

Sent by `templatepacks.services` after a pack's templates, ACL or existence
changed (after the commit of that change), with `pack_name` and `paths` (every
template path the pack held, read before a deletion). The flow catalog
listens (flows.packflows), so the packs never import the flows above them.
"""

from django.dispatch import Signal

template_pack_changed = Signal()
