"""Accounts: first-run set-up, login everywhere, the admin's users page, sign-up, passwords.

Uses Django's test client against the real URL conf and middleware (``FirstRunMiddleware``,
``LoginRequiredMiddleware``). ``chat.middleware.users_exist`` caches "there are users" for the
life of the process, so every test starts and ends with ``reset_cache()``.
"""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.test import Client

from chat import crypto, middleware, services
from chat.models import SIMULATOR_BASE_URL, Endpoint, SiteSettings

PASSWORD = "correct-horse-battery-9"
User = get_user_model()


@pytest.fixture(autouse=True)
def _users_cache():  # noqa: ANN202
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture(autouse=True)
def _fast_hashing(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_vendor_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in services.ENV_ENDPOINTS:
        monkeypatch.delenv(var, raising=False)


def setup_post(client: Client, username: str = "admin", password: str = PASSWORD):  # noqa: ANN201
    return client.post(
        "/setup/", {"username": username, "password1": password, "password2": password}
    )


@pytest.fixture
def admin(db):  # noqa: ANN001, ANN201
    return services.user_create(username="admin", password=PASSWORD, is_admin=True)


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    return services.user_create(username="alice", password=PASSWORD)


@pytest.fixture
def admin_client(admin) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(admin)
    return c


@pytest.fixture
def alice_client(alice) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(alice)
    return c


# ---- first run -----------------------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url",
    [
        "/",
        "/endpoints/",
        "/endpoints/new/",
        "/c/1/",
        "/users/",
        "/signup/",
        "/accounts/login/",
        "/admin/",
    ],
)
def test_empty_database_redirects_everything_to_setup(client: Client, url: str) -> None:
    assert not User.objects.exists()
    resp = client.get(url)
    assert resp.status_code == 302
    assert resp.url == "/setup/"


@pytest.mark.django_db
def test_setup_page_offers_first_account(client: Client) -> None:
    resp = client.get("/setup/")
    assert resp.status_code == 200
    assert b"Create the first account" in resp.content
    assert b'name="password1"' in resp.content


@pytest.mark.django_db
def test_setup_creates_admin_with_simulator_endpoint_and_logs_in(client: Client) -> None:
    resp = setup_post(client, "root")
    assert resp.status_code == 302
    assert resp.url == "/"
    user = User.objects.get()
    assert user.username == "root"
    assert user.is_superuser and user.is_staff
    assert user.check_password(PASSWORD)
    endpoints = list(Endpoint.objects.filter(owner=user))
    assert [(e.name, e.base_url) for e in endpoints] == [("Built-in simulator", SIMULATOR_BASE_URL)]
    # Logged in: the home page offers a new chat (created by POST), not the login page.
    home = client.get("/")
    assert home.status_code == 200
    assert b'action="/c/new/"' in home.content
    new = client.post("/c/new/")
    assert new.status_code == 302 and new.url.startswith("/c/")
    assert client.get(new.url).status_code == 200


@pytest.mark.django_db
def test_setup_rejects_mismatched_passwords(client: Client) -> None:
    resp = client.post(
        "/setup/", {"username": "root", "password1": PASSWORD, "password2": PASSWORD + "x"}
    )
    assert resp.status_code == 200
    assert not User.objects.exists()


@pytest.mark.django_db
def test_setup_afterwards_redirects_and_cannot_create_second_admin(client: Client) -> None:
    setup_post(client, "first")
    anon = Client()
    resp = anon.get("/setup/")
    assert resp.status_code == 302
    assert resp.url == "/"
    resp = setup_post(anon, "second")
    assert resp.status_code == 302
    assert list(User.objects.values_list("username", flat=True)) == ["first"]
    # Also from a logged-in normal user's session.
    services.user_create(username="bob", password=PASSWORD)
    bob = Client()
    bob.force_login(User.objects.get(username="bob"))
    setup_post(bob, "third")
    assert not User.objects.filter(username="third").exists()
    assert User.objects.filter(is_superuser=True).count() == 1


@pytest.mark.django_db
def test_setup_race_with_stale_cache_is_refused(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process created the first account after this one cached "no users"."""
    services.user_create_first(username="winner", password=PASSWORD)
    monkeypatch.setattr("chat.views.users_exist", lambda: False)
    resp = setup_post(client, "loser")
    assert resp.status_code == 302
    assert resp.url.startswith("/accounts/login/")
    assert not User.objects.filter(username="loser").exists()


@pytest.mark.django_db
def test_setup_adds_vendor_endpoints_from_environment(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    sn_key = "sn-Secret-Key-0123456789-abcd"
    sansa_key = "sansa-Other-Secret-98765-wxyz"
    monkeypatch.setenv("SAMBANOVA_API_KEY", sn_key)
    monkeypatch.setenv("SANSA_API_KEY", sansa_key)
    setup_post(client)
    user = User.objects.get()
    by_name = {e.name: e for e in Endpoint.objects.filter(owner=user)}
    assert set(by_name) == {"Built-in simulator", "SambaNova Cloud", "Sansa"}
    sn, sansa = by_name["SambaNova Cloud"], by_name["Sansa"]
    assert sn.base_url == "https://api.sambanova.ai/v1"
    assert sansa.base_url == "https://api.sansaml.com/v1"
    for endpoint, key in ((sn, sn_key), (sansa, sansa_key)):
        assert key not in endpoint.api_key_encrypted
        assert crypto.decrypt(endpoint.api_key_encrypted) == key
        assert endpoint.api_key_hint == "…" + key[-4:]
    page = client.get("/endpoints/").content.decode()
    assert "…abcd" in page and "…wxyz" in page
    assert sn_key not in page and sansa_key not in page
    assert "Secret-Key" not in page and "Other-Secret" not in page


@pytest.mark.django_db
def test_setup_without_vendor_keys_adds_only_simulator(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMBANOVA_API_KEY", "   ")
    setup_post(client)
    assert list(Endpoint.objects.values_list("name", flat=True)) == ["Built-in simulator"]


@pytest.mark.django_db
def test_vendor_keys_are_not_given_to_later_users(
    admin_client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAMBANOVA_API_KEY", "sn-later-user-key-1234")
    admin_client.post(
        "/users/",
        {"form": "create", "username": "carol", "password1": PASSWORD, "password2": PASSWORD},
    )
    carol = User.objects.get(username="carol")
    assert list(Endpoint.objects.filter(owner=carol).values_list("name", flat=True)) == [
        "Built-in simulator"
    ]


# ---- login required ------------------------------------------------------------------------


@pytest.mark.django_db
def test_anonymous_requests_redirect_to_login(client: Client, admin) -> None:  # noqa: ANN001
    conversation = services.conversation_create(user=admin)
    endpoint = Endpoint.objects.filter(owner=admin).first()
    urls = [
        "/",
        "/endpoints/",
        "/endpoints/new/",
        f"/endpoints/{endpoint.pk}/",
        f"/c/{conversation.pk}/",
        f"/m/{uuid.uuid4()}/inspect/",
        "/users/",
        "/c/sidebar/?q=x",
        "/accounts/password/",
    ]
    for url in urls:
        resp = client.get(url)
        assert resp.status_code == 302, url
        assert resp.url.startswith("/accounts/login/"), (url, resp.url)
    for url in [
        f"/endpoints/{endpoint.pk}/delete/",
        f"/endpoints/{endpoint.pk}/test/",
        "/c/new/",
        f"/c/{conversation.pk}/delete/",
        f"/c/{conversation.pk}/rename/",
    ]:
        resp = client.post(url, {"title": "x"})
        assert resp.status_code == 302, url
        assert resp.url.startswith("/accounts/login/"), (url, resp.url)
    resp = client.get("/admin/")
    assert resp.status_code == 302
    assert resp.url.startswith("/admin/login/")
    # Nothing was changed by the anonymous POSTs.
    assert Endpoint.objects.filter(pk=endpoint.pk).exists()
    assert admin.conversations.filter(pk=conversation.pk).exists()


@pytest.mark.django_db
def test_login_page_and_login_work(client: Client, admin) -> None:  # noqa: ANN001
    assert client.get("/accounts/login/").status_code == 200
    resp = client.post("/accounts/login/", {"username": "admin", "password": PASSWORD})
    assert resp.status_code == 302
    assert client.get("/endpoints/").status_code == 200
    bad = Client().post("/accounts/login/", {"username": "admin", "password": "wrong-password"})
    assert bad.status_code == 200  # form re-shown with an error


# ---- users page (admin) --------------------------------------------------------------------


@pytest.mark.django_db
def test_users_page_is_admin_only(alice_client: Client, admin) -> None:  # noqa: ANN001
    resp = alice_client.get("/users/")
    assert resp.status_code in (302, 403)
    if resp.status_code == 302:
        assert "/users/" not in resp.url.split("?")[0]
    resp = alice_client.post(
        "/users/",
        {"form": "create", "username": "mallory", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert resp.status_code in (302, 403)
    assert not User.objects.filter(username="mallory").exists()
    alice_client.post("/users/", {"form": "signup", "open_signup": "on"})
    assert SiteSettings.load().open_signup is False


@pytest.mark.django_db
def test_admin_adds_user(admin_client: Client) -> None:
    page = admin_client.get("/users/")
    assert page.status_code == 200
    assert b"admin" in page.content
    resp = admin_client.post(
        "/users/",
        {"form": "create", "username": "dave", "password1": PASSWORD, "password2": PASSWORD},
    )
    assert resp.status_code == 302
    dave = User.objects.get(username="dave")
    assert not dave.is_staff and not dave.is_superuser
    assert dave.check_password(PASSWORD)
    assert Endpoint.objects.filter(owner=dave, base_url=SIMULATOR_BASE_URL).count() == 1
    # The new user can log in.
    c = Client()
    assert c.login(username="dave", password=PASSWORD, request=HttpRequest())
    assert c.get("/endpoints/").status_code == 200


@pytest.mark.django_db
def test_admin_add_user_with_bad_form_shows_errors(admin_client: Client) -> None:
    resp = admin_client.post(
        "/users/",
        {"form": "create", "username": "erin", "password1": PASSWORD, "password2": "nope"},
    )
    assert resp.status_code == 200
    assert not User.objects.filter(username="erin").exists()


@pytest.mark.django_db
def test_admin_switches_open_signup(admin_client: Client) -> None:
    assert SiteSettings.load().open_signup is False
    resp = admin_client.post("/users/", {"form": "signup", "open_signup": "on"})
    assert resp.status_code == 302
    assert SiteSettings.load().open_signup is True
    assert b"checked" in admin_client.get("/users/").content
    admin_client.post("/users/", {"form": "signup"})
    assert SiteSettings.load().open_signup is False


# ---- sign-up -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_signup_closed_page_while_closed(client: Client, admin) -> None:  # noqa: ANN001
    resp = client.get("/signup/")
    assert resp.status_code == 403
    assert "Sign-up is closed, ask your admin" in resp.content.decode()
def test_signup_while_closed_says_so_and_creates_nobody(client: Client, admin) -> None:  # noqa: ANN001
    resp = client.get("/signup/")
    assert resp.status_code == 403
    assert "Sign-up is closed" in resp.content.decode() and "Ask your admin" in resp.content.decode()
    resp = client.post(
        "/signup/", {"username": "eve", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert resp.status_code == 403
    assert not User.objects.filter(username="eve").exists()


@pytest.mark.django_db
def test_signup_works_when_open(client: Client, admin) -> None:  # noqa: ANN001
    site = SiteSettings.load()
    site.open_signup = True
    site.save()
    assert client.get("/signup/").status_code == 200
    resp = client.post(
        "/signup/", {"username": "frank", "password1": PASSWORD, "password2": PASSWORD}
    )
    assert resp.status_code == 302
    frank = User.objects.get(username="frank")
    assert not frank.is_staff and not frank.is_superuser
    assert Endpoint.objects.filter(owner=frank, base_url=SIMULATOR_BASE_URL).exists()
    assert client.get("/endpoints/").status_code == 200  # logged in


# ---- password change, Django admin ---------------------------------------------------------


@pytest.mark.django_db
def test_password_change(alice_client: Client, alice) -> None:  # noqa: ANN001
    assert alice_client.get("/accounts/password/").status_code == 200
    new = "a-brand-new-passphrase-7"
    resp = alice_client.post(
        "/accounts/password/",
        {"old_password": PASSWORD, "new_password1": new, "new_password2": new},
    )
    assert resp.status_code == 302
    assert resp.url == "/accounts/password/done/"
    assert alice_client.get(resp.url).status_code == 200
    alice.refresh_from_db()
    assert alice.check_password(new)
    assert Client().login(username="alice", password=new, request=HttpRequest())
    assert not Client().login(username="alice", password=PASSWORD, request=HttpRequest())


@pytest.mark.django_db
def test_password_change_with_wrong_old_password_fails(alice_client: Client, alice) -> None:  # noqa: ANN001
    resp = alice_client.post(
        "/accounts/password/",
        {
            "old_password": "wrong",
            "new_password1": "x-new-pass-123",
            "new_password2": "x-new-pass-123",
        },
    )
    assert resp.status_code == 200
    alice.refresh_from_db()
    assert alice.check_password(PASSWORD)


@pytest.mark.django_db
def test_django_admin_loads_for_admin(admin_client: Client) -> None:
    resp = admin_client.get("/admin/")
    assert resp.status_code == 200
    assert b"Site administration" in resp.content


@pytest.mark.django_db
def test_django_admin_refuses_normal_user(alice_client: Client) -> None:
    resp = alice_client.get("/admin/")
    assert resp.status_code == 302
    assert resp.url.startswith("/admin/login/")
