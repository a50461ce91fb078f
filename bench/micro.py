"""``python -m bench.micro``: CPU cost per SSE event of each stage of the upstream read path.

Streams: the real llama.cpp recordings in ``tests/fixtures/llamacpp/`` (one per API style),
their answer deltas repeated to ``--events`` events (head and tail events kept as recorded). A
server in a *separate process* serves them on loopback over HTTP/1.1 chunked encoding, so the
CPU measured here (``time.process_time`` of this process) is the client's alone. Two serving
modes: ``bulk`` (the body in 16 KiB chunks: parsing cost) and ``paced`` (one event per chunk,
``--interval-us`` apart, so each event is its own network read, as with real token streams).

Stages, each a complete read of the stream through the project's client (``make_client``:
the pinned transport, ``follow_redirects=False``), reported in µs of CPU per event:

* ``asyncio socket (no httpx)``: ``asyncio.open_connection`` reads of the same response, the
  floor any client pays per network read;
* ``httpx aiter_raw`` / ``aiter_bytes`` / ``aiter_lines``: httpx alone (``, anyio``: on
  httpcore's anyio backend instead of the project's asyncio-streams backend);
* ``httpx-sse aiter_sse``: httpx-sse's ``EventSource`` (its own line decoder on ``aiter_text``);
* ``iter_sse (ours)``: :func:`chat.providers.http.iter_sse` (line splitting on decoded bytes
  feeding httpx-sse's ``SSEDecoder``), the path the adapters use;
* ``+ json.loads`` / ``+ orjson.loads``: the same plus decoding each event's data (orjson only
  when installed; it is not a project dependency);
* ``adapter.stream``: the whole adapter (read, decode, interpret, guard, events).

and, without I/O, ``adapter work``: the adapter's own work per event on pre-read events —
``RawEvent`` building (scrub, budget), ``json.loads``, ``state.interpret`` and
``StreamGuard.process`` — the figure the issue's 20 µs target is about.

Options: ``--events`` (default 3000), ``--repeat`` (default 5; the median run is reported),
``--mode bulk|paced|both`` (default both), ``--interval-us`` (paced mode, default 300),
``--json FILE`` (also write the figures as JSON).

May import: the standard library, httpx, httpcore, httpx-sse, ``chat.providers`` (no Django).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpcore
import httpx
from httpx_sse import EventSource

from chat.providers import base, get_adapter
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig, Limits, RawEvent
from chat.providers.errors import secret_variants
from chat.providers.http import NOT_JSON, PinnedTransport, iter_sse, loads, make_client
from chat.providers.text import StreamGuard

try:  # optional, for comparison only
    import orjson
except ImportError:  # pragma: no cover - depends on the environment
    orjson = None

ROOT = Path(__file__).resolve().parent.parent
RECORDINGS = {
    "openai_chat": ("openai_chat_smollm2_paris.sse", '"delta":{"content"', "/v1/chat/completions"),
    "anthropic_messages": ("messages_smollm2.sse", '"text_delta"', "/v1/messages"),
    "openai_responses": ("responses_smollm2.sse", "response.output_text.delta", "/v1/responses"),
}
STATES = {
    "openai_chat": "_Chunks",
    "anthropic_messages": "_MessageStream",
    "openai_responses": "_ResponseStream",
}
KEY = "sk-bench-KEY-0123456789abcdef"


def build_stream(style: str, events: int) -> bytes:
    """The recorded stream of ``style`` with its answer deltas cycled to ``events`` deltas."""
    name, marker, _ = RECORDINGS[style]
    text = (ROOT / "tests" / "fixtures" / "llamacpp" / name).read_bytes().decode()
    blocks = [b for b in text.replace("\r\n", "\n").split("\n\n") if b.strip()]
    deltas = [i for i, b in enumerate(blocks) if marker in b]
    head, tail = blocks[: deltas[0]], blocks[deltas[-1] + 1 :]
    body = [blocks[i] for i in deltas]
    cycled = [body[i % len(body)] for i in range(events)]
    return ("\n\n".join(head + cycled + tail) + "\n\n").encode()


# ---- the server (its own process) ----------------------------------------------------------


def _serve(streams: dict[str, bytes], mode: str, interval_s: float, ports: Any) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                path = head.split(b" ", 2)[1].decode()
                style = next(s for s, r in RECORDINGS.items() if path.endswith(r[2]))
                body = streams[style]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                if mode == "bulk":
                    pieces = [body[i : i + 16384] for i in range(0, len(body), 16384)]
                else:
                    pieces = [p + b"\n\n" for p in body.split(b"\n\n") if p]
                for piece in pieces:
                    writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                    if mode == "paced":
                        await writer.drain()
                        await asyncio.sleep(interval_s)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        ports.put(server.sockets[0].getsockname()[1])
        async with server:
            await server.serve_forever()

    asyncio.run(main())


# ---- stages ---------------------------------------------------------------------------------

Stage = Callable[[httpx.AsyncClient, str, str], Awaitable[int]]


async def _socket(client: httpx.AsyncClient, url: str, style: str) -> int:
    """No httpx: asyncio's own socket reads of the same response (the floor of any client)."""
    port = int(url.split(":")[2].split("/")[0])
    path = url.split(str(port), 1)[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 2\r\n\r\n{{}}".encode())
    reads = 0
    tail = b""
    while not tail.endswith(b"0\r\n\r\n"):
        data = await reader.read(65536)
        if not data:
            break
        reads += 1
        tail = (tail + data)[-5:]
    writer.close()
    return reads


async def _raw(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        return sum([1 async for _ in r.aiter_raw()])


async def _bytes(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        return sum([1 async for _ in r.aiter_bytes()])


async def _lines(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        return sum([1 async for _ in r.aiter_lines()])


async def _httpx_sse(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        return sum([1 async for _ in EventSource(r).aiter_sse()])


async def _iter_sse(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        return sum([1 async for _ in iter_sse(r, Limits())])


async def _iter_sse_json(client: httpx.AsyncClient, url: str, style: str) -> int:
    async with client.stream("POST", url, json={"stream": True}) as r:
        n = 0
        async for _, data in iter_sse(r, Limits()):
            n += loads(data) is not NOT_JSON
        return n


async def _iter_sse_orjson(client: httpx.AsyncClient, url: str, style: str) -> int:
    loads_ = orjson.loads  # type: ignore[union-attr]
    async with client.stream("POST", url, json={"stream": True}) as r:
        n = 0
        async for _, data in iter_sse(r, Limits()):
            try:
                loads_(data)
                n += 1
            except ValueError:
                pass
        return n


async def _adapter(client: httpx.AsyncClient, url: str, style: str) -> int:
    config = EndpointConfig(base_url=_base(url, style), api_key=KEY, api_style=style)
    request = ChatRequest(model="smollm2", messages=(ChatMessage("user", "hi"),))
    n = 0
    async for event in get_adapter(style).stream(client, config, request):
        n += isinstance(event, RawEvent)
    return n


def _base(url: str, style: str) -> str:
    return url[: -len(RECORDINGS[style][2])] + "/v1"


STAGES: list[tuple[str, Stage]] = [
    ("asyncio socket (no httpx)", _socket),
    ("httpx aiter_raw, anyio", _raw),
    ("httpx aiter_raw", _raw),
    ("httpx aiter_bytes", _bytes),
    ("httpx aiter_lines", _lines),
    ("httpx-sse aiter_sse", _httpx_sse),
    ("iter_sse (ours)", _iter_sse),
    ("iter_sse + json.loads", _iter_sse_json),
    ("iter_sse + orjson.loads", _iter_sse_orjson),
    ("adapter.stream (whole)", _adapter),
]


async def _time_stage(
    stage: Stage, url: str, style: str, repeat: int, *, anyio: bool = False
) -> tuple[float, int]:
    """Median CPU seconds of one read over ``repeat`` runs (after one warm-up), and the count
    the stage returned. ``anyio``: the pinned transport on httpcore's anyio backend instead of
    the project's asyncio streams (for comparison)."""
    if anyio:
        client = make_client(transport=PinnedTransport(backend=httpcore.AnyIOBackend()))
    else:
        client = make_client()
    try:
        count = await stage(client, url, style)  # warm-up (connection, imports)
        runs = []
        for _ in range(repeat):
            start = time.process_time()
            await stage(client, url, style)
            runs.append(time.process_time() - start)
    finally:
        await client.aclose()
    return statistics.median(runs), count


def adapter_work(style: str, body: bytes, repeat: int) -> dict[str, float]:
    """µs per event of the adapter's own work, without I/O: the events pre-read from ``body``,
    then per event ``RawEvent`` building, ``json.loads``, ``state.interpret`` and the guard."""
    module = get_adapter(style)
    make_state = getattr(module, STATES[style])
    secrets = secret_variants([KEY])

    async def read() -> list[tuple[str, str]]:
        class Body(httpx.AsyncByteStream):
            async def __aiter__(self):
                yield body

        response = httpx.Response(200, stream=Body())
        return [e async for e in iter_sse(response, Limits())]

    events = [e for e in asyncio.run(read()) if e[1] and e[1] != "[DONE]"]
    parsed = [(name, loads(data), data) for name, data in events]
    limits = base.DEFAULT_LIMITS

    def interpret_only() -> None:
        state = make_state(secrets, None)
        guard = StreamGuard(limits, secrets)
        for name, payload, data in parsed:
            guard.process(state.interpret(name, payload, data))

    def whole() -> None:
        state = make_state(secrets, None)
        guard = StreamGuard(limits, secrets)
        for name, data in events:
            guard.raw(name, data)
            payload = loads(data)
            guard.process(state.interpret(name, payload, data))

    def json_only() -> None:
        for _, data in events:
            loads(data)

    out = {}
    for label, fn in (("interpret + guard", interpret_only), ("json.loads", json_only), ("adapter work", whole)):
        runs = []
        for _ in range(repeat):
            start = time.process_time()
            fn()
            runs.append(time.process_time() - start)
        out[label] = statistics.median(runs) / len(events) * 1e6
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.micro", description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--mode", choices=("bulk", "paced", "both"), default="both")
    parser.add_argument("--interval-us", type=float, default=300.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)

    streams = {style: build_stream(style, args.events) for style in RECORDINGS}
    results: dict[str, Any] = {"events": args.events, "repeat": args.repeat, "stages": {}, "adapter_work_us": {}}
    modes = ("bulk", "paced") if args.mode == "both" else (args.mode,)
    for mode in modes:
        ports: Any = multiprocessing.Queue()
        server = multiprocessing.Process(
            target=_serve, args=(streams, mode, args.interval_us / 1e6, ports), daemon=True
        )
        server.start()
        port = ports.get(timeout=10)
        try:
            for style in RECORDINGS:
                url = f"http://127.0.0.1:{port}{RECORDINGS[style][2]}"
                print(f"\n{mode} · {style} · {args.events} answer events (µs CPU per SSE event, client process)")
                for label, stage in STAGES:
                    if stage is _iter_sse_orjson and orjson is None:
                        print(f"  {label:<26} (orjson not installed)")
                        continue
                    cpu, _count = asyncio.run(
                        _time_stage(stage, url, style, args.repeat, anyio=label.endswith("anyio"))
                    )
                    per_event = cpu / args.events * 1e6
                    results["stages"].setdefault(mode, {}).setdefault(style, {})[label] = round(per_event, 2)
                    print(f"  {label:<26} {per_event:8.2f}")
        finally:
            server.terminate()
            server.join()
    print("\nadapter work without I/O (µs per SSE event)")
    for style, body in streams.items():
        figures = adapter_work(style, body, args.repeat)
        results["adapter_work_us"][style] = {k: round(v, 2) for k, v in figures.items()}
        line = "  ".join(f"{k} {v:6.2f}" for k, v in figures.items())
        print(f"  {style:<20} {line}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return results


if __name__ == "__main__":
    main()
