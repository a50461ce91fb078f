"""Issue 7 item 10: the model field follows the endpoint, and an unlisted model id is flagged.

Switching endpoint never keeps the previous endpoint's model id: it becomes the new endpoint's
default model, else (when its list has one model) that model, else empty with a hint to pick
from the list. A model id the endpoint's ``/models`` list does not contain is flagged next to the
field before sending.
"""

from __future__ import annotations

import pytest

from tests.conftest import create_first_account

pytestmark = [pytest.mark.browser]


def add_endpoint(pg, server, sim, name: str, default_model: str = "") -> None:  # noqa: ANN001
    pg.goto(server.url + "/endpoints/new/")
    pg.fill("#id_name", name)
    pg.fill("#id_base_url", sim.base_url)
    if default_model:
        pg.fill("#id_default_model", default_model)
    pg.click("button:has-text('Save endpoint')")
    pg.wait_for_url("**/endpoints/")


def test_model_follows_endpoint_and_unlisted_model_is_flagged(server, page, fresh_sim) -> None:  # noqa: ANN001
    pg = page
    create_first_account(pg, server)
    add_endpoint(pg, server, fresh_sim, "With default", default_model="sim-fast")
    add_endpoint(pg, server, fresh_sim, "No default")
    pg.goto(server.url + "/")
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "model-of-another-endpoint")
    pg.select_option("#endpoint", label="With default")
    assert pg.input_value("#model") == "sim-fast"
    pg.wait_for_selector("#model-list option[value='sim-reasoning']", state="attached")
    assert pg.is_hidden("#model-hint")
    # An endpoint without a default model and several listed: empty, with a hint to pick one.
    pg.select_option("#endpoint", label="No default")
    assert pg.input_value("#model") == ""
    pg.wait_for_selector("#model-list option[value='sim-fast']", state="attached")
    pg.wait_for_selector("#model-hint:has-text('Pick a model')")
    # A model id the list does not contain is flagged before sending; a listed one is not.
    pg.fill("#model", "gpt-nonexistent")
    pg.wait_for_selector("#model-hint:has-text('is not in this endpoint')")
    assert pg.get_attribute("#model", "aria-invalid") == "true"
    pg.fill("#model", "sim-fast")
    pg.wait_for_selector("#model-hint", state="hidden")
    assert pg.get_attribute("#model", "aria-invalid") is None


def test_the_role_returns_to_user_after_a_prefill_send(server, page) -> None:  # noqa: ANN001
    """Issue 7 item 11: after a prefill (assistant) or system message the composer's role is
    "user" again, so the next typed message is not silently another prefill."""
    pg = page
    create_first_account(pg, server)
    pg.wait_for_selector("#conn-state.ok")
    pg.fill("#model", "sim-fast")
    pg.fill("#content", "Hi")
    pg.press("#content", "Enter")
    pg.wait_for_selector(".msg-assistant.status-complete")
    pg.select_option("#role", "assistant")
    pg.fill("#content", "Sure, here it is:")
    pg.click("#send")
    pg.wait_for_selector(".msg-assistant.status-complete >> nth=1")
    assert pg.input_value("#role") == "user"
    prefilled = pg.locator(".msg-assistant").nth(1).inner_text()
    assert "Sure, here it is:" in prefilled
    pg.select_option("#role", "system")
    pg.fill("#content", "Be brief.")
    pg.click("#append")
    # The page echoes the message at once; the composer resets when the server has it.
    pg.wait_for_function("() => document.getElementById('content').value === ''")
    assert pg.input_value("#role") == "user"
    assert "Be brief." in pg.inner_text(".msg-system")
