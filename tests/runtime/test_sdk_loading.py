"""A runs worker loads at start-up the SDKs of the enabled models' provider kinds, and only
those (neta.celery, runtime.llm.clients.load_sdks): each SDK is ~1.2 s of CPU to import."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from runtime.models import ModelConfig
from tests.support.services import REPO

PROBE = """
import json, sys
import django
django.setup()
from runtime.llm.clients import load_sdks
kinds = json.loads(sys.argv[1])
loaded = load_sdks(None if kinds is None else set(kinds))
print(json.dumps({"loaded": loaded, "anthropic": "anthropic" in sys.modules, "openai": "openai" in sys.modules}))
"""


def probe(kinds) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "neta.settings"}
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(kinds)], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("kinds", "loaded"),
    [
        (["scripted"], []),
        (["scripted", "openai-compatible"], ["openai"]),
        (["openai-responses"], ["openai"]),
        (["anthropic"], ["anthropic"]),
        (None, ["anthropic", "openai"]),  # the database could not say
    ],
)
def test_only_the_sdks_of_the_kinds_in_use_are_loaded(kinds, loaded):
    result = probe(kinds)
    assert result == {"loaded": loaded, "anthropic": "anthropic" in loaded, "openai": "openai" in loaded}


@pytest.mark.django_db(transaction=True)
def test_the_kinds_in_use_are_the_enabled_models(db):
    from neta.celery import _provider_kinds

    ModelConfig.objects.all().delete()
    for name, kind, enabled in (("s", "scripted", True), ("a", "anthropic", False), ("o", "openai", False)):
        ModelConfig.objects.create(name=name, provider_kind=kind, model_id=name, enabled=enabled)
    assert _provider_kinds() == {"scripted"}
    ModelConfig.objects.filter(provider_kind="anthropic").update(enabled=True)
    assert _provider_kinds() == {"scripted", "anthropic"}
