"""What goes with a flow when it is deleted, said before it is: the flows downstream of it and
its datasets' watermarks.

Downstream is what starts on its commits (its data trigger's upstreams: `triggers.UpstreamDataset`)
and what reads what it wrote (the lineage the runs recorded, `orchestration.state.lineage`, asked
through the `flow_deletion_asked` signal, since orchestration sits above the catalog). A deleted
flow's trigger rows go with it, so a flow that started on its commits no longer does; a flow that
reads its output finds no new data. Its watermarks stay in the state store under the deleted flow
(staff see them), so a flow created again under the same name reads its sources from the
beginning unless its owner adopts that state.

Only the downstream flows the asking user may see are named; the others are counted. The page's
confirmation and the REST API's DELETE (409 with the same facts unless `confirm=true`) say it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from portal.accounts import access
from portal.accounts.access import Principal
from portal.flows.models import FlowConfig
from portal.flows.signals import flow_deletion_asked

CONFIRM_PARAMETER = "confirm"


@dataclass
class Downstream:
    flow: FlowConfig
    starts_on_commit: bool = False
    reads_output: bool = False

    @property
    def how(self) -> str:
        ways = []
        if self.starts_on_commit:
            ways.append("starts when it commits")
        if self.reads_output:
            ways.append("reads what it writes")
        return " and ".join(ways)


@dataclass
class Impact:
    flow: FlowConfig
    downstream: list[Downstream] = field(default_factory=list)  # the ones the user may see
    hidden: int = 0  # downstream flows the user may not see
    watermarked: list[str] = field(default_factory=list)

    @property
    def feeds_others(self) -> bool:
        return bool(self.downstream or self.hidden)

    def sentence(self) -> str:
        """The facts in one paragraph, for the API's refusal."""
        parts = []
        if self.feeds_others:
            named = [f"{d.flow} ({d.how})" for d in self.downstream]
            if self.hidden:
                named.append(f"{self.hidden} flow(s) you cannot see")
            parts.append(
                f"Flow {self.flow} feeds {len(self.downstream) + self.hidden} other flow(s): "
                f"{', '.join(named)}; they no longer start on its commits nor get new data from it."
            )
        if self.watermarked:
            parts.append(
                f"Its watermarks of {len(self.watermarked)} dataset(s) stay with the deleted flow: a flow "
                f"created again as {self.flow} reads its sources from the beginning unless it adopts them."
            )
        return " ".join(parts)

    def to_api(self) -> dict[str, Any]:
        return {
            "downstreamFlows": [
                {
                    "flowGroup": d.flow.flow_group,
                    "flowName": d.flow.flow_name,
                    "startsOnCommit": d.starts_on_commit,
                    "readsOutput": d.reads_output,
                }
                for d in self.downstream
            ],
            "hiddenDownstreamFlows": self.hidden,
            "watermarkedDatasets": self.watermarked,
        }


def impact(flow: FlowConfig, user: Principal) -> Impact:
    """What deleting `flow` takes with it, as `user` may be told."""
    triggered = set(
        FlowConfig.objects.filter(data_trigger__upstreams__upstream=flow)
        .exclude(pk=flow.pk)
        .values_list("pk", flat=True)
    )
    readers: set[str] = set()
    watermarked: set[str] = set()
    for _, answer in flow_deletion_asked.send(sender=FlowConfig, flow=flow):
        if isinstance(answer, dict):
            readers.update(answer.get("readers") or ())
            watermarked.update(answer.get("watermarked") or ())
    reading = set()
    for key in readers - {f"{flow.flow_group}/{flow.flow_name}"}:
        group, _, name = key.partition("/")
        found = (
            FlowConfig.objects.filter(flow_group=group, flow_name=name).values_list("pk", flat=True).first()
        )
        if found is not None:
            reading.add(found)
    every = triggered | reading
    visible = (
        FlowConfig.objects.restrict(user, access.VIEW)
        .filter(pk__in=every)
        .order_by("flow_group", "flow_name")
    )
    downstream = [Downstream(f, f.pk in triggered, f.pk in reading) for f in visible]
    return Impact(flow, downstream, len(every) - len(downstream), sorted(watermarked))
