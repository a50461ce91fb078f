"""Forms: validation of everything a user sends, before any upstream call.

Parameter ranges follow seed 000/002 ``ChatCompletionRequest``: temperature 0–2, top_p 0–1,
top_k 1–100, max_tokens ≥ 1, stop up to 4 sequences, seed an integer.

May import: Django forms, chat.models, chat.providers.http (URL checks).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from chat.models import Endpoint
from chat.providers.http import check_base_url
from chat.turnsettings import (  # noqa: F401 - re-exported for callers of chat.forms
    EFFORTS,
    OPTION_FIELDS,
    PARAM_FIELDS,
    STYLE_FIELDS,
    request_fields,
)


class ParamsForm(forms.Form):
    """Sampling parameters and request options; blank means "not set" and is not sent upstream.

    Ranges follow seed 000/002 ``ChatCompletionRequest``: temperature 0–2, top_p 0–1, top_k
    1–100, penalties −2…2, stop up to 4 sequences, max tokens ≥ 1 (and within the model's
    ``max_completion_tokens`` when ``/models`` reported it), top_logprobs 0–20.
    """

    temperature = forms.FloatField(required=False, min_value=0.0, max_value=2.0)
    top_p = forms.FloatField(required=False, min_value=0.0, max_value=1.0)
    top_k = forms.IntegerField(required=False, min_value=1, max_value=100)
    max_tokens = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)
    stop = forms.CharField(required=False, max_length=1000, help_text="Up to 4 sequences, one per line.")
    seed = forms.IntegerField(required=False, min_value=-(2**63), max_value=2**63 - 1)
    frequency_penalty = forms.FloatField(required=False, min_value=-2.0, max_value=2.0)
    presence_penalty = forms.FloatField(required=False, min_value=-2.0, max_value=2.0)
    reasoning_effort = forms.ChoiceField(required=False, choices=[("", "")] + [(e, e) for e in EFFORTS])
    thinking_budget = forms.IntegerField(required=False, min_value=0, max_value=1_000_000,
                                         help_text="Anthropic thinking budget in tokens; 0 disables thinking.")
    enable_thinking = forms.ChoiceField(required=False, choices=[("", ""), ("on", "on"), ("off", "off")])
    response_format = forms.ChoiceField(
        required=False, choices=[("", ""), ("text", "text"), ("json_object", "json_object"), ("json_schema", "json_schema")]
    )
    schema_name = forms.RegexField(required=False, regex=r"^[A-Za-z0-9_-]{1,64}$", max_length=64,
                                   error_messages={"invalid": "Use letters, digits, _ or - (at most 64)."})
    schema_strict = forms.BooleanField(required=False)
    json_schema = forms.CharField(required=False, max_length=100_000)
    tools = forms.CharField(required=False, max_length=200_000)
    tool_choice = forms.CharField(required=False, max_length=200)
    logprobs = forms.BooleanField(required=False)
    top_logprobs = forms.IntegerField(required=False, min_value=0, max_value=20)
    session_id = forms.CharField(required=False, max_length=200)

    def __init__(
        self, *args: Any, max_completion_tokens: int | None = None, api_style: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.max_completion_tokens = max_completion_tokens
        self.api_style = api_style

    def unsent_fields(self) -> set[str]:
        """Fields whose values will not be sent, so they are neither validated nor kept: those
        the endpoint's API style does not take (hidden in the panel), and the schema fields
        unless the response format is ``json_schema``."""
        unsent: set[str] = set()
        if self.api_style:
            unsent |= set(PARAM_FIELDS + OPTION_FIELDS) - STYLE_FIELDS.get(self.api_style, STYLE_FIELDS["openai_chat"])
        data = self.data if hasattr(self.data, "get") else {}
        if "response_format" in unsent or data.get("response_format") != "json_schema":
            unsent |= {"json_schema", "schema_name", "schema_strict"}
        tools = data.get("tools")
        if "tools" in unsent or not (isinstance(tools, str) and tools.strip()):
            unsent |= {"tool_choice"}
        return unsent

    def full_clean(self) -> None:
        super().full_clean()
        if not hasattr(self, "cleaned_data"):
            return
        for name in self.unsent_fields():
            if self._errors is not None:
                self._errors.pop(name, None)
            self.cleaned_data.pop(name, None)

    def clean_stop(self) -> list[str]:
        raw = self.cleaned_data.get("stop") or ""
        if isinstance(raw, list):
            raw = "\n".join(raw)
        items = [s for s in raw.replace("\\n", "\n").split("\n") if s != ""]
        if len(items) > 4:
            raise forms.ValidationError("At most 4 stop sequences.")
        return items

    def clean_max_tokens(self) -> int | None:
        value = self.cleaned_data.get("max_tokens")
        if value is not None and self.max_completion_tokens and value > self.max_completion_tokens:
            raise forms.ValidationError(f"This model allows at most {self.max_completion_tokens} completion tokens.")
        return value

    def clean_json_schema(self) -> dict[str, Any] | None:
        raw = (self.cleaned_data.get("json_schema") or "").strip()
        if not raw:
            return None
        try:
            schema = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        if not isinstance(schema, dict):
            raise forms.ValidationError("A JSON schema must be an object.")
        try:
            import jsonschema

            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise forms.ValidationError(f"Not a valid JSON Schema: {exc.message}") from exc
        return schema

    def clean_tools(self) -> list[dict[str, Any]]:
        raw = (self.cleaned_data.get("tools") or "").strip()
        if not raw:
            return []
        try:
            tools = json.loads(raw)
        except ValueError as exc:
            raise forms.ValidationError(f"Not valid JSON: {exc}") from exc
        if isinstance(tools, dict):
            tools = [tools]
        if not isinstance(tools, list):
            raise forms.ValidationError("Tools must be a JSON list of function definitions.")
        out = []
        for i, t in enumerate(tools, 1):
            fn = t.get("function", t) if isinstance(t, dict) else None
            if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
                raise forms.ValidationError(f"Tool {i}: needs a name (OpenAI form: {{\"type\": \"function\", \"function\": {{\"name\", \"parameters\"}}}}).")
            params = fn.get("parameters", {"type": "object", "properties": {}})
            if not isinstance(params, dict):
                raise forms.ValidationError(f"Tool {i}: parameters must be a JSON Schema object.")
            out.append({"type": "function", "function": {
                "name": fn["name"], "description": fn.get("description", ""), "parameters": params,
            }})
        return out

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("response_format") == "json_schema" and not data.get("json_schema") and "json_schema" not in self.errors:
            self.add_error("json_schema", "Enter the JSON schema the answer must follow.")
        choice = (data.get("tool_choice") or "").strip()
        if choice and choice not in ("auto", "none", "required"):
            names = {t["function"]["name"] for t in data.get("tools") or []}
            if choice not in names:
                self.add_error("tool_choice", "Use auto, none, required, or the name of one of the tools.")
        return data

    def params(self) -> dict[str, Any]:
        """Everything the user set (sampling parameters and options), as stored on the
        conversation and in each answer's settings snapshot."""
        out: dict[str, Any] = {}
        for name in (*PARAM_FIELDS, *OPTION_FIELDS):
            value = self.cleaned_data.get(name)
            # Identity, not equality: 0 and 0.0 (temperature 0, thinking budget 0) are set values.
            if value is None or value is False or (isinstance(value, (str, list)) and not value):
                continue
            out[name] = value
        return out


class TurnSettingsForm(ParamsForm):
    """The settings panel sent with every action that starts a turn (and with View code):
    endpoint, model, system prompt and the parameters. ``present()`` tells whether the frame
    carried the panel at all (an action without it uses the conversation's stored settings)."""

    endpoint_id = forms.IntegerField()
    model = forms.CharField(max_length=200)
    system_prompt = forms.CharField(required=False, max_length=100_000, strip=False)

    @staticmethod
    def present(data: Any) -> bool:
        return hasattr(data, "get") and data.get("model") is not None and data.get("endpoint_id") not in (None, "")

    def clean_model(self) -> str:
        model = self.cleaned_data["model"].strip()
        if not model:
            raise forms.ValidationError("Pick or type a model id.")
        return model


class ChatSendForm(TurnSettingsForm):
    """One websocket ``send`` frame: a user message plus the settings panel."""

    turn_id = forms.UUIDField()
    content = forms.CharField(max_length=200_000, strip=False)
    role = forms.ChoiceField(choices=[("user", "user"), ("assistant", "assistant"), ("system", "system")], required=False)
    mode = forms.ChoiceField(choices=[("send", "send"), ("append", "append")], required=False)
    attachment_ids = forms.CharField(required=False, max_length=2000)  # comma-separated UUIDs

    def clean_content(self) -> str:
        content = self.cleaned_data["content"]
        if not content.strip():
            raise forms.ValidationError("Type a message first.")
        return content

    def clean_role(self) -> str:
        return self.cleaned_data.get("role") or "user"

    def clean_attachment_ids(self) -> list[str]:
        raw = [x.strip() for x in (self.cleaned_data.get("attachment_ids") or "").split(",") if x.strip()]
        cap = settings.PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE
        if len(raw) > cap:
            raise forms.ValidationError(f"At most {cap} attachments per message; remove {len(raw) - cap}.")
        try:
            return list(dict.fromkeys(str(uuid.UUID(x)) for x in raw))
        except ValueError as exc:
            raise forms.ValidationError("Bad attachment id.") from exc

    def clean_mode(self) -> str:
        return self.cleaned_data.get("mode") or "send"


class EditForm(forms.Form):
    """``edit`` frames: new text for a message; ``resend`` makes a user message a new branch."""

    message_id = forms.UUIDField()
    content = forms.CharField(max_length=200_000, strip=False)
    resend = forms.BooleanField(required=False)
    turn_id = forms.UUIDField(required=False)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("resend") and not data.get("turn_id"):
            data["turn_id"] = uuid.uuid4()
        return data


class TurnActionForm(forms.Form):
    """``stop`` / ``retry`` frames carry one message id."""

    message_id = forms.UUIDField()


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` lines → dict. Raises ValidationError on a malformed line."""
    headers: dict[str, str] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if ":" not in line:
            raise forms.ValidationError(f"Line {n}: use 'Name: value'.")
        name, value = line.split(":", 1)
        name = name.strip()
        if not name or any(c in name for c in " \t\r\n"):
            raise forms.ValidationError(f"Line {n}: invalid header name.")
        headers[name] = value.strip()
    return headers


class WriteOnlyTextarea(forms.Textarea):
    """A textarea that never renders its value back (like ``PasswordInput(render_value=False)``):
    header values are secrets, also when a refused form is shown again."""

    def format_value(self, value: Any) -> None:
        return None


class EndpointForm(forms.ModelForm):
    """Create/edit an endpoint. The key and header values are write-only: blank keeps them."""

    api_key = forms.CharField(
        required=False, label="API key", widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text="Stored encrypted. Leave blank to keep the current key.",
    )
    clear_api_key = forms.BooleanField(required=False, label="Remove the stored key")
    extra_headers = forms.CharField(
        required=False, widget=WriteOnlyTextarea(attrs={"rows": 3, "placeholder": "X-Org: my-team"}),
        help_text="One 'Name: value' per line; values are stored encrypted. Leave blank to keep the current headers.",
    )
    clear_extra_headers = forms.BooleanField(required=False, label="Remove the stored headers")

    class Meta:
        model = Endpoint
        fields = ["name", "base_url", "api_style", "default_model", "stream_options"]
        labels = {"base_url": "Base URL", "api_style": "API style", "stream_options": "Send stream_options"}
        help_texts = {
            "base_url": "The key and headers belong to this scheme, host and port: changing any of "
                        "them removes the stored key and header values unless you enter them again "
                        "in this form.",
        }

    def __init__(self, *args: Any, allow_private: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allow_private = allow_private
        if self.instance.pk is None:
            # A new endpoint has nothing stored: no "keep the current …" hints, no "remove" boxes.
            del self.fields["clear_api_key"], self.fields["clear_extra_headers"]
            self.fields["api_key"].help_text = "Stored encrypted; never shown again."
            self.fields["extra_headers"].help_text = "One 'Name: value' per line; values are stored encrypted."

    def clean_base_url(self) -> str:
        url = self.cleaned_data["base_url"].strip().rstrip("/")
        if url.startswith("sim://"):
            return url
        try:
            check_base_url(url, allow_private=self.allow_private)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return url

    def clean_extra_headers(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("extra_headers") or ""
        if not raw.strip():
            return None
        return parse_headers(raw)


class RenameForm(forms.Form):
    title = forms.CharField(max_length=200)


class FirstAccountForm(UserCreationForm):
    class Meta(UserCreationForm.Meta):
        model = get_user_model()
        fields = ("username",)


def new_turn_id() -> str:
    return str(uuid.uuid4())


def json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None
