"""One neutral view of a generation request, whatever API style it came in.

:class:`Turn` is what the simulator needs to plan an answer: the user's last text, the prompt
token count, the tools offered and the tool choice, a tool result to quote, the requested
output format, the images and audio clips attached, the token cap, stop sequences and the seed.
Three readers build it:

- :func:`chat_turn` – seed 000/002 ``ChatCompletionRequest`` (and seed 001, Sansa): ``messages``
  with ``image_url`` / ``input_audio`` (and seed 002's ``audio_content``) parts, ``tools``
  (``{type: function, function: {name, parameters}}``), ``tool_choice``, ``response_format``,
  ``stop``.
- :func:`messages_turn` – seed 002/004 ``MessageCreateRequest`` / ``MessageCountTokensRequest``:
  ``system`` (text or blocks), ``messages`` with ``text`` / ``image`` / ``tool_use`` /
  ``tool_result`` / ``thinking`` blocks, ``tools`` (``{name, input_schema}``), ``tool_choice``
  (``{type: auto|any|none|tool}``), ``stop_sequences``.
- :func:`responses_turn` – seed 002 ``ResponseRequest``: ``input`` (text or items:
  ``message`` with ``input_text`` / ``input_image`` / ``input_audio`` parts, ``function_call``,
  ``function_call_output``, ``reasoning``), ``instructions``, ``tools`` (``{type: function,
  name, parameters}``), ``tool_choice``, ``text.format``.

Prompt tokens are counted the same way for every style (:func:`count_prompt_tokens`: 4 per
message plus its whitespace words; tools add 4 each plus the words of their name, description
and JSON schema), so ``/messages/count_tokens`` equals ``/messages``' ``input_tokens``.

Readers are lenient: shapes they do not know are ignored, never an error (the dialect modules
validate what the seeds say must be rejected).

May import: the standard library and this package (no Django).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from .text import count_prompt_tokens, message_text

__all__ = [
    "OutputFormat",
    "ToolSpec",
    "Turn",
    "chat_turn",
    "messages_turn",
    "responses_turn",
    "tool_tokens",
]

_DATA_URI = re.compile(r"^data:([^;,]*)(;base64)?,(.*)$", re.DOTALL)


@dataclass(frozen=True)
class ToolSpec:
    """A function the model may call: its name and JSON Schema parameters."""

    name: str
    parameters: dict[str, Any]
    description: str = ""


@dataclass(frozen=True)
class OutputFormat:
    """A structured-output request: ``json_object`` or ``json_schema`` (with its schema)."""

    kind: str
    schema: dict[str, Any] | None = None
    name: str | None = None


@dataclass
class Turn:
    """The neutral request (see the module docstring). ``tool_choice``: ``auto``, ``none``,
    ``required`` or ``named`` (then ``tool_name`` says which); ``media`` items are the
    recorder's description of each attachment (``kind`` ``image``/``audio``, ``part`` (the
    wire type), ``source`` ``data``/``url``, ``media_type``, ``bytes``, ``sha256`` (first 16
    hex digits of the decoded bytes) or ``url``)."""

    prompt: str
    prompt_tokens: int
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: str = "auto"
    tool_name: str | None = None
    tool_result: str | None = None
    output_format: OutputFormat | None = None
    media: list[dict[str, Any]] = field(default_factory=list)
    stop: list[str] = field(default_factory=list)
    seed: int = 0

    @property
    def images(self) -> int:
        """How many images the request carries."""
        return sum(1 for m in self.media if m["kind"] == "image")

    @property
    def audios(self) -> int:
        """How many audio clips the request carries."""
        return sum(1 for m in self.media if m["kind"] == "audio")

    def chosen_tool(self, knob: bool) -> ToolSpec | None:
        """The tool the model calls, or ``None`` for a text answer.

        A call happens when tools are offered, ``tool_choice`` is not ``none``, the last
        message is not a tool result, and the knob ``tool=1`` or a ``required``/named choice
        asks for one. Named: that tool (``None`` if it is not offered; the caller rejects
        that); otherwise the first.
        """
        if not self.tools or self.tool_choice == "none" or self.tool_result is not None:
            return None
        if self.tool_choice == "named":
            return next((t for t in self.tools if t.name == self.tool_name), None)
        if knob or self.tool_choice == "required":
            return self.tools[0]
        return None


# ---- shared helpers ---------------------------------------------------------------------


def tool_tokens(tools: list[ToolSpec]) -> int:
    """Prompt tokens the tool definitions add: 4 each plus the words of name, description and
    the compact JSON of the parameters."""
    total = 0
    for tool in tools:
        schema = json.dumps(tool.parameters, sort_keys=True, separators=(", ", ": "))
        total += 4 + len(f"{tool.name} {tool.description} {schema}".split())
    return total


def _int_seed(body: dict[str, Any]) -> int:
    seed = body.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _text_of(value: Any) -> str:
    """Text of a string, a list of text parts/blocks, or anything else as compact JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return message_text(value)
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _media_from_data(kind: str, part: str, media_type: str | None, data: Any) -> dict[str, Any]:
    item: dict[str, Any] = {"kind": kind, "part": part, "source": "data", "media_type": media_type}
    raw: bytes | None = None
    if isinstance(data, str):
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    item["valid_base64"] = raw is not None
    item["bytes"] = len(raw) if raw is not None else None
    item["sha256"] = hashlib.sha256(raw).hexdigest()[:16] if raw is not None else None
    return item


def _media_from_url(kind: str, part: str, url: Any) -> dict[str, Any]:
    """An attachment given as a URL or a ``data:`` URI."""
    text = url if isinstance(url, str) else ""
    match = _DATA_URI.match(text)
    if match:
        media_type = match.group(1) or None
        if match.group(2):
            return _media_from_data(kind, part, media_type, match.group(3))
        raw = match.group(3).encode()
        return {
            "kind": kind,
            "part": part,
            "source": "data",
            "media_type": media_type,
            "valid_base64": None,
            "bytes": len(raw),
            "sha256": hashlib.sha256(raw).hexdigest()[:16],
        }
    return {"kind": kind, "part": part, "source": "url", "url": text[:500]}


def _tool_choice(value: Any) -> tuple[str, str | None]:
    """Normalise any style's ``tool_choice`` to (``auto|none|required|named``, name)."""
    if isinstance(value, str):
        lowered = value.lower()
        if lowered == "any":
            return "required", None
        if lowered in ("auto", "none", "required"):
            return lowered, None
        return "auto", None
    if isinstance(value, dict):
        kind = value.get("type")
        if kind in ("auto", "none"):
            return str(kind), None
        if kind == "any":
            return "required", None
        name = value.get("name")
        function = value.get("function")
        if isinstance(function, dict):
            name = function.get("name", name)
        if isinstance(name, str) and name:
            return "named", name
    return "auto", None


def _stop_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if value else []
    if isinstance(value, list):
        return [s for s in value if isinstance(s, str) and s]
    return []


# ---- chat completions -------------------------------------------------------------------


def chat_turn(body: dict[str, Any]) -> Turn:
    """The :class:`Turn` of a (validated) seed 002 ``ChatCompletionRequest``."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    prompt = ""
    for message in reversed(messages):
        if message.get("role") == "user":
            prompt = message_text(message.get("content"))
            break
    tools: list[ToolSpec] = []
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            params = function.get("parameters")
            tools.append(
                ToolSpec(
                    function["name"],
                    params if isinstance(params, dict) else {},
                    str(function.get("description") or ""),
                )
            )
    choice, name = _tool_choice(body.get("tool_choice"))
    tool_result = None
    if messages and messages[-1].get("role") in ("tool", "function"):
        tool_result = _text_of(messages[-1].get("content"))
    media: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "image_url":
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, dict) else image
                media.append(_media_from_url("image", "image_url", url))
            elif kind == "input_audio":
                audio = part.get("input_audio") or {}
                fmt = audio.get("format") if isinstance(audio, dict) else None
                data = audio.get("data") if isinstance(audio, dict) else None
                media.append(_media_from_data("audio", "input_audio", f"audio/{fmt}", data))
            elif kind == "audio_content":
                audio = part.get("audio_content") or {}
                data = audio.get("content") if isinstance(audio, dict) else None
                media.append(_media_from_url("audio", "audio_content", data))
    fmt = body.get("response_format")
    output = None
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        output = OutputFormat("json_object")
    elif isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = fmt.get("json_schema") if isinstance(fmt.get("json_schema"), dict) else {}
        schema = spec.get("schema")
        output = OutputFormat(
            "json_schema", schema if isinstance(schema, dict) else {}, spec.get("name")
        )
    return Turn(
        prompt=prompt,
        prompt_tokens=count_prompt_tokens(messages) + tool_tokens(tools),
        tools=tools,
        tool_choice=choice,
        tool_name=name,
        tool_result=tool_result,
        output_format=output,
        media=media,
        stop=_stop_list(body.get("stop")),
        seed=_int_seed(body),
    )


# ---- Anthropic messages -----------------------------------------------------------------


def _block_text(block: dict[str, Any]) -> str:
    """The countable text of one Anthropic content block."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text") or "")
    if kind == "thinking":
        return str(block.get("thinking") or "")
    if kind == "tool_use":
        return f"{block.get('name', '')} {_text_of(block.get('input'))}"
    if kind == "tool_result":
        return _text_of(block.get("content"))
    return ""


def messages_turn(body: dict[str, Any]) -> Turn:
    """The :class:`Turn` of a (validated) seed 002 ``MessageCreateRequest`` (or
    ``MessageCountTokensRequest``)."""
    messages = [m for m in body.get("messages", []) if isinstance(m, dict)]
    counted: list[dict[str, Any]] = []
    system = body.get("system")
    if isinstance(system, str) and system or isinstance(system, list) and system:
        counted.append({"content": _text_of(system)})
    media: list[dict[str, Any]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks = [b for b in content if isinstance(b, dict)]
            counted.append({"content": " ".join(_block_text(b) for b in blocks)})
            for block in blocks:
                if block.get("type") != "image":
                    continue
                source = block.get("source") if isinstance(block.get("source"), dict) else {}
                if source.get("type") == "url":
                    media.append(_media_from_url("image", "image", source.get("url")))
                else:
                    media.append(
                        _media_from_data(
                            "image", "image", source.get("media_type"), source.get("data")
                        )
                    )
        else:
            counted.append({"content": _text_of(content)})
    prompt = ""
    tool_result = None
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, list):
            results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            if results and index == len(messages) - 1:
                tool_result = _text_of(results[-1].get("content"))
            texts = [b for b in content if isinstance(b, dict) and b.get("type") == "text"]
            if not texts and results:
                continue  # a tool-result message: the prompt is the user's earlier text
            prompt = message_text(texts)
        else:
            prompt = _text_of(content)
        break
    tools = [
        ToolSpec(
            t["name"],
            t["input_schema"] if isinstance(t.get("input_schema"), dict) else {},
            str(t.get("description") or ""),
        )
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    choice, name = _tool_choice(body.get("tool_choice"))
    return Turn(
        prompt=prompt,
        prompt_tokens=count_prompt_tokens(counted) + tool_tokens(tools),
        tools=tools,
        tool_choice=choice,
        tool_name=name,
        tool_result=tool_result,
        media=media,
        stop=_stop_list(body.get("stop_sequences")),
        seed=_int_seed(body),
    )


# ---- OpenAI responses -------------------------------------------------------------------


def _response_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"type": "message", "role": "user", "content": raw}]
    if isinstance(raw, list):
        return [item for item in raw if isinstance(item, dict)]
    return []


def responses_turn(body: dict[str, Any]) -> Turn:
    """The :class:`Turn` of a (validated) seed 002 ``ResponseRequest``."""
    items = _response_items(body)
    counted: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        counted.append({"content": instructions})
    media: list[dict[str, Any]] = []
    prompt = ""
    for item in items:
        kind = item.get("type") or "message"
        if kind == "message":
            content = item.get("content")
            text = _text_of(content) if not isinstance(content, list) else message_text(content)
            counted.append({"content": text})
            if item.get("role") == "user":
                prompt = text
            if isinstance(content, list):
                for part in content:
                    if not isinstance(part, dict):
                        continue
                    if part.get("type") == "input_image":
                        image = part.get("image_url")
                        if isinstance(image, dict):
                            image = image.get("url")
                        media.append(_media_from_url("image", "input_image", image))
                    elif part.get("type") == "input_audio":
                        audio = part.get("input_audio") or {}
                        fmt = audio.get("format") if isinstance(audio, dict) else None
                        data = audio.get("data") if isinstance(audio, dict) else None
                        media.append(_media_from_data("audio", "input_audio", f"audio/{fmt}", data))
        elif kind == "function_call":
            counted.append({"content": f"{item.get('name', '')} {item.get('arguments', '')}"})
        elif kind == "function_call_output":
            counted.append({"content": _text_of(item.get("output"))})
        elif kind == "reasoning":
            parts = item.get("content") or item.get("summary") or []
            counted.append({"content": message_text(parts) if isinstance(parts, list) else ""})
    tool_result = None
    if items and items[-1].get("type") == "function_call_output":
        tool_result = _text_of(items[-1].get("output"))
    tools = [
        ToolSpec(
            t["name"],
            t["parameters"] if isinstance(t.get("parameters"), dict) else {},
            str(t.get("description") or ""),
        )
        for t in body.get("tools") or []
        if isinstance(t, dict) and isinstance(t.get("name"), str)
    ]
    choice, name = _tool_choice(body.get("tool_choice"))
    text = body.get("text")
    fmt = text.get("format") if isinstance(text, dict) else None
    output = None
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        output = OutputFormat("json_object")
    elif isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        schema = fmt.get("schema")
        output = OutputFormat(
            "json_schema", schema if isinstance(schema, dict) else {}, fmt.get("name")
        )
    return Turn(
        prompt=prompt,
        prompt_tokens=count_prompt_tokens(counted) + tool_tokens(tools),
        tools=tools,
        tool_choice=choice,
        tool_name=name,
        tool_result=tool_result,
        output_format=output,
        media=media,
        seed=_int_seed(body),
    )
