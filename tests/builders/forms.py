"""A form read and posted the way a browser reads and posts it: the flow form's stories submit
exactly what the page rendered, with only the changes the story makes, so a field the page
forgets to render is missed as a browser would miss it."""

from __future__ import annotations

from html.parser import HTMLParser

from django.test import Client


class FormReader(HTMLParser):
    """Fields of <form id="flow-form"> as a browser would post them (not the
    <template> rows a script copies), plus every label's `for` and every id."""

    def __init__(self, form_id: str = "flow-form") -> None:
        super().__init__()
        self.form_id = form_id
        self.in_form = False
        self.template_depth = 0
        self.fields: list[tuple[str, str]] = []
        self.inputs: list[dict[str, str]] = []  # every control, with its attributes
        self.label_for: set[str] = set()
        self.ids: set[str] = set()
        self._select: str | None = None
        self._option: dict[str, str] | None = None
        self._first_option: str | None = None
        self._selected = False
        self._textarea: dict[str, str] | None = None
        self._text: list[str] = []
        self._label_depth = 0
        self.wrapped_ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: (v if v is not None else "") for k, v in attrs}
        if "id" in a:
            self.ids.add(a["id"])
        if tag == "form" and a.get("id") == self.form_id:
            self.in_form = True
        if tag == "template":
            self.template_depth += 1
        if not self.in_form or self.template_depth:
            return
        if tag == "label":
            self._label_depth += 1
            if "for" in a:
                self.label_for.add(a["for"])
        if tag == "input":
            self.inputs.append({"tag": "input", **a})
            if self._label_depth and "id" in a:
                self.wrapped_ids.add(a["id"])
            kind = a.get("type", "text")
            if "name" not in a or "disabled" in a:
                return
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.fields.append((a["name"], a.get("value", "on")))
            elif kind not in ("submit", "button"):
                self.fields.append((a["name"], a.get("value", "")))
        elif tag == "select":
            self.inputs.append({"tag": "select", **a})
            self._select, self._first_option, self._selected = a.get("name"), None, False
        elif tag == "option" and self._select:
            self._option = a
            if self._first_option is None:
                self._first_option = a.get("value", "")
            if "selected" in a:
                self.fields.append((self._select, a.get("value", "")))
                self._selected = True
        elif tag == "textarea":
            self.inputs.append({"tag": "textarea", **a})
            self._textarea, self._text = a, []

    def handle_endtag(self, tag: str) -> None:
        if tag == "template":
            self.template_depth -= 1
        if tag == "form" and self.in_form:
            self.in_form = False
        if tag == "label" and self._label_depth:
            self._label_depth -= 1
        if tag == "select" and self._select:
            if not self._selected and self._first_option is not None:
                self.fields.append((self._select, self._first_option))
            self._select = None
        if tag == "textarea" and self._textarea is not None:
            text = "".join(self._text)
            if text.startswith("\n"):
                text = text[1:]
            self.fields.append((self._textarea["name"], text))
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text.append(data)


def read_form(html: str | bytes) -> FormReader:
    reader = FormReader()
    reader.feed(html.decode() if isinstance(html, bytes) else html)
    return reader


def as_post(fields: list[tuple[str, str]], **changes: str | list[str]) -> dict[str, str | list[str]]:
    """Posted fields as the test client wants them (repeated names as lists)."""
    data: dict[str, list[str]] = {}
    for name, value in fields:
        data.setdefault(name, []).append(value)
    posted: dict[str, str | list[str]] = {k: v if len(v) > 1 else v[0] for k, v in data.items()}
    posted.pop("csrfmiddlewaretoken", None)
    posted.update(changes)
    return posted


def submit_as_rendered(client: Client, url: str, **changes: str | list[str]):
    """GET the form page, then POST it back with only `changes` made."""
    page = client.get(url)
    assert page.status_code == 200
    return client.post(url, as_post(read_form(page.content).fields, **changes))


def htmx(client: Client, url: str, data: dict):
    return client.post(url, data, headers={"HX-Request": "true"})
