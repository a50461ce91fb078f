"""The simulator as a pure ASGI 3 application (no Django): a deterministic upstream that speaks
every API style of the seeds.

Routes, relative to ``mount_prefix`` (``/simulator/v1`` in-process, ``/v1`` standalone):

- ``GET  {prefix}/models`` – seed 002 ``ModelMetadataList`` (``context_length``,
  ``max_completion_tokens``, ``pricing``); ``GET {prefix}/models/{id}`` – ``ModelMetadata``.
- ``POST {prefix}/chat/completions`` – seed 000/002 ``createChatCompletion`` and Sansa (seed
  001), see :mod:`chat.simulator.completions`.
- ``POST {prefix}/messages`` – seed 002/004 ``createMessage`` (Anthropic Messages), and
  ``POST {prefix}/messages/count_tokens`` – ``countMessageTokens``, see
  :mod:`chat.simulator.messages`.
- ``POST {prefix}/responses`` – seed 002 ``/responses`` (OpenAI Responses), see
  :mod:`chat.simulator.responses`.
- ``POST {prefix}/completions`` and ``POST {prefix}/embeddings`` – seed 002, see
  :mod:`chat.simulator.legacy`; ``POST {prefix}/audio/transcriptions`` and
  ``/audio/translations`` (multipart), see :mod:`chat.simulator.audio`.

Behaviour comes from knobs (:mod:`chat.simulator.knobs`), the same in every style.

Control routes, under the mount's parent (``/simulator/_simulator/…`` in-process,
``/_simulator/…`` standalone): ``GET requests`` (the recorder as JSON), ``POST reset``,
``GET knobs`` (knob help).

A stop is a client disconnect: a task waits for ASGI ``http.disconnect`` while the response is
generated, every pause wakes up on it, and nothing is written after it.

May import: the standard library and this package only (no Django).
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from .audio import handle_transcriptions, handle_translations
from .completions import handle_chat_completions
from .errors import (
    fault_response,
    method_not_allowed,
    missing_key_error,
    not_found,
    validation_error,
)
from .knobs import KNOB_HELP, MODELS, KnobError, parse_knobs, split_model
from .legacy import handle_completions, handle_embeddings
from .messages import handle_count_tokens, handle_messages
from .recorder import Recorder
from .responses import handle_responses
from .structured import MAX_ANSWER_CHARS as _ANSWER_CHARS
from .wire import Exchange, Receive, Scope, Send, header, plain_json, read_body

__all__ = ["SimulatorApp", "create_app", "simulator_asgi_app"]

#: Largest request body read by default; more gets the 413 proxy page.
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Largest structured (JSON schema) answer by default, characters.
MAX_ANSWER_CHARS = 1_000_000

#: POST routes: sub-path -> handler(exchange, X-Simulator-Options, raw body).
_POST_ROUTES = {
    "/chat/completions": handle_chat_completions,
    "/messages": handle_messages,
    "/messages/count_tokens": handle_count_tokens,
    "/responses": handle_responses,
    "/completions": handle_completions,  # seed 002, chat.simulator.legacy
    "/embeddings": handle_embeddings,
    "/audio/transcriptions": handle_transcriptions,  # seed 002, chat.simulator.audio
    "/audio/translations": handle_translations,
}


class SimulatorApp:
    """The ASGI application. ``recorder`` holds what it received and sent (only with
    ``control``: without it nothing is kept). ``max_body_bytes``: larger request bodies get 413;
    ``max_answer_chars``: the largest JSON-schema answer it builds."""

    def __init__(
        self,
        mount_prefix: str = "/v1",
        *,
        control: bool = True,
        max_recorded: int = 500,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_answer_chars: int = MAX_ANSWER_CHARS,
    ):
        self.prefix = "/" + mount_prefix.strip("/")
        parent = self.prefix.rsplit("/", 1)[0]
        self.control_prefix = f"{parent}/_simulator"
        self.control = control
        self.max_body_bytes = max_body_bytes
        self.max_answer_chars = max_answer_chars
        self.recorder = Recorder(max_recorded, keep=control)
        self._counter = itertools.count(1)

    # ---- entry ---------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """ASGI 3 entry point: ``http`` and ``lifespan``; websockets are closed."""
        kind = scope["type"]
        if kind == "lifespan":
            await self._lifespan(receive, send)
            return
        if kind != "http":
            if kind == "websocket":
                await receive()
                await send({"type": "websocket.close", "code": 1000})
            return
        path: str = scope["path"]
        root = scope.get("root_path") or ""
        if root and not path.startswith(root) and (root + path).startswith(self.prefix):
            path = root + path
        if self.control and path.startswith(self.control_prefix + "/"):
            await self._control(scope, path[len(self.control_prefix) :], receive, send)
            return
        await self._api(scope, path, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    def next_request_id(self) -> str:
        """The next ``x-request-id``: ``sim-000001``, ``sim-000002``, … (reset restarts)."""
        return f"sim-{next(self._counter):06d}"

    def reset(self) -> None:
        """Forget recorded requests and restart request ids at ``sim-000001``."""
        self.recorder.reset()
        self._counter = itertools.count(1)

    # ---- control routes ------------------------------------------------------------------

    async def _control(self, scope: Scope, sub: str, receive: Receive, send: Send) -> None:
        await read_body(receive, 0)
        method = scope["method"]
        if sub == "/requests" and method == "GET":
            await plain_json(send, 200, self.recorder.to_list())
        elif sub == "/reset" and method == "POST":
            self.reset()
            await plain_json(send, 200, {"ok": True})
        elif sub == "/knobs" and method == "GET":
            await plain_json(send, 200, KNOB_HELP)
        else:
            await plain_json(send, 404, {"error": "Not found"})

    # ---- API routes ----------------------------------------------------------------------

    async def _api(self, scope: Scope, path: str, receive: Receive, send: Send) -> None:
        request_id = self.next_request_id()
        record, api_key = self.recorder.start(
            request_id=request_id,
            method=scope["method"],
            path=path,
            query_string=scope.get("query_string", b"").decode("latin-1"),
            raw_headers=list(scope.get("headers", [])),
        )
        ex = Exchange(send=send, record=record, request_id=request_id, api_key=api_key)
        _ANSWER_CHARS.set(self.max_answer_chars)  # this request's context only
        raw = await read_body(receive, self.max_body_bytes)
        if raw is None:
            record.mark_disconnected()
            record.finish("disconnected")
            return
        watcher = asyncio.ensure_future(self._watch(receive, ex))
        try:
            await self._route(ex, scope, path, raw)
        finally:
            watcher.cancel()
            record.finish("disconnected" if ex.disconnected.is_set() else "complete")

    async def _watch(self, receive: Receive, ex: Exchange) -> None:
        """Wait for ``http.disconnect`` and wake every pause of this exchange."""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not ex.closing:
                    ex.record.mark_disconnected()
                ex.disconnected.set()
                return

    async def _route(self, ex: Exchange, scope: Scope, path: str, raw: bytes) -> None:
        method = scope["method"]
        if len(raw) > self.max_body_bytes:
            await ex.error(fault_response("413", **ex.fault_args("", 7)))
            return
        if not (path == self.prefix or path.startswith(self.prefix + "/")):
            await ex.error(not_found(path))
            return
        sub = path[len(self.prefix) :].rstrip("/")
        options = header(scope, b"x-simulator-options")
        handler = _POST_ROUTES.get(sub)
        if handler is not None:
            if method != "POST":
                await ex.error(method_not_allowed())
                return
            await handler(ex, options, raw)
        elif sub == "/models" or sub.startswith("/models/"):
            if method != "GET":
                await ex.error(method_not_allowed())
                return
            await self._models(ex, options, sub[len("/models/") :])
        else:
            await ex.error(not_found(path))

    async def _models(self, ex: Exchange, options: str | None, model_id: str) -> None:
        """``GET /models`` (seed 002 ``ModelMetadataList``) and ``GET /models/{id}``."""
        try:
            knobs = parse_knobs("", options)
        except KnobError as exc:
            await ex.error(
                validation_error(
                    "invalid_option", request_id=ex.request_id, message=str(exc), param=exc.param
                ),
            )
            return
        ex.record.knobs = knobs.as_dict()
        if knobs.require_key and not ex.api_key:
            await ex.error(missing_key_error(ex.request_id))
            return
        if knobs.http_fault:
            args = ex.fault_args(model_id or "sim-fast", knobs.retry_after)
            await ex.error(fault_response(knobs.http_fault, **args))
            return
        if not model_id:
            body: dict[str, Any] = {
                "object": "list",
                "data": [spec.metadata() for spec in MODELS.values()],
            }
            await ex.json(200, body)
            return
        spec = MODELS.get(split_model(model_id)[0])
        if spec is None:
            await ex.error(not_found(model_id))
            return
        await ex.json(200, spec.metadata())


def create_app(
    mount_prefix: str = "/v1",
    *,
    control: bool = True,
    max_recorded: int = 500,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_answer_chars: int = MAX_ANSWER_CHARS,
) -> SimulatorApp:
    """A new simulator ASGI app serving the API under ``mount_prefix`` (``/v1`` standalone,
    ``/simulator/v1`` in-process) and, when ``control``, ``/_simulator/…`` under the prefix's
    parent. Each app has its own :class:`~chat.simulator.recorder.Recorder` (``app.recorder``)
    keeping the last ``max_recorded`` requests (none without ``control``). Request bodies over
    ``max_body_bytes`` get 413; JSON-schema answers stop at ``max_answer_chars`` characters.
    """
    return SimulatorApp(
        mount_prefix, control=control, max_recorded=max_recorded,
        max_body_bytes=max_body_bytes, max_answer_chars=max_answer_chars,
    )


_SINGLETON: SimulatorApp | None = None


def simulator_asgi_app(
    *,
    control: bool = True,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_answer_chars: int = MAX_ANSWER_CHARS,
) -> SimulatorApp:
    """The process-wide app for the in-process mount: ``/simulator/v1/…`` (API) and
    ``/simulator/_simulator/…`` (recorder; only when ``control``, which the first call
    decides). Route every ``/simulator/`` path to it, e.g. in ``playground/asgi.py``::

        if scope["type"] == "http" and scope["path"].startswith("/simulator/"):
            return await simulator_asgi_app()(scope, receive, send)

    With ``control`` the recorder keeps the last 100 requests, prompts included, and serves
    them; without it nothing is kept. The app checks no credentials itself: the playground's
    ASGI mount (``playground.asgi.SimulatorGate``) does. The first call decides the options.
    """
    global _SINGLETON
    if _SINGLETON is None:
        _SINGLETON = create_app(
            "/simulator/v1", control=control, max_recorded=100,
            max_body_bytes=max_body_bytes, max_answer_chars=max_answer_chars,
        )
    return _SINGLETON
