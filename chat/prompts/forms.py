"""Forms of the prompt library: the editor (metadata + one version), labels, use, tokens, import.

Every size a user controls is bounded: name 100, description 2 000, 20 tags of 40, system prompt
and each message 100 000 characters, 20 messages, import file 2 MB.

May import: Django forms, chat.forms, chat.models, chat.prompts.*.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from chat.forms import ParamsForm
from chat.prompts import variables
from chat.prompts.models import PromptVisibility
from chat.prompts.services import LABEL_RE, MAX_MESSAGES, VersionContent
from chat.selectors import endpoint_list_for_user
from chat.teams.selectors import teams_for_user

NAME_RE = r"^[A-Za-z0-9][A-Za-z0-9 _.\-]{0,99}$"
MESSAGE_SLOTS_EXTRA = 2
MAX_IMPORT_BYTES = 2 * 1024 * 1024
# Parameters the editor shows; the others a version holds (seed, stop, … from "Save as prompt")
# are carried over unchanged from the version being edited.
EDITOR_PARAM_FIELDS = ("temperature", "top_p", "max_tokens", "response_format", "schema_name", "json_schema", "tools")


def parse_tags(text: str) -> list[str]:
    """Comma-separated tags → distinct, stripped, lower-case list. Raises ValidationError."""
    tags = list(dict.fromkeys(t.strip().lower() for t in (text or "").split(",") if t.strip()))
    if len(tags) > 20 or any(len(t) > 40 for t in tags):
        raise forms.ValidationError("At most 20 tags of at most 40 characters.")
    return tags


class PromptForm(forms.Form):
    """Name, description, tags, visibility and the version's content. Message rows are posted as
    ``msg_role_<i>`` / ``msg_content_<i>`` (blank content rows are dropped); config fields are
    validated by :class:`chat.forms.ParamsForm`."""

    name = forms.RegexField(regex=NAME_RE, max_length=100, error_messages={
        "invalid": "Start with a letter or digit; letters, digits, spaces, _ . - (at most 100)."})
    description = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
    tags = forms.CharField(required=False, max_length=1000, help_text="Comma-separated.")
    visibility = forms.ChoiceField(choices=PromptVisibility.choices)
    team = forms.TypedChoiceField(required=False, coerce=int, empty_value=None,
                                  help_text="With “A team's members”: which team.")
    system_prompt = forms.CharField(required=False, max_length=100_000, strip=False, widget=forms.Textarea(attrs={"rows": 5}))
    endpoint_id = forms.TypedChoiceField(required=False, coerce=int, empty_value=None)
    model = forms.CharField(required=False, max_length=200)
    version_message = forms.CharField(required=False, max_length=300, label="Version message")

    def __init__(self, *args: Any, user: Any, base_params: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.base_params = {k: v for k, v in (base_params or {}).items() if k not in EDITOR_PARAM_FIELDS}
        self.fields["endpoint_id"].choices = [("", "(the user's first endpoint)")] + [
            (e.pk, e.name) for e in endpoint_list_for_user(user=user)
        ]
        self.fields["team"].choices = [("", "(no team)")] + [
            (t.pk, t.name) for t in teams_for_user(user=user)
        ]
        self.params_form = ParamsForm(self.data if self.is_bound else None, prefix=None)
        self.message_rows: list[dict[str, str]] = []

    def clean_tags(self) -> list[str]:
        return parse_tags(self.cleaned_data.get("tags") or "")

    def _messages(self) -> list[dict[str, str]]:
        rows = []
        for i in range(MAX_MESSAGES + MESSAGE_SLOTS_EXTRA):
            content = self.data.get(f"msg_content_{i}")
            if content is None:
                continue
            role = self.data.get(f"msg_role_{i}") or "user"
            if role not in ("user", "assistant"):
                raise forms.ValidationError("A message is from the user or the assistant.")
            if len(content) > 100_000:
                raise forms.ValidationError(f"Message {i + 1} is longer than 100 000 characters.")
            if content.strip():
                rows.append({"role": role, "content": content})
        if len(rows) > MAX_MESSAGES:
            raise forms.ValidationError(f"At most {MAX_MESSAGES} messages.")
        return rows

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("visibility") == PromptVisibility.TEAM:
            if not data.get("team"):
                self.add_error("team", "Pick the team whose members may use this prompt.")
        else:
            data["team"] = None
        try:
            self.message_rows = self._messages()
        except forms.ValidationError as exc:
            self.add_error(None, exc)
        if not self.params_form.is_valid():
            for name, errs in self.params_form.errors.items():
                for e in errs:
                    self.add_error(None, f"{name}: {e}")
        return data

    def content(self) -> VersionContent:
        """The version content of a valid form."""
        params = {**self.base_params, **self.params_form.params()}
        if params.get("response_format") != "json_schema":
            params.pop("schema_strict", None)
        if not params.get("tools"):
            params.pop("tool_choice", None)
        return VersionContent(
            self.cleaned_data.get("system_prompt") or "",
            tuple(self.message_rows),
            {"endpoint_id": self.cleaned_data.get("endpoint_id"), "model": (self.cleaned_data.get("model") or "").strip(),
             "params": params},
        )

    def variables(self) -> list[str]:
        return variables.variables_in([self.data.get("system_prompt") or "", *(m["content"] for m in self.message_rows)])


class LabelForm(forms.Form):
    label = forms.RegexField(regex=LABEL_RE, max_length=50, error_messages={
        "invalid": "A label is lower-case letters, digits, _ or - (at most 50)."})
    number = forms.IntegerField(min_value=1)


class ForkForm(forms.Form):
    name = forms.RegexField(regex=NAME_RE, max_length=100)


class SaveAsPromptForm(forms.Form):
    name = forms.RegexField(regex=NAME_RE, max_length=100)


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100)


def use_form(names: list[str], data: Any = None) -> forms.Form:
    """A form with one required text field per variable (at most 10 000 characters each)."""
    fields = {n: forms.CharField(label=n, max_length=10_000, strip=False, widget=forms.Textarea(attrs={"rows": 2})) for n in names}
    form_class = type("UseForm", (forms.Form,), fields)
    return form_class(data)


def validate_export(raw: bytes) -> dict[str, Any]:
    """Parse and check an export file (``chat.prompts.services.prompt_export`` output). Raises
    ValidationError with a message naming what is wrong; nothing is imported then."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise forms.ValidationError("The file is larger than 2 MB.")
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != "playground.prompt/1":
        raise forms.ValidationError("Not a prompt export (format playground.prompt/1).")
    if not isinstance(data.get("name"), str) or not re.match(NAME_RE, data["name"]):
        raise forms.ValidationError("The prompt name is missing or invalid.")
    if not isinstance(data.get("description", ""), str) or len(data.get("description", "")) > 2000:
        raise forms.ValidationError("The description must be text of at most 2 000 characters.")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or len(tags) > 20 or not all(isinstance(t, str) and len(t) <= 40 for t in tags):
        raise forms.ValidationError("Tags must be a list of at most 20 short strings.")
    versions = data.get("versions")
    if not isinstance(versions, list) or not 1 <= len(versions) <= 500:
        raise forms.ValidationError("There must be 1 to 500 versions.")
    seen = set()
    for i, v in enumerate(versions, 1):
        if not isinstance(v, dict) or not isinstance(v.get("number"), int) or v["number"] in seen:
            raise forms.ValidationError(f"Version {i}: needs a distinct integer number.")
        seen.add(v["number"])
        if not isinstance(v.get("system_prompt", ""), str) or len(v.get("system_prompt", "")) > 100_000:
            raise forms.ValidationError(f"Version {i}: system prompt must be text (≤ 100 000).")
        msgs = v.get("messages", [])
        if not isinstance(msgs, list) or len(msgs) > MAX_MESSAGES or not all(
            isinstance(m, dict) and m.get("role") in ("user", "assistant") and isinstance(m.get("content"), str)
            and len(m["content"]) <= 100_000 for m in msgs
        ):
            raise forms.ValidationError(f"Version {i}: messages must be a list of {{role, content}} (user/assistant).")
        v["messages"] = [{"role": m["role"], "content": m["content"]} for m in msgs]
        config = v.get("config", {})
        if not isinstance(config, dict) or not isinstance(config.get("params", {}), dict):
            raise forms.ValidationError(f"Version {i}: config must be an object with a params object.")
        pf = ParamsForm({k: (json.dumps(val) if k in ("json_schema", "tools") and not isinstance(val, str) else val)
                         for k, val in config.get("params", {}).items()})
        if not pf.is_valid():
            raise forms.ValidationError(f"Version {i}: bad parameters: {dict(pf.errors)}")
        v["config"] = {"model": str(config.get("model", ""))[:200], "endpoint_name": str(config.get("endpoint_name", ""))[:100],
                       "params": pf.params()}
        if not isinstance(v.get("message", ""), str):
            raise forms.ValidationError(f"Version {i}: message must be text.")
        v["message"] = v.get("message", "")[:300]
    labels = data.get("labels", {})
    if not isinstance(labels, dict) or not all(isinstance(k, str) and re.match(LABEL_RE, k) and v in seen for k, v in labels.items()):
        raise forms.ValidationError("Labels must map label names to version numbers of this file.")
    return data
