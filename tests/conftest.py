"""Fixtures for every test: each test gets an empty job-template cache of its own (launchers/templates.py), so
that no test reads a template another test stored and none writes into the user's ~/.cache; subprocesses inherit
it through the environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from launchers.templates import CACHE_ENV


@pytest.fixture(autouse=True)
def _own_template_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path_factory.mktemp("template-cache")
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder
