"""System checks for the sandbox setting."""

from __future__ import annotations

from toolcatalog import checks, sandbox


def test_bwrap_setting_without_bwrap_is_an_error(settings, monkeypatch):
    settings.NETA_SANDBOX = "bwrap"
    monkeypatch.setattr(sandbox, "BWRAP_BINARIES", ("/nonexistent/bwrap",))
    sandbox.bwrap_status.cache_clear()
    try:
        errors = checks.check_sandbox_available()
        assert [e.id for e in errors] == ["toolcatalog.E001"]
        assert "bwrap is not installed" in errors[0].msg
    finally:
        monkeypatch.undo()
        sandbox.bwrap_status.cache_clear()


def test_bwrap_setting_with_working_bwrap_is_fine(settings, bwrap_ok):
    settings.NETA_SANDBOX = "bwrap"
    assert checks.check_sandbox_available() == []


def test_deploy_check_nudges_towards_the_sandbox(settings, bwrap_ok):
    settings.NETA_SANDBOX = "none"
    settings.DEBUG = False
    assert [w.id for w in checks.check_sandbox_used()] == ["toolcatalog.W001"]
    settings.NETA_SANDBOX = "bwrap"
    assert checks.check_sandbox_used() == []
