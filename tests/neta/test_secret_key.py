"""The embedded default's secret key: made once per var/ folder, the same for processes that start together."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PRINT_KEY = "import django; from django.conf import settings; print(settings.SECRET_KEY)"


def start(var_dir: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update({"NETA_VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "neta.settings", "PYTHONPATH": str(REPO)})
    return subprocess.Popen([sys.executable, "-c", PRINT_KEY], env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_processes_starting_together_on_a_new_folder_share_one_complete_key(tmp_path):
    for attempt in range(2):  # a race is won differently each time
        var_dir = tmp_path / f"var{attempt}"
        children = [start(var_dir) for _ in range(8)]
        outputs = [child.communicate(timeout=120) for child in children]
        assert all(child.returncode == 0 for child in children), [err[-2000:] for _, err in outputs]
        keys = {out.strip() for out, _ in outputs}
        stored = (var_dir / "secret_key").read_text(encoding="utf-8").strip()
        assert keys == {stored} and len(stored) >= 50
        assert stat.S_IMODE((var_dir / "secret_key").stat().st_mode) == 0o600
        assert sorted(p.name for p in var_dir.iterdir() if p.name.startswith(".secret_key")) == []  # no temporary left
        # A later start reads it.
        out, err = start(var_dir).communicate(timeout=120)
        assert out.strip() == stored, err


def test_many_makers_at_once_agree_on_one_key(tmp_path):
    """The maker's race run hard: threads released together on a new folder, many rounds."""
    import threading

    from neta.env import installation_key

    for round_ in range(40):
        path = tmp_path / f"r{round_}" / "secret_key"
        path.parent.mkdir()
        barrier = threading.Barrier(12)
        keys, errors = [], []

        def make():
            barrier.wait()
            try:
                keys.append(installation_key(path))
            except Exception as exc:  # noqa: BLE001 - collected for the assertion
                errors.append(repr(exc))

        threads = [threading.Thread(target=make) for _ in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and len(set(keys)) == 1 and keys[0] == path.read_text().strip()
        assert [p.name for p in path.parent.iterdir()] == ["secret_key"]


def test_an_empty_key_file_is_a_clear_error(tmp_path):
    import pytest
    from django.core.exceptions import ImproperlyConfigured

    from neta.env import installation_key

    (tmp_path / "secret_key").write_text("")
    with pytest.raises(ImproperlyConfigured, match="is empty"):
        installation_key(tmp_path / "secret_key")
