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
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import UserCreationForm

from chat.models import ApiStyle, Endpoint
from chat.providers.http import check_base_url

PARAM_FIELDS = ("temperature", "top_p", "top_k", "max_tokens", "stop", "seed")


class ParamsForm(forms.Form):
    """Sampling parameters; blank means "not set" and is not sent upstream."""

    temperature = forms.FloatField(required=False, min_value=0.0, max_value=2.0)
    top_p = forms.FloatField(required=False, min_value=0.0, max_value=1.0)
    top_k = forms.IntegerField(required=False, min_value=1, max_value=100)
    max_tokens = forms.IntegerField(required=False, min_value=1, max_value=1_000_000)
    stop = forms.CharField(required=False, max_length=1000, help_text="Up to 4 sequences, one per line.")
    seed = forms.IntegerField(required=False, min_value=-(2**63), max_value=2**63 - 1)

    def clean_stop(self) -> list[str]:
        raw = self.cleaned_data.get("stop") or ""
        items = [s for s in raw.replace("\\n", "\n").split("\n") if s != ""]
        if len(items) > 4:
            raise forms.ValidationError("At most 4 stop sequences.")
        return items

    def params(self) -> dict[str, Any]:
        """Only the parameters the user set, in wire units."""
        out: dict[str, Any] = {}
        for name in PARAM_FIELDS:
            value = self.cleaned_data.get(name)
            if value in (None, "", []):
                continue
            out[name] = value
        return out


class ChatSendForm(ParamsForm):
    """One websocket ``send`` frame: a user message plus the conversation's settings."""

    turn_id = forms.UUIDField()
    content = forms.CharField(max_length=200_000, strip=False)
    role = forms.ChoiceField(choices=[("user", "user"), ("assistant", "assistant"), ("system", "system")], required=False)
    mode = forms.ChoiceField(choices=[("send", "send"), ("append", "append")], required=False)
    endpoint_id = forms.IntegerField()
    model = forms.CharField(max_length=200)
    system_prompt = forms.CharField(required=False, max_length=100_000, strip=False)

    def clean_content(self) -> str:
        content = self.cleaned_data["content"]
        if not content.strip():
            raise forms.ValidationError("Type a message first.")
        return content

    def clean_model(self) -> str:
        model = self.cleaned_data["model"].strip()
        if not model:
            raise forms.ValidationError("Pick or type a model id.")
        return model


    def clean_role(self) -> str:
        return self.cleaned_data.get("role") or "user"

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
        required=False, widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
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

    def __init__(self, *args: Any, allow_private: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.allow_private = allow_private
        self.fields["api_style"].choices = [(ApiStyle.OPENAI_CHAT.value, ApiStyle.OPENAI_CHAT.label)]

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
