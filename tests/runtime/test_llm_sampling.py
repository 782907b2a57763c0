"""Sampling parameters an OpenAI client sends (``LlmRequest.sampling``) reach the provider that
takes them, through the official SDKs to local wire servers, and are left out where the
provider would refuse them (runtime/llm/sampling.py)."""

from __future__ import annotations

from runtime.llm import complete
from runtime.llm.sampling import capped_max_tokens

from tests.support.wire_servers import Reply, ask, serve, wire_spec

openai_server, _clean_openai = serve("openai", "openai_server")
anthropic_server, _clean_anthropic = serve("anthropic", "anthropic_server")
responses_server, _clean_responses = serve("openai-responses", "responses_server")

TEXT = {"type": "text", "text": "ok"}
ASKED = {"temperature": 1.4, "top_p": 0.5, "stop": ["END"], "seed": 7, "presence_penalty": 0.1, "frequency_penalty": 0.2}
KEYS = ("temperature", "top_p", "stop", "stop_sequences", "seed", "presence_penalty", "frequency_penalty")


def sent(server, spec, **request) -> dict:
    server.script(Reply([TEXT]))
    complete(spec, ask(**request))
    (recorded,) = server.requests
    return {k: recorded.body[k] for k in KEYS if k in recorded.body}


def test_openai_chat_completions_takes_them_all(openai_server):
    spec = wire_spec(openai_server, {"provider_kind": "openai", "model_id": "gpt-test", "provider_name": "openai", "api_key": "k"}, {})
    assert sent(openai_server, spec, sampling=ASKED) == ASKED


def test_an_openai_model_that_thinks_gets_no_temperature_top_p_or_penalties(openai_server):
    spec = wire_spec(
        openai_server,
        {"provider_kind": "openai", "model_id": "o-test", "provider_name": "openai", "api_key": "k", "supports_thinking": True},
        {},
    )
    assert sent(openai_server, spec, sampling=ASKED) == {"stop": ["END"], "seed": 7}


def test_anthropic_takes_the_stop_sequences_only(anthropic_server):
    # The Messages API of the anthropic SDK in use has no temperature or top_p.
    spec = wire_spec(anthropic_server, {"provider_kind": "anthropic", "model_id": "claude-test", "provider_name": "anthropic", "api_key": "k"}, {})
    assert sent(anthropic_server, spec, sampling=ASKED) == {"stop_sequences": ["END"]}


def test_openai_responses_takes_temperature_and_top_p(responses_server):
    spec = wire_spec(
        responses_server, {"provider_kind": "openai-responses", "model_id": "gpt-test", "provider_name": "openai", "api_key": "k"}, {}
    )
    assert sent(responses_server, spec, sampling=ASKED) == {"temperature": 1.4, "top_p": 0.5}


def test_no_sampling_sends_nothing_extra(openai_server):
    spec = wire_spec(openai_server, {"provider_kind": "openai", "model_id": "gpt-test", "provider_name": "openai", "api_key": "k"}, {})
    assert sent(openai_server, spec) == {}


def test_max_tokens_is_capped_by_the_model():
    assert capped_max_tokens(8192, {"max_tokens": 100}) == 100
    assert capped_max_tokens(8192, {"max_tokens": 100_000}) == 8192
    assert capped_max_tokens(8192, {}) == 8192
    assert capped_max_tokens(8192, {"max_tokens": True}) == 8192
