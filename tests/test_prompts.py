"""Prompt library (issue 13): versions, diff, restore, fork, labels, variables, use in chat,
save as prompt, API tokens and the read-only API, export/import — and a second user who gets
404 (or 401 at the API), changes nothing, and never sees a private prompt."""

from __future__ import annotations

import json

from django.test import Client

from chat import services
from chat.models import Conversation, Message
from chat.prompts import selectors as psel
from chat.prompts import services as psvc
from chat.prompts import variables
from chat.prompts.models import ApiToken, Prompt, PromptLabel, PromptLabelMove, PromptVersion
from tests.accounts import PASSWORD, client_for, fast_accounts  # noqa: F401


def post_prompt(c: Client, url: str, *, name: str = "greeter", system: str = "You greet {{name}}.",
                msg: str = "Say hi to {{name}} in {{lang}}.", temperature: str = "0.5", **extra) -> object:
    data = {"name": name, "description": "d", "tags": "Demo, greet", "visibility": "private",
            "system_prompt": system, "msg_role_0": "user", "msg_content_0": msg, "model": "sim-echo",
            "temperature": temperature, "version_message": "", **extra}
    return c.post(url, data)


def test_variables_parse_check_fill() -> None:
    assert variables.variables_in(["{{ a }} {{b}} {{a}}", "{{c_1}} {{ not a var }} {{9x}}"]) == ["a", "b", "c_1"]
    assert variables.check(["a", "b"], {"a": "1", "b": " ", "z": "x"}) == (["b"], ["z"])
    assert variables.fill("Hi {{ a }} {{q}}", {"a": "A"}) == "Hi A {{q}}"


def test_versions_diff_restore_labels_fork(alice, bob) -> None:  # noqa: ANN001
    c = client_for(alice)
    r = post_prompt(c, "/prompts/new/")
    assert r.status_code == 302
    p = Prompt.objects.get(owner=alice)
    assert p.tags == ["demo", "greet"]
    pid = p.pk
    post_prompt(c, f"/prompts/{pid}/edit/", msg="Say hello to {{name}} in {{lang}}.", version_message="hello")
    post_prompt(c, f"/prompts/{pid}/edit/", msg="Say hello to {{name}} in {{lang}}.", temperature="0.9")
    # Unchanged content makes no version.
    post_prompt(c, f"/prompts/{pid}/edit/", msg="Say hello to {{name}} in {{lang}}.", temperature="0.9")
    assert list(p.versions.order_by("number").values_list("number", flat=True)) == [1, 2, 3]
    v1, v3 = p.versions.get(number=1), p.versions.get(number=3)
    assert v1.config["params"]["temperature"] == 0.5 and v3.config["params"]["temperature"] == 0.9
    assert p.versions.get(number=2).message == "hello"
    # Diff per field.
    r = c.get(f"/prompts/{pid}/diff/?a=1&b=3")
    html = r.content.decode()
    assert r.status_code == 200
    assert "-Say hi to {{name}} in {{lang}}." in html and "+Say hello to {{name}} in {{lang}}." in html
    fields = {f.field: f for f in psel.version_diff(v1, v3)}
    assert not fields["System prompt"].changed and fields["Message 1"].changed and fields["Config"].changed
    assert [x.text[1:].strip() for x in fields["Config"].lines if x.kind == "add"] == ['"temperature": 0.9']
    assert 'class="d-add">+    &quot;temperature&quot;: 0.9' in html
    # Restore v1 → v4 equal to v1.
    c.post(f"/prompts/{pid}/restore/", {"number": 1})
    v4 = p.versions.get(number=4)
    assert (v4.system_prompt, v4.messages, v4.config) == (v1.system_prompt, v1.messages, v1.config)
    # Labels, with moves recorded.
    c.post(f"/prompts/{pid}/label/", {"label": "production", "number": 2})
    c.post(f"/prompts/{pid}/label/", {"label": "production", "number": 3})
    assert PromptLabel.objects.get(prompt=p, name="production").version.number == 3
    assert list(PromptLabelMove.objects.filter(prompt=p).order_by("id").values_list("from_number", "to_number")) == [(None, 2), (2, 3)]
    # Bob: private prompt is 404 everywhere, and nothing changes.
    b = client_for(bob)
    before = (PromptVersion.objects.count(), PromptLabelMove.objects.count(), Prompt.objects.count())
    for url in (f"/prompts/{pid}/", f"/prompts/{pid}/v/1/", f"/prompts/{pid}/diff/?a=1&b=3", f"/prompts/{pid}/edit/",
                f"/prompts/{pid}/use/", f"/prompts/{pid}/export/"):
        assert b.get(url).status_code == 404, url
    for url, data in ((f"/prompts/{pid}/restore/", {"number": 1}), (f"/prompts/{pid}/label/", {"label": "x", "number": 1}),
                      (f"/prompts/{pid}/fork/", {"number": 1, "name": "mine"}), (f"/prompts/{pid}/delete/", {}),
                      (f"/prompts/{pid}/edit/", {"name": "pwn", "visibility": "site"}), (f"/prompts/{pid}/use/", {"name": "x", "lang": "y"})):
        assert b.post(url, data).status_code == 404, url
    assert (PromptVersion.objects.count(), PromptLabelMove.objects.count(), Prompt.objects.count()) == before
    assert "greeter" not in b.get("/prompts/").content.decode()
    assert Conversation.objects.filter(owner=bob).count() == 0
    # Shared with the site: Bob can read and fork, but not edit, restore or label.
    Prompt.objects.filter(pk=pid).update(visibility="site")
    assert "greeter" in b.get("/prompts/").content.decode()
    assert b.get(f"/prompts/{pid}/").status_code == 200
    assert b.get(f"/prompts/{pid}/edit/").status_code == 404
    assert b.post(f"/prompts/{pid}/restore/", {"number": 1}).status_code == 404
    assert b.post(f"/prompts/{pid}/label/", {"label": "x", "number": 1}).status_code == 404
    r = b.post(f"/prompts/{pid}/fork/", {"number": 2, "name": "my greeter"})
    fork = Prompt.objects.get(owner=bob)
    assert r.status_code == 302 and fork.name == "my greeter" and fork.forked_from.number == 2
    assert fork.versions.get().messages == p.versions.get(number=2).messages


def test_search_by_text_and_tag_sort_by_last_used(alice) -> None:  # noqa: ANN001
    c = client_for(alice)
    post_prompt(c, "/prompts/new/", name="alpha", system="About cats", tags="animals")
    post_prompt(c, "/prompts/new/", name="beta", system="About rockets", tags="space")
    post_prompt(c, "/prompts/new/", name="gamma", system="About dogs", tags="animals")
    names = lambda **kw: [p.name for p in psel.prompt_list_for_user(user=alice, **kw)]  # noqa: E731
    assert names(query="rockets") == ["beta"]
    assert sorted(names(tag="animals")) == ["alpha", "gamma"]
    psvc.prompt_use(user=alice, version=Prompt.objects.get(name="gamma").versions.get(), values={"name": "x", "lang": "y"})
    assert names()[0] == "gamma"
    html = c.get("/prompts/?q=cats").content.decode()
    assert '">alpha</a>' in html and '">beta</a>' not in html


def test_use_reports_missing_and_fills_the_conversation(alice, bob) -> None:  # noqa: ANN001
    c = client_for(alice)
    post_prompt(c, "/prompts/new/", system="You greet {{name}}.")
    p = Prompt.objects.get(owner=alice)
    r = c.post(f"/prompts/{p.pk}/use/", {"v": 1, "name": "Ada", "lang": ""})
    assert r.status_code == 200 and "Missing values for" in r.content.decode() and "lang" in r.content.decode()
    assert Conversation.objects.filter(owner=alice).exclude(title="").count() == 0
    n_before = Conversation.objects.count()
    r = c.post(f"/prompts/{p.pk}/use/", {"v": 1, "name": "Ada", "lang": "French"})
    assert r.status_code == 302
    conv = Conversation.objects.order_by("-id").first()
    assert Conversation.objects.count() == n_before + 1 and conv.owner == alice
    assert conv.system_prompt == "You greet Ada." and conv.model == "sim-echo" and conv.params["temperature"] == 0.5
    # The chat page carries the pending send once, with the version id.
    page = c.get(r["Location"]).content.decode()
    assert 'id="prompt-use-version"' in page and 'data-send="Say hi to Ada in French."' in page
    assert 'id="prompt-use-version"' not in c.get(r["Location"]).content.decode()


def test_turn_records_prompt_version_only_when_visible(alice, bob) -> None:  # noqa: ANN001
    from chat.consumers import prepare_send

    c = client_for(alice)
    post_prompt(c, "/prompts/new/")
    v = Prompt.objects.get(owner=alice).versions.get()
    conv = services.conversation_create(user=alice)
    data = {"turn_id": "6f1d8f3e-1111-4111-8111-111111111111", "content": "hi", "endpoint_id": conv.endpoint_id,
            "model": "sim-echo", "prompt_version_id": str(v.pk)}
    prepared = prepare_send(user=alice, conversation_id=conv.pk, data=data, live=frozenset())
    assert all(row.prompt_version_id == v.pk for row in prepared.plan.rows)
    services.turn_commit(plan=prepared.plan)
    assert set(Message.objects.filter(conversation=conv).values_list("prompt_version_id", flat=True)) == {v.pk}
    # Bob names Alice's private version: not recorded.
    conv_b = services.conversation_create(user=bob)
    data_b = {**data, "turn_id": "6f1d8f3e-2222-4222-8222-222222222222", "endpoint_id": conv_b.endpoint_id}
    prepared = prepare_send(user=bob, conversation_id=conv_b.pk, data=data_b, live=frozenset())
    assert all(row.prompt_version_id is None for row in prepared.plan.rows)


def test_save_as_prompt_from_conversation(alice, bob) -> None:  # noqa: ANN001
    conv = services.conversation_create(user=alice)
    Conversation.objects.filter(pk=conv.pk).update(system_prompt="Be brief.", model="sim-echo", params={"temperature": 0.2})
    conv.refresh_from_db()
    services.message_append(conversation=conv, role="user", content="What is 2+2?", parent_id=None)
    assert client_for(bob).post(f"/prompts/from-conversation/{conv.pk}/", {"name": "stolen"}).status_code == 404
    assert not Prompt.objects.exists()
    r = client_for(alice).post(f"/prompts/from-conversation/{conv.pk}/", {"name": "math"})
    p = Prompt.objects.get()
    v = p.versions.get()
    assert r.status_code == 302 and p.owner == alice and v.system_prompt == "Be brief."
    assert v.messages == [{"role": "user", "content": "What is 2+2?"}] and v.config["params"] == {"temperature": 0.2}


def test_api_tokens_and_read_only_api(alice, bob) -> None:  # noqa: ANN001
    c = client_for(alice)
    post_prompt(c, "/prompts/new/")
    post_prompt(c, "/prompts/new/".replace("new", str(Prompt.objects.get().pk) + "/edit"), msg="v2 {{name}}")
    p = Prompt.objects.get()
    psvc.label_move(prompt=p, user=alice, name="production", number=1)
    r = c.post("/prompts/tokens/", {"name": "app"})
    assert r.status_code == 302  # POST-redirect-GET: a reload does not make a second token
    raw = c.get("/prompts/tokens/").context["raw"]
    assert raw and c.get("/prompts/tokens/").context["raw"] is None  # shown once
    assert ApiToken.objects.filter(owner=alice).count() == 1
    tok = ApiToken.objects.get()
    assert raw.startswith("pgp_") and tok.token_hash != raw and raw not in tok.token_hash and tok.token_hash == psel.token_hash(raw)
    anon = Client()
    assert anon.get("/api/prompts/greeter").status_code == 401
    assert anon.get("/api/prompts/greeter", HTTP_AUTHORIZATION="Bearer nope").status_code == 401
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    body = anon.get("/api/prompts/greeter?label=production", **auth).json()
    assert body["version"] == 1 and body["labels"] == ["production"] and body["variables"] == ["name", "lang"]
    assert body["messages"] == [{"role": "user", "content": "Say hi to {{name}} in {{lang}}."}]
    assert body["config"] == {"model": "sim-echo", "params": {"temperature": 0.5}}
    assert anon.get("/api/prompts/greeter?version=2", **auth).json()["messages"][0]["content"] == "v2 {{name}}"
    assert anon.get("/api/prompts/greeter", **auth).json()["version"] == 2
    assert anon.get("/api/prompts/greeter?label=staging", **auth).status_code == 404
    assert anon.get("/api/prompts/greeter?version=9", **auth).status_code == 404
    # Bob's token: Alice's private prompt is a 404, the same as a missing one.
    _, raw_b = psvc.token_create(user=bob, name="b")
    r = anon.get("/api/prompts/greeter?label=production", HTTP_AUTHORIZATION=f"Bearer {raw_b}")
    assert r.status_code == 404 and "Say hi" not in r.content.decode()
    # Bob cannot revoke Alice's token; Alice can, then the API refuses it.
    assert client_for(bob).post("/prompts/tokens/", {"revoke": tok.pk}).status_code == 404
    assert anon.get("/api/prompts/greeter", **auth).status_code == 200
    c.post("/prompts/tokens/", {"revoke": tok.pk})
    assert anon.get("/api/prompts/greeter", **auth).status_code == 401


def test_export_import_round_trip_and_bad_file(alice, bob) -> None:  # noqa: ANN001
    from django.core.files.uploadedfile import SimpleUploadedFile

    c = client_for(alice)
    post_prompt(c, "/prompts/new/", endpoint_id=str(alice.endpoints.get().pk))
    p = Prompt.objects.get()
    assert p.versions.get().config["endpoint_id"] == alice.endpoints.get().pk
    post_prompt(c, f"/prompts/{p.pk}/edit/", msg="second {{name}}", response_format="json_schema",
                json_schema='{"type": "object"}', schema_name="out")
    psvc.label_move(prompt=p, user=alice, name="production", number=2)
    exported = c.get(f"/prompts/{p.pk}/export/").json()
    assert exported["format"] == "playground.prompt/1" and len(exported["versions"]) == 2
    assert "endpoint_id" not in exported["versions"][0]["config"]
    b = client_for(bob)
    r = b.post("/prompts/import/", {"file": SimpleUploadedFile("p.json", json.dumps(exported).encode())})
    q = Prompt.objects.get(owner=bob)
    assert r.status_code == 302 and q.name == "greeter" and q.labels.get().version.number == 2
    for a, z in zip(p.versions.order_by("number"), q.versions.order_by("number"), strict=True):
        assert (a.system_prompt, a.messages, a.config["params"], a.config["model"]) == (z.system_prompt, z.messages, z.config["params"], z.config["model"])
    assert q.versions.get(number=1).config["endpoint_id"] == bob.endpoints.get().pk  # matched by name
    # A bad file: clear error, nothing imported.
    n = Prompt.objects.count()
    bad = {**exported, "labels": {"production": 99}}
    r = b.post("/prompts/import/", {"file": SimpleUploadedFile("p.json", json.dumps(bad).encode()), "name": "other"}, follow=True)
    assert "Import refused" in r.content.decode() and Prompt.objects.count() == n
    r = b.post("/prompts/import/", {"file": SimpleUploadedFile("p.json", b"{not json"), "name": "other"}, follow=True)
    assert "Not valid JSON" in r.content.decode() and Prompt.objects.count() == n


def test_editing_keeps_parameters_the_editor_does_not_show(alice) -> None:  # noqa: ANN001
    conv = services.conversation_create(user=alice)
    Conversation.objects.filter(pk=conv.pk).update(params={"temperature": 0.2, "seed": 7, "stop": ["END"]})
    conv.refresh_from_db()
    services.message_append(conversation=conv, role="user", content="Hi {{who}}", parent_id=None)
    p = psvc.prompt_from_conversation(user=alice, conversation=conv, name="kept")
    post_prompt(client_for(alice), f"/prompts/{p.pk}/edit/", name="kept", msg="Hello {{who}}", temperature="0.4")
    v2 = p.versions.get(number=2)
    assert v2.config["params"] == {"temperature": 0.4, "seed": 7, "stop": ["END"]}


# ---- team visibility (issue 13 × issue 12) -----------------------------------------------


def test_a_team_prompt_is_seen_by_members_only_and_lost_on_removal(alice, bob) -> None:  # noqa: ANN001
    from django.contrib.auth import get_user_model

    from chat.models import Membership
    from chat.teams import services as team_services

    carol = get_user_model().objects.create_user("carol", password="pw-carol-12345")
    team = team_services.team_create(user=alice, name="Research")
    team_services.member_add(team=team, who=bob.username)
    c = client_for(alice)
    # "A team's members" needs a team; a team the author is not in is not offered.
    r = post_prompt(c, "/prompts/new/", visibility="team")
    assert r.status_code == 200 and "Pick the team" in r.content.decode() and not Prompt.objects.exists()
    post_prompt(c, "/prompts/new/", visibility="team", team=str(team.pk))
    p = Prompt.objects.get()
    assert p.visibility == "team" and p.team_id == team.pk
    b, k = client_for(bob), client_for(carol)
    assert "greeter" in b.get("/prompts/").content.decode() and b.get(f"/prompts/{p.pk}/").status_code == 200
    assert "greeter" not in k.get("/prompts/").content.decode() and k.get(f"/prompts/{p.pk}/").status_code == 404
    assert b.get(f"/prompts/{p.pk}/edit/").status_code == 404  # members use it; the author edits it
    b.post("/prompts/tokens/", {"name": "app"})
    raw = b.get("/prompts/tokens/").context["raw"]
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert Client().get("/api/prompts/greeter", **auth).status_code == 200
    # Removed from the team: the prompt is gone at once, in the library and the API.
    team_services.member_remove(membership=Membership.objects.get(team=team, user=bob))
    assert b.get(f"/prompts/{p.pk}/").status_code == 404 and "greeter" not in b.get("/prompts/").content.decode()
    assert Client().get("/api/prompts/greeter", **auth).status_code == 404


def test_the_owner_of_a_team_prompt_with_other_members_sees_it_once_everywhere(alice, bob) -> None:  # noqa: ANN001
    """A team prompt is joined to the team's members: the author of a prompt shared with a team
    of two got it twice (the list) and a server error (every page that gets one prompt)."""
    from django.contrib.auth import get_user_model

    from chat.teams import services as team_services

    carol = get_user_model().objects.create_user("carol", password="pw-carol-12345")
    team = team_services.team_create(user=alice, name="Research")
    team_services.member_add(team=team, who=bob.username)
    team_services.member_add(team=team, who=carol.username)
    post_prompt(client_for(alice), "/prompts/new/", visibility="team", team=str(team.pk))
    p = Prompt.objects.get()
    for who in (alice, bob, carol):
        c = client_for(who)
        assert c.get("/prompts/").content.decode().count(f'href="/prompts/{p.pk}/"') == 1, who
        for url in (f"/prompts/{p.pk}/", f"/prompts/{p.pk}/use/", f"/prompts/{p.pk}/v/1/",
                    f"/prompts/{p.pk}/diff/?a=1&b=1", f"/compare/from-prompt/{p.pk}/?v=1"):
            assert c.get(url).status_code in (200, 302), (who, url)
