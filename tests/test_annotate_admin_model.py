"""The admin page shows the votes model live (ability, posteriors, agreement over time, the drift
alarm), in a real browser (Playwright + Debian's headless Chromium) against the real ``annotate
serve``, on SQLite and on a real PostgreSQL server: four careful annotators vote first (no
alarm), then two who vote against every case's truth; a reload shows the alarm naming them."""

from __future__ import annotations

import pytest

pytest.importorskip("starlette", reason="the web extra is not installed: pip install 'casebench[web]'")

from servers.annotate_server import AnnotateServer, write_dataset  # noqa: E402
from test_annotate_browser import CHROMIUM, CHROMIUM_ARGS  # noqa: E402
from test_annotate_stats import crowd_votes  # noqa: E402

CASES, PER_CASE = 20, 6
CAREFUL = {f"good{j}": 0.9 for j in range(4)}
AGAINST = {f"bad{j}": 0.0 for j in range(2)}


@pytest.mark.slow
def test_the_admin_page_shows_ability_posteriors_agreement_and_drift(db_url, tmp_path):
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    data = write_dataset(tmp_path / "d.json", CASES)
    with AnnotateServer(data, db_url, "--votes-per-case", str(PER_CASE), "--cases-per-annotator", str(CASES),
                        "--attention-every", "1000") as srv, playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_context().new_page()
            page.goto(f"{srv.base}/admin?token={srv.admin_token}")
            assert page.locator("#votes-model").count() == 0  # no vote yet: no model to show
            assert crowd_votes(srv, CAREFUL, CASES) == 80
            page.reload()
            assert page.locator('meta[http-equiv="refresh"]').get_attribute("content") == "30"  # follows live
            assert page.get_by_role("heading", name="Annotator ability").is_visible()
            rows = page.locator("#ability tbody tr")
            assert rows.count() == 4 and rows.first.locator("td").nth(0).inner_text().startswith("good")
            assert page.locator("#drift-none").is_visible() and page.locator("#drift-alert").count() == 0
            assert page.locator("#windows tbody tr").count() >= 2
            assert float(page.locator("#alpha-overall").inner_text()) > 0.3
            cells = page.locator("td.posterior")
            assert cells.count() == CASES and all(c.strip() != "-" for c in cells.all_inner_texts())

            assert crowd_votes(srv, AGAINST, CASES) == 40
            page.reload()
            alert = page.get_by_role("alert")
            assert alert.is_visible()
            text = alert.inner_text()
            assert "bad0" in text and "bad1" in text and "less often than chance" in text
            assert page.locator("#ability tr.flag").count() == 2
            assert page.locator("#windows tr.flag").count() == 1  # the latest window
            model = srv.admin()["votes_model"]
            assert model["votes"] == 120 and model["drift"]["alert"] is True
        finally:
            browser.close()
