""""View code": the request of the current conversation and settings as curl, Python and
JavaScript, with the API key and secret header values replaced by environment variables.

The body is exactly what the relay sends (``adapter.build_request``); only ``stream`` stays
true. Secrets never reach the snippet: the request is built with placeholder secrets and each
placeholder becomes an environment variable reference.

May import: chat.providers, the standard library.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass

from chat.providers import get_adapter
from chat.providers.base import ChatRequest, EndpointConfig

KEY_PLACEHOLDER = "__PLAYGROUND_API_KEY__"


@dataclass(frozen=True)
class Snippets:
    """One request in three languages plus its JSON body (what the relay would send)."""

    url: str
    body: dict
    curl: str
    python: str
    javascript: str
    key_env: str
    header_envs: dict[str, str]


def env_name(endpoint_name: str) -> str:
    """``SambaNova Cloud`` → ``SAMBANOVA_CLOUD_API_KEY``."""
    stem = re.sub(r"[^A-Za-z0-9]+", "_", endpoint_name).strip("_").upper() or "PLAYGROUND"
    return f"{stem}_API_KEY"


def snippets(config: EndpointConfig, request: ChatRequest, *, endpoint_name: str) -> Snippets:
    """Build the snippets. ``config`` carries the real base URL and header names; its secret
    values are ignored (placeholders are used), so nothing secret can leak into the output."""
    key_env = env_name(endpoint_name)
    header_envs = {
        name: "HEADER_" + re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_").upper()
        for name in config.extra_headers
    }
    safe = EndpointConfig(
        base_url=config.base_url,
        api_key=KEY_PLACEHOLDER if config.api_key else "",
        extra_headers={n: f"__{header_envs[n]}__" for n in config.extra_headers},
        api_style=config.api_style,
        stream_options=config.stream_options,
    )
    adapter = get_adapter(config.api_style)
    url, headers, body = adapter.build_request(safe, request)
    headers = {k: v for k, v in headers.items() if k.lower() not in ("accept-encoding", "content-length", "host")}
    placeholders = {KEY_PLACEHOLDER: key_env, **{f"__{v}__": v for v in header_envs.values()}}

    def sh(value: str) -> str:
        # Double quotes where a variable must expand, single quotes elsewhere.
        if any(p in value for p in placeholders):
            for p, env in placeholders.items():
                value = value.replace(p, "${" + env + "}")
            return '"' + value.replace('"', '\\"') + '"'
        return shlex.quote(value)

    body_json = json.dumps(body, indent=2, ensure_ascii=False)
    curl_lines = [f"curl -sN {shlex.quote(url)}"]
    curl_lines += [f"  -H {sh(f'{k}: {v}')}" for k, v in headers.items()]
    curl_lines += ["  --data-binary @- <<'JSON'", body_json, "JSON"]
    curl = " \\\n".join(curl_lines[:-2]) + "\n" + "\n".join(curl_lines[-2:])

    def py_value(v: str) -> str:
        for p, env in placeholders.items():
            if p in v:
                parts = v.split(p)
                return " + ".join(
                    x for x in [repr(parts[0]) if parts[0] else "", f"os.environ[{env!r}]", repr(parts[1]) if parts[1] else ""] if x
                )
        return repr(v)

    def js_value(v: str) -> str:
        for p, env in placeholders.items():
            if p in v:
                return "`" + v.replace(p, "${process.env." + env + "}") + "`"
        return json.dumps(v)

    py_headers = "{\n" + "".join(f"    {k!r}: {py_value(v)},\n" for k, v in headers.items()) + "}"
    base = url.rsplit("/", 1)[0] if config.api_style != "anthropic_messages" else url.rsplit("/messages", 1)[0]
    body_py = json.dumps(body, indent=4, ensure_ascii=False).replace("true", "True").replace("false", "False").replace("null", "None")
    if config.api_style == "openai_chat":
        sdk = (
            "# pip install openai\nimport os\nfrom openai import OpenAI\n\n"
            f"client = OpenAI(base_url={base!r}, api_key=os.environ[{key_env!r}])\n"
            f"body = {body_py}\n"
            "body.pop(\"stream\", None)\n"
            "for chunk in client.chat.completions.create(stream=True, **body):\n"
            "    if chunk.choices and chunk.choices[0].delta.content:\n"
            "        print(chunk.choices[0].delta.content, end=\"\", flush=True)\n"
        )
    elif config.api_style == "anthropic_messages":
        sdk = (
            "# pip install anthropic\nimport os\nfrom anthropic import Anthropic\n\n"
            f"client = Anthropic(base_url={base!r}, api_key=os.environ[{key_env!r}])\n"
            f"body = {body_py}\n"
            "body.pop(\"stream\", None)\n"
            "with client.messages.stream(**body) as stream:\n"
            "    for text in stream.text_stream:\n"
            "        print(text, end=\"\", flush=True)\n"
        )
    else:
        sdk = (
            "# pip install openai\nimport os\nfrom openai import OpenAI\n\n"
            f"client = OpenAI(base_url={base!r}, api_key=os.environ[{key_env!r}])\n"
            f"body = {body_py}\n"
            "body.pop(\"stream\", None)\n"
            "for event in client.responses.create(stream=True, **body):\n"
            "    if event.type == \"response.output_text.delta\":\n"
            "        print(event.delta, end=\"\", flush=True)\n"
        )
    sdk += (
        "\n# Or without an SDK (httpx):\n# import httpx\n"
        f"# headers = {py_headers.replace(chr(10), chr(10) + '# ')}\n"
        f"# with httpx.stream('POST', {url!r}, headers=headers, json=body | {{'stream': True}}) as r:\n"
        "#     for line in r.iter_lines(): print(line)\n"
    )
    js_headers = "{\n" + "".join(f"    {json.dumps(k)}: {js_value(v)},\n" for k, v in headers.items()) + "  }"
    javascript = (
        "// Node 18+ (fetch and streams built in)\n"
        f"const body = {body_json};\n\n"
        f"const res = await fetch({json.dumps(url)}, {{\n  method: \"POST\",\n  headers: {js_headers},\n"
        "  body: JSON.stringify(body),\n});\n"
        "const reader = res.body.getReader();\nconst decoder = new TextDecoder();\n"
        "for (;;) {\n  const { done, value } = await reader.read();\n  if (done) break;\n"
        "  process.stdout.write(decoder.decode(value, { stream: true }));  // raw SSE events\n}\n"
    )
    return Snippets(url=url, body=body, curl=curl, python=sdk, javascript=javascript, key_env=key_env, header_envs=header_envs)
