"""Issue 8 (hardening), the HTTP and ASGI side: each test names its item.

1 no HTML injection in any view · 2 Content-Security-Policy header · 3 keys bound to their
endpoint's origin · 5 no debug run by default, secrets hidden in reprs · 9 the in-process
simulator needs a session or the simulator key, keeps nothing, and is bounded · 12 attachment
limits and orphan cleanup · 14 the websocket message limit · 16 login throttling · 18 the
websocket origin check · 19 no state change on GET · 20 ``check --deploy`` with the README's
production environment.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import html5lib
import httpx
import pytest
from asgiref.sync import async_to_sync
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from chat import middleware, services
from chat.compare import services as compare_services
from chat.models import Attachment, Conversation, Endpoint, Message, MessageStatus, SiteSettings
from chat.modes.models import ModeRun

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct-horse-battery-9"


@pytest.fixture(autouse=True)
def _setup(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    return services.user_create(username="alice", password=PASSWORD, is_admin=True)


@pytest.fixture
def alice_client(alice) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(alice)
    return c


def finished_turn(user: Any, text: str = "Hello", answer: str = "Hi there") -> tuple[Conversation, Message]:
    """A conversation with one complete turn (user message and answer), like the runner writes."""
    conversation = services.conversation_create(user=user)
    endpoint = Endpoint.objects.filter(owner=user).first()
    started = services.turn_start(
        conversation=conversation, turn_id=uuid.uuid4(), content=text, parent_id=None,
        endpoint=endpoint, model="sim-fast", system_prompt="", params={},
    )
    (assistant_id,) = started.assistant_message_ids
    services.message_complete(
        message_id=assistant_id, status=MessageStatus.COMPLETE, content=answer, reasoning="",
        finish_reason="stop", usage={}, usage_raw={}, metrics={}, error={},
        inspect={"request": {"model": "sim-fast"}, "events": [{"event": "", "data": "{}"}]},
    )
    return conversation, Message.objects.get(pk=assistant_id)


# ---- URL patterns with real objects --------------------------------------------------------


def all_patterns(resolver: URLResolver | None = None, prefix: str = "", ns: str = "") -> list[tuple[str, str]]:
    """(route, name) of every URL pattern outside the admin (its login page is added)."""
    out: list[tuple[str, str]] = []
    for p in (resolver or get_resolver()).url_patterns:
        if isinstance(p, URLResolver):
            if p.namespace == "admin":
                continue
            out += all_patterns(p, prefix + str(p.pattern), p.namespace or ns)
        elif isinstance(p, URLPattern):
            out.append((prefix + str(p.pattern), f"{ns}:{p.name}" if ns else str(p.name)))
    return [*out, ("admin/login/", "admin:login")]


def fill(route: str, ids: dict[str, Any]) -> str:
    """A concrete path for ``route`` (``c/<int:conversation_id>/`` → ``/c/12/``)."""
    def sub(m: re.Match[str]) -> str:
        name = m.group(2)
        for key in ids:  # "<prefix>:<name>": the id of that name under that URL prefix
            prefix, _, own = key.rpartition(":")
            if prefix and own == name and route.startswith(prefix):
                return str(ids[key])
        return str(ids[name])

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", sub, route)


@pytest.fixture
def objects(alice) -> dict[str, Any]:  # noqa: ANN001
    """One of everything alice owns: conversation, message, attachment, endpoint, team (and
    her membership of it), and her own user id (for the staff's user pages)."""
    conversation, answer = finished_turn(alice)
    user_message = Message.objects.get(conversation=conversation, role="user")
    attachment = Attachment.objects.create(
        owner=alice, message=user_message, kind="image", media_type="image/png", filename="a.png",
        data=b"\x89PNG\r\n", size=6,
    )
    endpoint = services.endpoint_create(
        user=alice, name="Other", base_url="http://127.0.0.1:9/v1", api_key="sk-objects-1234567890",
    )
    SiteSettings.objects.update_or_create(pk=1, defaults={"open_signup": True})
    run = ModeRun.objects.create(  # issue 14: a finished embeddings run (modes URLs)
        owner=alice, endpoint=endpoint, endpoint_name=endpoint.name, kind="embeddings", model="sim-embed",
        inputs=["a", "b"], vectors=b"\x00\x00\x80?" * 4, dims=2, status="complete",
    )
    comparison = compare_services.compare_create(user=alice)  # issue 11: a comparison and its lanes
    lane = comparison.lanes.order_by("position").first()
    from chat.teams import services as team_services

    team = team_services.team_create(user=alice, name="Team")
    return {
        "conversation_id": conversation.pk, "message_id": answer.pk, "attachment_id": attachment.pk,
        "endpoint_id": endpoint.pk, "fmt": "json", **prompt_objects(alice, conversation),
        "modes/:run_id": run.pk,
        "compare/:conversation_id": comparison.pk, "lane_id": lane.pk, "action": "duplicate",
        "team_id": team.pk, "membership_id": team.memberships.get().pk, "user_id": alice.pk,
    }


def prompt_objects(alice, conversation) -> dict[str, Any]:  # noqa: ANN001
    """A prompt with a version, a test set, a run and a share link of alice (chat.prompts, chat.sharing)."""
    from chat.prompts import services as prompt_services
    from chat.prompts.models import TestRun, TestSet
    from chat.sharing import services as share_services

    prompt = prompt_services.prompt_create(user=alice, name="swept", content=prompt_services.VersionContent(
        "S {{x}}", ({"role": "user", "content": "U {{x}}"},), {"model": "m", "params": {}}))
    test_set = TestSet.objects.create(prompt=prompt, name="t", rows=[{"vars": {"x": "1"}, "checks": []}])
    run = TestRun.objects.create(test_set=test_set, owner=alice, lanes=[])
    _, token = share_services.share_create(user=alice, conversation=conversation, visibility="link", include_reasoning=False)
    return {"prompt_id": prompt.pk, "number": 1, "set_id": test_set.pk, "run_id": run.pk, "token": token, "name": "swept"}


# ---- item 1: no HTML injection anywhere ----------------------------------------------------

PAYLOADS = [
    '<img src=x onerror=alert(1) data-xss="1">',
    '"><svg onload=alert(1) data-xss="2">',
    "'><svg onload=alert(1) data-xss=\"3\">",
    '</textarea></pre><img src=x onerror=alert(1) data-xss="4">',
]
#: Every query or form parameter any view reads (forms, filters, actions, accounts).
PARAMETERS = sorted({
    "q", "current", "refresh", "content", "role", "model", "endpoint_id", "system_prompt", "upto",
    "title", "url", "form", "open_signup", "username", "password", "password1", "password2", "next",
    "old_password", "new_password1", "new_password2", "name", "base_url", "api_style", "api_key",
    "clear_api_key", "extra_headers", "clear_extra_headers", "default_model", "stream_options",
    "temperature", "top_p", "top_k", "max_tokens", "stop", "seed", "frequency_penalty",
    "presence_penalty", "reasoning_effort", "thinking_budget", "enable_thinking", "response_format",
    "schema_name", "schema_strict", "json_schema", "tools", "tool_choice", "logprobs",
    "top_logprobs", "session_id",
    "prompt", "texts", "encoding_format", "task", "language", "endpoint",  # modes (issue 14)
    "v", "number", "blind", "choice", "rank_0", "rank_1", "rank_2",  # compare × prompts, rankings
})


def live_injections(body: str) -> list[str]:
    """Elements a browser would build from a payload: any element carrying ``data-xss``, any
    ``on*`` attribute, any ``javascript:`` link (parsed with html5lib, as a browser parses)."""
    found = []
    doc = html5lib.parse(body, namespaceHTMLElements=False)
    for el in doc.iter():
        if not isinstance(el.tag, str):
            continue
        for name, value in el.attrib.items():
            name = name.lower() if isinstance(name, str) else str(name)
            if name == "data-xss" or name.startswith("on"):
                found.append(f"<{el.tag} {name}={value!r}>")
            if name in ("href", "src", "action", "formaction") and value.strip().lower().startswith("javascript:"):
                found.append(f"<{el.tag} {name}={value!r}>")
    return found


def _request(client: Client, method: str, path: str, data: dict[str, str]) -> Any:
    if method == "GET":
        return client.get(path, data, HTTP_HX_REQUEST="true" if "code" in path else None)
    return client.post(path, data)


@pytest.mark.django_db
def test_no_view_turns_a_parameter_into_live_html(alice_client: Client, alice, objects) -> None:  # noqa: ANN001
    """Item 1: the payloads in every parameter (all at once, and each alone) of every URL,
    by GET and POST, as the owner of real objects: no response has a live element from them.
    ``GET /c/<id>/code/?reasoning_effort=<img onerror>`` was the reported case."""
    patterns = all_patterns()
    reflected = 0
    # Deleting views last, so the other views still see the objects.
    patterns.sort(key=lambda p: "delete" in p[1])
    checked = 0
    for route, name in patterns:
        path = fill(route, objects)
        for payload in PAYLOADS:
            cases = [dict.fromkeys(PARAMETERS, payload)] + [{p: payload} for p in PARAMETERS]
            for method in ("GET", "POST"):
                if "delete" in name and method == "POST":
                    continue  # below, once
                for data in cases if payload is PAYLOADS[0] else cases[:1]:
                    resp = _request(alice_client, method, path, data)
                    if name in ("logout", "password_change"):  # may end or rotate the session
                        alice.refresh_from_db()
                        alice_client.force_login(alice)
                    if "html" not in resp.get("Content-Type", ""):
                        continue
                    body = resp.content.decode("utf-8", "replace")
                    assert not live_injections(body), (method, path, sorted(data)[:3], live_injections(body))
                    checked += 1
                    reflected += "&lt;img src=x onerror" in body or "&quot;&gt;&lt;svg" in body
    for route, name in patterns:
        if "delete" in name:
            resp = alice_client.post(fill(route, objects), dict.fromkeys(PARAMETERS, PAYLOADS[0]))
            assert not live_injections(resp.content.decode("utf-8", "replace"))
    assert checked > 1000
    assert reflected > 20  # the payloads did reach pages (escaped): the sweep ran logged in
    assert alice_client.get(f"/c/{objects['conversation_id']}/").status_code in (200, 404)


@pytest.mark.django_db
def test_view_code_shows_form_errors_escaped(alice_client: Client, objects) -> None:  # noqa: ANN001
    """Item 1, the reported example and a variant, looked at directly."""
    cid = objects["conversation_id"]
    for field in ("reasoning_effort", "response_format", "enable_thinking"):
        resp = alice_client.get(f"/c/{cid}/code/", {field: PAYLOADS[0]})
        body = resp.content.decode()
        assert resp.status_code == 200
        assert "Fix the settings first" in body
        assert "&lt;img src=x onerror=alert(1)" in body
        assert not live_injections(body)
    resp = alice_client.get(f"/c/{cid}/code/", {"response_format": "json_schema", "json_schema": '{"x": 1' + PAYLOADS[1]})
    assert "Not valid JSON" in resp.content.decode() and not live_injections(resp.content.decode())


def test_views_build_no_html_by_string_formatting() -> None:
    """Item 1: views return templates; no ``HttpResponse('<…')`` literal is left."""
    source = (ROOT / "chat" / "views.py").read_text()
    assert not re.search(r"HttpResponse\(\s*f?['\"]\s*<", source)


# ---- item 2: Content-Security-Policy on every page -----------------------------------------


def csp(resp: Any) -> dict[str, list[str]]:
    header = resp.get("Content-Security-Policy", "")
    out = {}
    for part in header.split(";"):
        words = part.split()
        if words:
            out[words[0]] = words[1:]
    return out


@pytest.mark.django_db
def test_every_html_page_has_a_strict_policy(alice_client: Client, objects) -> None:  # noqa: ANN001
    pages = [fill(route, objects) for route, name in all_patterns() if "delete" not in name]
    seen = 0
    for path in [*pages, "/no/such/page/"]:
        resp = alice_client.get(path)
        if "html" not in resp.get("Content-Type", ""):
            continue
        seen += 1
        policy = csp(resp)
        assert policy.get("script-src") == ["'self'"], (path, policy)
        assert policy.get("style-src") == ["'self'"], (path, policy)
        assert policy.get("object-src") == ["'none'"]
        assert policy.get("base-uri") == ["'none'"]
        assert policy.get("frame-ancestors") == ["'none'"]
        assert sorted(policy.get("img-src", [])) == sorted(["'self'", "data:"])
        assert {"'self'", "ws://testserver", "wss://testserver"} <= set(policy.get("connect-src", []))
        assert "'unsafe-inline'" not in " ".join(sum(policy.values(), []))
        assert "'unsafe-eval'" not in " ".join(sum(policy.values(), []))
    assert seen >= 12
    anonymous = Client().get("/accounts/login/")
    assert csp(anonymous).get("script-src") == ["'self'"]


@pytest.mark.django_db
def test_pages_have_no_inline_script_handler_or_style(alice_client: Client, objects) -> None:  # noqa: ANN001
    """Item 2: what the policy forbids is not in the markup either (it would be blocked)."""
    pages = [fill(route, objects) for route, name in all_patterns() if "delete" not in name]
    for path in [*pages, "/accounts/login/", "/no/such/page/"]:
        resp = alice_client.get(path)
        if "html" not in resp.get("Content-Type", ""):
            continue
        doc = html5lib.parse(resp.content.decode(), namespaceHTMLElements=False)
        for el in doc.iter():
            if not isinstance(el.tag, str):
                continue
            assert not (el.tag == "script" and not el.get("src")), (path, "inline script")
            assert el.tag != "style", (path, "inline <style>")
            assert "style" not in el.attrib, (path, el.tag, el.attrib)
            assert not [a for a in el.attrib if a.lower().startswith("on")], (path, el.tag, el.attrib)
            if el.tag == "meta" and el.get("name") == "htmx-config":
                config = json.loads(el.get("content"))
                assert config["includeIndicatorStyles"] is False and config["allowEval"] is False


def test_markdown_tables_align_with_classes_not_style() -> None:
    from chat.rendering import render_markdown

    out = render_markdown("| a | b | c |\n|:--|:-:|--:|\n| 1 | 2 | 3 |\n")
    assert "style" not in out
    assert 'class="align-left"' in out and 'class="align-center"' in out and 'class="align-right"' in out


# ---- item 3: a key belongs to its endpoint's scheme, host and port ------------------------


def endpoint_form(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Vendor", "base_url": "https://127.0.0.1:8443/v1", "api_style": "openai_chat",
        "api_key": "", "extra_headers": "", "default_model": "m", "stream_options": "on",
    }
    data.update(overrides)
    return data


@pytest.mark.django_db
@pytest.mark.parametrize("new_url", [
    "https://127.0.0.2:8443/v1",  # another host (loopback addresses resolve without DNS)
    "https://localhost:8443/v1",  # another host name for the same machine
    "http://127.0.0.1:8443/v1",   # another scheme
    "https://127.0.0.1:8444/v1",  # another port
    "https://127.0.0.1/v1",       # the default port is another port
])
def test_changing_the_origin_drops_the_stored_key_and_headers(alice_client: Client, alice, new_url: str) -> None:  # noqa: ANN001
    alice_client.post("/endpoints/new/", endpoint_form(api_key="sk-vendor-SECRET-123456", extra_headers="X-Org: secret-org-value"))
    endpoint = Endpoint.objects.get(owner=alice, name="Vendor")
    assert endpoint.get_api_key() == "sk-vendor-SECRET-123456"
    resp = alice_client.post(f"/endpoints/{endpoint.pk}/", endpoint_form(base_url=new_url), follow=True)
    endpoint.refresh_from_db()
    assert endpoint.base_url == new_url
    assert endpoint.get_api_key() == "" and endpoint.api_key_hint == ""
    assert endpoint.get_extra_headers() == {} and endpoint.extra_header_names == []
    assert "stored key and header values were removed" in resp.content.decode()


@pytest.mark.django_db
def test_same_origin_keeps_the_key_and_new_secrets_with_a_new_origin_are_kept(alice_client: Client, alice) -> None:  # noqa: ANN001
    alice_client.post("/endpoints/new/", endpoint_form(api_key="sk-vendor-SECRET-123456", extra_headers="X-Org: v"))
    endpoint = Endpoint.objects.get(owner=alice, name="Vendor")
    # Same scheme, host and port (other case, other path): kept.
    alice_client.post(f"/endpoints/{endpoint.pk}/", endpoint_form(base_url="HTTPS://127.0.0.1:8443/v2"))
    endpoint.refresh_from_db()
    assert endpoint.get_api_key() == "sk-vendor-SECRET-123456" and endpoint.get_extra_headers() == {"X-Org": "v"}
    # Another host with a key and headers typed in the same form: those are stored.
    alice_client.post(f"/endpoints/{endpoint.pk}/", endpoint_form(
        base_url="https://127.0.0.3/v1", api_key="sk-second-host-999999", extra_headers="X-Org: w",
    ))
    endpoint.refresh_from_db()
    assert endpoint.get_api_key() == "sk-second-host-999999" and endpoint.get_extra_headers() == {"X-Org": "w"}
    # Another host with only a new key: the old headers do not follow.
    alice_client.post(f"/endpoints/{endpoint.pk}/", endpoint_form(base_url="https://127.0.0.4/v1", api_key="sk-third-000000"))
    endpoint.refresh_from_db()
    assert endpoint.get_api_key() == "sk-third-000000" and endpoint.get_extra_headers() == {}


@pytest.mark.django_db
def test_the_form_says_so_next_to_the_base_url(alice_client: Client) -> None:
    page = alice_client.get("/endpoints/new/").content.decode()
    assert "changing any of them removes the stored key and header values" in page


# ---- item 5: no debug run by default; reprs hide secrets ----------------------------------


def test_default_settings_are_not_debug_and_keep_no_derived_key() -> None:
    from django.conf import settings

    source = (ROOT / "playground" / "settings.py").read_text()
    assert 'env.bool("DJANGO_DEBUG", default=False)' in source
    crypto_source = (ROOT / "chat" / "crypto.py").read_text()
    assert "SECRET_KEY" not in crypto_source.split('"""', 2)[2]  # code, not the docstring
    assert settings.PLAYGROUND_ENCRYPTION_KEYS and settings.PLAYGROUND_SIMULATOR_KEY


@pytest.mark.django_db
def test_endpoint_and_attachment_reprs_hide_secrets(alice) -> None:  # noqa: ANN001
    endpoint = services.endpoint_create(
        user=alice, name="V", base_url="https://api.vendor.example/v1", api_key="sk-repr-SECRET-98765",
        extra_headers={"X-Org": "header-SECRET-value"},
    )
    text = repr(endpoint) + str(endpoint) + repr(Endpoint.objects.filter(pk=endpoint.pk))
    assert "SECRET" not in text and "…8765" not in text and endpoint.api_key_encrypted not in text
    attachment = Attachment(owner=alice, kind="image", media_type="image/png", data=b"PIXELS-SECRET", size=13)
    assert "PIXELS" not in repr(attachment)


SECRET_FIELDS = {"api_key": "sk-repr-SECRET-12345", "extra_headers": {"X-Org": "hdr-SECRET-67890"}}


# chat/providers/ is another engineer's (issue 8 item 4/10): the fix there is
# ``field(repr=False)`` on EndpointConfig.api_key and .extra_headers. Strict xfail: remove the
# marker when it lands (then it must pass).


def test_endpoint_config_repr_hides_secrets() -> None:
    """Item 5: EndpointConfig (chat/providers/base.py) is printed by the debug page and in
    tracebacks; it must not show the key or header values. (Owned by the providers work:
    fixed there; this test shows it.)"""
    from chat.providers.base import EndpointConfig

    config = EndpointConfig(base_url="https://api.vendor.example/v1", **SECRET_FIELDS)
    assert "SECRET" not in repr(config) and "SECRET" not in str(config)


def test_every_dataclass_holding_secrets_hides_them_in_repr() -> None:
    """Item 5, the kind: any dataclass of the chat package with a key or headers field."""
    import dataclasses
    import importlib
    import pkgutil

    import chat

    found = []
    for info in pkgutil.walk_packages(chat.__path__, "chat."):
        if ".simulator" in info.name or info.name.endswith(("views", "routing")):
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if not (isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == module.__name__):
                continue
            names = {f.name for f in dataclasses.fields(obj)}
            if names & set(SECRET_FIELDS):
                found.append(obj)
                shown = [f.name for f in dataclasses.fields(obj) if f.name in SECRET_FIELDS and f.repr]
                assert not shown, f"{obj.__module__}.{obj.__qualname__} shows {shown} in its repr"
    assert found  # EndpointConfig at least


# ---- item 9: the in-process simulator ------------------------------------------------------


def _gate(control: bool = False, **limits: int) -> Any:
    from chat.simulator import create_app
    from playground.asgi import SimulatorGate

    app = create_app("/simulator/v1", control=control, **limits)
    return app, SimulatorGate(app)


def _call(gate: Any, method: str, path: str, *, body: Any = None, headers: dict[str, str] | None = None) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=gate)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            return await client.request(method, path, json=body, headers=headers or {})

    return async_to_sync(go)()


CHAT = {"model": "sim-fast", "messages": [{"role": "user", "content": "private prompt"}], "stream": False}
GATED = [
    ("POST", "/simulator/v1/chat/completions", CHAT),
    ("POST", "/simulator/v1/messages", {"model": "sim-fast", "max_tokens": 20, "messages": [{"role": "user", "content": "x"}]}),
    ("POST", "/simulator/v1/messages/count_tokens", {"model": "sim-fast", "messages": [{"role": "user", "content": "x"}]}),
    ("POST", "/simulator/v1/responses", {"model": "sim-fast", "input": "x"}),
    ("GET", "/simulator/_simulator/requests", None),
    ("POST", "/simulator/_simulator/reset", None),
    ("GET", "/simulator/other", None),
]


@pytest.mark.django_db(transaction=True)
def test_simulator_models_are_public_everything_else_needs_login_or_key(settings) -> None:  # noqa: ANN001
    _, gate = _gate(control=True)
    models = _call(gate, "GET", "/simulator/v1/models")
    assert models.status_code == 200 and any(m["id"] == "sim-fast" for m in models.json()["data"])
    assert _call(gate, "GET", "/simulator/v1/models/sim-fast").status_code == 200
    for method, path, body in GATED:
        resp = _call(gate, method, path, body=body)
        assert resp.status_code == 401, (method, path, resp.status_code)
        assert resp.json()["error"]["code"] == "simulator_login_required"
        wrong = _call(gate, method, path, body=body, headers={"Authorization": "Bearer sim-wrong"})
        assert wrong.status_code == 401
    key = settings.PLAYGROUND_SIMULATOR_KEY
    assert _call(gate, "POST", "/simulator/v1/chat/completions", body=CHAT, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert _call(gate, "POST", GATED[1][1], body=GATED[1][2], headers={"x-api-key": key}).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_simulator_answers_a_logged_in_session_only_while_the_user_is_active() -> None:
    user = services.user_create(username="simuser", password=PASSWORD)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    _, gate = _gate()
    ok = _call(gate, "POST", "/simulator/v1/chat/completions", body=CHAT, headers={"Cookie": cookie})
    assert ok.status_code == 200 and ok.json()["choices"][0]["message"]["content"]
    user.is_active = False
    user.save()
    assert _call(gate, "POST", "/simulator/v1/chat/completions", body=CHAT, headers={"Cookie": cookie}).status_code == 401


@pytest.mark.django_db
def test_the_builtin_endpoint_sends_the_simulator_key(alice, settings) -> None:  # noqa: ANN001
    """Item 9: the playground's own sim:// endpoints authenticate with the per-install key
    (no turn code changes: the endpoint gives it as its key); it is never stored or shown."""
    sim = Endpoint.objects.get(owner=alice, base_url="sim://builtin/v1")
    assert sim.get_api_key() == settings.PLAYGROUND_SIMULATOR_KEY
    assert sim.api_key_encrypted == "" and sim.api_key_hint == ""
    moved = services.endpoint_create(user=alice, name="x", base_url="https://elsewhere.example/v1")
    assert moved.get_api_key() == ""


@pytest.mark.django_db(transaction=True)
def test_simulator_keeps_no_request_without_its_control_switch(settings) -> None:  # noqa: ANN001
    key = {"Authorization": f"Bearer {settings.PLAYGROUND_SIMULATOR_KEY}"}
    app, gate = _gate(control=False)
    assert _call(gate, "POST", "/simulator/v1/chat/completions", body=CHAT, headers=key).status_code == 200
    assert app.recorder.requests == []
    assert _call(gate, "GET", "/simulator/_simulator/requests", headers=key).status_code == 404
    app, gate = _gate(control=True)
    _call(gate, "POST", "/simulator/v1/chat/completions", body=CHAT, headers=key)
    assert app.recorder.last().body["messages"][0]["content"] == "private prompt"


@pytest.mark.django_db(transaction=True)
def test_simulator_answer_and_request_sizes_are_capped(settings) -> None:  # noqa: ANN001
    key = {"Authorization": f"Bearer {settings.PLAYGROUND_SIMULATOR_KEY}"}
    _, gate = _gate(max_answer_chars=50_000, max_body_bytes=100_000)
    for schema in (
        {"type": "object", "properties": {"s": {"type": "string", "minLength": 100_000_000}}, "required": ["s"]},
        {"type": "array", "minItems": 100_000, "items": {"type": "array", "minItems": 100_000, "items": {"type": "string"}}},
    ):
        body = {**CHAT, "model": "sim-fast?ttft_ms=0&delay_ms=0", "max_tokens": 10**9, "response_format": {
            "type": "json_schema", "json_schema": {"name": "big", "schema": schema},
        }}
        resp = _call(gate, "POST", "/simulator/v1/chat/completions", body=body, headers=key)
        assert resp.status_code == 200
        assert len(resp.json()["choices"][0]["message"]["content"]) <= 60_000
    huge = {**CHAT, "messages": [{"role": "user", "content": "x" * 200_000}]}
    assert _call(gate, "POST", "/simulator/v1/chat/completions", body=huge, headers=key).status_code == 413


def test_asgi_mount_passes_the_settings_limits() -> None:
    source = (ROOT / "playground" / "asgi.py").read_text()
    assert "SimulatorGate(simulator_asgi_app(" in source
    assert "max_body_bytes=settings.PLAYGROUND_SIMULATOR_MAX_BODY_BYTES" in source
    assert "max_answer_chars=settings.PLAYGROUND_SIMULATOR_MAX_ANSWER_CHARS" in source


# ---- item 12: attachment limits and orphans ------------------------------------------------


def png(name: str, size: int) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, b"\x89PNG" + b"0" * (size - 4), content_type="image/png")


@pytest.mark.django_db
def test_attachments_per_message_count_and_bytes_are_capped(alice_client: Client, alice, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE = 3
    settings.PLAYGROUND_MAX_ATTACHMENT_BYTES_PER_MESSAGE = 2500
    resp = alice_client.post("/attachments/", {"file": [png(f"i{i}.png", 500) for i in range(4)]})
    body = resp.content.decode()
    assert Attachment.objects.filter(owner=alice).count() == 3
    assert "i3.png: 3 attachments are waiting to be sent and a message takes at most 3" in body
    assert 'class="chip chip-error" role="alert"' in body
    # Bytes: 1000 waiting + 1600 > 2500.
    Attachment.objects.filter(owner=alice).last().delete()
    resp = alice_client.post("/attachments/", {"file": [png("big.png", 1600)]})
    assert "big.png (0.0 MB) does not fit: 0.0 MB are waiting" in resp.content.decode()
    assert Attachment.objects.filter(owner=alice).count() == 2
    # Removing a chip deletes the unsent upload, which frees room.
    one = Attachment.objects.filter(owner=alice).first()
    assert alice_client.post(f"/a/{one.pk}/delete/").status_code == 204
    assert alice_client.post("/attachments/", {"file": [png("fits.png", 1600)]}).content.decode().count("chip-error") == 0


@pytest.mark.django_db
def test_a_send_with_too_many_attachments_is_refused_by_the_form(settings) -> None:  # noqa: ANN001
    from chat.forms import ChatSendForm

    settings.PLAYGROUND_MAX_ATTACHMENTS_PER_MESSAGE = 2
    ids = ",".join(str(uuid.uuid4()) for _ in range(3))
    form = ChatSendForm({"turn_id": str(uuid.uuid4()), "content": "x", "endpoint_id": 1, "model": "m", "attachment_ids": ids})
    assert not form.is_valid()
    assert "At most 2 attachments per message" in str(form.errors["attachment_ids"])


@pytest.mark.django_db
def test_per_user_quota_counts_sent_attachments_too(alice_client: Client, alice, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_ATTACHMENT_QUOTA_BYTES = 3000
    _, answer = finished_turn(alice)
    user_message = Message.objects.get(conversation=answer.conversation, role="user")
    Attachment.objects.create(owner=alice, message=user_message, kind="image", media_type="image/png", data=b"0" * 2500, size=2500)
    resp = alice_client.post("/attachments/", {"file": [png("over.png", 600)]})
    assert "over.png (0.0 MB) is over your attachment quota: 0.0 MB of 0.0 MB used" in resp.content.decode()
    assert Attachment.objects.filter(owner=alice, message__isnull=True).count() == 0


@pytest.mark.django_db
def test_orphan_uploads_are_deleted_by_the_command_and_on_upload(alice_client: Client, alice, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_ORPHAN_ATTACHMENT_HOURS = 24
    _, answer = finished_turn(alice)
    user_message = Message.objects.get(conversation=answer.conversation, role="user")
    old = timezone.now() - timedelta(hours=25)
    sent = Attachment.objects.create(owner=alice, message=user_message, kind="image", media_type="image/png", size=1)
    orphan = Attachment.objects.create(owner=alice, kind="image", media_type="image/png", size=1)
    fresh = Attachment.objects.create(owner=alice, kind="image", media_type="image/png", size=1)
    Attachment.objects.filter(pk__in=[sent.pk, orphan.pk]).update(created_at=old)
    call_command("attachments_cleanup", stdout=open(os.devnull, "w"))  # noqa: SIM115
    assert set(Attachment.objects.values_list("pk", flat=True)) == {sent.pk, fresh.pk}
    # On upload, at most once per ORPHAN_SWEEP_EVERY_S per process.
    orphan2 = Attachment.objects.create(owner=alice, kind="image", media_type="image/png", size=1)
    Attachment.objects.filter(pk=orphan2.pk).update(created_at=old)
    services._last_orphan_sweep = None
    alice_client.post("/attachments/", {"file": [png("a.png", 10)]})
    assert not Attachment.objects.filter(pk=orphan2.pk).exists()
    orphan3 = Attachment.objects.create(owner=alice, kind="image", media_type="image/png", size=1)
    Attachment.objects.filter(pk=orphan3.pk).update(created_at=old)
    alice_client.post("/attachments/", {"file": [png("b.png", 10)]})
    assert Attachment.objects.filter(pk=orphan3.pk).exists()  # not its turn yet


# ---- item 14: the websocket message limit --------------------------------------------------


def test_make_run_sets_daphnes_websocket_limit_from_the_same_setting() -> None:
    out = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "--websocket-max-message-size 1048576" in out and "--websocket-max-frame-size 1048576" in out
    assert "PLAYGROUND_WS_MAX_MESSAGE_BYTES=1048576" in out
    out = subprocess.run(["make", "-n", "run", "WS_MAX_MESSAGE_BYTES=2097152"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "--websocket-max-message-size 2097152" in out and "PLAYGROUND_WS_MAX_MESSAGE_BYTES=2097152" in out


@pytest.mark.django_db
def test_chat_page_tells_the_client_the_limit(alice_client: Client, alice, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_WS_MAX_MESSAGE_BYTES = 12345
    conversation = services.conversation_create(user=alice)
    assert 'data-ws-max-bytes="12345"' in alice_client.get(f"/c/{conversation.pk}/").content.decode()


# ---- item 16: login throttling -------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("login_url", ["/accounts/login/", "/admin/login/"])
def test_login_is_locked_after_failures_and_axes_reset_lifts_it(alice, login_url: str, settings) -> None:  # noqa: ANN001
    limit = settings.AXES_FAILURE_LIMIT
    client = Client()
    for _ in range(limit - 1):
        resp = client.post(login_url, {"username": "alice", "password": "wrong"})
        assert resp.status_code == 200  # the form again, with its error
    locked = client.post(login_url, {"username": "alice", "password": "wrong"})
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed logins" in page and "manage.py axes_reset" in page
    # Even the right password is refused while locked.
    assert client.post(login_url, {"username": "alice", "password": PASSWORD}).status_code == 429
    call_command("axes_reset", stdout=open(os.devnull, "w"))  # noqa: SIM115
    ok = client.post(login_url, {"username": "alice", "password": PASSWORD})
    assert ok.status_code == 302


@pytest.mark.django_db
def test_lockout_is_per_username_and_address(alice) -> None:  # noqa: ANN001
    services.user_create(username="bob", password=PASSWORD)
    attacker = Client(REMOTE_ADDR="198.51.100.7")
    for _ in range(10):
        attacker.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert Client(REMOTE_ADDR="203.0.113.9").post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 302
    assert attacker.post("/accounts/login/", {"username": "bob", "password": PASSWORD}).status_code == 302


# ---- item 18: websocket origin -------------------------------------------------------------


def ws_scope(origin: str | None, host: str = "chat.example.com", scheme: str = "wss", **extra: str) -> dict[str, Any]:
    headers = [(b"host", host.encode())]
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    headers += [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in extra.items()]
    return {"type": "websocket", "scheme": scheme, "headers": headers, "path": "/ws/c/1/"}


@pytest.mark.parametrize(("origin", "host", "scheme", "ok"), [
    ("https://chat.example.com", "chat.example.com", "wss", True),
    ("https://chat.example.com:443", "chat.example.com", "wss", True),
    ("http://chat.example.com", "chat.example.com", "wss", False),        # another scheme
    ("https://chat.example.com:8443", "chat.example.com", "wss", False),  # another port
    ("https://evil.example.com", "chat.example.com", "wss", False),       # another host
    ("http://chat.example.com:8000", "chat.example.com:8000", "ws", True),
    ("http://chat.example.com:8001", "chat.example.com:8000", "ws", False),
    ("https://chat.example.com:8000", "chat.example.com:8000", "ws", False),
    ("null", "chat.example.com", "wss", False),
    (None, "chat.example.com", "wss", False),
    ("https://chat.example.com", "not-allowed.example.net", "wss", False),  # Host not allowed
    ("https://app.trusted.example", "chat.example.com", "wss", True),        # CSRF_TRUSTED_ORIGINS
    ("http://app.trusted.example", "chat.example.com", "wss", False),
    ("https://x.sub.example", "chat.example.com", "wss", True),               # https://*.sub.example
    ("https://x.sub.example:444", "chat.example.com", "wss", False),
])
def test_websocket_origin_compares_scheme_host_and_port(settings, origin, host, scheme, ok) -> None:  # noqa: ANN001
    from playground.origins import origin_allowed

    settings.ALLOWED_HOSTS = ["chat.example.com", "localhost"]
    settings.CSRF_TRUSTED_ORIGINS = ["https://app.trusted.example", "https://*.sub.example"]
    assert origin_allowed(ws_scope(origin, host, scheme)) is ok


def test_websocket_origin_behind_a_tls_proxy(settings) -> None:  # noqa: ANN001
    from playground.origins import origin_allowed

    settings.ALLOWED_HOSTS = ["chat.example.com"]
    settings.CSRF_TRUSTED_ORIGINS = []
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert origin_allowed(ws_scope("https://chat.example.com", scheme="ws", x_forwarded_proto="https"))
    assert not origin_allowed(ws_scope("http://chat.example.com", scheme="ws", x_forwarded_proto="https"))
    assert not origin_allowed(ws_scope("https://chat.example.com", scheme="ws", x_forwarded_proto="http"))


@pytest.mark.django_db(transaction=True)
async def test_websocket_handshake_from_another_port_is_refused(settings) -> None:  # noqa: ANN001
    from channels.testing import WebsocketCommunicator

    from playground.asgi import application

    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    for origin in ("http://127.0.0.1:9999", "https://127.0.0.1:8000"):
        comm = WebsocketCommunicator(application, "/ws/c/1/", headers=[(b"host", b"127.0.0.1:8000"), (b"origin", origin.encode())])
        connected, _ = await comm.connect()
        assert not connected, origin
        await comm.disconnect()


# ---- item 19: no state change on GET -------------------------------------------------------


def row_counts() -> dict[str, int]:
    with connection.cursor() as cursor:
        out = {}
        for model in apps.get_models():
            table = model._meta.db_table
            cursor.execute(f'SELECT COUNT(*) FROM "{table}"')  # noqa: S608 - table names from models
            out[table] = cursor.fetchone()[0]
    return out


def table_digest() -> dict[str, str]:
    """Row counts and a digest of every row (an UPDATE changes it too)."""
    import hashlib

    out = {}
    with connection.cursor() as cursor:
        for model in apps.get_models():
            table = model._meta.db_table
            cursor.execute(f'SELECT * FROM "{table}" ORDER BY 1')  # noqa: S608
            out[table] = hashlib.sha256(repr(cursor.fetchall()).encode()).hexdigest()
    return out


@pytest.mark.django_db
def test_no_get_changes_the_database(alice_client: Client, alice, objects) -> None:  # noqa: ANN001
    """Item 19: GET every URL pattern (with ``?refresh=1`` too) as the owner of real objects,
    with an empty model cache and no empty conversation: every table's rows stay the same.
    The reported cases: ``GET /`` created a conversation, ``?refresh=1`` called upstream and
    wrote the model list (and an empty list was fetched and written on a plain GET)."""
    Endpoint.objects.filter(owner=alice).update(models_cache=[])
    SiteSettings.objects.all().delete()  # SiteSettings.load() wrote its row on a GET
    before_counts, before = row_counts(), table_digest()
    for route, _name in all_patterns():
        path = fill(route, objects)
        for query in ({}, {"refresh": "1"}):
            alice_client.get(path, query)
            Client().get(path, query)  # anonymous
    assert row_counts() == before_counts
    assert table_digest() == before


@pytest.mark.django_db
def test_model_list_refresh_is_a_post(alice_client: Client, alice, monkeypatch) -> None:  # noqa: ANN001
    from chat import views

    calls = []

    async def fake_list(config):  # noqa: ANN001, ANN202
        calls.append(config.base_url)
        return [{"id": "fresh-model"}]

    monkeypatch.setattr(views, "_list_models", fake_list)
    endpoint = Endpoint.objects.get(owner=alice)
    Endpoint.objects.filter(pk=endpoint.pk).update(models_cache=[{"id": "cached-model"}])
    got = alice_client.get(f"/endpoints/{endpoint.pk}/models/?refresh=1").content.decode()
    assert "cached-model" in got and not calls
    Endpoint.objects.filter(pk=endpoint.pk).update(models_cache=[])
    empty = alice_client.get(f"/endpoints/{endpoint.pk}/models/").content.decode()
    assert not calls and "hx-post" in empty and 'hx-trigger="load"' in empty  # asks again by POST
    posted = alice_client.post(f"/endpoints/{endpoint.pk}/models/").content.decode()
    assert "fresh-model" in posted and len(calls) == 1
    endpoint.refresh_from_db()
    assert endpoint.models_cache == [{"id": "fresh-model"}]
    assert "hx-post" not in posted  # never loops


def test_the_refresh_button_posts() -> None:
    js = (ROOT / "static" / "chat" / "app.js").read_text()
    assert "refresh=1" not in js
    assert 'htmx.ajax("POST", opt.dataset.modelsUrl' in js


# ---- item 20: check --deploy with the README's production environment ----------------------


def readme_production_env() -> dict[str, str]:
    """The ``export NAME=value`` lines of the README's production block; ``<the … key>``
    placeholders get freshly generated keys, as the README's previous block makes them."""
    import secrets

    from cryptography.fernet import Fernet

    text = (ROOT / "README.md").read_text()
    blocks = text.split("## Production set-up", 1)[1].split("## Security", 1)[0].split("```sh")[1:]
    env: dict[str, str] = {}
    for block in blocks:
        for line in block.split("```", 1)[0].splitlines():
            line = line.split("  #", 1)[0].strip()
            if not line.startswith("export "):
                continue
            for name, value in re.findall(r"(\w+)=(<[^>]*>|\S+)", line[len("export "):]):
                if value.startswith("<"):
                    value = Fernet.generate_key().decode() if "encryption" in value else secrets.token_urlsafe(50)
                env[name] = value
    return env


def test_check_deploy_passes_with_the_readme_production_environment(tmp_path: Path) -> None:
    env = readme_production_env()
    for needed in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "PLAYGROUND_ENCRYPTION_KEYS", "DJANGO_ALLOWED_HOSTS",
                   "DJANGO_SECURE_SSL_REDIRECT", "DJANGO_SECURE_HSTS_SECONDS", "DJANGO_SECURE_COOKIES"):
        assert needed in env, needed
    assert len(env["DJANGO_SECRET_KEY"]) >= 50
    env.pop("DATABASE_URL", None)  # no PostgreSQL needed for the check
    env.pop("REDIS_URL", None)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PLAYGROUND_")) and k not in ("DATABASE_URL", "REDIS_URL")}
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**clean, **env, "PLAYGROUND_VAR_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no issues" in proc.stdout, proc.stdout
    # And the default (plain HTTP on loopback) does warn: the settings are what changed it.
    default = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env={**clean, "PLAYGROUND_VAR_DIR": str(tmp_path)}, capture_output=True, text=True, timeout=120,
    )
    assert default.returncode != 0 and "security.W004" in default.stderr + default.stdout
