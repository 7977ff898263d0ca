"""Shared fixtures: paths to the real published data (read at run time, never committed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "casebench"
DATA_FILE = SHARED / "CASEBench_data.json"
EXP = SHARED / "exp"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def _own_cache(tmp_path_factory: pytest.TempPathFactory):
    """Tests never see the user's casebench cache or ``$CASEBENCH_DATA``: a dataset fetched there,
    published outputs or cached reference scores would change what commands find (the report gained
    18 published rows on a machine where ``casebench data fetch`` had run). The converted embedded
    model is shared through a link, so it is still converted once per machine."""
    from casebench.cache import cache_dir

    real = cache_dir()
    root = tmp_path_factory.mktemp("casebench-cache")
    (real / "models").mkdir(parents=True, exist_ok=True)
    (root / "models").symlink_to(real / "models", target_is_directory=True)
    mp = pytest.MonkeyPatch()
    mp.setenv("CASEBENCH_CACHE", str(root))
    mp.delenv("CASEBENCH_DATA", raising=False)
    yield root
    mp.undo()


#: provider settings a developer's shell may hold: no test reads them unless it sets them itself
AMBIENT_PROVIDER_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL",
                        "CASEBENCH_PRICES")


@pytest.fixture(autouse=True)
def _no_ambient_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing from the developer's shell leaks into a test: API keys and base URLs of the
    providers and a price table are removed (a test that needs one sets it). One home for what
    seven test files each cleared on their own."""
    for name in AMBIENT_PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def real_data_path() -> Path:
    if not DATA_FILE.is_file():
        pytest.skip("the published dataset is not at ../shared/casebench")
    return DATA_FILE


@pytest.fixture(scope="session")
def real_dataset(real_data_path):
    from casebench.data import load_dataset

    return load_dataset(real_data_path)


@pytest.fixture(scope="session")
def exp_dir() -> Path:
    if not EXP.is_dir():
        pytest.skip("the published outputs are not at ../shared/casebench/exp")
    return EXP


@pytest.fixture()
def small_records() -> list[dict]:
    return json.loads((FIXTURES / "small_cases.json").read_text())


@pytest.fixture()
def small_data_path() -> Path:
    return FIXTURES / "small_cases.json"


@pytest.fixture(scope="session")
def embedded_model() -> Path:
    """The embedded SmolLM2's converted folder (converted once per machine); skips with the reason
    when torch or the model package is missing."""
    pytest.importorskip("torch")
    from casebench.backends.embedded import EmbeddedModelError, embedded_model_path

    try:
        return embedded_model_path()
    except EmbeddedModelError as e:
        pytest.skip(str(e))


# Real servers on loopback: a scripted OpenAI-compatible fault server and a llama.cpp server.
from conftest_servers import db_url, fault_server, llama_server, llama_server_stateless, postgres_server  # noqa: E402,F401


#: the headless Chromium the browser tests drive (Debian's package; `make test-deps` installs it)
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture()
def chromium():
    """A headless Chromium browser (Playwright), closed after the test; skips where Chromium or
    the playwright package is missing."""
    if not CHROMIUM.exists():
        pytest.skip("headless Chromium is not installed at /usr/bin/chromium (`make test-deps` installs it)")
    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()
