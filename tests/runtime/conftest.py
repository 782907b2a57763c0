"""Runtime fixtures: a scripted model whose rules each test sets, an agent, a session."""

from __future__ import annotations

import pytest

from runtime.models import Agent, ModelConfig
from sessions_tree.index import INDEXES
from tests.support.driver import Driver


@pytest.fixture
def workspace(tmp_path, settings):
    path = tmp_path / "workspace"
    path.mkdir()
    settings.NETA_SESSIONS_DIR = tmp_path / "sessions"
    settings.NETA_WORKSPACE_DIR = path
    INDEXES.clear()
    return path


@pytest.fixture
def make_agent(workspace):
    def make(script: dict, *, name="tester", provider="file", **fields) -> Agent:
        model = ModelConfig.objects.create(
            name=f"{name}-model",
            provider_kind="scripted",
            provider_name="scripted",
            model_id="scripted-test",
            context_window=fields.pop("context_window", 100000),
            price_input=1,
            price_output=2,
            supports_thinking=True,
            options={"rules": script},
        )
        return Agent.objects.create(name=name, model=model, cwd=str(workspace), session_provider=provider, **fields)

    return make


@pytest.fixture
def driver_for(make_agent):
    def make(script: dict, **fields) -> Driver:
        return Driver(make_agent(script, **fields))

    return make
