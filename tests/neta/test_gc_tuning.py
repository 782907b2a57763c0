"""The collector set for a long-lived process (infra/gc_tuning.py), in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import gc, json, sys
from neta.serve import serve_tuned_gc
before = gc.get_threshold()
serve_tuned_gc()
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "asgi": "neta.asgi" in sys.modules}))
"""


def _probe(**env) -> dict:
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "neta.settings", **env}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_server_freezes_its_startup_heap_and_raises_the_young_threshold(tmp_path):
    seen = _probe(NETA_VAR_DIR=str(tmp_path))
    assert seen["before"] == [700, 10, 10]
    assert seen["after"] == [10000, 20, 20]
    assert seen["asgi"] and seen["frozen"] > 50_000  # Django, the apps and the libraries


def test_the_setting_sets_the_threshold_and_zero_leaves_python_s_collector(tmp_path):
    assert _probe(NETA_VAR_DIR=str(tmp_path), NETA_GC_YOUNG="2500")["after"] == [2500, 20, 20]
    untouched = _probe(NETA_VAR_DIR=str(tmp_path), NETA_GC_YOUNG="0")
    assert untouched["after"] == [700, 10, 10] and untouched["frozen"] == 0


def test_a_bad_setting_is_a_clear_error(tmp_path):
    environment = {**os.environ, "DJANGO_SETTINGS_MODULE": "neta.settings", "NETA_VAR_DIR": str(tmp_path), "NETA_GC_YOUNG": "lots"}
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=environment, capture_output=True, text=True, timeout=120)
    assert out.returncode != 0 and "NETA_GC_YOUNG must be an integer, not 'lots'" in out.stderr
