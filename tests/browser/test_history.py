"""The browser's Back and Forward buttons walk the views the user saw (issue 48): Attention's Model view →
Masked words → Back landed in Head view, and a second Back did nothing."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

from tests.browser.conftest import assert_no_streamlit_exception, wait_for_app


def _checked_view(page) -> str:
    """The Attention page's View control as drawn (its pressed option)."""
    return page.locator('[data-testid="stMain"] [role=radio][aria-checked=true]').first.inner_text()


def _where(page) -> tuple[str, dict]:
    url = urlparse(page.url)
    return url.path.strip("/"), {k: v[-1] for k, v in parse_qs(url.query).items()}


def test_back_and_forward_return_to_the_page_and_view_seen(page, app_url):
    page.goto(f"{app_url}/attention?a=the+cat+sat+on+the+mat")
    wait_for_app(page)
    page.get_by_role("radio", name="Model view").click()
    wait_for_app(page)
    assert _checked_view(page) == "Model view"
    page.locator('[data-testid="stSidebarNav"]').get_by_text("Masked words").click()
    wait_for_app(page)
    path, query = _where(page)
    assert path == "masked" and query.get("a") == "the cat sat on the mat"

    page.go_back()
    wait_for_app(page)
    page.wait_for_url("**/attention?**")  # one Back leaves Masked words (no bare entry of the switch in between)
    path, query = _where(page)
    assert path == "attention" and query.get("view") == "Model view", page.url
    assert _checked_view(page) == "Model view"  # the view the URL says is the one drawn
    assert_no_streamlit_exception(page)

    page.go_back()  # the step before: the same page in Head view
    wait_for_app(page)
    path, query = _where(page)
    assert path == "attention" and "view" not in query, page.url
    assert _checked_view(page) == "Head view"

    page.go_forward()
    wait_for_app(page)
    assert _where(page)[1].get("view") == "Model view" and _checked_view(page) == "Model view"
    page.go_forward()
    page.wait_for_url("**/masked?**", timeout=30_000)  # again one step, past the switch's extra entry
    wait_for_app(page)
    assert _where(page)[1].get("a") == "the cat sat on the mat"
    assert_no_streamlit_exception(page)
