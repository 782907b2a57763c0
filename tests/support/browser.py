"""The browser side of the suite: Debian's Chromium (its headless shell, through Playwright) against
the shared browser deployment, and what a test does with a page.

The browser deployment (``browser_deployment``, ``tests/browser/conftest.py``): one
embedded Daphne (SQLite, the inline backend, the in-memory channel layer) with a scripted
model whose rules make every scene of the chat page reproducible: a tool call, a slow
stream, an endless one, a quick answer (``RULES``, the agents ``browser`` and ``always``,
the users ``alice`` and ``mallory``). A module that needs other settings starts a server of
its own on the same deployment (``Site.start``).

One Chromium per xdist worker (``chromium``): Playwright's sync API keeps its event loop
marked running in this thread between calls, which would stop any later test from running
a loop of its own (``asyncio.run``, pytest-asyncio). So the loop is marked running only
while a browser test runs (the ``browser`` fixture) and cleared after it.

Each test saves a screenshot under ``test-artifacts/browser/``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import databases
from tests.support.deployment import PASSWORD, Deployment
from tests.support.services import REPO, require

# The headless shell: the same Blink as the full browser, without its windowing and browser
# UI underneath; a browser test costs the machine about half the Chromium CPU.
CHROMIUM = os.environ.get("NETA_CHROMIUM", "/usr/bin/chromium-headless-shell")
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
__all__ = ["PASSWORD"]  # alice's and mallory's password (tests/support/deployment.py)

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
if not U.objects.filter(username="mallory").exists():
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


# What the browser deployment's servers see besides the deployment's own settings.
SERVER_ENV = {
    "NETA_EVENT_LOG_SIZE": "10",  # small: the resync path is taken for real
    "NETA_WS_HEARTBEAT_SECONDS": "3",
    "CONSOLE_TEST_API_KEY": "sk-browser-console",  # a key variable the console's model test finds set
    "BACKUP_TEST_API_KEY": "sk-browser-backup",  # a second one: one key variable goes to one endpoint
    "FAILOVER_TEST_API_KEY": "sk-browser-failover",  # the failover page's primary (its own endpoint)
}

_STATIC_ROOT: Path | None = None


def static_root() -> Path:
    """The static files collected once per test run (what `make run` serves: hashed names,
    the chat bundle, gzip copies; neta/static_build.py), shared by every server of the run's
    processes (``databases.run_folder``)."""
    global _STATIC_ROOT
    if _STATIC_ROOT is None:
        _STATIC_ROOT = databases.run_folder("static", _collect_static)
    return _STATIC_ROOT


def _collect_static(root: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETA_")}
    env.update(NETA_STATIC_ROOT=str(root), NETA_VAR_DIR=str(root / "var"), DJANGO_SETTINGS_MODULE="neta.settings")
    out = subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "-v", "0"], cwd=REPO, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"collectstatic failed:\n{out.stdout}\n{out.stderr}")


def require_browser() -> None:
    require(Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM} (apt-get install chromium-headless-shell)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        require(False, "the playwright package is not installed (pip install playwright)")


def browser_deployment(workdir: Path, **env: str) -> Deployment:
    """The embedded deployment the browser tests share (not started): ``SETUP`` is part of
    its template, the workspace holds ``notes.md`` and ``src/``."""
    seed = SETUP.format(rules=json.dumps(RULES), password=PASSWORD)
    deployment = Deployment(workdir, servers=0, extra_env={**SERVER_ENV, "NETA_STATIC_ROOT": str(static_root()), **env}, seed=seed)
    (deployment.workdir / "workspace" / "src").mkdir(parents=True, exist_ok=True)
    (deployment.workdir / "workspace" / "notes.md").write_text("# notes\n", encoding="utf-8")
    return deployment


class Site:
    """One server of a browser deployment, as a browser test addresses it."""

    def __init__(self, deployment: Deployment, name: str = "daphne0"):
        self.deployment, self.name = deployment, name

    @property
    def base_url(self) -> str:
        return self.deployment.origin(self.name)

    @property
    def var_dir(self) -> Path:
        """The deployment's ``NETA_VAR_DIR``."""
        return Path(self.deployment.env["NETA_VAR_DIR"])

    def start(self, **env: str) -> Site:
        """Start the server (``env``: settings of this server alone) and wait until it answers."""
        self.deployment.prepare()
        self.deployment.start_server(self.name, **env)
        return self

    def python(self, code: str, timeout: float = 300) -> str:
        """Run ``code`` in ``manage.py shell`` on the deployment's database."""
        return self.deployment.manage("shell", "-c", code, timeout=timeout)


class Console:
    """Errors the page reported (console errors, uncaught exceptions, failed requests)."""

    def __init__(self, page):
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))


# The session cookies of each (site, user) this process logged in: a later page of the same
# user starts with them instead of the login form (Django's PBKDF2 check costs the server
# ~0.3 s of CPU a login, and the form a page load). The login form itself is driven by the
# tests of the login page. A session that no longer holds (a test logged out) is logged in again.
_SESSIONS: dict[tuple[str, str], list[dict]] = {}
SESSION_COOKIES = ("sessionid", "csrftoken")


def login(page, base_url: str, username: str = "alice", path: str = "/?agent=browser") -> None:
    """Open ``path`` as ``username`` (a chat page), logged in."""
    cookies = _SESSIONS.get((base_url, username))
    if cookies:
        page.context.add_cookies(cookies)
    page.goto(base_url + path)
    form = page.locator("#id_username").count() > 0  # no session yet, or it ended
    if form:
        page.fill("#id_username", username)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
    page.wait_for_selector("html[data-conversation-ready]")
    if form:
        _SESSIONS[(base_url, username)] = [c for c in page.context.cookies() if c["name"] in SESSION_COOKIES]


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


# How often the waits below check the page, in ms. Playwright's default checks on every
# animation frame, which keeps the renderer drawing 60 frames a second while a test waits.
POLL_MS = 100


def wait_idle(page, timeout: float = 30_000) -> None:
    """Until no run is active and the last answer is stored."""
    page.wait_for_function(
        "() => window.neta.store.connection.state === 'live' && !window.neta.store.running", timeout=timeout, polling=POLL_MS
    )


def open_steps(page, answer) -> None:
    """Open the steps box of ``answer`` (a ``.msg-assistant`` locator) once the run is over.

    The box is open while its answer is written and folds when the answer's text arrives,
    unless the reader opened or closed it: a click on its summary before the answer is there
    would close it for good, so this waits for the run to end and then opens it."""
    wait_idle(page)
    steps = answer.locator("details.steps")
    steps.evaluate("(el) => { el.open = true; }")
    steps.locator(".steps-body").wait_for(state="visible")


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
        polling=POLL_MS,
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
        polling=POLL_MS,
    )


# The contrast ratio of an element's text against what is behind it (WCAG).
CONTRAST = """(el) => {
  const rgb = (s) => s.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = null;
  for (let n = el; n && !bg; n = n.parentElement) {
    const c = rgb(getComputedStyle(n).backgroundColor);
    if (c.length < 4 || c[3] > 0.99) bg = c.slice(0, 3);
  }
  bg = bg ?? [255, 255, 255];
  let alpha = 1;
  for (let n = el; n; n = n.parentElement) alpha *= Number(getComputedStyle(n).opacity);
  const fg = rgb(getComputedStyle(el).color).slice(0, 3).map((c, i) => c * alpha + bg[i] * (1 - alpha));
  const [a, b] = [lum(fg), lum(bg)].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""
