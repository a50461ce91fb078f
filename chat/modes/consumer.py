"""The websocket of one mode run: ``/ws/modes/<run_id>/``.

Interface layer only. Close codes as for chat: 4401 not logged in, 4404 no such run for this
user (accepted first, then closed). On connect a pending run is claimed (once, in the database:
two tabs cannot both start it) and started in :mod:`chat.modes.runner`; frames are JSON text
(see the runner). Incoming: ``{"action": "stop"}`` stops the run.

May import: channels, Django, chat.db, chat.consumers (the ``sim://`` resolution), chat.modes.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from channels.generic.websocket import AsyncWebsocketConsumer
from django.http import Http404

from chat import db
from chat import selectors as chat_selectors
from chat.consumers import resolve_base_url
from chat.modes import runner, selectors, services
from chat.modes.models import ModeKind, ModeRun, RunStatus
from chat.modes.requests import audio_request, completion_request, embeddings_request
from chat.providers.base import EndpointConfig
from chat.selectors import TurnRefused

log = logging.getLogger(__name__)


def _prices(run: ModeRun) -> tuple[float | None, float | None]:
    for info in (run.endpoint.models_cache if run.endpoint else None) or []:
        if info.get("id") == run.model:
            return info.get("prompt_price_per_mtok"), info.get("completion_price_per_mtok")
    return None, None


def config_for(run: ModeRun, scope: dict[str, Any]) -> EndpointConfig:
    """The adapter config of the run's endpoint (the simulator resolved to this server)."""
    endpoint = run.endpoint
    assert endpoint is not None
    return EndpointConfig(
        base_url=resolve_base_url(endpoint.base_url, scope), api_key=endpoint.get_api_key(),
        extra_headers=endpoint.get_extra_headers(), api_style=endpoint.api_style,
        stream_options=endpoint.stream_options, allow_private=True if endpoint.is_simulator else None,
    )


class ModeRunConsumer(AsyncWebsocketConsumer):
    """Starts (once) and follows one mode run."""

    async def connect(self) -> None:
        self.run_id = None
        self.open = False
        user = self.scope.get("user")
        await self.accept()
        if not user or not user.is_authenticated:
            await self.close(code=4401)
            return
        try:
            run = await db.read(selectors.run_get_for_user, user=user, run_id=self.scope["url_route"]["kwargs"]["run_id"])
        except Http404:
            await self.close(code=4404)
            return
        self.open = True
        self.run_id = run.pk
        if run.status != RunStatus.PENDING or run.endpoint is None:
            await self.send(text_data=json.dumps({"t": "final", "status": run.status}))
            return
        try:  # the endpoint is still the user's to use (team membership, budgets), read now
            await db.read(chat_selectors.endpoint_for_turn, user=user, endpoint_id=run.endpoint_id)
        except TurnRefused as exc:
            await db.write(services.run_finish, run_id=run.pk, status=RunStatus.ERROR,
                           error={"message": str(exc), "code": "refused"})
            await self.send(text_data=json.dumps({"t": "final", "status": RunStatus.ERROR}))
            return
        if not await db.write(services.run_claim, run_id=run.pk):
            await self.send(text_data=json.dumps({"t": "final", "status": "claimed"}))
            return
        config = config_for(run, self.scope)
        # Frames go through one queue drained by one writer task: in order, and pushing never
        # awaits (the runner's token path never waits for this socket).
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.writer = asyncio.get_running_loop().create_task(self._write())

        def push(frame: dict[str, Any]) -> None:
            if self.open:
                self.queue.put_nowait(frame)

        if run.kind == ModeKind.COMPLETION:
            prompt_price, completion_price = _prices(run)
            coro = runner.run_completion(run.pk, user.pk, config, completion_request(run), push,
                                         prompt_price=prompt_price, completion_price=completion_price)
        elif run.kind == ModeKind.EMBEDDINGS:
            coro = runner.run_embeddings(run.pk, user.pk, config, embeddings_request(run), push)
        else:
            coro = runner.run_audio(run.pk, user.pk, config, audio_request(run), push)
        runner.start(run.pk, coro)

    async def _write(self) -> None:
        while self.open:
            frame = await self.queue.get()
            try:
                await self.send(text_data=json.dumps(frame))
            except Exception:  # the socket closed meanwhile
                self.open = False

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if not self.open or not text_data or len(text_data) > 1000:
            return
        try:
            data = json.loads(text_data)
        except ValueError:
            return
        if isinstance(data, dict) and data.get("action") == "stop" and self.run_id is not None:
            runner.stop(self.run_id)

    async def disconnect(self, code: int) -> None:
        self.open = False  # the run goes on and saves itself; a closed tab does not stop it
        writer = getattr(self, "writer", None)
        if writer is not None:
            writer.cancel()
