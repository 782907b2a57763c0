"""The reader's language: API messages translated on request while codes and fields stay,
the user's setting (cookie at sign-in and on change) over the browser's, the chat page's
catalog, Chinese content searched and answered in Chinese."""

from __future__ import annotations

import io

import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.test import Client

from runtime.agents.bootstrap import DEMO_RULES
from runtime.gateway.consumers import scope_language
from runtime.models import ModelConfig, UserSettings
from runtime.realtime.sinks import InMemorySink
from runtime.runs.prompts import session_prompt
from runtime.runs.turn import execute_run
from runtime.sessions.services import session_start
from sessions_tree.providers import get_provider
from tests.support.builders import assert_error
from tests.support.entries import assistant_message, user_message

ZH = {"HTTP_ACCEPT_LANGUAGE": "zh-CN,zh;q=0.9,en;q=0.5"}


def test_an_api_error_keeps_its_code_and_field_and_translates_only_its_message(client_for):
    client = client_for("owner")
    body = {"customInstructions": "x" * 5000}
    english = assert_error(client.put("/api/me/settings/", body, format="json"), 400, "invalid", "customInstructions")
    chinese = assert_error(client.put("/api/me/settings/", body, format="json", **ZH), 400, "invalid", "customInstructions")
    assert set(english["fields"]) == set(chinese["fields"]) == {"customInstructions"}
    assert "characters" in english["message"] and "字符" in chinese["message"]
    # Django REST framework's own messages come translated too, with Neta's codes.
    anonymous = client_for("anonymous")
    assert assert_error(anonymous.get("/api/sessions/"), 401, "not_authenticated")["message"].startswith("Authentication")
    message = assert_error(anonymous.get("/api/sessions/", **ZH), 401, "not_authenticated")["message"]
    assert "认证" in message
    # Neta's own: an unknown path.
    assert "没有 API 端点" in assert_error(client.get("/api/no-such-thing/", **ZH), 404, "not_found")["message"]
    response = client.get("/api/no-such-thing/", **ZH)
    assert response["Content-Language"] == "zh-hans"


def test_the_users_setting_wins_over_the_browser_and_reaches_the_cookie_at_sign_in(owner, agent):
    client = Client()
    client.force_login(owner)
    page = client.get("/", **ZH)
    assert page.status_code == 200
    assert b'<html lang="zh-hans"' in page.content and "正在加载对话" in page.content.decode()
    english = client.get("/")
    assert b'<html lang="en"' in english.content and b'"catalog": {}' in english.content

    # The switcher: the setting is kept and the cookie set; an outside `next` is ignored.
    answer = client.post("/language/", {"language": "en", "next": "https://elsewhere.example/"}, **ZH)
    assert answer.status_code == 302 and answer["Location"] == "/"
    assert UserSettings.objects.get(user=owner).language == "en"
    assert answer.cookies[settings.LANGUAGE_COOKIE_NAME].value == "en"
    assert b'<html lang="en"' in client.get("/", **ZH).content  # the cookie beats Accept-Language
    refused = client.post("/language/", {"language": "klingon", "next": "/"})
    assert refused.status_code == 302 and UserSettings.objects.get(user=owner).language == "en"

    # Another browser: signing in brings the setting along.
    owner.set_password("pw-for-language")
    owner.save()
    fresh = Client()
    signed_in = fresh.post("/login/", {"username": owner.username, "password": "pw-for-language"}, **ZH)
    assert signed_in.status_code == 302
    assert signed_in.cookies[settings.LANGUAGE_COOKIE_NAME].value == "en"
    # "" (the browser's language) removes it again.
    back = fresh.post("/language/", {"language": "", "next": "/"})
    assert back.cookies[settings.LANGUAGE_COOKIE_NAME].value == ""
    assert UserSettings.objects.get(user=owner).language == ""
    assert fresh.get("/api/me/settings/").json()["language"] == ""


def test_the_login_page_and_the_console_speak_the_browsers_language(client_for, staff):
    login = Client().get("/login/", **ZH)
    text = login.content.decode()
    assert "登录后即可与你的智能体对话" in text and 'name="language"' in text
    console = Client()
    console.force_login(staff)
    overview = console.get("/admin/", **ZH).content.decode()
    assert "健康状况" in overview and "最近 24 小时的运行" in overview
    assert "Health:" in console.get("/admin/").content.decode()


def test_chinese_text_is_found_by_search_in_both_stores(client_for, owner, agent):
    file_session = session_start(agent=agent, user=owner)
    get_provider("file").append_message(file_session.session_id, user_message("怎么修剪榅桲树？"))
    agent.session_provider = "mysql"
    agent.save()
    rows = session_start(agent=agent, user=owner)
    get_provider("mysql").append_message(rows.session_id, user_message("你好"))
    get_provider("mysql").append_message(rows.session_id, assistant_message("冬末修剪榅桲树最好。"))
    found = client_for("owner").get("/api/sessions/search/", {"q": "榅桲树"}).json()["results"]
    assert {h["session"]["sessionId"] for h in found} == {file_session.session_id, rows.session_id}
    assert all("榅桲树" in h["snippet"] for h in found)


def test_the_demo_model_answers_a_chinese_prompt_in_chinese(owner, agent):
    ModelConfig.objects.filter(pk=agent.model_id).update(options={"rules": DEMO_RULES, "delay_ms": 0})
    sid = session_start(agent=agent, user=owner).session_id
    run = session_prompt(session_id=sid, text="我的工作区里有什么？", actor=owner, dispatch=False).run
    assert execute_run(run.run_id, sink=InMemorySink()).status == "completed"
    answers = [e["message"] for e in get_provider("file").get_active_path(sid) if e.get("type") == "message" and e["message"]["role"] == "assistant"]
    tools = [b["name"] for m in answers for b in m["content"] if b.get("type") == "toolCall"]
    final = "".join(b.get("text", "") for b in answers[-1]["content"] if b.get("type") == "text")
    assert tools == ["ls"] and "刚才发生了什么" in final and "我的工作区里有什么？" in final


def test_a_socket_speaks_the_language_its_handshake_asks_for():
    assert scope_language({"headers": [(b"accept-language", b"zh-CN,zh;q=0.9,en;q=0.5")]}) == "zh-hans"
    assert scope_language({"headers": [(b"cookie", b"csrftoken=x; django_language=en"), (b"accept-language", b"zh-CN")]}) == "en"
    assert scope_language({"headers": [(b"cookie", b"django_language=klingon"), (b"accept-language", b"fr, zh-TW;q=0.5")]}) == "zh-hans"
    assert scope_language({"headers": []}) == "en"


def test_the_chat_command_speaks_the_terminals_language(owner, agent, monkeypatch):
    ModelConfig.objects.filter(pk=agent.model_id).update(options={"rules": DEMO_RULES, "delay_ms": 0})
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    out = io.StringIO()
    call_command("chat", "--no-color", "我的工作区里有什么？", stdout=out)
    text = out.getvalue()
    assert "刚才发生了什么" in text and "会话 " in text and "工作区 " in text
    with pytest.raises(CommandError, match="没有名为 'nobody' 的已启用智能体"):
        call_command("chat", "--agent", "nobody", "x", stdout=io.StringIO())
    monkeypatch.setenv("LANG", "C.UTF-8")
    with pytest.raises(CommandError, match="no enabled agent named 'nobody'"):
        call_command("chat", "--agent", "nobody", "x", stdout=io.StringIO())
