"""Endpoints through the UI views: CRUD, write-only encrypted secrets, base URL checks,
"Test connection" against the standalone simulator, other users' ids, key rotation, logs.

The API key and extra header values are secrets (DESIGN.md, "Storage and scale"): encrypted at
rest with MultiFernet, shown only as ``…`` plus the last 4 characters, never in a page, an htmx
response or a log record.
"""

from __future__ import annotations

import json
import logging
import socket

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import Client

from chat import crypto, middleware, services
from chat.models import SIMULATOR_BASE_URL, Endpoint

PASSWORD = "correct-horse-battery-9"
KEY = "sk-live-SECRETKEYMATERIAL-0123456789-zq7w"
KEY_HINT = "…zq7w"
KEY2 = "sk-second-ROTATEDKEYMATERIAL-5555-abcd"
HEADER_VALUE_1 = "team-hidden-HEADERVALUE-one-111"
HEADER_VALUE_2 = "another-hidden-HEADERVALUE-two-222"
HEADERS_TEXT = f"X-Org: {HEADER_VALUE_1}\nX-Trace-Token: {HEADER_VALUE_2}\n"
SECRET_FRAGMENTS = (
    KEY,
    "SECRETKEYMATERIAL",
    KEY2,
    "ROTATEDKEYMATERIAL",
    HEADER_VALUE_1,
    HEADER_VALUE_2,
    "HEADERVALUE",
)


def assert_no_secret(text: str | bytes) -> None:
    if isinstance(text, bytes):
        text = text.decode()
    for fragment in SECRET_FRAGMENTS:
        assert fragment not in text, f"secret fragment {fragment!r} leaked"


@pytest.fixture(autouse=True)
def _setup(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = False
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    return services.user_create(username="alice", password=PASSWORD)


@pytest.fixture
def bob(db):  # noqa: ANN001, ANN201
    return services.user_create(username="bob", password=PASSWORD)


@pytest.fixture
def alice_client(alice) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(alice)
    return c


@pytest.fixture
def bob_client(bob) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(bob)
    return c


def form_data(**overrides: str) -> dict[str, str]:
    data = {
        "name": "Local llama",
        "base_url": "http://127.0.0.1:8080/v1",
        "api_style": "openai_chat",
        "default_model": "smollm2",
        "stream_options": "on",
        "api_key": "",
        "extra_headers": "",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def raw_endpoint_row(pk: int) -> dict[str, object]:
    """The row as stored in the database, bypassing the model."""
    with connection.cursor() as cur:
        cur.execute("SELECT * FROM chat_endpoint WHERE id = %s", [pk])
        cols = [c[0] for c in cur.description]
        return dict(zip(cols, cur.fetchone(), strict=True))


def create_via_ui(client: Client, **overrides: str) -> Endpoint:
    before = set(Endpoint.objects.values_list("pk", flat=True))
    resp = client.post("/endpoints/new/", form_data(**overrides))
    assert resp.status_code == 302, resp.content.decode()[:3000]
    assert resp.url == "/endpoints/"
    (pk,) = set(Endpoint.objects.values_list("pk", flat=True)) - before
    return Endpoint.objects.get(pk=pk)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- create / edit / delete -----------------------------------------------------------------


@pytest.mark.django_db
def test_list_shows_builtin_simulator(alice_client: Client, alice) -> None:  # noqa: ANN001
    resp = alice_client.get("/endpoints/")
    assert resp.status_code == 200
    assert "Built-in simulator" in resp.content.decode()
    assert Endpoint.objects.get(owner=alice).base_url == SIMULATOR_BASE_URL


@pytest.mark.django_db
def test_new_form_renders_with_presets(alice_client: Client) -> None:
    resp = alice_client.get("/endpoints/new/")
    assert resp.status_code == 200
    page = resp.content.decode()
    for preset in ("SambaNova Cloud", "Sansa", "OpenAI", "llama.cpp", "vLLM", "Ollama"):
        assert preset in page
    assert "https://api.sambanova.ai/v1" in page
    assert 'type="password"' in page


@pytest.mark.django_db
def test_create_endpoint_encrypts_key_and_headers(alice_client: Client, alice) -> None:  # noqa: ANN001
    e = create_via_ui(alice_client, api_key=KEY, extra_headers=HEADERS_TEXT)
    assert e.owner == alice
    assert e.name == "Local llama"
    assert e.base_url == "http://127.0.0.1:8080/v1"
    assert e.default_model == "smollm2"
    assert e.stream_options is True
    row = raw_endpoint_row(e.pk)
    row_text = json.dumps(row, default=str)
    assert_no_secret(row_text)
    assert row["api_key_encrypted"]
    assert crypto.decrypt(row["api_key_encrypted"]) == KEY
    assert e.get_api_key() == KEY
    assert e.api_key_hint == KEY_HINT
    assert e.extra_header_names == ["X-Org", "X-Trace-Token"]
    assert e.get_extra_headers() == {"X-Org": HEADER_VALUE_1, "X-Trace-Token": HEADER_VALUE_2}
    assert json.loads(crypto.decrypt(row["extra_headers_encrypted"]))["X-Org"] == HEADER_VALUE_1


@pytest.mark.django_db
def test_create_with_stream_options_off_and_trailing_slash(alice_client: Client) -> None:
    e = create_via_ui(alice_client, base_url="http://127.0.0.1:8080/v1/", stream_options=None)
    assert e.stream_options is False
    assert e.base_url == "http://127.0.0.1:8080/v1"
    assert e.get_api_key() == ""
    assert e.api_key_hint == ""


@pytest.mark.django_db
def test_pages_never_show_secrets(alice_client: Client) -> None:
    e = create_via_ui(alice_client, api_key=KEY, extra_headers=HEADERS_TEXT)
    listing = alice_client.get("/endpoints/").content.decode()
    assert_no_secret(listing)
    assert KEY_HINT in listing
    assert "X-Org" in listing and "X-Trace-Token" in listing
    edit = alice_client.get(f"/endpoints/{e.pk}/").content.decode()
    assert_no_secret(edit)
    assert KEY_HINT in edit
    assert "X-Org" in edit and "X-Trace-Token" in edit
    models = alice_client.get(f"/endpoints/{e.pk}/models/").content.decode()
    assert_no_secret(models)


@pytest.mark.django_db
def test_invalid_form_does_not_echo_secrets(alice_client: Client) -> None:
    """A refused save re-renders the form: the typed key and header values stay write-only."""
    resp = alice_client.post(
        "/endpoints/new/",
        form_data(base_url="http://169.254.169.254/v1", api_key=KEY, extra_headers=HEADERS_TEXT),
    )
    assert resp.status_code == 200
    assert "field-error" in resp.content.decode()
    assert_no_secret(resp.content)
    assert not Endpoint.objects.filter(name="Local llama").exists()


@pytest.mark.django_db
def test_edit_with_empty_key_keeps_old_key(alice_client: Client) -> None:
    e = create_via_ui(alice_client, api_key=KEY, extra_headers=HEADERS_TEXT)
    resp = alice_client.post(
        f"/endpoints/{e.pk}/", form_data(name="Renamed", default_model="other", api_key="")
    )
    assert resp.status_code == 302
    e.refresh_from_db()
    assert e.name == "Renamed"
    assert e.default_model == "other"
    assert e.get_api_key() == KEY
    assert e.api_key_hint == KEY_HINT
    # Blank headers field keeps the stored headers too.
    assert e.get_extra_headers() == {"X-Org": HEADER_VALUE_1, "X-Trace-Token": HEADER_VALUE_2}


@pytest.mark.django_db
def test_edit_with_new_key_replaces_it(alice_client: Client) -> None:
    e = create_via_ui(alice_client, api_key=KEY)
    alice_client.post(f"/endpoints/{e.pk}/", form_data(api_key=KEY2))
    e.refresh_from_db()
    assert e.get_api_key() == KEY2
    assert e.api_key_hint == "…abcd"
    assert_no_secret(json.dumps(raw_endpoint_row(e.pk), default=str))


@pytest.mark.django_db
def test_remove_stored_key(alice_client: Client) -> None:
    e = create_via_ui(alice_client, api_key=KEY)
    resp = alice_client.post(f"/endpoints/{e.pk}/", form_data(clear_api_key="on"))
    assert resp.status_code == 302
    e.refresh_from_db()
    assert e.get_api_key() == ""
    assert e.api_key_encrypted == ""
    assert e.api_key_hint == ""
    assert KEY_HINT not in alice_client.get("/endpoints/").content.decode()


@pytest.mark.django_db
def test_replace_and_remove_extra_headers(alice_client: Client) -> None:
    e = create_via_ui(alice_client, extra_headers=HEADERS_TEXT)
    alice_client.post(f"/endpoints/{e.pk}/", form_data(extra_headers="X-Only: just-one-value"))
    e.refresh_from_db()
    assert e.get_extra_headers() == {"X-Only": "just-one-value"}
    assert e.extra_header_names == ["X-Only"]
    alice_client.post(f"/endpoints/{e.pk}/", form_data(clear_extra_headers="on"))
    e.refresh_from_db()
    assert e.get_extra_headers() == {}
    assert e.extra_header_names == []
    assert e.extra_headers_encrypted == ""


@pytest.mark.django_db
@pytest.mark.parametrize("bad", ["no colon here", ": value without a name", "Bad Name: v"])
def test_malformed_header_lines_are_refused(alice_client: Client, bad: str) -> None:
    resp = alice_client.post("/endpoints/new/", form_data(extra_headers=f"X-Ok: fine\n{bad}"))
    assert resp.status_code == 200
    assert "field-error" in resp.content.decode()
    assert not Endpoint.objects.filter(name="Local llama").exists()


@pytest.mark.django_db
def test_header_values_may_contain_colons(alice_client: Client) -> None:
    e = create_via_ui(alice_client, extra_headers="X-Url: https://example.com:8443/x\n\n")
    assert e.get_extra_headers() == {"X-Url": "https://example.com:8443/x"}


@pytest.mark.django_db
def test_changing_base_url_clears_cached_models(alice_client: Client) -> None:
    e = create_via_ui(alice_client)
    services.endpoint_set_models(endpoint_id=e.pk, models=[{"id": "old-model"}])
    alice_client.post(f"/endpoints/{e.pk}/", form_data(name="Same URL"))
    e.refresh_from_db()
    assert e.models_cache == [{"id": "old-model"}]  # same base URL: cache kept
    alice_client.post(f"/endpoints/{e.pk}/", form_data(base_url="http://127.0.0.1:9090/v1"))
    e.refresh_from_db()
    assert e.base_url == "http://127.0.0.1:9090/v1"
    assert e.models_cache == []  # another server: its models are unknown


@pytest.mark.django_db
def test_refused_edit_changes_nothing(alice_client: Client) -> None:
    e = create_via_ui(alice_client, api_key=KEY)
    resp = alice_client.post(
        f"/endpoints/{e.pk}/", form_data(name="Evil", base_url="http://169.254.169.254/latest")
    )
    assert resp.status_code == 200
    e.refresh_from_db()
    assert e.name == "Local llama"
    assert e.base_url == "http://127.0.0.1:8080/v1"
    assert e.get_api_key() == KEY


@pytest.mark.django_db
def test_edit_builtin_simulator_keeps_symbolic_url(alice_client: Client, alice) -> None:  # noqa: ANN001
    sim_ep = Endpoint.objects.get(owner=alice, base_url=SIMULATOR_BASE_URL)
    resp = alice_client.post(
        f"/endpoints/{sim_ep.pk}/", form_data(name="My sim", base_url=SIMULATOR_BASE_URL)
    )
    assert resp.status_code == 302
    sim_ep.refresh_from_db()
    assert sim_ep.name == "My sim"
    assert sim_ep.base_url == SIMULATOR_BASE_URL


@pytest.mark.django_db
def test_delete_endpoint(alice_client: Client) -> None:
    e = create_via_ui(alice_client)
    assert alice_client.get(f"/endpoints/{e.pk}/delete/").status_code == 405  # POST only
    assert Endpoint.objects.filter(pk=e.pk).exists()
    resp = alice_client.post(f"/endpoints/{e.pk}/delete/")
    assert resp.status_code == 302
    assert not Endpoint.objects.filter(pk=e.pk).exists()
    assert f'id="endpoint-{e.pk}"' not in alice_client.get("/endpoints/").content.decode()


@pytest.mark.django_db
def test_delete_endpoint_keeps_conversations(alice_client: Client, alice) -> None:  # noqa: ANN001
    e = create_via_ui(alice_client)
    conv = services.conversation_create(user=alice, endpoint=e)
    alice_client.post(f"/endpoints/{e.pk}/delete/")
    conv.refresh_from_db()
    assert conv.endpoint is None
    assert alice_client.get(f"/c/{conv.pk}/").status_code == 200


# ---- another user's endpoint ------------------------------------------------------------


@pytest.mark.django_db
def test_second_user_gets_404_and_changes_nothing(
    alice_client: Client, bob_client: Client, fresh_sim
) -> None:  # noqa: ANN001
    e = create_via_ui(
        alice_client, base_url=fresh_sim.base_url, api_key=KEY, extra_headers=HEADERS_TEXT
    )
    before = raw_endpoint_row(e.pk)
    assert bob_client.get(f"/endpoints/{e.pk}/").status_code == 404
    assert (
        bob_client.post(
            f"/endpoints/{e.pk}/", form_data(name="Stolen", api_key="bob-key-0000")
        ).status_code
        == 404
    )
    assert bob_client.post(f"/endpoints/{e.pk}/", form_data(clear_api_key="on")).status_code == 404
    assert bob_client.post(f"/endpoints/{e.pk}/delete/").status_code == 404
    test_resp = bob_client.post(f"/endpoints/{e.pk}/test/")
    assert test_resp.status_code == 404
    models_resp = bob_client.get(f"/endpoints/{e.pk}/models/")
    assert models_resp.status_code == 404
    for resp in (test_resp, models_resp):
        assert_no_secret(resp.content)
    assert raw_endpoint_row(e.pk) == before
    assert fresh_sim.requests() == []  # no upstream call was made on bob's behalf
    listing = bob_client.get("/endpoints/").content.decode()
    assert "Local llama" not in listing
    assert KEY_HINT not in listing


@pytest.mark.django_db
def test_nonexistent_endpoint_is_404(alice_client: Client) -> None:
    assert alice_client.get("/endpoints/999999/").status_code == 404
    assert alice_client.post("/endpoints/999999/test/").status_code == 404


# ---- base URL checks --------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/v1",
        "http://169.254.169.254/latest/meta-data",
        "http://[fe80::1]:8080/v1",
        "http://[::ffff:169.254.169.254]/v1",
        "http://metadata.google.internal/v1",
        "http://0.0.0.0:8080/v1",
        "ftp://x",
        "ftp://example.com/v1",
        "file:///etc/passwd",
        "javascript:alert(1)",
        "http://user:pass@example.com/v1",
        "not a url",
    ],
)
def test_refused_base_urls(alice_client: Client, url: str) -> None:
    resp = alice_client.post("/endpoints/new/", form_data(base_url=url))
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "field-error" in page
    assert not Endpoint.objects.filter(name="Local llama").exists()


@pytest.mark.django_db
def test_hostname_resolving_to_link_local_is_refused(
    alice_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if host == "innocent.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.10.20", port))]
        if host == "dual.example":  # one public, one metadata address: refused
            return [
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port)),
                (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port)),
            ]
        if host == "public.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    for host in ("innocent.example", "dual.example"):
        resp = alice_client.post("/endpoints/new/", form_data(base_url=f"https://{host}/v1"))
        assert resp.status_code == 200
        page = resp.content.decode()
        assert "field-error" in page
        assert "link-local" in page or "metadata" in page
        assert not Endpoint.objects.filter(name="Local llama").exists()
    e = create_via_ui(alice_client, base_url="https://public.example/v1")
    assert e.base_url == "https://public.example/v1"


@pytest.mark.django_db
def test_loopback_allowed_by_default_refused_by_setting(alice_client: Client, settings) -> None:  # noqa: ANN001
    e = create_via_ui(alice_client, base_url="http://127.0.0.1:8080/v1")
    assert e.base_url == "http://127.0.0.1:8080/v1"
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = True
    for url in (
        "http://127.0.0.1:8080/v1",
        "http://10.1.2.3/v1",
        "http://192.168.1.20:11434/v1",
        "http://localhost:8000/v1",
    ):
        resp = alice_client.post("/endpoints/new/", form_data(name="Private", base_url=url))
        assert resp.status_code == 200, url
        assert "field-error" in resp.content.decode(), url
    assert not Endpoint.objects.filter(name="Private").exists()


@pytest.mark.django_db
def test_test_connection_rechecks_base_url(alice_client: Client, settings, fresh_sim) -> None:  # noqa: ANN001
    """A URL stored while private addresses were allowed is refused at call time afterwards."""
    e = create_via_ui(alice_client, base_url=fresh_sim.base_url, api_key=KEY)
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = True
    resp = alice_client.post(f"/endpoints/{e.pk}/test/")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "Connection failed" in page
    assert "base_url_refused" in page
    assert fresh_sim.requests() == []


@pytest.mark.django_db
def test_test_connection_rechecks_dns(
    alice_client: Client, monkeypatch: pytest.MonkeyPatch, fresh_sim
) -> None:  # noqa: ANN001
    """DNS that changes after saving (rebinding to a metadata address) is caught at call time."""
    e = create_via_ui(alice_client, base_url=fresh_sim.base_url)
    Endpoint.objects.filter(pk=e.pk).update(base_url=f"http://rebind.example:{fresh_sim.port}/v1")
    real = socket.getaddrinfo

    def fake(host, port, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        if host == "rebind.example":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    resp = alice_client.post(f"/endpoints/{e.pk}/test/")
    assert resp.status_code == 200
    assert "base_url_refused" in resp.content.decode()
    assert fresh_sim.requests() == []


# ---- test connection --------------------------------------------------------------------


@pytest.mark.django_db
def test_test_connection_lists_models_and_caches_them(alice_client: Client, fresh_sim) -> None:  # noqa: ANN001
    e = create_via_ui(
        alice_client, base_url=fresh_sim.base_url, api_key=KEY, extra_headers=HEADERS_TEXT
    )
    assert e.models_cache == []
    resp = alice_client.post(f"/endpoints/{e.pk}/test/", HTTP_HX_REQUEST="true")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert_no_secret(page)
    assert "<html" not in page.lower()  # a partial for htmx, not a whole page
    assert "Connected: 4 models" in page
    for mid in ("sim-fast", "sim-reasoning", "sim-slow"):
        assert f"<code>{mid}</code>" in page
    # Context length, max completion tokens, prices per million tokens (USD per token × 1e6).
    assert "<td>8192</td><td>4096</td><td>0.1</td><td>0.2</td>" in page
    assert "<td>32768</td><td>8192</td><td>0.5</td><td>2.0</td>" in page
    e.refresh_from_db()
    cache = {m["id"]: m for m in e.models_cache}
    assert list(cache) == ["sim-fast", "sim-reasoning", "sim-slow", "sim-text-only"]
    assert cache["sim-text-only"]["input_modalities"] == ["text"] and cache["sim-fast"]["input_modalities"] is None
    assert cache["sim-reasoning"]["context_length"] == 32768
    assert cache["sim-reasoning"]["max_completion_tokens"] == 8192
    assert cache["sim-reasoning"]["prompt_price_per_mtok"] == pytest.approx(0.5)
    assert cache["sim-reasoning"]["completion_price_per_mtok"] == pytest.approx(2.0)
    assert cache["sim-fast"]["prompt_price_per_mtok"] == pytest.approx(0.1)
    # The request really carried the decrypted key and the extra headers.
    (record,) = fresh_sim.requests()
    assert record["path"] == "/v1/models"
    assert record["auth_present"] is True
    from chat.simulator.recorder import key_fingerprint

    assert record["auth_fingerprint"] == key_fingerprint(KEY)
    headers = {k.lower(): v for k, v in record["headers"].items()}
    assert headers.get("x-org") == HEADER_VALUE_1
    # The model picker's datalist now comes from the cache, without another request.
    fresh_sim.reset()
    options = alice_client.get(f"/endpoints/{e.pk}/models/").content.decode()
    assert '<option value="sim-reasoning"' in options
    assert fresh_sim.requests() == []


@pytest.mark.django_db
def test_test_connection_closed_port(alice_client: Client) -> None:
    port = closed_port()
    e = create_via_ui(alice_client, base_url=f"http://127.0.0.1:{port}/v1", api_key=KEY)
    resp = alice_client.post(f"/endpoints/{e.pk}/test/")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "Connection failed" in page
    assert "connection_error" in page
    assert f"127.0.0.1:{port}" in page
    assert "Traceback" not in page and "File &quot;" not in page and 'File "' not in page
    assert_no_secret(page)
    e.refresh_from_db()
    assert e.models_cache == []


@pytest.mark.django_db
def test_test_connection_error_echoing_key_is_scrubbed(alice_client: Client, fresh_sim) -> None:  # noqa: ANN001
    """The simulator's ``echo_key`` fault puts the key in its 401 body, as a careless proxy would."""
    e = create_via_ui(
        alice_client,
        base_url=fresh_sim.base_url,
        api_key=KEY,
        extra_headers="X-Simulator-Options: fault=echo_key",
    )
    resp = alice_client.post(f"/endpoints/{e.pk}/test/")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "Connection failed" in page
    assert "HTTP 401" in page
    assert "Incorrect API key provided" in page
    assert_no_secret(page)
    assert fresh_sim.requests()[0]["status"] == 401


@pytest.mark.django_db
def test_test_connection_shows_upstream_error_clearly(alice_client: Client, fresh_sim) -> None:  # noqa: ANN001
    e = create_via_ui(
        alice_client, base_url=fresh_sim.base_url, extra_headers="X-Simulator-Options: fault=429"
    )
    page = alice_client.post(f"/endpoints/{e.pk}/test/").content.decode()
    assert "HTTP 429" in page
    assert "rate_limit_exceeded" in page
    assert "Traceback" not in page


@pytest.mark.django_db
def test_models_view_with_failing_endpoint_returns_empty_list(alice_client: Client) -> None:
    e = create_via_ui(alice_client, base_url=f"http://127.0.0.1:{closed_port()}/v1")
    resp = alice_client.get(f"/endpoints/{e.pk}/models/")
    assert resp.status_code == 200
    assert "<option" not in resp.content.decode()


@pytest.mark.django_db
def test_key_never_logged(
    alice_client: Client, fresh_sim, caplog: pytest.LogCaptureFixture
) -> None:  # noqa: ANN001
    caplog.set_level(logging.DEBUG)
    for name in ("httpx", "httpcore", "django", "django.request", "django.db.backends", "chat"):
        caplog.set_level(logging.DEBUG, logger=name)
    e = create_via_ui(
        alice_client, base_url=fresh_sim.base_url, api_key=KEY, extra_headers=HEADERS_TEXT
    )
    alice_client.post(f"/endpoints/{e.pk}/", form_data(base_url=fresh_sim.base_url, api_key=KEY2))
    alice_client.post(f"/endpoints/{e.pk}/test/")
    alice_client.get("/endpoints/")
    # A failing call and a scrubbed error too.
    Endpoint.objects.filter(pk=e.pk).update(models_cache=[])
    e.refresh_from_db()
    e.set_extra_headers({"X-Simulator-Options": "fault=echo_key", "X-Org": HEADER_VALUE_1})
    e.save()
    alice_client.post(f"/endpoints/{e.pk}/test/")
    assert caplog.records, "nothing was logged at DEBUG: the capture is not working"
    for record in caplog.records:
        text = record.getMessage() + repr(record.args) + repr(getattr(record, "request", ""))
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        assert_no_secret(text)


# ---- crypto -----------------------------------------------------------------------------


def test_encrypt_decrypt_roundtrip_and_hint(settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_ENCRYPTION_KEYS = [Fernet.generate_key().decode()]
    token = crypto.encrypt(KEY)
    assert KEY not in token
    assert crypto.decrypt(token) == KEY
    assert crypto.encrypt("") == ""
    assert crypto.decrypt("") == ""
    assert crypto.hint(KEY) == KEY_HINT
    assert crypto.hint("") == ""
    assert "1234" not in crypto.hint("1234")  # too short to show any of it
    assert crypto.encrypt(KEY) != token  # Fernet tokens carry a random IV


def test_multifernet_rotation(settings) -> None:  # noqa: ANN001
    key_a = Fernet.generate_key().decode()
    key_b = Fernet.generate_key().decode()
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_a]
    old = crypto.encrypt(KEY)
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_b, key_a]  # rotate: prepend the new key
    assert crypto.decrypt(old) == KEY
    new = crypto.encrypt(KEY)
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_b]  # A retired
    assert crypto.decrypt(new) == KEY  # new tokens use the first key
    with pytest.raises(crypto.SecretDecryptionError):
        crypto.decrypt(old)
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_a]
    with pytest.raises(crypto.SecretDecryptionError):
        crypto.decrypt(new)


@pytest.mark.django_db
def test_rotation_with_stored_endpoint(settings, alice) -> None:  # noqa: ANN001
    key_a = Fernet.generate_key().decode()
    key_b = Fernet.generate_key().decode()
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_a]
    e = services.endpoint_create(
        user=alice,
        name="Rotated",
        base_url="http://127.0.0.1:8080/v1",
        api_key=KEY,
        extra_headers={"X-Org": HEADER_VALUE_1},
    )
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_b, key_a]
    e = Endpoint.objects.get(pk=e.pk)
    assert e.get_api_key() == KEY
    assert e.get_extra_headers() == {"X-Org": HEADER_VALUE_1}
    # Re-saving re-encrypts with the new first key; then A can be dropped.
    e.set_api_key(e.get_api_key())
    e.set_extra_headers(e.get_extra_headers())
    e.save()
    settings.PLAYGROUND_ENCRYPTION_KEYS = [key_b]
    e = Endpoint.objects.get(pk=e.pk)
    assert e.get_api_key() == KEY
    assert e.get_extra_headers() == {"X-Org": HEADER_VALUE_1}


# ---- the built-in simulator's symbolic URL ------------------------------------------------


@pytest.mark.parametrize(
    ("host", "server_port", "expected_port"),
    [
        ("127.0.0.1:8000", "8000", "8000"),  # make run
        ("127.0.0.1:9123", "9123", "9123"),  # PORT=9123
        ("localhost", "8000", "8000"),  # behind a proxy on port 80: no port in Host
        ("localhost:443", "8000", "8000"),  # behind a TLS proxy: Host has the proxy's port
        ("localhost:9555", "0", "9555"),  # no server port known (no ASGI "server" in the scope)
    ],
)
def test_simulator_url_resolves_to_this_servers_port(
    host: str, server_port: str, expected_port: str
) -> None:
    from django.test import RequestFactory

    from chat.views import endpoint_base_url_for_request

    request = RequestFactory().get("/", HTTP_HOST=host, SERVER_PORT=server_port)
    assert endpoint_base_url_for_request(request, SIMULATOR_BASE_URL) == (
        f"http://127.0.0.1:{expected_port}/simulator/v1"
    )
    assert (
        endpoint_base_url_for_request(request, "https://api.example.com/v1")
        == "https://api.example.com/v1"
    )


@pytest.mark.django_db
def test_a_server_without_a_model_list_is_reachable_not_failed(alice_client: Client) -> None:
    """Issue 7 item 18: a 404 on GET /models is "reachable, lists no models: type the id",
    not "Connection failed"."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class NoModels(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = b'{"detail": "Not Found"}'
            self.send_response(404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), NoModels)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        e = create_via_ui(alice_client, base_url=f"http://127.0.0.1:{srv.server_port}/v1")
        page = alice_client.post(f"/endpoints/{e.pk}/test/", HTTP_HX_REQUEST="true").content.decode()
        assert "Reachable" in page and "does not list its models" in page
        assert "Connection failed" not in page
    finally:
        srv.shutdown()
