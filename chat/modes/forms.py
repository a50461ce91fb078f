"""Forms of the modes: every size a user controls has a limit, checked before any call, and
the error is shown next to its field.

May import: Django, chat.models, chat.modes.
"""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.conf import settings

from chat.models import Endpoint
from chat.modes.selectors import model_context_length
from chat.selectors import endpoint_list_for_user

#: Largest raw prompt, characters.
MAX_PROMPT_CHARS = 200_000
#: Stop sequences: at most this many, each at most STOP_CHARS characters.
MAX_STOPS = 4
STOP_CHARS = 200
#: Embeddings: most texts per run, characters per text, characters in all.
MAX_TEXTS = 64
MAX_TEXT_CHARS = 8_000
MAX_TEXTS_TOTAL_CHARS = 100_000
#: Characters per token used to estimate a text's tokens against the model's context length
#: before the call (a conservative English average; the server's count is shown after).
CHARS_PER_TOKEN = 4


def _limit(name: str, default: int) -> int:
    return int(getattr(settings, name, default))


class EndpointModelForm(forms.Form):
    """The endpoint (one of the user's) and the model name."""

    endpoint = forms.ModelChoiceField(queryset=Endpoint.objects.none(), empty_label=None)
    model = forms.CharField(max_length=200, widget=forms.TextInput(attrs={"list": "mode-models", "autocomplete": "off"}))

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["endpoint"].queryset = endpoint_list_for_user(user=user)

    def clean_model(self) -> str:
        return self.cleaned_data["model"].strip()


class CompletionForm(EndpointModelForm):
    """A raw completion: ``prompt`` and seed 002 ``CompletionRequest`` parameters. ``logprobs``
    empty = off, else the number of alternatives per token (0–20)."""

    prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 14, "class": "raw-prompt"}), strip=False,
                             max_length=MAX_PROMPT_CHARS)
    max_tokens = forms.IntegerField(required=False, min_value=1, max_value=131_072, initial=128)
    temperature = forms.FloatField(required=False, min_value=0, max_value=2)
    top_p = forms.FloatField(required=False, min_value=0, max_value=1)
    stop = forms.CharField(required=False, strip=False, widget=forms.Textarea(attrs={"rows": 2}),
                           help_text="One stop sequence per line (\\n for a newline).", max_length=MAX_STOPS * (STOP_CHARS + 1))
    logprobs = forms.IntegerField(required=False, min_value=0, max_value=20,
                                  help_text="Alternatives per token; empty: no log probabilities.")

    def clean_stop(self) -> list[str]:
        lines = [line.replace("\\n", "\n") for line in self.cleaned_data["stop"].splitlines() if line]
        if len(lines) > MAX_STOPS:
            raise forms.ValidationError(f"At most {MAX_STOPS} stop sequences.")
        if any(len(line) > STOP_CHARS for line in lines):
            raise forms.ValidationError(f"A stop sequence is at most {STOP_CHARS} characters.")
        return lines

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        endpoint, prompt = data.get("endpoint"), data.get("prompt")
        if endpoint is not None and prompt and data.get("model"):
            context = model_context_length(endpoint, data["model"])
            estimate = math.ceil(len(prompt) / CHARS_PER_TOKEN)
            if context and estimate > context:
                self.add_error("prompt", f"About {estimate:,} tokens: more than {data['model']}'s context "
                                         f"length of {context:,} tokens.")
        return data

    def params(self) -> dict[str, Any]:
        """The stored parameters (only what was set)."""
        d = self.cleaned_data
        out = {k: d[k] for k in ("max_tokens", "temperature", "top_p", "logprobs") if d.get(k) is not None}
        if d.get("stop"):
            out["stop"] = d["stop"]
        return out


class EmbeddingsForm(EndpointModelForm):
    """Texts to embed, one per line (blank lines ignored), and ``encoding_format``."""

    texts = forms.CharField(widget=forms.Textarea(attrs={"rows": 10}), strip=False,
                            max_length=MAX_TEXTS_TOTAL_CHARS + MAX_TEXTS,
                            help_text=f"One text per line; at most {MAX_TEXTS} texts of {MAX_TEXT_CHARS:,} characters.")
    encoding_format = forms.ChoiceField(choices=[("float", "float"), ("base64", "base64 (little-endian float32)"),
                                                 ("", "server default")], required=False, initial="float")

    def clean_texts(self) -> list[str]:
        lines = [line.strip() for line in self.cleaned_data["texts"].splitlines() if line.strip()]
        if not lines:
            raise forms.ValidationError("Enter at least one text.")
        if len(lines) > MAX_TEXTS:
            raise forms.ValidationError(f"{len(lines)} texts: at most {MAX_TEXTS} per run.")
        for i, line in enumerate(lines, 1):
            if len(line) > MAX_TEXT_CHARS:
                raise forms.ValidationError(f"Text {i} has {len(line):,} characters: at most {MAX_TEXT_CHARS:,}.")
        return lines

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        endpoint, texts = data.get("endpoint"), data.get("texts")
        if endpoint is not None and texts and data.get("model"):
            context = model_context_length(endpoint, data["model"])
            if context:
                for i, text in enumerate(texts, 1):
                    estimate = math.ceil(len(text) / CHARS_PER_TOKEN)
                    if estimate > context:
                        self.add_error("texts", f"Text {i} is about {estimate:,} tokens: more than "
                                                f"{data['model']}'s limit of {context:,} tokens.")
                        break
        return data

    def params(self) -> dict[str, Any]:
        return {"encoding_format": self.cleaned_data.get("encoding_format") or ""}


#: Audio: the seed's types (by extension or media type) and size limit (25 MB), capped by the
#: site's upload limit (``PLAYGROUND_MAX_ATTACHMENT_BYTES``).
AUDIO_EXTENSIONS = ("flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm")
AUDIO_TYPES = ("audio/", "video/mp4", "video/webm", "video/mpeg", "application/ogg")
SEED_AUDIO_LIMIT = 25 * 1024 * 1024
LANGUAGES = ("en", "es", "fr", "de", "it", "pt", "nl", "ja", "zh", "ru", "ko", "ar", "hi", "pl", "tr", "sv")


def audio_limit() -> int:
    """Largest audio file accepted, bytes."""
    return min(SEED_AUDIO_LIMIT, _limit("PLAYGROUND_MAX_ATTACHMENT_BYTES", 10 * 1024 * 1024))


class AudioForm(EndpointModelForm):
    """A transcription or translation: the file (uploaded or recorded in the page) and seed 002
    ``TranscriptionTranslationRequestProperties``."""

    task = forms.ChoiceField(choices=[("transcription", "Transcription"), ("translation", "Translation (to English)")])
    file = forms.FileField(required=False, help_text="FLAC, MP3, MP4, M4A, Ogg, WAV or WebM; or record below.")
    language = forms.ChoiceField(choices=[("", "auto"), *[(c, c) for c in LANGUAGES]], required=False)
    prompt = forms.CharField(required=False, max_length=2000, widget=forms.TextInput())
    response_format = forms.ChoiceField(help_text="Segments come with verbose_json when not streamed.", choices=[("json", "json"), ("text", "text"),
                                                 ("verbose_json", "verbose_json (segments)")], initial="verbose_json")
    temperature = forms.FloatField(required=False, min_value=0, max_value=1)
    stream = forms.BooleanField(required=False, initial=True)

    def clean_file(self) -> Any:
        upload = self.cleaned_data.get("file")
        if upload is None:
            raise forms.ValidationError("Choose an audio file or record one.")
        limit = audio_limit()
        if upload.size > limit:
            raise forms.ValidationError(f"The file has {upload.size:,} bytes: at most {limit:,}.")
        if upload.size == 0:
            raise forms.ValidationError("The file is empty.")
        ext = upload.name.rsplit(".", 1)[-1].lower() if "." in upload.name else ""
        media = (upload.content_type or "").split(";")[0].strip().lower()
        if ext not in AUDIO_EXTENSIONS and not media.startswith(AUDIO_TYPES):
            raise forms.ValidationError("Not an audio file the API takes (FLAC, MP3, MP4, MPEG, MPGA, M4A, Ogg, WAV, WebM).")
        return upload

    def params(self) -> dict[str, Any]:
        d = self.cleaned_data
        out: dict[str, Any] = {"response_format": d["response_format"], "stream": bool(d.get("stream"))}
        for k in ("language", "prompt"):
            if d.get(k):
                out[k] = d[k]
        if d.get("temperature") is not None:
            out["temperature"] = d["temperature"]
        return out
