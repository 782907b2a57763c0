"""The chat page and the console read in Chinese (a browser asking for zh-CN), and switched
to English in the page. One page session on the shared browser deployment, with an agent of
its own on the offline demo model (which answers Chinese in Chinese): the sign-in, the first
screen, a turn with tools, a plan, a question answered, a phone's width, the switch to
English and back; then five console pages as a staff account. Screenshots at 1440 and 390
(``i18n-zh-*``: docs/screenshots/ with NETA_WRITE_DOC_SCREENSHOTS=1)."""

from __future__ import annotations

import pytest

from tests.support.browser import PASSWORD, Console, answered, send, shot, wait_idle

pytestmark = pytest.mark.slow

SETUP = f"""
from django.contrib.auth import get_user_model
from runtime.models import Agent, ModelConfig, UserSettings
U = get_user_model()
if not U.objects.filter(username="zh-operator").exists():
    U.objects.create_superuser("zh-operator", "zh@example.com", {PASSWORD!r})
UserSettings.objects.filter(user__username__in=["alice", "zh-operator"]).update(language="")
model, _ = ModelConfig.objects.update_or_create(name="zh-demo", defaults=dict(
    display_name="Demo (zh)", provider_kind="scripted", provider_name="scripted", model_id="zh-demo",
    context_window=64000, max_output_tokens=4096, options={{"rules": "runtime/llm/scripted_demo.yaml", "delay_ms": 0}}))
Agent.objects.update_or_create(name="zh-demo", defaults=dict(model=model, workspace_mode="shared",
    restore_last_session=False, description="用中文演示的智能体",
    subagent_policy={{"enabled": True, "agents": ["default"], "child_budget": {{"idle_seconds": 60}}}}))
"""


def no_sideways_scroll(page) -> None:
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth + 1"), "the page scrolls sideways"


def test_the_chat_page_and_the_console_in_chinese_and_switched_to_english(browser, server, artifacts):
    server.python(SETUP)
    context = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.set_default_timeout(30_000)
    console = Console(page)

    # Sign in: the first screen a Chinese reader sees.
    page.goto(server.base_url + "/?agent=zh-demo")
    assert page.get_attribute("html", "lang") == "zh-hans"
    assert page.inner_text("button[type=submit]") == "登录"
    page.fill("#id_username", "alice")
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_selector("html[data-conversation-ready]")
    page.wait_for_selector(".first-screen")
    assert "你能做什么？" in page.inner_text(".starters")
    assert page.get_attribute("#composer-input", "placeholder").startswith("给智能体发消息")
    assert page.inner_text(".composer button[type=submit]") == "发送"
    shot(page, artifacts, "i18n-zh-first-screen", "i18n-zh-first-screen")

    # A turn with a tool: the demo answers in Chinese, the page's chrome is Chinese, the
    # content stays as written.
    send(page, "我的工作区里有什么？")
    answered(page, "我的工作区里有什么？", "刚才发生了什么", timeout=60_000)
    turn = page.locator(".msg-turn").last
    assert "个步骤" in turn.locator(".steps-title").inner_text()
    assert turn.locator("button", has_text="从这里继续").count() == 1
    assert page.locator(".msg-user").last.inner_text().strip().startswith("我的工作区里有什么？")

    # Two subagents (real child processes), a plan, then a question answered: the panels
    # speak Chinese too.
    send(page, "委派两个子智能体看看工作区")
    answered(page, "委派两个子智能体看看工作区", "子智能体的发现", timeout=90_000)
    panel = page.locator(".subagent-panel").last
    assert "子智能体（并行）" in panel.inner_text() and "2 个子智能体" in panel.inner_text()
    shot(page, artifacts, "i18n-zh-subagents", "i18n-zh-subagents")
    send(page, "帮我规划一个小任务")
    answered(page, "帮我规划一个小任务", "完成", timeout=60_000)
    assert "计划" in page.inner_text(".msg-turn >> nth=-1")
    send(page, "先问我摘要的形式")
    page.wait_for_selector(".clarify-panel")
    assert "等你回答" in page.inner_text(".clarify-panel")
    assert "等你回答" in page.inner_text(".status-bar")
    shot(page, artifacts, "i18n-zh-question", "i18n-zh-question")
    page.click(".clarify-panel button:has-text('要点列表')")
    answered(page, "先问我摘要的形式", "谢谢", timeout=60_000)
    wait_idle(page)
    no_sideways_scroll(page)
    shot(page, artifacts, "i18n-zh-turn", "i18n-zh-turn")

    # A phone's width: nothing overflows with the Chinese words.
    page.set_viewport_size({"width": 390, "height": 844})
    page.wait_for_function("() => window.innerWidth === 390")
    for close in (".tree-sidebar .drawer-close", ".session-list .drawer-close"):  # the drawers left open at desktop width
        if page.locator(close).is_visible():
            page.click(close)
    page.wait_for_selector(".drawer-backdrop", state="detached")
    no_sideways_scroll(page)
    shot(page, artifacts, "i18n-zh-phone", "i18n-zh-phone")
    page.set_viewport_size({"width": 1440, "height": 900})

    # The switch to English in Settings: the page comes back in English, and stays so.
    page.click(".settings-button")
    page.wait_for_selector(".settings-dialog select[name=language]")
    assert page.inner_text("#settings-title") == "设置"
    with page.expect_navigation():
        page.select_option(".settings-dialog select[name=language]", "en")
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.get_attribute("html", "lang") == "en"
    assert page.inner_text(".composer button[type=submit]") == "Send"
    page.reload()
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.get_attribute("html", "lang") == "en"
    assert "我的工作区里有什么？" in page.inner_text(".conversation")  # what was written stays as written
    # Back to the browser's language (no setting left behind for the other tests alice signs in to).
    page.click(".settings-button")
    with page.expect_navigation():
        page.select_option(".settings-dialog select[name=language]", "")
    page.wait_for_selector("html[data-conversation-ready]")
    assert page.get_attribute("html", "lang") == "zh-hans"
    session_id = page.evaluate("() => window.neta.data.sessionId")

    # The console as a staff account reading Chinese: five pages.
    staff = browser.new_context(viewport={"width": 1440, "height": 900}, locale="zh-CN")
    desk = staff.new_page()
    desk.set_default_timeout(30_000)
    desk_console = Console(desk)
    desk.goto(server.base_url + "/admin/")
    desk.fill("#id_username", "zh-operator")
    desk.fill("#id_password", PASSWORD)
    desk.click("input[type=submit]")
    desk.wait_for_selector("#health")
    assert "健康状况" in desk.inner_text("#health h2") and "数据库" in desk.inner_text("#health")
    assert "概览" in desk.inner_text(".console-nav")
    shot(desk, artifacts, "i18n-zh-console-overview", "i18n-zh-console-overview")
    pages = {
        "/admin/console/tools/": "注册表中的每个工具",
        "/admin/console/access/": "谁可以使用各个智能体",
        f"/admin/sessions_tree/agentsession/{session_id}/change/": "叶节点处的上下文",
        "/admin/runtime/agentrun/": "运行",
    }
    for path, words in pages.items():
        desk.goto(server.base_url + path)
        assert words in desk.inner_text("#content"), path
        no_sideways_scroll(desk)
    shot(desk, artifacts, "i18n-zh-console-runs", "i18n-zh-console-runs")
    # The console's switcher: English for this staff account.
    with desk.expect_navigation():
        desk.select_option("#user-tools select[name=language]", "en")
    assert "Runs" in desk.inner_text("#content h1") and desk.get_attribute("html", "lang") == "en"
    with desk.expect_navigation():
        desk.select_option("#user-tools select[name=language]", "")
    staff.close()
    context.close()
    assert console.errors == [], console.errors
    assert desk_console.errors == [], desk_console.errors
