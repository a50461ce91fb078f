"""HTTP views of the modes: thin. Every view is scoped to the requesting user through
:mod:`chat.modes.selectors` (another user's run or endpoint is a 404 and nothing is written or
called).

Pages: ``/modes/completion/`` and ``/modes/embeddings/`` (form + history; POST creates a pending
run and redirects to it), ``/modes/r/<id>/`` (a run: form prefilled, result; a pending run is
started by the page's websocket), Continue (a completion run's prompt + completion as a new
run), vector downloads (JSON, CSV, ``.npy``), Inspect and View code.

May import: Django, chat.frames, chat.codegen, chat.modes, chat.providers.
"""

from __future__ import annotations

import csv
import io
import json
import math
import struct
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from chat import codegen, frames
from chat.models import Endpoint
from chat.modes import selectors, services
from chat.modes.forms import AudioForm, CompletionForm, EmbeddingsForm, audio_limit
from chat.modes.models import ModeKind, ModeRun
from chat.modes.requests import audio_request, completion_request, embeddings_request
from chat.providers import openai_audio, openai_completions, openai_embeddings
from chat.providers.base import EndpointConfig
from chat.selectors import endpoint_list_for_user

#: Largest similarity matrix drawn (texts); the nearest view works for every run.
MAX_HEATMAP = 64

FORMS = {ModeKind.COMPLETION: CompletionForm, ModeKind.EMBEDDINGS: EmbeddingsForm,
         ModeKind.TRANSCRIPTION: AudioForm, ModeKind.TRANSLATION: AudioForm}
TEMPLATES = {ModeKind.COMPLETION: "modes/completion.html", ModeKind.EMBEDDINGS: "modes/embeddings.html",
             ModeKind.TRANSCRIPTION: "modes/audio.html", ModeKind.TRANSLATION: "modes/audio.html"}
DEFAULT_MODELS = {ModeKind.COMPLETION: "sim-fast", ModeKind.EMBEDDINGS: "sim-embed",
                  ModeKind.TRANSCRIPTION: "sim-whisper", ModeKind.TRANSLATION: "sim-whisper"}
AUDIO_KINDS = (ModeKind.TRANSCRIPTION, ModeKind.TRANSLATION)


def _endpoints(user: AbstractBaseUser) -> list[Endpoint]:
    return list(endpoint_list_for_user(user=user))


def _initial(kind: str, user: AbstractBaseUser, run: ModeRun | None) -> dict[str, Any]:
    if run is not None:
        data: dict[str, Any] = {"endpoint": run.endpoint_id, "model": run.model, **run.params}
        if kind == ModeKind.COMPLETION:
            data["prompt"] = run.prompt
            data["stop"] = "\n".join(s.replace("\n", "\\n") for s in run.params.get("stop", []))
        elif kind == ModeKind.EMBEDDINGS:
            data["texts"] = "\n".join(run.inputs)
        else:
            data["task"] = kind
        return data
    endpoints = _endpoints(user)
    data = {"model": DEFAULT_MODELS[kind]}
    if endpoints:
        data["endpoint"] = endpoints[0].pk
        if not endpoints[0].is_simulator and endpoints[0].default_model and kind == ModeKind.COMPLETION:
            data["model"] = endpoints[0].default_model
    if kind == ModeKind.COMPLETION:
        data["max_tokens"] = 128
    elif kind == ModeKind.EMBEDDINGS:
        data["encoding_format"] = "float"
    else:
        data.update({"task": kind, "response_format": "verbose_json", "stream": True})
    return data


def _page(request: HttpRequest, kind: str, form: Any, run: ModeRun | None, status: int = 200) -> HttpResponse:
    context: dict[str, Any] = {
        "kind": "audio" if kind in AUDIO_KINDS else kind, "form": form, "run": run,
        "history": selectors.run_list_for_user(user=request.user, kind=AUDIO_KINDS if kind in AUDIO_KINDS else kind),
        "audio_limit": audio_limit(),
        "models": sorted({i.get("id") for e in _endpoints(request.user) for i in (e.models_cache or []) if i.get("id")}),
    }
    if run is not None:
        context.update(run_context(run))
    return render(request, TEMPLATES[kind], context, status=status)


def _mode_page(request: HttpRequest, kind: str) -> HttpResponse:
    form_class = FORMS[kind]
    if request.method == "POST":
        form = form_class(request.POST, request.FILES, user=request.user)
        if form.is_valid():
            d = form.cleaned_data
            if kind in AUDIO_KINDS:
                upload = d["file"]
                run = services.run_create(user=request.user, endpoint=d["endpoint"], kind=d["task"], model=d["model"],
                                          params=form.params(), prompt=d.get("prompt", ""), audio=upload.read(),
                                          audio_name=upload.name[:200], audio_type=(upload.content_type or "")[:100])
            elif kind == ModeKind.COMPLETION:
                run = services.run_create(user=request.user, endpoint=d["endpoint"], kind=kind, model=d["model"],
                                          params=form.params(), prompt=d["prompt"])
            else:
                run = services.run_create(user=request.user, endpoint=d["endpoint"], kind=kind, model=d["model"],
                                          params=form.params(), prompt="\n".join(d["texts"]), inputs=d["texts"])
            return redirect("chat:modes:run", run_id=run.pk)
        return _page(request, kind, form, None, status=400)
    return _page(request, kind, form_class(initial=_initial(kind, request.user, None), user=request.user), None)


def completion(request: HttpRequest) -> HttpResponse:
    """The raw completion page (GET) or a new run (POST)."""
    return _mode_page(request, ModeKind.COMPLETION)


def audio(request: HttpRequest) -> HttpResponse:
    """The transcription / translation page (GET) or a new run (POST, multipart)."""
    return _mode_page(request, ModeKind.TRANSCRIPTION)


def embeddings(request: HttpRequest) -> HttpResponse:
    """The embeddings page (GET) or a new run (POST)."""
    return _mode_page(request, ModeKind.EMBEDDINGS)


@require_safe
def run_page(request: HttpRequest, run_id: str) -> HttpResponse:
    """One run of the user (404 otherwise) with the form prefilled from it."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    if run.kind not in FORMS:
        raise Http404("No such run")
    form = FORMS[run.kind](initial=_initial(run.kind, request.user, run), user=request.user)
    return _page(request, run.kind, form, run)


@require_POST
def run_continue(request: HttpRequest, run_id: str) -> HttpResponse:
    """A new completion run whose prompt is this run's prompt + completion (same settings)."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id, kind=ModeKind.COMPLETION)
    if run.endpoint is None:
        raise Http404("The endpoint of this run was deleted")
    new = services.run_create(user=request.user, endpoint=run.endpoint, kind=run.kind, model=run.model,
                              params=run.params, prompt=(run.prompt + run.output)[:200_000], continued_from=run)
    return redirect("chat:modes:run", run_id=new.pk)


# ---- results --------------------------------------------------------------------------------


def vectors_of(run: ModeRun) -> list[list[float]]:
    """The stored vectors of an embeddings run (float32 → float), one per input."""
    raw = bytes(run.vectors or b"")
    if not raw or not run.dims:
        return []
    flat = struct.unpack(f"<{len(raw) // 4}f", raw)
    return [list(flat[i:i + run.dims]) for i in range(0, len(flat), run.dims)]


def cosine_matrix(vectors: list[list[float]]) -> list[list[float]]:
    """Cosine similarity of every pair (1.0 on the diagonal; 0.0 for a zero vector)."""
    norms = [math.sqrt(sum(v * v for v in vec)) for vec in vectors]
    out = []
    for i, a in enumerate(vectors):
        row = []
        for j, b in enumerate(vectors):
            denom = norms[i] * norms[j]
            row.append(sum(x * y for x, y in zip(a, b, strict=True)) / denom if denom else 0.0)
        out.append(row)
    return out


def _heat_class(value: float) -> str:
    """One of 10 colour classes (CSS, no inline styles) for a similarity in [-1, 1]."""
    return f"heat-{max(0, min(9, int((value + 1) / 2 * 10)))}"


def _logprob_tokens(logprobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for t in logprobs:
        try:
            p = math.exp(min(0.0, max(-1000.0, float(t.get("logprob")))))
        except (TypeError, ValueError, OverflowError):
            p = 0.0
        tint = "p-high" if p >= 0.9 else "p-mid" if p >= 0.5 else "p-low" if p >= 0.2 else "p-vlow"
        alts = ", ".join(f"{a[0]!r} {math.exp(min(0.0, float(a[1]))):.1%}" for a in t.get("top", []) if len(a) == 2)
        out.append({"token": t.get("token", ""), "tint": tint, "title": f"{p:.1%}" + (f" · top: {alts}" if alts else "")})
    return out


def run_context(run: ModeRun) -> dict[str, Any]:
    """Template context of a run's result: metrics strip, error hint, logprob tokens,
    embeddings table, similarity heat map and nearest lists."""
    ctx: dict[str, Any] = {
        "metric_items": frames.metric_items(run.metrics or {}, run.usage or {}, run.finish_reason),
        "error_hint": frames.error_hint(run.error) if run.error else "",
        "streaming": run.status in ("pending", "streaming") and not selectors.run_is_stale(run),
        "stale": selectors.run_is_stale(run),
    }
    if run.kind in AUDIO_KINDS:
        ctx["segments"] = (run.result or {}).get("segments", [])
    if run.kind == ModeKind.COMPLETION:
        tokens = _logprob_tokens(run.logprobs or [])
        ctx["lp_tokens"] = tokens if "".join(t["token"] for t in tokens) == run.output else []
        ctx["all_lp_tokens"] = tokens
    elif run.kind == ModeKind.EMBEDDINGS:
        vectors = vectors_of(run)
        rows = []
        for i, (text, vec) in enumerate(zip(run.inputs, vectors, strict=False)):
            rows.append({"i": i, "text": text, "dims": len(vec), "norm": math.sqrt(sum(v * v for v in vec)),
                         "first": [f"{v:.4f}" for v in vec[:6]]})
        ctx["rows"] = rows
        ctx["latency_ms"] = (run.metrics or {}).get("total_ms")
        if vectors and len(vectors) <= MAX_HEATMAP:
            matrix = cosine_matrix(vectors)
            ctx["heatmap"] = [
                {"text": run.inputs[i], "i": i, "cells": [
                    {"j": j, "value": f"{v:.4f}", "cls": _heat_class(v), "title": f"{run.inputs[i][:60]} ↔ {run.inputs[j][:60]}: {v:.4f}"}
                    for j, v in enumerate(row)]}
                for i, row in enumerate(matrix)
            ]
            ctx["nearest"] = [
                {"i": i, "text": run.inputs[i], "others": sorted(
                    ({"text": run.inputs[j], "value": f"{v:.4f}"} for j, v in enumerate(row) if j != i),
                    key=lambda o: -float(o["value"]))}
                for i, row in enumerate(matrix)
            ]
    return ctx


@require_safe
def run_download(request: HttpRequest, run_id: str, fmt: str) -> HttpResponse:
    """The vectors of an embeddings run as ``json`` (``{"model", "inputs", "embeddings"}``),
    ``csv`` (text, then one column per dimension) or ``npy`` (NumPy v1.0, ``<f4``, shape
    ``(inputs, dims)``)."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id, kind=ModeKind.EMBEDDINGS)
    vectors = vectors_of(run)
    if not vectors:
        raise Http404("No vectors")
    name = f"embeddings-{str(run.pk)[:8]}"
    if fmt == "json":
        body = json.dumps({"model": run.model, "inputs": run.inputs, "embeddings": vectors})
        response = HttpResponse(body, content_type="application/json")
    elif fmt == "csv":
        buf = io.StringIO()
        writer = csv.writer(buf)
        writer.writerow(["text", *[f"d{k}" for k in range(run.dims)]])
        for text, vec in zip(run.inputs, vectors, strict=False):
            writer.writerow([text, *[repr(v) for v in vec]])
        response = HttpResponse(buf.getvalue(), content_type="text/csv; charset=utf-8")
    elif fmt == "npy":
        header = f"{{'descr': '<f4', 'fortran_order': False, 'shape': ({len(vectors)}, {run.dims}), }}"
        pad = 64 - (10 + len(header) + 1) % 64
        header_bytes = (header + " " * pad + "\n").encode("latin-1")
        body = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header_bytes)) + header_bytes + bytes(run.vectors)
        response = HttpResponse(body, content_type="application/octet-stream")
    else:
        raise Http404("Unknown format")
    response["Content-Disposition"] = f'attachment; filename="{name}.{fmt}"'
    return response


@require_safe
def run_inspect(request: HttpRequest, run_id: str) -> HttpResponse:
    """The request (secrets redacted) and the raw answer of a run."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    inspect = run.inspect or {}
    return render(request, "modes/inspect.html", {
        "run": run, "request_json": json.dumps(inspect.get("request", {}), indent=2, ensure_ascii=False),
        "events": inspect.get("events", []), "truncated": inspect.get("events_truncated"),
        "error_json": json.dumps(run.error, indent=2, ensure_ascii=False) if run.error else "",
    })


@require_safe
def run_code(request: HttpRequest, run_id: str) -> HttpResponse:
    """curl / Python / JavaScript for the run's request, keys from environment variables."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    endpoint = run.endpoint
    if endpoint is None or run.kind not in FORMS:
        raise Http404("No endpoint")
    base = endpoint.base_url
    if endpoint.is_simulator:
        base = request.build_absolute_uri("/simulator/v1")
    config = EndpointConfig(base_url=base, api_key="set" if (endpoint.api_key_encrypted or endpoint.is_simulator) else "",
                            extra_headers={k: "" for k in endpoint.extra_header_names or []},
                            stream_options=endpoint.stream_options)
    if run.kind in AUDIO_KINDS:
        s = codegen.audio_snippets(openai_audio.build_request, config, audio_request(run), endpoint_name=endpoint.name,
                                   filename=run.audio_name or "audio.wav")
    elif run.kind == ModeKind.COMPLETION:
        s = codegen.snippets_for(openai_completions.build_request, config, completion_request(run),
                                 endpoint_name=endpoint.name)
    else:
        s = codegen.snippets_for(openai_embeddings.build_request, config, embeddings_request(run),
                                 endpoint_name=endpoint.name)
    return render(request, "modes/code.html", {"s": s, "endpoint": endpoint})


@require_safe
def run_audio_file(request: HttpRequest, run_id: str) -> HttpResponse:
    """The audio of a run of the user, for the page's player (an audio media type only; other
    types are sent as ``application/octet-stream``)."""
    run = selectors.run_get_for_user(user=request.user, run_id=run_id)
    if run.kind not in AUDIO_KINDS or not run.audio:
        raise Http404("No audio")
    media = run.audio_type.split(";")[0].strip().lower()
    response = HttpResponse(bytes(run.audio), content_type=media if media.startswith("audio/") else "application/octet-stream")
    response["Content-Disposition"] = "inline"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def mode_urls(run: ModeRun) -> dict[str, str]:
    """Links of a run (for templates)."""
    return {"page": reverse("chat:modes:run", args=[run.pk])}
