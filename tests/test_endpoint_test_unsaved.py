"""Issue 10: "Test connection" on the new/edit endpoint form, before saving.

The form's values (base URL, API style, key, headers) go to ``endpoints/test/``, which runs the
same check as the saved endpoint's Test connection and saves nothing: no row, no model cache.
A blank key while editing means the stored one, but only for the stored scheme, host and port;
another user's endpoint id is a 404; the key is never echoed back.
"""

from __future__ import annotations

import pytest
from django.test import Client

from chat import services
from chat.models import Endpoint
from chat.simulator.recorder import key_fingerprint
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401

KEY = "sk-unsaved-SECRETKEYMATERIAL-0123-zq7w"
STORED = "sk-stored-STOREDKEYMATERIAL-9876-abcd"
HEADER_VALUE = "hdr-SECRETHEADERVALUE-42"


@pytest.fixture(autouse=True)
def _private_urls(settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = False  # the test simulator runs on 127.0.0.1


def form(**kw: str) -> dict[str, str]:
    data = {"name": "", "base_url": "", "api_style": "openai_chat", "default_model": "", "stream_options": "on",
            "api_key": "", "extra_headers": ""}
    data.update(kw)
    return data


def assert_clean(text: str) -> None:
    for secret in (KEY, STORED, HEADER_VALUE, "SECRETKEYMATERIAL", "STOREDKEYMATERIAL", "SECRETHEADERVALUE"):
        assert secret not in text, secret


@pytest.mark.django_db
def test_unsaved_values_are_tested_and_nothing_is_saved(alice, fresh_sim) -> None:  # noqa: ANN001
    c = client_for(alice)
    rows = Endpoint.objects.count()
    resp = c.post("/endpoints/test/", form(base_url=fresh_sim.base_url, api_key=KEY,
                                           extra_headers=f"X-Org: {HEADER_VALUE}"), HTTP_HX_REQUEST="true")
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "Connected: 4 models" in page and "<code>sim-reasoning</code>" in page
    assert "nothing was saved" in page
    assert "<html" not in page.lower()
    assert_clean(page)
    assert Endpoint.objects.count() == rows  # no row
    assert all(e.models_cache == [] or e.is_simulator for e in Endpoint.objects.all())
    (record,) = fresh_sim.requests()
    assert record["path"] == "/v1/models"
    assert record["auth_fingerprint"] == key_fingerprint(KEY)
    assert {k.lower(): v for k, v in record["headers"].items()}["x-org"] == HEADER_VALUE


@pytest.mark.django_db
def test_without_javascript_the_form_comes_back_with_the_result(alice, fresh_sim) -> None:  # noqa: ANN001
    resp = client_for(alice).post("/endpoints/test/", form(name="Typed", base_url=fresh_sim.base_url, api_key=KEY))
    assert resp.status_code == 200
    page = resp.content.decode()
    assert "<html" in page.lower() and 'id="test-unsaved-result"' in page
    assert "Connected: 4 models" in page
    assert 'action="/endpoints/new/"' in page  # Save still saves
    assert_clean(page)
    assert not Endpoint.objects.filter(name="Typed").exists()


@pytest.mark.django_db
def test_refused_base_url_follows_the_form_rules_and_sends_nothing(alice, fresh_sim, settings) -> None:  # noqa: ANN001
    settings.PLAYGROUND_REFUSE_PRIVATE_URLS = True
    c = client_for(alice)
    for url in (fresh_sim.base_url, "http://169.254.169.254/v1", "file:///etc/passwd"):
        page = c.post("/endpoints/test/", form(base_url=url, api_key=KEY), HTTP_HX_REQUEST="true").content.decode()
        assert "Connection failed" in page, url
        assert_clean(page)
    assert fresh_sim.requests() == []


@pytest.mark.django_db
def test_editing_with_a_blank_key_uses_the_stored_one_for_the_same_origin_only(alice, fresh_sim) -> None:  # noqa: ANN001
    c = client_for(alice)
    e = services.endpoint_create(user=alice, name="Stored", base_url=fresh_sim.base_url, api_style="openai_chat",
                                 api_key=STORED, extra_headers={"X-Org": HEADER_VALUE})
    page = c.post("/endpoints/test/", form(endpoint_id=str(e.pk), base_url=fresh_sim.base_url),
                  HTTP_HX_REQUEST="true").content.decode()
    assert "Connected" in page
    assert_clean(page)
    (record,) = fresh_sim.requests()
    assert record["auth_fingerprint"] == key_fingerprint(STORED)
    assert {k.lower(): v for k, v in record["headers"].items()}["x-org"] == HEADER_VALUE
    # Another host (here: another port spelling of the same loopback) never gets the stored key.
    fresh_sim.reset()
    other = fresh_sim.base_url.replace("127.0.0.1", "localhost")
    c.post("/endpoints/test/", form(endpoint_id=str(e.pk), base_url=other), HTTP_HX_REQUEST="true")
    (record,) = fresh_sim.requests()
    assert record["auth_present"] is False
    assert "x-org" not in {k.lower() for k in record["headers"]}
    # "Remove the stored key" ticked: tested without it.
    fresh_sim.reset()
    c.post("/endpoints/test/", form(endpoint_id=str(e.pk), base_url=fresh_sim.base_url, clear_api_key="on"),
           HTTP_HX_REQUEST="true")
    assert fresh_sim.requests()[0]["auth_present"] is False
    e.refresh_from_db()
    assert e.get_api_key() == STORED and e.models_cache == []  # nothing saved or cached


@pytest.mark.django_db
def test_another_users_endpoint_id_is_404_and_sends_nothing(alice, bob, fresh_sim) -> None:  # noqa: ANN001
    e = services.endpoint_create(user=alice, name="Alice's", base_url=fresh_sim.base_url, api_style="openai_chat",
                                 api_key=STORED)
    resp = client_for(bob).post("/endpoints/test/", form(endpoint_id=str(e.pk), base_url=fresh_sim.base_url),
                                HTTP_HX_REQUEST="true")
    assert resp.status_code == 404
    assert_clean(resp.content.decode())
    assert fresh_sim.requests() == []


@pytest.mark.django_db
def test_get_is_refused_and_login_is_required(alice) -> None:  # noqa: ANN001
    assert client_for(alice).get("/endpoints/test/").status_code == 405
    resp = Client().post("/endpoints/test/", form(base_url="http://127.0.0.1:1/v1"))
    assert resp.status_code in (302, 403)


@pytest.mark.django_db
def test_edit_and_new_forms_show_the_button(alice) -> None:  # noqa: ANN001
    c = client_for(alice)
    new = c.get("/endpoints/new/").content.decode()
    assert 'id="test-unsaved"' in new and 'name="endpoint_id"' not in new
    e = services.endpoint_create(user=alice, name="E", base_url="http://127.0.0.1:9/v1", api_style="openai_chat")
    edit = c.get(f"/endpoints/{e.pk}/").content.decode()
    assert 'id="test-unsaved"' in edit and f'name="endpoint_id" value="{e.pk}"' in edit
