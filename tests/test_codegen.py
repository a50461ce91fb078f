"""Issue 7 item 8: every "View code" snippet runs as it is and sends the relay's request.

Each snippet (curl under ``sh``, Python with the ``openai`` / ``anthropic`` SDKs, JavaScript with
Node's built-in ``fetch``) is written to a file and run in a subprocess against the standalone
simulator, with only the environment variables the snippet names. The relay's request is sent to
the same simulator (``adapter.build_request`` with the real secrets, posted as the relay posts
it); the two recorded requests must have the same path, the same JSON body, the same key
(fingerprint) and the same headers, except the ones a client adds by itself:

* every client: ``host``, ``connection``, ``content-length``, ``accept-encoding``, ``user-agent``;
* the Python SDKs: ``accept`` (they send ``application/json``) and their ``x-stainless-*``;
* Node's fetch: ``accept-language`` and ``sec-fetch-mode``.

Variants: keyed with a secret extra header, keyless (runs with no variable set), a custom
``Authorization`` header and no key, api.openai.com / api.anthropic.com (host-specific bodies and
headers; the snippet's host is pointed at the simulator to run it), an Anthropic base URL not
ending in ``/v1`` (a simulator mounted at ``/anthropic``), a seed beyond JavaScript's exact
integers, and a keyed snippet run without its variable (it stops before sending anything).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from chat.codegen import env_name, snippets
from chat.providers import get_adapter
from chat.providers.base import ChatMessage, ChatRequest, EndpointConfig, ToolCall
from tests.conftest import PY, ROOT, Sim, free_port, wait_http

STYLES = ["openai_chat", "anthropic_messages", "openai_responses"]
LANGS = ["curl", "python", "javascript"]
KEY = "sk-codegen-SECRET-4321"
TEAM = "team-SECRET-hdr"
FAST = "sim-fast?ttft_ms=1&delay_ms=1&length=12&reasoning=0"
WEATHER = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
# Text that breaks naive quoting in each language: quotes, $, backticks, backslashes, JSON
# keywords inside text, a line that is the here-document delimiter, non-ASCII, U+2028.
TRICKY = ('Say "true" and \'false\' or null; $HOME ${PATH} `id` \\n C:\\temp\nJSON\n'
          "é 😀 \u2028 end")

INHERENT = {"host", "connection", "content-length", "accept-encoding", "user-agent"}
INHERENT_BY_LANG = {"curl": set(), "python": {"accept"}, "javascript": {"accept-language", "sec-fetch-mode"}}

AUTH = {
    "keyed": {"api_key": KEY, "extra_headers": {"X-Team": TEAM}},
    "keyless": {"api_key": "", "extra_headers": {}},
    "custom_auth": {"api_key": "", "extra_headers": {"Authorization": "Token tok-SECRET-77", "X-Org": "org-SECRET-5"}},
}


def rich_request(style: str, *, seed: int = 2**60) -> ChatRequest:
    """Everything an adapter can put in a body: system prompt, a tool round trip in history,
    every sampling parameter, tools, a JSON schema, reasoning fields, log probabilities and a
    dialect extra."""
    reasoning = {
        "openai_chat": {"effort": "low", "enable_thinking": True},
        "anthropic_messages": {"budget_tokens": 128, "enable_thinking": True},
        "openai_responses": {"effort": "low"},
    }[style]
    return ChatRequest(
        model=FAST,
        system="Be exact. " + TRICKY,
        messages=(
            ChatMessage("user", "Weather in Paris?"),
            ChatMessage("assistant", "", tool_calls=(ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)),
            ChatMessage("tool", '{"temp_c": 21}', tool_call_id="call_1", name="get_weather"),
            ChatMessage("user", TRICKY),
        ),
        params={"temperature": 0.5, "top_p": 0.9, "top_k": 40, "max_tokens": 300, "stop": ["END", "\n\n"],
                "seed": seed, "frequency_penalty": 0.1, "presence_penalty": -0.2},
        tools=tuple(WEATHER),
        tool_choice="auto",
        response_format={"type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": SCHEMA}},
        reasoning=reasoning,
        logprobs=True,
        top_logprobs=2,
        extra={"session_id": "sess-1"},
    )


def config(style: str, base_url: str, auth: str) -> EndpointConfig:
    return EndpointConfig(base_url=base_url, api_style=style, **AUTH[auth])


def run(lang: str, code: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    """Run one snippet as a user would: ``sh file``, ``python file`` (this venv, which has the
    SDKs), ``node file`` (a CommonJS file)."""
    file = tmp_path / {"curl": "snippet.sh", "python": "snippet.py", "javascript": "snippet.js"}[lang]
    file.write_text(code, encoding="utf-8")
    cmd = {"curl": ["sh", str(file)], "python": [PY, str(file)], "javascript": ["node", str(file)]}[lang]
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    return subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def code_of(s, lang: str) -> str:  # noqa: ANN001
    return {"curl": s.curl, "python": s.python, "javascript": s.javascript}[lang]


def env_for(s, cfg: EndpointConfig) -> dict[str, str]:  # noqa: ANN001
    """The variables the snippet names, with the endpoint's real secrets."""
    env = {s.key_env: cfg.api_key} if s.key_env else {}
    return env | {s.header_envs[name]: value for name, value in cfg.extra_headers.items()}


def send_as_relay(cfg: EndpointConfig, request: ChatRequest, root: str | None = None) -> None:
    """POST what the relay would (``build_request`` with the real secrets), read to the end."""
    url, headers, body = get_adapter(cfg.api_style).build_request(cfg, request)
    if root:
        url = root + url[url.index("/", len("https://")):]
    with httpx.Client(timeout=60) as client, client.stream("POST", url, headers=headers, json=body) as resp:
        assert resp.status_code == 200, resp.read()
        for _ in resp.iter_bytes():
            pass


def comparable(rec: dict, lang: str) -> dict:
    """What must match between the relay's request and the snippet's."""
    drop = INHERENT | INHERENT_BY_LANG[lang]
    headers = {k: v for k, v in rec["headers"].items() if k not in drop and not k.startswith("x-stainless-")}
    return {"path": rec["path"], "status": rec["status"], "auth": rec["auth_fingerprint"],
            "headers": headers, "body": rec["body"]}


def check_same_as_relay(sim: Sim, lang: str, out: subprocess.CompletedProcess) -> None:
    """``lang`` picks which headers its client adds by itself (:data:`INHERENT_BY_LANG`)."""
    assert out.returncode == 0, out.stderr
    recs = sim.requests()
    assert len(recs) == 2, [r["path"] for r in recs]  # the relay's, then exactly one (no retry)
    relay, snippet = recs
    expected = comparable(relay, lang)
    got = comparable(snippet, lang)
    assert got == expected
    assert expected["status"] == 200


def assert_no_secret(s, cfg: EndpointConfig) -> None:  # noqa: ANN001
    for text in (s.curl, s.python, s.javascript):
        for secret in cfg.secrets():
            assert secret not in text


@pytest.fixture(scope="module")
def node() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.skip("node is not installed: the JavaScript snippets cannot be run")
    return path


def needs(lang: str, request: pytest.FixtureRequest) -> None:
    if lang == "javascript":
        request.getfixturevalue("node")


@pytest.mark.parametrize("auth", list(AUTH))
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("style", STYLES)
def test_snippet_sends_the_relay_request(style, lang, auth, fresh_sim, tmp_path, request) -> None:  # noqa: ANN001
    needs(lang, request)
    cfg = config(style, fresh_sim.base_url, auth)
    req = rich_request(style)
    s = snippets(cfg, req, endpoint_name=f"sim {style}")
    assert_no_secret(s, cfg)
    assert s.body == get_adapter(style).build_request(cfg, req)[2]
    send_as_relay(cfg, req)
    out = run(lang, code_of(s, lang), env_for(s, cfg), tmp_path)
    check_same_as_relay(fresh_sim, lang, out)


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(("style", "host"), [("openai_chat", "https://api.openai.com"),
                                             ("openai_responses", "https://api.openai.com"),
                                             ("anthropic_messages", "https://api.anthropic.com")])
def test_snippet_for_a_vendor_host_matches_the_relay(style, host, lang, fresh_sim, tmp_path, request) -> None:  # noqa: ANN001
    """api.openai.com: max_completion_tokens, no top_k, ``include``, reasoning summary;
    api.anthropic.com: x-api-key without Authorization. Built for the vendor, run against the
    simulator by pointing the snippet's host there."""
    needs(lang, request)
    cfg = config(style, f"{host}/v1", "keyed")
    req = rich_request(style)
    s = snippets(cfg, req, endpoint_name="Vendor")
    assert s.key_env == "VENDOR_API_KEY"
    if style == "openai_chat":
        assert "max_completion_tokens" in s.body and "top_k" not in s.body
    if style == "anthropic_messages":
        assert "'Authorization': Omit()" in s.python
    send_as_relay(cfg, req, root=fresh_sim.root)
    out = run(lang, code_of(s, lang).replace(host, fresh_sim.root), env_for(s, cfg), tmp_path)
    check_same_as_relay(fresh_sim, lang, out)


@pytest.fixture(scope="module")
def sim_at_anthropic(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """A simulator mounted at ``/anthropic`` (an Anthropic base URL without ``/v1``)."""
    port = free_port()
    log = open(tmp_path_factory.mktemp("sim-prefix") / "sim.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [PY, "manage.py", "simulator", "--host", "127.0.0.1", "--port", str(port), "--prefix", "/anthropic"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "DJANGO_SETTINGS_MODULE": "playground.settings"},
    )
    s = Sim(port, proc)
    s.base_url = f"{s.root}/anthropic"
    try:
        wait_http(f"{s.base_url}/models", proc=proc)
        yield s
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


@pytest.mark.parametrize("lang", LANGS)
def test_anthropic_base_without_v1_is_reached_by_every_snippet(lang, sim_at_anthropic, tmp_path, request) -> None:  # noqa: ANN001
    """The anthropic SDK always appends /v1/messages: a base like ``…/anthropic`` (relay URL
    ``…/anthropic/messages``) gets a standard-library Python snippet instead of a wrong URL."""
    needs(lang, request)
    sim_at_anthropic.reset()
    cfg = config("anthropic_messages", sim_at_anthropic.base_url, "keyed")
    req = rich_request("anthropic_messages")
    s = snippets(cfg, req, endpoint_name="Proxy")
    assert s.url == f"{sim_at_anthropic.root}/anthropic/messages"
    assert s.python_sdk == "" and "urllib.request" in s.python
    send_as_relay(cfg, req)
    out = run(lang, code_of(s, lang), env_for(s, cfg), tmp_path)
    # The standard-library snippet sends every relay header (Accept included), like curl.
    check_same_as_relay(sim_at_anthropic, "curl" if lang == "python" else lang, out)


@pytest.mark.parametrize("style", STYLES)
def test_sdk_base_urls_are_the_ones_the_sdks_expect(style, sim) -> None:  # noqa: ANN001
    """The issue's exact values: the OpenAI base_url is the endpoint base (not ``…/v1/chat``),
    the Anthropic one has no ``/v1`` (the SDK adds ``/v1/messages``)."""
    s = snippets(config(style, sim.base_url + "/", "keyed"), rich_request(style), endpoint_name="sim")
    expected = sim.root if style == "anthropic_messages" else sim.base_url
    assert f"base_url={expected!r}," in s.python
    assert s.python.count("base_url=") == 1


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("style", STYLES)
def test_keyless_snippet_runs_with_no_variable_and_names_none(style, lang, fresh_sim, tmp_path, request) -> None:  # noqa: ANN001
    """The issue's example: a keyless endpoint's Python snippet raised KeyError. No snippet of a
    keyless endpoint reads the environment, and none sends an auth header."""
    needs(lang, request)
    cfg = config(style, fresh_sim.base_url, "keyless")
    req = rich_request(style, seed=7)
    s = snippets(cfg, req, endpoint_name="Local llama")
    assert s.key_env == "" and s.header_envs == {}
    assert "os.environ" not in s.python and "process.env" not in s.javascript
    assert "${" not in s.curl.split("<<'JSON'")[0]  # (the body's text has one)
    out = run(lang, code_of(s, lang), {}, tmp_path)
    assert out.returncode == 0, out.stderr
    (rec,) = fresh_sim.requests()
    assert rec["status"] == 200 and not rec["auth_present"]
    assert "authorization" not in rec["headers"] and "x-api-key" not in rec["headers"]
    assert rec["body"] == s.body


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("style", STYLES)
def test_keyed_snippet_without_its_variable_stops_before_sending(style, lang, fresh_sim, tmp_path, request) -> None:  # noqa: ANN001
    needs(lang, request)
    cfg = config(style, fresh_sim.base_url, "keyed")
    s = snippets(cfg, rich_request(style, seed=7), endpoint_name="Team GPU")
    assert s.key_env == "TEAM_GPU_API_KEY"
    out = run(lang, code_of(s, lang), {}, tmp_path)
    assert out.returncode != 0
    assert "TEAM_GPU_API_KEY" in out.stderr
    assert fresh_sim.requests() == []


def test_javascript_keeps_an_integer_beyond_its_exact_range(fresh_sim, tmp_path, node) -> None:  # noqa: ANN001
    """seed 2**60 + 1 is not a JavaScript number: the body is sent as JSON text, byte-exact."""
    cfg = config("openai_chat", fresh_sim.base_url, "keyless")
    req = rich_request("openai_chat", seed=2**60 + 1)
    s = snippets(cfg, req, endpoint_name="x")
    assert "const body = \"" in s.javascript
    out = run("javascript", s.javascript, {}, tmp_path)
    assert out.returncode == 0, out.stderr
    (rec,) = fresh_sim.requests()
    assert rec["body"]["seed"] == 2**60 + 1 and rec["body"] == s.body
    small = snippets(cfg, rich_request("openai_chat", seed=7), endpoint_name="x")
    assert "const body = {" in small.javascript


def test_env_names_are_valid_shell_names() -> None:
    assert env_name("SambaNova Cloud") == "SAMBANOVA_CLOUD_API_KEY"
    assert env_name("1st GPU") == "EP_1ST_GPU_API_KEY"
    assert env_name("Модель") == "PLAYGROUND_API_KEY"
    cfg = EndpointConfig(base_url="http://h/v1", api_key="k-long", extra_headers={"X-Team": "a-long", "X_Team": "b-long"})
    s = snippets(cfg, ChatRequest(model="m", messages=(ChatMessage("user", "hi"),)), endpoint_name="e")
    assert s.header_envs == {"X-Team": "HEADER_X_TEAM", "X_Team": "HEADER_X_TEAM_2"}


def test_python_snippet_is_python_for_every_style() -> None:
    """Compiles (the body is a Python literal, not JSON with true/false/null replaced)."""
    for style in STYLES:
        for auth in AUTH:
            s = snippets(config(style, "http://127.0.0.1:9/v1", auth), rich_request(style), endpoint_name="e")
            compile(s.python, "snippet.py", "exec")
            assert "'Say \"true\" and \\'false\\' or null;" in s.python



# ---- "this turn": the request one turn sent, from its Inspect record (issue 10) ------------


def recorded_request(cfg: EndpointConfig, req: ChatRequest) -> dict:
    """What a turn keeps of its request: the runner's own ``_request_for_inspect`` (secret
    header values ``[REDACTED]``, secrets scrubbed), on a stand-in with the turn's spec."""
    from types import SimpleNamespace

    from chat.providers.errors import secret_variants
    from chat.turns import TurnRunner

    runner = SimpleNamespace(turn=SimpleNamespace(spec=SimpleNamespace(config=cfg, request=req)),
                             _secrets=secret_variants(cfg.secrets()))
    return TurnRunner._request_for_inspect(runner)


@pytest.mark.parametrize("auth", list(AUTH))
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("style", STYLES)
def test_this_turn_snippet_sends_the_recorded_request(style, lang, auth, fresh_sim, tmp_path, request) -> None:  # noqa: ANN001
    from chat.codegen import snippets_recorded

    needs(lang, request)
    cfg = config(style, fresh_sim.base_url, auth)
    req = rich_request(style)
    recorded = recorded_request(cfg, req)
    r = snippets_recorded(recorded, api_style=style, endpoint_name=f"sim {style}",
                          header_names=list(cfg.extra_headers))
    assert r is not None and not r.shortened
    s = r.s
    assert_no_secret(s, cfg)
    assert "[REDACTED]" not in s.curl + s.python + s.javascript
    assert s.body == recorded["body"] == get_adapter(style).build_request(cfg, req)[2]
    assert s.key_env == (env_name(f"sim {style}") if cfg.api_key else "")
    send_as_relay(cfg, req)
    out = run(lang, code_of(s, lang), env_for(s, cfg), tmp_path)
    check_same_as_relay(fresh_sim, lang, out)


def test_this_turn_without_a_full_record_has_no_snippet() -> None:
    from chat.codegen import snippets_recorded

    assert snippets_recorded({}, api_style="openai_chat", endpoint_name="x") is None
    assert snippets_recorded({"model": "m", "messages": []}, api_style="openai_chat", endpoint_name="x") is None
