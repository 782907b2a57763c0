"""System checks for the sandbox setting."""

from __future__ import annotations

import pytest

from toolcatalog import checks, sandbox


@pytest.fixture
def fresh_probe():
    sandbox.reset_sandbox_probe()
    yield
    sandbox.reset_sandbox_probe()


def test_bwrap_setting_without_bwrap_is_an_error(settings, fresh_probe):
    settings.NETA_SANDBOX = "bwrap"
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    errors = checks.check_sandbox_available()
    assert [e.id for e in errors] == ["toolcatalog.E001"]
    assert "bwrap is not installed" in errors[0].msg


def test_bwrap_setting_with_working_bwrap_is_fine(settings, bwrap_ok):
    settings.NETA_SANDBOX = "bwrap"
    assert checks.check_sandbox_available() == []


def test_deploy_check_nudges_towards_the_sandbox(settings, bwrap_ok):
    settings.NETA_SANDBOX = "none"
    settings.DEBUG = False
    assert [w.id for w in checks.check_sandbox_used()] == ["toolcatalog.W001"]
    settings.NETA_SANDBOX = "bwrap"
    assert checks.check_sandbox_used() == []


def test_auto_without_bwrap_warns_in_the_checks(settings, fresh_probe):
    settings.NETA_SANDBOX = "auto"
    settings.NETA_SANDBOX_BWRAP = "/nonexistent/bwrap"
    warnings = checks.check_sandbox_fallback()
    assert [w.id for w in warnings] == ["toolcatalog.W002"]
    assert "run without a sandbox (none)" in warnings[0].msg and "/nonexistent/bwrap" in warnings[0].msg


def test_auto_with_working_bwrap_has_nothing_to_say(settings, bwrap_ok, fresh_probe):
    settings.NETA_SANDBOX = "auto"
    assert checks.check_sandbox_fallback() == []
    assert checks.check_sandbox_available() == []
