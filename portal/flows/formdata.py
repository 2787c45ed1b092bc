"""What the flow form needs to show, gathered read-only: data nodes, the
templates a user can read and the attributes they ask for, schedule
previews, and the seam to the keys app for secret properties.

Nothing here decides what a valid flow is; it asks the modules that do
(flows.schedules, templatepacks.services, the compiler's key namespace) and
writes nothing.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import F

from portal.flows.compiler.templates import REQUIRED_KEY, declared_encrypted_attributes
from portal.flows.models import FlowConfig
from portal.flows.schedules import next_run_times, to_unix_cron
from portal.keys.models import CustomerKey
from portal.keys.properties import WRAPPED_KEY_PROPERTY
from portal.keys.services import EncryptionError, MasterKeyError, binding_for, encrypt_value
from portal.templatepacks.models import JobTemplate, TemplatePack
from portal.templatepacks.resolution import TemplateLoader, resolve_with
from portal.templatepacks.services import TemplateResolutionError
from portal.templatepacks.uris import split_template_uris
from portal.topology.models import DataNode

logger = logging.getLogger(__name__)

# --- data nodes -----------------------------------------------------------


def data_nodes() -> list[DataNode]:
    return list(DataNode.objects.only("name", "kind", "description").order_by("name"))


def node_label(node: DataNode, limit: int = 70) -> str:
    """`lake — Parquet lake on HDFS` (the description cut to fit a select)."""
    description = " ".join(node.description.split())
    if len(description) > limit:
        description = description[: limit - 1].rstrip() + "…"
    return f"{node.name} — {description}" if description else node.name


def source_choices(nodes: list[DataNode], current: str = "") -> list:
    """Select choices grouped by node kind; a current value that is not a
    data node (any more) stays selectable so editing never loses it."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for node in nodes:
        groups.setdefault(node.get_kind_display(), []).append((node.name, node_label(node)))
    choices: list = [("", "— choose the source data node —"), *groups.items()]
    if current and current not in {node.name for node in nodes}:
        choices.append(("Not in the topology", [(current, f"{current} (not a data node)")]))
    return choices


# --- templates --------------------------------------------------------------

# Flowport's convention for describing a template's required attributes
# (the form's help text tells template authors about it):
#   flowport.attribute.<name>.description = "Tables to pull, comma-separated"
#   flowport.attribute.<name>.default = "orders"
ATTRIBUTE_PREFIX = "flowport.attribute."
# Keys the compiler sets on every job (docs/topology.md, "hop keys"): a
# template may require them, but a flow never types them in.
COMPILER_KEYS = frozenset({"flow.group", "flow.name", "job.name", "spark.master"})
COMPILER_PREFIXES = ("flowport.hop.", "flowport.executor")


def supplied_by_compiler(name: str) -> bool:
    return name in COMPILER_KEYS or name.startswith(COMPILER_PREFIXES)


def template_groups(user) -> list[tuple[str, list[tuple[str, str]]]]:
    """[(pack name, [(template URI, path), …]), …] of the packs `user` may
    read (accounts.access decides), current versions only."""
    rows = (
        JobTemplate.objects.filter(
            version__pack__in=TemplatePack.objects.restrict(user),
            version__pack__current_version=F("version"),
        )
        .order_by("version__pack__name", "path")
        .values_list("version__pack__name", "path")
    )
    groups: dict[str, list[tuple[str, str]]] = {}
    for pack, path in rows:
        groups.setdefault(pack, []).append((f"pack://{pack}/{path}", path))
    return list(groups.items())


def template_choices(user, current: str = "") -> list:
    groups = template_groups(user) if user is not None else []
    offered = {uri for _pack, templates in groups for uri, _path in templates}
    choices: list = [("", "— no template —"), *groups]
    if current and current not in offered:
        # Several URIs, the FS:/// form, or a pack the owner can no longer
        # read: kept as it is, and reported by validation if it is broken.
        choices.append(("This flow", [(current, current)]))
    return choices


@dataclass
class TemplateAttribute:
    name: str
    description: str = ""
    default: str = ""  # suggested value, filled in for a new flow
    template_value: str = ""  # what the templates already give it
    encrypted: bool = False  # listed in gobblin.template.encrypted_attributes: typed like a secret

    @property
    def required(self) -> bool:
        return not self.template_value


@dataclass
class TemplateAttributes:
    attributes: list[TemplateAttribute] = field(default_factory=list)
    error: str = ""  # why the templates could not be read, safe to show

    @property
    def names(self) -> list[str]:
        return [attribute.name for attribute in self.attributes]

    @property
    def encrypted_names(self) -> set[str]:
        return {attribute.name for attribute in self.attributes if attribute.encrypted}


def template_loader(user):
    """One loader for a request's several questions, so each template is
    read and parsed once (templatepacks checks access as it loads)."""

    return TemplateLoader(user)


def _resolve(template_uris: str, properties: dict[str, str], user, loader=None):
    return resolve_with(loader or template_loader(user), split_template_uris(template_uris), properties)


def template_attributes(template_uris: str, user, loader=None) -> TemplateAttributes:
    """The attributes a flow sets for these templates: those listed in
    gobblin.template.required_attributes (every template in the chain) and
    the ${…} variables no template fills, minus what the compiler sets."""

    if not split_template_uris(template_uris) or user is None:
        return TemplateAttributes()
    try:
        resolved = _resolve(template_uris, {}, user, loader)
    except TemplateResolutionError as error:
        return TemplateAttributes(error=f"{error.uri}: {error.message}")
    except ValidationError as error:
        return TemplateAttributes(error=" ".join(error.messages))
    declared = [n.strip() for n in resolved.properties.get(REQUIRED_KEY, "").split(",") if n.strip()]
    names = [n for n in dict.fromkeys([*resolved.missing_required, *declared]) if not supplied_by_compiler(n)]
    properties = resolved.properties
    encrypted = declared_encrypted_attributes(FlowConfig(template_uris=template_uris, properties={}), user)
    return TemplateAttributes(
        [
            TemplateAttribute(
                name=name,
                description=properties.get(f"{ATTRIBUTE_PREFIX}{name}.description", ""),
                default=properties.get(f"{ATTRIBUTE_PREFIX}{name}.default", ""),
                template_value=properties.get(name, ""),
                encrypted=name in encrypted,
            )
            for name in names
        ]
    )


def missing_attributes(template_uris: str, properties: dict[str, str], user, loader=None) -> list[str]:
    """Required attributes the templates and these flow properties leave
    unset (templatepacks' own verdict), minus the compiler's hop keys, which
    the compiler checks per job. Unreadable templates are reported by
    templatepacks.validate_template_uris_for instead, so: none here."""

    if not split_template_uris(template_uris) or user is None:
        return []
    try:
        resolved = _resolve(template_uris, properties, user, loader)
    except (TemplateResolutionError, ValidationError):
        return []
    return [name for name in resolved.missing_required if not supplied_by_compiler(name)]


# --- schedules --------------------------------------------------------------

_DAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "", "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip
_NAMES = {name[:3].lower(): number for number, name in enumerate(_DAYS[:7])} | {
    name[:3].lower(): number for number, name in enumerate(_MONTHS) if name
}
_ALIAS_TEXT = {
    "@hourly": "every hour, on the hour",
    "@daily": "every day at 00:00",
    "@midnight": "every day at 00:00",
    "@weekly": "every Sunday at 00:00",
    "@monthly": "at 00:00 on day 1 of the month",
    "@yearly": "at 00:00 on 1 January, every year",
    "@annually": "at 00:00 on 1 January, every year",
}
_ORDINALS = {1: "first", 2: "second", 3: "third", 4: "fourth", 5: "fifth"}


class _Unsupported(Exception):
    """A field this describer does not put into words; the runs still show."""


def _number(token: str) -> int:
    token = token.lower()
    if token in _NAMES:
        return _NAMES[token]
    if not token.isdigit():
        raise _Unsupported(token)
    return int(token)


def _join(items: list[str], word: str = "and") -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} {word} {items[-1]}"


def _list_text(field_: str, name) -> str:
    """`1-5` → "Monday through Friday"; `1,15` → "1 and 15"; `*/3` → "every 3rd"."""
    parts = []
    for item in field_.split(","):
        base, _, step = item.partition("/")
        if step:
            start = "" if base in ("*", "0") else f" from {name(_number(base.split('-')[0]))}"
            parts.append(f"every {_number(step)}{_suffix(_number(step))}{start}")
        elif "-" in base:
            low, high = base.split("-", 1)
            parts.append(f"{name(_number(low))} through {name(_number(high))}")
        else:
            parts.append(name(_number(base)))
    return _join(parts)


def _suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _plain_numbers(field_: str) -> list[int] | None:
    if not re.fullmatch(r"\d+(,\d+)*", field_):
        return None
    return [int(n) for n in field_.split(",")]


def _every(field_: str, first: str = "0") -> int | None:
    """n for `*/n` (or `<first>/n`), the "every n" steps."""
    match = re.fullmatch(rf"(?:\*|{first})/(\d+)", field_)
    return int(match.group(1)) if match else None


def _uneven_steps_listed(field_: str, cycle: int) -> str:
    """`*/45` in the minute field fires at :00 and :45, not every 45 minutes:
    a step that does not divide its field's cycle is spelled out as numbers."""
    n = _every(field_)
    return ",".join(str(v) for v in range(0, cycle, n)) if n and cycle % n else field_


def _time_text(minute: str, hour: str) -> str:
    minute, hour = _uneven_steps_listed(minute, 60), _uneven_steps_listed(hour, 24)
    minutes, hours = _plain_numbers(minute), _plain_numbers(hour)
    if minutes is not None and hours is not None and len(minutes) * len(hours) <= 6:
        return "at " + _join([f"{h:02d}:{m:02d}" for h in hours for m in minutes])
    if minute == "*":
        minute_text = "every minute"
    elif (n := _every(minute)) is not None:
        minute_text = "every minute" if n == 1 else f"every {n} minutes"
    elif minutes == [0]:
        minute_text = "on the hour"
    else:
        minute_text = f"at minute {_list_text(minute, str)}"
    if hour == "*":
        if minute_text.startswith("every"):
            return minute_text
        return f"every hour, {minute_text}" if minutes == [0] else f"every hour {minute_text}"
    if (n := _every(hour)) is not None:
        return f"every {n} hours, {minute_text}" if n > 1 else f"every hour, {minute_text}"
    return f"{minute_text}, during hour {_list_text(hour, str)}"


def _day_of_week_text(dow: str) -> str:
    if match := re.fullmatch(r"([0-7a-zA-Z]{1,3})#([1-5])", dow):
        return f"the {_ORDINALS[int(match.group(2))]} {_DAYS[_number(match.group(1))]} of the month"
    if match := re.fullmatch(r"L([0-7a-zA-Z]{1,3})", dow):  # croniter's "last <day>"
        return f"the last {_DAYS[_number(match.group(1))]} of the month"
    return _list_text(dow, lambda n: _DAYS[n] if 0 <= n <= 7 else str(n))


def _day_text(dom: str, dow: str) -> str:
    if dom == "*" and dow == "*":
        return "every day"
    parts = []
    if dom != "*":
        if dom.upper() == "L":
            parts.append("on the last day of the month")
        else:
            numbers = _plain_numbers(dom)
            noun = "day" if numbers is not None and len(numbers) == 1 else "days"
            parts.append(f"on {noun} {_list_text(dom, str)} of the month")
    if dow != "*":
        parts.append(f"on {_day_of_week_text(dow)}")
    return _join(parts, "or")  # cron fires when either day field matches


def _month_text(month: str) -> str:
    if month == "*":
        return ""
    if (n := _every(month, first="1")) is not None and 12 % n == 0:
        return f"every {n} months"
    return "in " + _list_text(month, lambda n: _MONTHS[n] if 1 <= n <= 12 else str(n))


def describe_schedule(unix: str) -> str:
    """A unix cron expression in words (lower case): "every 5 minutes",
    "at 09:00 on Monday through Friday". Unusual fields fall back to
    naming the expression; the next run times are the exact answer."""
    if not unix:
        return "runs once, as soon as it is saved (no schedule)"
    if unix in _ALIAS_TEXT:
        return _ALIAS_TEXT[unix]
    if unix.count(" ") != 4:  # croniter's seven-field form of a Quartz year (flows.schedules)
        return f"on the cron schedule {unix}"
    minute, hour, dom, month, dow = unix.split(" ")
    try:
        time_text = _time_text(minute, hour)
        day_text = _day_text(dom, dow)
        month_text = _month_text(month)
    except (_Unsupported, IndexError, ValueError):
        return f"on the cron schedule {unix}"
    if day_text == "every day" and (time_text.startswith("every") or month_text):
        day_text = ""
    return " ".join(part for part in (time_text, day_text, month_text) if part)


@dataclass
class SchedulePreview:
    expression: str
    unix: str = ""
    description: str = ""
    next_runs: list[datetime] = field(default_factory=list)
    error: str = ""
    time_zone: str = field(default_factory=lambda: settings.TIME_ZONE)

    @property
    def errors(self) -> list[str]:
        return [self.error] if self.error else []

    @property
    def converted(self) -> bool:
        """A Quartz (or oddly spaced) expression, stored in its unix form."""
        return bool(self.unix) and self.unix != self.expression


def schedule_preview(expression: str, count: int = 5, after: datetime | None = None) -> SchedulePreview:
    """Validation and next runs come from flows.schedules, as on save."""
    expression = " ".join((expression or "").split())
    preview = SchedulePreview(expression)
    try:
        preview.unix = to_unix_cron(expression)
    except ValidationError as error:
        preview.error = " ".join(error.messages)
        return preview
    preview.description = describe_schedule(preview.unix)
    preview.next_runs = next_run_times(preview.unix, count, after) if preview.unix else []
    return preview


# --- secret properties ------------------------------------------------------

NEEDS_CUSTOMER_KEY = "secret properties need a customer key; create one under Keys"


def customer_key_for(owner, flow_properties: dict[str, str] | None = None) -> str | None:
    """The wrapped customer key a flow's new secrets are encrypted with: the
    one the flow already carries (every ENC value of a flow shares one key),
    else the owner's newest own key, else their groups' newest."""

    existing = (flow_properties or {}).get(WRAPPED_KEY_PROPERTY)
    if existing:
        return existing
    keys = CustomerKey.objects.usable_by(owner)
    key = keys.filter(owner_user=owner).first() or keys.first()
    return key.wrapped_key if key is not None else None


class SecretEncrypter:
    """Encrypts a flow's new secret values with the keys app
    (`portal.keys.services.encrypt_value`); `wrapped_key` is what the flow's
    `encrypt.wrapped.key` property must then hold. Errors are
    ValidationErrors whose text names no key and no plaintext."""

    def __init__(self, owner, flow_properties: dict[str, str] | None = None) -> None:
        self.owner = owner
        self.flow_properties = flow_properties or {}
        self._wrapped_key: str | None = None

    @property
    def wrapped_key(self) -> str:
        if self._wrapped_key is None:
            wrapped = customer_key_for(self.owner, self.flow_properties) if self.owner is not None else None
            if not wrapped:
                raise ValidationError(NEEDS_CUSTOMER_KEY, code="no_customer_key")
            self._wrapped_key = wrapped
        return self._wrapped_key

    def encrypt(self, plaintext: str) -> str:
        try:
            return encrypt_value(self.wrapped_key, plaintext, binding_for(self.owner, self.wrapped_key))
        except MasterKeyError as error:
            logger.error("master key unavailable while encrypting a flow secret: %s", error)
            raise ValidationError(
                "Secret values cannot be encrypted now: the portal's master key is not available; "
                "an administrator must fix it.",
                code=error.code,
            ) from None
        except EncryptionError as error:
            raise ValidationError(f"A secret value cannot be encrypted: {error}", code=error.code) from None
