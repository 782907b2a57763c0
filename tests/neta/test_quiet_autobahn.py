"""The server's autobahn does not style the arguments of debug lines it drops."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import txaio
txaio.use_twisted()
txaio.set_global_log_level({level!r})
from autobahn.websocket import protocol
from neta.serve import install_quiet_autobahn
install_quiet_autobahn()
print(repr(protocol.hlval(42)))
"""


def run(level: str) -> str:
    out = subprocess.run([sys.executable, "-c", SCRIPT.format(level=level)], capture_output=True, text=True, timeout=60, check=True)
    return out.stdout.strip()


def test_info_level_passes_the_values_as_they_are():
    assert run("info") == "42"


def test_debug_level_keeps_autobahn_s_styled_values():
    styled = run("debug")
    assert styled != "42" and "42" in styled  # a string with the ANSI colours click adds
