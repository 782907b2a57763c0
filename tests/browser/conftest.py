"""Browser tests: Debian's Chromium (headless, through Playwright) against a real Daphne.

One Daphne per test session, on a private var dir (SQLite, session files, the
inline backend), with a scripted model whose rules make every scene of the chat
page reproducible: a tool call, a slow stream, an endless one, a quick answer.
Each test saves a screenshot under ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, require
from tests.support.databases import sqlite_migrated

CHROMIUM = os.environ.get("NETA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ARTIFACTS = REPO / "test-artifacts" / "browser"
DOC_SHOTS = REPO / "docs" / "screenshots"
PASSWORD = "pw-browser-alice"

# The slow answer streams in about six seconds (4 characters every 30 ms).
SLOW_TEXT = " ".join(f"Sentence {i} of a slow answer about trees and branches." for i in range(1, 15))
RULES = {
    "version": 1,
    "chunk_size": 0,
    "rules": [
        {"match": {"system": "(?i)summariz"}, "reply": [{"text": "Summary: the user asked a second question on the branch they left."}]},
        {
            "match": {"contains": "workspace"},
            "replies": [
                [
                    {"thinking": "I should list the workspace first.", "chunk_size": 6, "delay_ms": 20},
                    {"text": "Let me look at the workspace.", "chunk_size": 4, "delay_ms": 20},
                    {"tool_call": {"name": "ls", "arguments": {"path": "."}}, "chunk_size": 3, "delay_ms": 40},
                    {"pause_ms": 1500},  # the streamed tool card stays up long enough to be seen
                ],
                [{"text": "The workspace holds **notes.md** and `src/`.", "chunk_size": 4, "delay_ms": 20}],
            ],
        },
        {"match": {"contains": "slowly"}, "reply": [{"text": SLOW_TEXT, "chunk_size": 4, "delay_ms": 30}]},
        {"match": {"contains": "forever"}, "reply": [{"text": "Counting sheep: " + "one more sheep, " * 400, "chunk_size": 4, "delay_ms": 40}]},
    ],
    "default": {"reply": [{"text": "Noted: {{user}}", "chunk_size": 3, "delay_ms": 10}]},
}

SETUP = """
from django.contrib.auth import get_user_model
from runtime.models import Agent, ModelConfig
import json
rules = json.loads({rules!r})
U = get_user_model()
if not U.objects.filter(username="alice").exists():
    U.objects.create_user("alice", password={password!r})
    U.objects.create_user("mallory", password={password!r})
model, _ = ModelConfig.objects.update_or_create(
    name="browser-scripted",
    defaults=dict(display_name="Browser scripted", provider_kind="scripted", provider_name="scripted", model_id="browser-scripted",
                  context_window=64000, max_output_tokens=4096, supports_thinking=True, supports_images=True,
                  price_input=1, price_output=2, options={{"rules": rules}}),
)
Agent.objects.update_or_create(name="browser", defaults=dict(model=model, workspace_mode="shared", restore_last_session=False, summarize_on_switch="ask", thinking_level="low", description="browser tests"))
Agent.objects.update_or_create(name="always", defaults=dict(model=model, restore_last_session=True, summarize_on_switch="always", description="summarizes every switch"))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    base_url: str
    env: dict
    var_dir: Path

    def manage(self, *args: str, timeout: float = 120) -> str:
        out = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout
        )
        if out.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out.stdout

    def python(self, code: str, timeout: float = 300) -> str:
        return self.manage("shell", "-c", code, timeout=timeout)


_STATIC_ROOT: Path | None = None


def static_root() -> Path:
    """The static files collected once per test process (what `make run` serves: hashed
    names, the chat bundle, gzip copies; neta/static_build.py), shared by every server."""
    global _STATIC_ROOT
    if _STATIC_ROOT is None:
        import tempfile

        root = Path(tempfile.mkdtemp(prefix="neta-static-"))
        env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
        env.update(NETA_STATIC_ROOT=str(root), NETA_VAR_DIR=str(root / "var"), DJANGO_SETTINGS_MODULE="neta.settings")
        out = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=REPO, env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(f"collectstatic failed:\n{out.stdout}\n{out.stderr}")
        _STATIC_ROOT = root
    return _STATIC_ROOT


def server_env(var_dir: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(
        NETA_STATIC_ROOT=str(static_root()),
        NETA_VAR_DIR=str(var_dir),
        NETA_SESSIONS_DIR=str(var_dir / "sessions"),
        NETA_WORKSPACE_DIR=str(var_dir / "workspace"),
        NETA_EVENT_LOG_SIZE="10",  # small: the resync path is taken for real
        NETA_WS_HEARTBEAT_SECONDS="3",
        NETA_ALLOWED_HOSTS="127.0.0.1,localhost",
        DJANGO_SETTINGS_MODULE="neta.settings",
        PYTHONUNBUFFERED="1",
        CONSOLE_TEST_API_KEY="sk-browser-console",  # a key variable the console's model test finds set
        BACKUP_TEST_API_KEY="sk-browser-backup",  # a second one: one key variable goes to one endpoint
    )
    env.update(extra)
    return env


def start_daphne(env: dict, log_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    log = open(log_path, "ab")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("daphne")), "-b", "127.0.0.1", "-p", str(port), "neta.asgi:application"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"daphne exited with {proc.returncode}; see {log_path}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError("daphne did not start listening within 60 s")


def stop_daphne(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def prepare(var_dir: Path, env: dict) -> Server:
    var_dir.mkdir(parents=True, exist_ok=True)
    (var_dir / "workspace" / "src").mkdir(parents=True, exist_ok=True)
    (var_dir / "workspace" / "notes.md").write_text("# notes\n", encoding="utf-8")
    server = Server(base_url="", env=env, var_dir=var_dir)
    sqlite_migrated(var_dir / "neta.sqlite3", bootstrapped=True)  # what `migrate` and `neta_bootstrap` leave
    server.python(SETUP.format(rules=json.dumps(RULES), password=PASSWORD))
    return server


def require_browser() -> None:
    require(Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        require(False, "the playwright package is not installed (pip install playwright)")


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    require_browser()
    var_dir = tmp_path_factory.mktemp("neta-browser")
    server = prepare(var_dir, server_env(var_dir))
    proc, server.base_url = start_daphne(server.env, var_dir / "daphne.log")
    yield server
    stop_daphne(proc)


# Module scope: Playwright's sync API keeps an event loop running in this thread
# until it stops, which breaks later tests that call asyncio.run().
@pytest.fixture(scope="module")
def browser():
    require_browser()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


class Console:
    """Errors the page reported (console errors, uncaught exceptions, failed requests)."""

    def __init__(self, page):
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


@pytest.fixture
def artifacts():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def login(page, base_url: str, username: str = "alice", path: str = "/?agent=browser") -> None:
    page.goto(base_url + path)
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("html[data-conversation-ready]")


@pytest.fixture
def chat(browser, server, artifacts, request):
    """A logged-in page on a fresh session of the `browser` agent (desktop width)."""
    context = browser.new_context(viewport={"width": 1360, "height": 880})
    page = context.new_page()
    page.set_default_timeout(20_000)
    console = Console(page)
    login(page, server.base_url)
    page.console = console
    yield page
    page.screenshot(path=str(artifacts / f"{request.node.name}-end.png"))
    context.close()
    assert console.errors == [], console.errors


def send(page, text: str) -> None:
    page.fill("#composer-input", text)
    page.press("#composer-input", "Enter")


def api(page, method: str, path: str, body=None) -> dict:
    """A call of ``/api/<path>`` from the page, as its logged-in user (cookie and CSRF token)."""
    return page.evaluate(
        """async ([method, path, body]) => {
          const csrf = decodeURIComponent(document.cookie.match(/csrftoken=([^;]+)/)?.[1] ?? '');
          const r = await fetch('/api/' + path, {method, credentials: 'same-origin',
            headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf}, body: body ? JSON.stringify(body) : undefined});
          return {status: r.status, body: r.status === 204 ? null : await r.json()};
        }""",
        [method, path, body],
    )


def shot(page, artifacts: Path, name: str, doc: str) -> None:
    """A screenshot into test-artifacts/browser/<name>.png; with NETA_WRITE_DOC_SCREENSHOTS=1
    also into docs/screenshots/<doc>.png (the shots the docs show)."""
    page.screenshot(path=str(artifacts / f"{name}.png"))
    if os.environ.get("NETA_WRITE_DOC_SCREENSHOTS") == "1":
        DOC_SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOC_SHOTS / f"{doc}.png"))


def wait_idle(page, timeout: float = 30_000) -> None:
    """Until no run is active and the last answer is stored."""
    page.wait_for_function("() => window.neta.store.connection.state === 'live' && !window.neta.store.running", timeout=timeout)


def store_eval(page, expression: str):
    return page.evaluate(f"() => {{ const s = window.neta.store; return {expression}; }}")


def server_snapshot(page) -> dict:
    return page.evaluate(
        """async () => {
          const id = window.neta.data.sessionId;
          const r = await fetch(`/api/sessions/${id}/snapshot/`, {credentials: 'same-origin'});
          return await r.json();
        }"""
    )


def answered(page, prompt: str, contains: str, timeout: float = 60_000) -> None:
    """Until the run for `prompt` (the last user message with that text on the active path)
    has a stored final answer containing `contains` and no run is active. Exact: an earlier
    answer with the same words, or a moment before the run started, does not count."""
    page.wait_for_function(
        """([prompt, contains]) => {
          const s = window.neta.store;
          if (!s.snapshot || s.running || s.connection.state !== 'live') return false;
          const path = s.snapshot.activePath.map((id) => s.entry(id));
          const text = (m) => (Array.isArray(m.content) ? m.content.filter((b) => b.type === 'text').map((b) => b.text).join('') : String(m.content ?? ''));
          let at = -1;
          path.forEach((e, i) => { if (e?.type === 'message' && e.message.role === 'user' && text(e.message) === prompt) at = i; });
          return at >= 0 && path.slice(at + 1).some((e) => e?.type === 'message' && e.message.role === 'assistant'
            && e.message.stopReason === 'stop' && text(e.message).includes(contains));
        }""",
        arg=[prompt, contains],
        timeout=timeout,
    )


def reached(page, prompt: str, contains: str, timeout: float = 30_000) -> None:
    """Until the answer to `prompt` (streaming, or already stored) shows `contains`: the
    streaming message once the run for `prompt` started, else a stored answer after it."""
    page.wait_for_function(
        """([prompt, contains]) => {
          const s = window.neta.store;
          if (!s.snapshot) return false;
          const path = s.snapshot.activePath.map((id) => s.entry(id));
          const text = (m) => (Array.isArray(m.content) ? m.content.filter((b) => b.type === 'text').map((b) => b.text).join('') : String(m.content ?? ''));
          let at = -1;
          path.forEach((e, i) => { if (e?.type === 'message' && e.message.role === 'user' && text(e.message) === prompt) at = i; });
          if (at < 0) return false;
          if (path.slice(at + 1).some((e) => e?.type === 'message' && e.message.role === 'assistant' && text(e.message).includes(contains))) return true;
          // The run for `prompt` has started (its message is on the path): what streams is its answer.
          return (document.querySelector('.msg-streaming')?.textContent ?? '').includes(contains);
        }""",
        arg=[prompt, contains],
        timeout=timeout,
    )
