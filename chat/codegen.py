""""View code": the next request of a conversation as curl, Python and JavaScript that run as
they are, with the API key and secret header values read from environment variables.

What every snippet sends is what the relay sends: the JSON body is ``adapter.build_request``'s
body (model, messages/input, params, tools, response_format, reasoning fields, ``stream`` and
``stream_options``), to the same URL, with the same auth and extra headers. The request is built
with placeholder secrets, and each placeholder becomes an environment variable reference, so a
secret cannot reach the output.

Per API style (wire formats: the adapters and their seed documents; calls: the SDKs' docs):

* curl: the URL, every relay header, the body as a here-document. A missing variable stops the
  shell (``${VAR:?…}``) instead of sending an empty key.
* Python: ``openai_chat`` → ``OpenAI(base_url=<endpoint base>).chat.completions.create``;
  ``openai_responses`` → ``client.responses.create``; ``anthropic_messages`` →
  ``Anthropic(base_url=<base without /v1>).messages.stream`` (the SDK appends ``/v1/messages``;
  a base URL not ending in ``/v1`` cannot be reached through it, so that case is a
  standard-library snippet). Fields the SDK method has no argument for go in ``extra_body``, so
  the body is the relay's, field for field.
* JavaScript: Node 18+ ``fetch`` (no package to install), printing the raw SSE events.

Differences inherent to the SDKs (headers only, never the body): the SDKs send
``Accept: application/json`` instead of ``text/event-stream``, their ``User-Agent`` and
``X-Stainless-*`` headers, and may retry a failed request (``max_retries``). Auth matches the
relay: a keyless endpoint's SDK client gets a placeholder key (the SDKs refuse to start without
one) and the auth headers are omitted from the request (``Omit()``), so nothing needs to be set
in the environment; Anthropic clients get the relay's ``anthropic-version`` and both
``x-api-key`` and ``Authorization`` exactly as the relay sends them.

May import: chat.providers, the standard library.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass
from typing import Any

from chat.providers import get_adapter
from chat.providers.base import ChatRequest, EndpointConfig, json_default

#: Placeholder secrets: ``__ENV:<NAME>__`` stands for the environment variable ``NAME``.
_PLACEHOLDER = re.compile(r"__ENV:([A-Z_][A-Z0-9_]*?)__")

#: Headers an SDK sets itself and that SDK snippets leave to it (curl and fetch send the relay's).
_SDK_OWNED = frozenset({"accept", "content-type"})

#: Body fields each SDK method takes as keyword arguments (openai-python
#: ``chat.completions.create`` / ``responses.create``, anthropic-sdk-python ``messages.stream``).
#: Only names every recent SDK version takes; anything else goes through ``extra_body`` (merged
#: into the top level of the JSON body). The tests run every snippet, so a name the installed
#: SDK does not take fails there.
_SDK_ARGS = {
    "openai_chat": frozenset({
        "model", "messages", "stream", "stream_options", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "stop", "seed", "frequency_penalty", "presence_penalty", "tools",
        "tool_choice", "response_format", "logprobs", "top_logprobs", "reasoning_effort",
    }),
    "openai_responses": frozenset({
        "model", "input", "instructions", "stream", "temperature", "top_p", "max_output_tokens",
        "reasoning", "text", "tools", "tool_choice", "top_logprobs", "include", "store",
    }),
    # Sampling parameters (temperature, top_p, top_k) are no arguments of messages.stream in
    # anthropic 2.x, so they ride in extra_body, which every version takes.
    "anthropic_messages": frozenset({
        "model", "max_tokens", "messages", "system", "stop_sequences", "thinking", "tools",
        "tool_choice",
    }),
}

#: Auth header names as each SDK spells them (a dict key of another case would be sent twice).
_SDK_AUTH = {
    "openai": ("Authorization",),
    "anthropic": ("Authorization", "X-Api-Key"),
}
_CANONICAL = {"authorization": "Authorization", "x-api-key": "X-Api-Key",
              "anthropic-version": "anthropic-version"}

_JS_SAFE_INT = 2**53 - 1


@dataclass(frozen=True)
class Snippets:
    """One request in three languages plus what the relay would send.

    ``url``: the relay's URL; ``body``: its JSON body; ``curl`` / ``python`` / ``javascript``:
    the programs; ``python_sdk``: "openai", "anthropic" or "" (standard library);
    ``key_env``: the environment variable holding the API key, "" for a keyless endpoint;
    ``header_envs``: extra header name → the environment variable holding its value.
    """

    url: str
    body: dict
    curl: str
    python: str
    javascript: str
    key_env: str
    header_envs: dict[str, str]
    python_sdk: str = ""


def env_name(endpoint_name: str) -> str:
    """The API key's environment variable: ``SambaNova Cloud`` → ``SAMBANOVA_CLOUD_API_KEY``
    (``PLAYGROUND_API_KEY`` when nothing usable is left; ``EP_`` in front of a leading digit,
    which a shell variable name cannot start with)."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", endpoint_name).strip("_").upper() or "PLAYGROUND"
    if stem[0].isdigit():
        stem = f"EP_{stem}"
    return f"{stem}_API_KEY"


def _header_envs(names: list[str], taken: set[str]) -> dict[str, str]:
    """``X-Team`` → ``HEADER_X_TEAM``; names that map to the same variable get ``_2``, ``_3``."""
    out: dict[str, str] = {}
    for name in names:
        stem = "HEADER_" + (re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper() or "VALUE")
        env, n = stem, 1
        while env in taken:
            n += 1
            env = f"{stem}_{n}"
        taken.add(env)
        out[name] = env
    return out


def _parts(value: str) -> list[tuple[str, str]]:
    """Split a header value into ``("text", …)`` and ``("env", NAME)`` pieces."""
    out: list[tuple[str, str]] = []
    pos = 0
    for m in _PLACEHOLDER.finditer(value):
        if m.start() > pos:
            out.append(("text", value[pos:m.start()]))
        out.append(("env", m.group(1)))
        pos = m.end()
    if pos < len(value) or not out:
        out.append(("text", value[pos:]))
    return out


# ---- curl -----------------------------------------------------------------------------------


def _sh_header(name: str, value: str) -> str:
    """One ``-H`` argument: literal text single-quoted, variables double-quoted with ``:?`` so a
    missing one stops the shell (header names are user input: nothing of theirs is expanded)."""
    words = []
    for kind, text in _parts(f"{name}: {value}"):
        words.append(f'"${{{text}:?set {text}}}"' if kind == "env" else shlex.quote(text))
    return "".join(words)


def _curl(url: str, headers: dict[str, str], body: dict) -> str:
    lines = [f"curl -sSN {shlex.quote(url)}"]
    lines += [f"  -H {_sh_header(k, v)}" for k, v in headers.items()]
    lines.append("  --data-binary @- <<'JSON'")
    # indent=2: no line of the document can be the bare delimiter ``JSON``.
    return " \\\n".join(lines) + "\n" + json.dumps(body, indent=2, ensure_ascii=False) + "\nJSON\n"


# ---- Python ---------------------------------------------------------------------------------


def py_literal(value: Any, level: int = 0) -> str:
    """A Python expression equal to the JSON value ``value``, indented like ``json.dumps(indent=4)``
    (strings via ``repr``, so quotes, backslashes and ``true`` inside text stay text)."""
    pad, end = "    " * (level + 1), "    " * level
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = "".join(f"{pad}{py_literal(str(k))}: {py_literal(v, level + 1)},\n" for k, v in value.items())
        return "{\n" + items + end + "}"
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        return "[\n" + "".join(f"{pad}{py_literal(v, level + 1)},\n" for v in value) + end + "]"
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, int | float | str):
        return repr(value)
    return repr(str(value))


def _py_value(value: str, names: dict[str, str] | None = None) -> str:
    """A header value as a Python expression: variables via ``os.environ``, or the Python name
    ``names`` gives for them."""
    names = names or {}
    pieces = [(names.get(text) or f"os.environ[{text!r}]") if kind == "env" else repr(text)
              for kind, text in _parts(value) if text]
    return " + ".join(pieces) or "''"


def _py_dict(items: dict[str, str], level: int) -> str:
    pad, end = "    " * (level + 1), "    " * level
    return "{\n" + "".join(f"{pad}{k!r}: {v},\n" for k, v in items.items()) + end + "}"


def _sdk_headers(headers: dict[str, str], sdk: str, key_env: str) -> tuple[dict[str, str], list[str]]:
    """The relay's headers for an SDK client: ``(default_headers as Python expressions, the SDK's
    auth headers the relay does not send, to omit per request)``. The OpenAI SDK's own
    ``Authorization: Bearer <api_key>`` is left to it; everything else is explicit, so auth does
    not depend on what an SDK version does with ``api_key``."""
    default: dict[str, str] = {}
    bearer = f"Bearer __ENV:{key_env}__" if key_env else None
    sdk_bearer = False
    for name, value in headers.items():
        if name.lower() in _SDK_OWNED:
            continue
        name = _CANONICAL.get(name.lower(), name)
        if sdk == "openai" and name == "Authorization" and value == bearer:
            sdk_bearer = True  # exactly what OpenAI(api_key=…) sends
            continue
        default[name] = _py_value(value, {key_env: "api_key"} if key_env else None)
    omit = [h for h in _SDK_AUTH[sdk] if h not in default and not (h == "Authorization" and sdk_bearer)]
    return default, omit


def _python_sdk(style: str, url: str, headers: dict[str, str], body: dict, key_env: str) -> str:
    sdk = "anthropic" if style == "anthropic_messages" else "openai"
    if style == "anthropic_messages":
        base = url.removesuffix("/messages").removesuffix("/v1")
        note = "  # the SDK appends /v1/messages"
        cls = "Anthropic"
    else:
        path = "/chat/completions" if style == "openai_chat" else "/responses"
        base = url.removesuffix(path)
        note = f"  # the SDK appends {path}"
        cls = "OpenAI"
    default, omit = _sdk_headers(headers, sdk, key_env)
    lines = [f"# pip install {sdk}", "import os", "", f"from {sdk} import {cls}" + (", Omit" if omit else ""), ""]
    if key_env:
        lines.append(f"api_key = os.environ[{key_env!r}]")
        api_key = "api_key"
    else:
        lines.append("# This endpoint takes no API key. The SDK will not start without one, so it gets a")
        lines.append("# placeholder, and the auth headers are left out of the request (Omit).")
        api_key = repr("no-key")
    lines.append(f"client = {cls}(")
    lines.append(f"    base_url={base!r},{note}")
    lines.append(f"    api_key={api_key},")
    if default:
        lines.append(f"    default_headers={_py_dict(default, 1)},")
    lines.append(")")
    lines.append("")

    allowed = _SDK_ARGS[style]
    args = {k: v for k, v in body.items() if k in allowed}
    extra = {k: v for k, v in body.items() if k not in allowed and k != "stream"}
    call_args = [f"    {k}={py_literal(v, 1)}," for k, v in args.items()]
    if extra:
        call_args.append(f"    extra_body={py_literal(extra, 1)},  # fields the SDK has no argument for")
    if omit:
        call_args.append("    extra_headers={" + ", ".join(f"{h!r}: Omit()" for h in omit) + "},")
    if style == "anthropic_messages":
        # messages.stream() sends "stream": true itself.
        lines.append("with client.messages.stream(")
        lines += call_args
        lines.append(") as stream:")
        lines.append("    for text in stream.text_stream:")
        lines.append('        print(text, end="", flush=True)')
    elif style == "openai_chat":
        lines.append("stream = client.chat.completions.create(")
        lines += call_args
        lines.append(")")
        lines.append("for chunk in stream:")
        lines.append("    if chunk.choices and chunk.choices[0].delta.content:")
        lines.append('        print(chunk.choices[0].delta.content, end="", flush=True)')
    else:
        lines.append("stream = client.responses.create(")
        lines += call_args
        lines.append(")")
        lines.append("for event in stream:")
        lines.append('    if event.type == "response.output_text.delta":')
        lines.append('        print(event.delta, end="", flush=True)')
    lines.append("print()")
    code = "\n".join(lines) + "\n"
    return code if "os.environ" in code else code.replace("import os\n\n", "", 1)


def _python_stdlib(url: str, headers: dict[str, str], body: dict, why: str) -> str:
    """The request with ``urllib.request`` (no package to install), printing the raw SSE."""
    sent = {k: _py_value(v) for k, v in headers.items()}
    return "\n".join([
        f"# {why}",
        "import json",
        "import os",
        "import urllib.request",
        "",
        f"body = {py_literal(body)}",
        "",
        "request = urllib.request.Request(",
        f"    {url!r},",
        '    method="POST",',
        f"    headers={_py_dict(sent, 1)},",
        '    data=json.dumps(body).encode("utf-8"),',
        ")",
        "with urllib.request.urlopen(request) as response:",
        "    for line in response:  # the raw SSE events",
        '        print(line.decode("utf-8"), end="", flush=True)',
        "",
    ])


# ---- JavaScript -----------------------------------------------------------------------------


def _unsafe_ints(value: Any) -> bool:
    """Whether a JSON value holds an integer JavaScript numbers cannot represent exactly."""
    if isinstance(value, dict):
        return any(_unsafe_ints(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_unsafe_ints(v) for v in value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > _JS_SAFE_INT


def _js_value(value: str) -> str:
    pieces = [f"env({json.dumps(text)})" if kind == "env" else json.dumps(text)
              for kind, text in _parts(value) if text]
    return " + ".join(pieces) or '""'


def _javascript(url: str, headers: dict[str, str], body: dict) -> str:
    uses_env = any(_PLACEHOLDER.search(v) for v in headers.values())
    lines = ["// Node 18+: fetch and web streams are built in, no package to install.",
             "// Save as request.js and run: node request.js"]
    if uses_env:
        lines += [
            "function env(name) {",
            "  const value = process.env[name];",
            "  if (!value) throw new Error(`Set the environment variable ${name}`);",
            "  return value;",
            "}",
            "",
        ]
    if _unsafe_ints(body):
        lines.append("// The body is kept as JSON text: it holds an integer beyond JavaScript's exact range.")
        lines.append(f"const body = {json.dumps(json.dumps(body, ensure_ascii=False), ensure_ascii=False)};")
        payload = "body"
    else:
        lines.append(f"const body = {json.dumps(body, indent=2, ensure_ascii=False)};")
        payload = "JSON.stringify(body)"
    js_headers = "".join(f"      {json.dumps(k)}: {_js_value(v)},\n" for k, v in headers.items())
    lines += [
        "",
        "async function main() {",
        f"  const res = await fetch({json.dumps(url)}, {{",
        '    method: "POST",',
        "    headers: {\n" + js_headers + "    },",
        f"    body: {payload},",
        "  });",
        "  if (!res.ok) {",
        "    console.error(`HTTP ${res.status}: ${await res.text()}`);",
        "    process.exitCode = 1;",
        "    return;",
        "  }",
        "  const decoder = new TextDecoder();",
        "  for await (const chunk of res.body) {",
        "    process.stdout.write(decoder.decode(chunk, { stream: true }));  // the raw SSE events",
        "  }",
        "}",
        "",
        "main().catch((err) => {",
        "  console.error(err.message);",
        "  process.exitCode = 1;",
        "});",
        "",
    ]
    return "\n".join(lines)


# ---- entry point ----------------------------------------------------------------------------


def snippets(config: EndpointConfig, request: ChatRequest, *, endpoint_name: str) -> Snippets:
    """Build the snippets of ``request`` to the endpoint ``config`` describes.

    ``config`` supplies the real base URL, API style, ``stream_options`` and the extra header
    *names*; whether ``api_key`` is set decides keyed or keyless; no secret value is read.
    ``endpoint_name`` names the key's environment variable (:func:`env_name`). Pure; raises
    nothing.
    """
    key_env = env_name(endpoint_name) if config.api_key else ""
    header_envs = _header_envs(list(config.extra_headers), {key_env} if key_env else set())
    safe = EndpointConfig(
        base_url=config.base_url,
        api_key=f"__ENV:{key_env}__" if key_env else "",
        extra_headers={name: f"__ENV:{env}__" for name, env in header_envs.items()},
        api_style=config.api_style,
        stream_options=config.stream_options,
    )
    url, headers, body = get_adapter(config.api_style).build_request(safe, request)
    # Attachments' bytes as their base64 text: a snippet sends exactly what the relay streams.
    body = json.loads(json.dumps(body, default=json_default))
    style = config.api_style if config.api_style in _SDK_ARGS else "openai_chat"
    if style == "anthropic_messages" and not url.endswith("/v1/messages"):
        python = _python_stdlib(url, headers, body, (
            "The anthropic SDK always calls <base_url>/v1/messages, and this endpoint's URL does not "
            "end in /v1/messages,\n# so this uses the standard library (no package to install)."
        ))
        python_sdk = ""
    else:
        python = _python_sdk(style, url, headers, body, key_env)
        python_sdk = "anthropic" if style == "anthropic_messages" else "openai"
    return Snippets(
        url=url, body=body, curl=_curl(url, headers, body), python=python,
        javascript=_javascript(url, headers, body), key_env=key_env, header_envs=header_envs,
        python_sdk=python_sdk,
    )


def snippets_for(build_request: Any, config: EndpointConfig, request: Any, *, endpoint_name: str) -> Snippets:
    """Snippets of a non-chat mode request (issue 14: ``/completions``, ``/embeddings``):
    ``build_request(config, request) -> (url, headers, body)`` is the mode adapter's own
    builder, called with placeholder secrets as in :func:`snippets`. curl, Python (standard
    library, prints the raw answer) and JavaScript (fetch). Pure; raises nothing."""
    key_env = env_name(endpoint_name) if config.api_key else ""
    header_envs = _header_envs(list(config.extra_headers), {key_env} if key_env else set())
    safe = EndpointConfig(
        base_url=config.base_url, api_key=f"__ENV:{key_env}__" if key_env else "",
        extra_headers={name: f"__ENV:{env}__" for name, env in header_envs.items()},
        api_style=config.api_style, stream_options=config.stream_options,
    )
    url, headers, body = build_request(safe, request)
    body = json.loads(json.dumps(body, default=json_default))
    python = _python_stdlib(url, headers, body, "Standard library only (no package to install).")
    return Snippets(url=url, body=body, curl=_curl(url, headers, body), python=python,
                    javascript=_javascript(url, headers, body), key_env=key_env, header_envs=header_envs)


def audio_snippets(build_request: Any, config: EndpointConfig, request: Any, *, endpoint_name: str,
                   filename: str) -> Snippets:
    """Snippets of a ``multipart/form-data`` audio request (issue 14): ``build_request`` gives
    ``(url, headers, fields)`` with ``fields["file"]`` a placeholder; every snippet reads the
    audio from ``filename`` in the current directory. curl ``-F``, Python (standard library,
    multipart built by hand) and JavaScript (Node 18+ ``FormData``/``Blob``). Pure."""
    key_env = env_name(endpoint_name) if config.api_key else ""
    header_envs = _header_envs(list(config.extra_headers), {key_env} if key_env else set())
    safe = EndpointConfig(
        base_url=config.base_url, api_key=f"__ENV:{key_env}__" if key_env else "",
        extra_headers={name: f"__ENV:{env}__" for name, env in header_envs.items()},
        api_style=config.api_style, stream_options=config.stream_options,
    )
    url, headers, fields = build_request(safe, request)
    fields = {k: v for k, v in fields.items() if k != "file"}
    curl_lines = [f"curl -sSN {shlex.quote(url)}"]
    curl_lines += [f"  -H {_sh_header(k, v)}" for k, v in headers.items()]
    curl_lines += [f"  -F {shlex.quote(f'{k}={v}')}" for k, v in fields.items()]
    curl_lines.append(f"  -F {shlex.quote('file=@' + filename)}")
    curl = " \\\n".join(curl_lines) + "\n"
    sent = {k: _py_value(v) for k, v in headers.items()}
    python = "\n".join([
        "# Standard library only (no package to install): the multipart body is built by hand.",
        "import os",
        "import urllib.request",
        "import uuid",
        "",
        f"fields = {py_literal(fields)}",
        f"filename = {filename!r}",
        'boundary = uuid.uuid4().hex',
        "body = b''",
        "for name, value in fields.items():",
        "    body += f'--{boundary}\\r\\nContent-Disposition: form-data; name=\"{name}\"\\r\\n\\r\\n{value}\\r\\n'.encode()",
        "with open(filename, 'rb') as f:",
        "    body += (f'--{boundary}\\r\\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\\r\\n'",
        "             'Content-Type: application/octet-stream\\r\\n\\r\\n').encode() + f.read() + f'\\r\\n--{boundary}--\\r\\n'.encode()",
        f"headers = {_py_dict(sent, 0)}",
        "headers['Content-Type'] = f'multipart/form-data; boundary={boundary}'",
        f"request = urllib.request.Request({url!r}, method='POST', headers=headers, data=body)",
        "with urllib.request.urlopen(request) as response:",
        "    for line in response:",
        '        print(line.decode("utf-8"), end="", flush=True)',
        "",
    ])
    uses_env = any(_PLACEHOLDER.search(v) for v in headers.values())
    js = ["// Node 18+: fetch, FormData and Blob are built in. Save as request.js, run: node request.js",
          'const fs = require("fs");']
    if uses_env:
        js += ["function env(name) {", "  const value = process.env[name];",
               "  if (!value) throw new Error(`Set the environment variable ${name}`);", "  return value;", "}"]
    js += ["const form = new FormData();"]
    js += [f"form.append({json.dumps(k)}, {json.dumps(v)});" for k, v in fields.items()]
    js += [f"form.append(\"file\", new Blob([fs.readFileSync({json.dumps(filename)})]), {json.dumps(filename)});",
           "async function main() {",
           f"  const res = await fetch({json.dumps(url)}, {{",
           '    method: "POST",',
           "    headers: {\n" + "".join(f"      {json.dumps(k)}: {_js_value(v)},\n" for k, v in headers.items()) + "    },",
           "    body: form,",
           "  });",
           "  process.stdout.write(await res.text());",
           "}",
           "main().catch((err) => { console.error(err.message); process.exitCode = 1; });",
           ""]
    return Snippets(url=url, body=fields, curl=curl, python=python, javascript="\n".join(js), key_env=key_env,
                    header_envs=header_envs)


# ---- "this turn": the request a turn sent, as recorded -----------------------------------

#: What a recorded secret header value looks like (chat.providers.base.REDACTED).
_REDACTED = "[REDACTED]"
_SHORTENED = re.compile(r"… \([\d,]+ characters\)$")


def _shortened(value: Any) -> bool:
    """Whether the recorded body holds a string Inspect shortened (base64 media)."""
    if isinstance(value, dict):
        return any(_shortened(v) for v in value.values())
    if isinstance(value, list):
        return any(_shortened(v) for v in value)
    return isinstance(value, str) and bool(_SHORTENED.search(value))


@dataclass(frozen=True)
class RecordedSnippets:
    """:class:`Snippets` of a recorded request plus ``shortened``: whether the record cut long
    strings (attachments' base64), so the snippet sends the shortened text."""

    s: Snippets
    shortened: bool


def snippets_recorded(recorded: dict[str, Any], *, api_style: str, endpoint_name: str,
                      header_names: list[str] | tuple[str, ...] = ()) -> RecordedSnippets | None:
    """Snippets of the request one turn sent, from its Inspect record
    (``{"url", "headers", "body"}``, secret values already ``[REDACTED]``): the same URL,
    headers and body, each redacted value an environment variable. ``Authorization`` /
    ``x-api-key`` become the key's variable (``Bearer`` form for ``Authorization``) unless
    ``header_names`` (the endpoint's extra header names) holds them; any other redacted header
    gets its own ``HEADER_*`` variable. None when the record has no URL or body (turns
    recorded before the record kept them). Pure; raises nothing."""
    url, headers, body = recorded.get("url"), recorded.get("headers"), recorded.get("body")
    if not isinstance(url, str) or not isinstance(headers, dict) or not isinstance(body, dict):
        return None
    extra = {n.lower() for n in header_names}
    secret = [k for k, v in headers.items() if v == _REDACTED]
    uses_key = any(k.lower() in ("authorization", "x-api-key") and k.lower() not in extra for k in secret)
    key_env = env_name(endpoint_name) if uses_key else ""
    header_envs = _header_envs([k for k in secret if k.lower() in extra or k.lower() not in ("authorization", "x-api-key")],
                               {key_env} if key_env else set())
    sent: dict[str, str] = {}
    for name, value in headers.items():
        value = str(value)
        if name in header_envs:
            value = f"__ENV:{header_envs[name]}__"
        elif value == _REDACTED and name.lower() == "authorization":
            value = f"Bearer __ENV:{key_env}__"
        elif value == _REDACTED:
            value = f"__ENV:{key_env}__"
        sent[name] = value
    style = api_style if api_style in _SDK_ARGS else "openai_chat"
    if style == "anthropic_messages" and not url.endswith("/v1/messages"):
        python = _python_stdlib(url, sent, body, (
            "The anthropic SDK always calls <base_url>/v1/messages, and this endpoint's URL does not "
            "end in /v1/messages,\n# so this uses the standard library (no package to install)."
        ))
        python_sdk = ""
    else:
        python = _python_sdk(style, url, sent, body, key_env)
        python_sdk = "anthropic" if style == "anthropic_messages" else "openai"
    s = Snippets(url=url, body=body, curl=_curl(url, sent, body), python=python,
                 javascript=_javascript(url, sent, body), key_env=key_env, header_envs=header_envs,
                 python_sdk=python_sdk)
    return RecordedSnippets(s=s, shortened=_shortened(body))
