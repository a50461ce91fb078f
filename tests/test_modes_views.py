"""Mode pages (``chat.modes.views``): forms with limits checked before any call (errors next to
the field), runs owned by their user (a second user gets 404 and nothing changes), history,
Continue, vector downloads (JSON / CSV / .npy), Inspect and View code."""

from __future__ import annotations

import csv
import io
import json
import math
import struct

import pytest
from django.test import Client

from chat import middleware, services
from chat.models import Endpoint
from chat.modes import services as mode_services
from chat.modes.models import ModeRun
from chat.modes.views import cosine_matrix, vectors_of

PASSWORD = "correct-horse-battery-9"


@pytest.fixture(autouse=True)
def _setup(settings) -> None:  # noqa: ANN001
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    middleware.reset_cache()
    yield
    middleware.reset_cache()


@pytest.fixture
def alice(db):  # noqa: ANN001, ANN201
    user = services.user_create(username="alice", password=PASSWORD)
    if not Endpoint.objects.filter(owner=user).exists():
        services.endpoint_create_simulator(user=user)
    return user


@pytest.fixture
def bob(db):  # noqa: ANN001, ANN201
    user = services.user_create(username="bob", password=PASSWORD)
    if not Endpoint.objects.filter(owner=user).exists():
        services.endpoint_create_simulator(user=user)
    return user


def client_for(user) -> Client:  # noqa: ANN001
    c = Client()
    c.force_login(user)
    return c


def embeddings_run(user, texts, vectors) -> ModeRun:  # noqa: ANN001
    endpoint = Endpoint.objects.filter(owner=user).first()
    run = mode_services.run_create(user=user, endpoint=endpoint, kind="embeddings", model="sim-embed",
                                   params={"encoding_format": "float"}, prompt="\n".join(texts), inputs=texts)
    flat = [v for vec in vectors for v in vec]
    mode_services.run_finish(run_id=run.pk, status="complete", vectors=struct.pack(f"<{len(flat)}f", *flat),
                             dims=len(vectors[0]), usage={"prompt_tokens": 7}, metrics={"total_ms": 12.5})
    run.refresh_from_db()
    return run


def test_completion_post_creates_pending_run_and_redirects(alice):
    c = client_for(alice)
    endpoint = Endpoint.objects.filter(owner=alice).first()
    r = c.post("/modes/completion/", {"endpoint": endpoint.pk, "model": "sim-fast", "prompt": "Once upon",
                                      "max_tokens": "16", "temperature": "0.3", "stop": "\\n\\n\nEND", "logprobs": "2"})
    assert r.status_code == 302
    run = ModeRun.objects.get(owner=alice)
    assert r["Location"] == f"/modes/r/{run.pk}/"
    assert run.status == "pending" and run.prompt == "Once upon"
    assert run.params == {"max_tokens": 16, "temperature": 0.3, "logprobs": 2, "stop": ["\n\n", "END"]}
    page = c.get(r["Location"])
    assert page.status_code == 200 and f'data-ws="/ws/modes/{run.pk}/"'.encode() in page.content
    assert b"Once upon" in c.get("/modes/completion/").content  # history


def test_completion_limits_are_checked_before_the_call(alice):
    c = client_for(alice)
    endpoint = Endpoint.objects.filter(owner=alice).first()
    endpoint.models_cache = [{"id": "tiny", "context_length": 10}]
    endpoint.save()
    r = c.post("/modes/completion/", {"endpoint": endpoint.pk, "model": "tiny", "prompt": "x" * 100,
                                      "temperature": "3", "stop": "a\nb\nc\nd\ne"})
    assert r.status_code == 400
    html = r.content.decode()
    assert "context length of 10 tokens" in html and "At most 4 stop sequences" in html
    assert "less than or equal to 2" in html
    assert not ModeRun.objects.exists()


def test_embeddings_limits_are_checked_before_the_call(alice):
    c = client_for(alice)
    endpoint = Endpoint.objects.filter(owner=alice).first()
    r = c.post("/modes/embeddings/", {"endpoint": endpoint.pk, "model": "sim-embed",
                                      "texts": "\n".join(f"t{i}" for i in range(65)), "encoding_format": "float"})
    assert r.status_code == 400 and b"65 texts: at most 64" in r.content
    r = c.post("/modes/embeddings/", {"endpoint": endpoint.pk, "model": "sim-embed", "texts": "\n \n"})
    assert r.status_code == 400 and b"at least one text" in r.content
    assert not ModeRun.objects.exists()


def test_other_users_endpoint_is_refused(alice, bob):
    bobs = Endpoint.objects.filter(owner=bob).first()
    r = client_for(alice).post("/modes/completion/", {"endpoint": bobs.pk, "model": "sim-fast", "prompt": "hi"})
    assert r.status_code == 400 and not ModeRun.objects.exists()


def test_second_user_gets_404_everywhere_and_nothing_changes(alice, bob):
    run = embeddings_run(alice, ["a", "b"], [[1.0, 0.0], [0.0, 1.0]])
    done = mode_services.run_create(user=alice, endpoint=Endpoint.objects.filter(owner=alice).first(),
                                    kind="completion", model="sim-fast", params={}, prompt="p")
    mode_services.run_finish(run_id=done.pk, status="complete", output="q")
    c = client_for(bob)
    for url in (f"/modes/r/{run.pk}/", f"/modes/r/{run.pk}/vectors.json", f"/modes/r/{run.pk}/vectors.npy",
                f"/modes/r/{run.pk}/inspect/", f"/modes/r/{run.pk}/code/", f"/modes/r/{done.pk}/"):
        assert c.get(url).status_code == 404, url
    assert c.post(f"/modes/r/{done.pk}/continue/").status_code == 404
    assert ModeRun.objects.count() == 2
    assert b"p" not in c.get("/modes/completion/").content.split(b"History")[1].split(b"</ul>")[0]


def test_continue_appends_the_completion_to_the_prompt(alice):
    c = client_for(alice)
    run = mode_services.run_create(user=alice, endpoint=Endpoint.objects.filter(owner=alice).first(),
                                   kind="completion", model="sim-fast", params={"max_tokens": 8}, prompt="Once")
    mode_services.run_finish(run_id=run.pk, status="complete", output=" upon a time")
    r = c.post(f"/modes/r/{run.pk}/continue/")
    new = ModeRun.objects.exclude(pk=run.pk).get()
    assert r["Location"] == f"/modes/r/{new.pk}/"
    assert new.prompt == "Once upon a time" and new.params == {"max_tokens": 8} and new.status == "pending"


def test_downloads_and_similarity(alice):
    texts = ["cat", "dog", "car"]
    vectors = [[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 2.0]]
    run = embeddings_run(alice, texts, vectors)
    c = client_for(alice)
    data = json.loads(c.get(f"/modes/r/{run.pk}/vectors.json").content)
    f32 = [[struct.unpack("<f", struct.pack("<f", v))[0] for v in vec] for vec in vectors]
    assert data["inputs"] == texts and data["embeddings"] == f32 and data["embeddings"] != vectors
    rows = list(csv.reader(io.StringIO(c.get(f"/modes/r/{run.pk}/vectors.csv").content.decode())))
    assert rows[0] == ["text", "d0", "d1", "d2"] and rows[2] == ["dog", "0.6000000238418579", "0.800000011920929", "0.0"]
    npy = c.get(f"/modes/r/{run.pk}/vectors.npy").content
    assert npy[:6] == b"\x93NUMPY" and (len(npy) - len(bytes(run.vectors))) % 64 == 0
    header_len = struct.unpack("<H", npy[8:10])[0]
    assert b"'shape': (3, 3)" in npy[10:10 + header_len]
    assert struct.unpack("<9f", npy[10 + header_len:]) == struct.unpack("<9f", bytes(run.vectors))
    matrix = cosine_matrix(vectors_of(run))
    assert math.isclose(matrix[0][1], 0.6, rel_tol=1e-6) and math.isclose(matrix[0][2], 0.0, abs_tol=1e-9)
    page = c.get(f"/modes/r/{run.pk}/").content.decode()
    assert 'data-value="0.6000"' in page and "cat ↔ dog: 0.6000" in page
    assert c.get(f"/modes/r/{run.pk}/vectors.xml").status_code == 404


def test_inspect_and_code_views(alice):
    c = client_for(alice)
    endpoint = Endpoint.objects.filter(owner=alice).first()
    run = mode_services.run_create(user=alice, endpoint=endpoint, kind="completion", model="sim-fast",
                                   params={"max_tokens": 8, "logprobs": 1}, prompt="Hello")
    mode_services.run_finish(run_id=run.pk, status="error", error={"message": "you must provide a model parameter",
                                                                     "status": 400, "code": "invalid_request_error"},
                             inspect={"request": {"url": "u", "headers": {"Authorization": "[REDACTED]"}, "body": {"prompt": "Hello"}},
                                      "events": [{"event": "", "data": "{\"x\": 1}"}]})
    page = c.get(f"/modes/r/{run.pk}/").content.decode()
    assert "you must provide a model parameter" in page and "HTTP 400" in page
    inspect = c.get(f"/modes/r/{run.pk}/inspect/").content.decode()
    assert "[REDACTED]" in inspect and "&quot;x&quot;: 1" in inspect
    code = c.get(f"/modes/r/{run.pk}/code/").content.decode()
    assert "/simulator/v1/completions" in code and "&quot;prompt&quot;: &quot;Hello&quot;" in code
    assert "&quot;logprobs&quot;: 1" in code
    assert endpoint.get_api_key() not in code


def test_audio_upload_checks_and_ownership(alice, bob, settings):  # noqa: ANN001
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.test_modes_providers import make_wav
    settings.PLAYGROUND_MAX_ATTACHMENT_BYTES = 50_000
    c = client_for(alice)
    endpoint = Endpoint.objects.filter(owner=alice).first()
    base = {"endpoint": endpoint.pk, "model": "sim-whisper", "task": "transcription", "response_format": "verbose_json",
            "stream": "on"}
    r = c.post("/modes/audio/", {**base, "file": SimpleUploadedFile("big.wav", make_wav(5.0), "audio/wav")})
    assert r.status_code == 400 and b"at most 50,000" in r.content
    r = c.post("/modes/audio/", {**base, "file": SimpleUploadedFile("notes.txt", b"hello", "text/plain")})
    assert r.status_code == 400 and b"Not an audio file" in r.content
    r = c.post("/modes/audio/", base)
    assert r.status_code == 400 and b"Choose an audio file or record one" in r.content
    assert not ModeRun.objects.exists()
    wav = make_wav(1.0)
    r = c.post("/modes/audio/", {**base, "task": "translation", "language": "es",
                                 "file": SimpleUploadedFile("hi.wav", wav, "audio/wav")})
    run = ModeRun.objects.get()
    assert r.status_code == 302 and run.kind == "translation" and bytes(run.audio) == wav
    assert run.params == {"response_format": "verbose_json", "stream": True, "language": "es"}
    got = c.get(f"/modes/r/{run.pk}/audio")
    assert got.status_code == 200 and got["Content-Type"] == "audio/wav" and got.content == wav
    code = c.get(f"/modes/r/{run.pk}/code/").content.decode()
    assert "/simulator/v1/audio/translations" in code and "file=@hi.wav" in code
    other = client_for(bob)
    assert other.get(f"/modes/r/{run.pk}/audio").status_code == 404
    assert other.get(f"/modes/r/{run.pk}/").status_code == 404
    assert b"hi.wav" not in other.get("/modes/audio/").content


def test_a_streaming_run_whose_heartbeat_stopped_shows_interrupted(alice):
    from datetime import timedelta

    from django.utils import timezone
    run = mode_services.run_create(user=alice, endpoint=Endpoint.objects.filter(owner=alice).first(),
                                   kind="completion", model="sim-fast", params={}, prompt="p")
    assert mode_services.run_claim(run_id=run.pk) and not mode_services.run_claim(run_id=run.pk)
    mode_services.run_partial(run_id=run.pk, output="partial")
    c = client_for(alice)
    page = c.get(f"/modes/r/{run.pk}/").content.decode()
    assert 'data-status="streaming"' in page and "Interrupted" not in page and "partial" in page
    ModeRun.objects.filter(pk=run.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    page = c.get(f"/modes/r/{run.pk}/").content.decode()
    assert 'data-status="interrupted"' in page and "Interrupted" in page and "partial" in page
