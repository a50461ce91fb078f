"""Adapter requests of stored runs (shared by the runner's socket, Inspect and View code).

May import: chat.providers, chat.modes.models.
"""

from __future__ import annotations

from chat.modes.models import ModeRun
from chat.providers.openai_audio import AudioRequest
from chat.providers.openai_completions import CompletionRequest
from chat.providers.openai_embeddings import EmbeddingsRequest


def completion_request(run: ModeRun) -> CompletionRequest:
    """The ``/completions`` request of a completion run."""
    params = {k: v for k, v in run.params.items() if k != "logprobs"}
    return CompletionRequest(model=run.model, prompt=run.prompt, params=params, logprobs=run.params.get("logprobs"))


def embeddings_request(run: ModeRun) -> EmbeddingsRequest:
    """The ``/embeddings`` request of an embeddings run."""
    return EmbeddingsRequest(model=run.model, inputs=tuple(run.inputs),
                             encoding_format=run.params.get("encoding_format", ""))


def audio_request(run: ModeRun) -> AudioRequest:
    """The ``/audio/*`` request of a transcription or translation run."""
    p = run.params
    return AudioRequest(task=run.kind, model=run.model, audio=bytes(run.audio or b""), filename=run.audio_name or "audio",
                        media_type=run.audio_type or "application/octet-stream", language=p.get("language", ""),
                        prompt=p.get("prompt", ""), response_format=p.get("response_format", "json"),
                        temperature=p.get("temperature"), stream=bool(p.get("stream")))
