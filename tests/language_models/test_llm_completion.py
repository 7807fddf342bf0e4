"""Every LLM call goes through llm_complete: answers and failures come back in Gatehouse's own terms.

The calls run litellm's real code path with its ``mock_response`` (the LLM_MOCK_RESPONSES_FILE test
hook), so no network is used; scripted litellm exceptions exercise the error translation.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import pytest

from core.errors import (
    GatehouseError,
    NotReady,
    Timeout,
    Unavailable,
    UpstreamFailed,
    UpstreamNotFound,
    UpstreamRateLimited,
    UpstreamRefused,
    UpstreamRejectedRequest,
)
from language_models.completion import (
    LLM_CONTEXT_TOO_LONG,
    LLM_EMPTY_ANSWER,
    LLM_ENVIRONMENT_KEY_REFUSED,
    LLM_MODEL_NOT_FOUND,
    LLM_PAYMENT_REQUIRED,
    LLM_PERMISSION_DENIED,
    LLM_PROVIDER_FAILED,
    LLM_RATE_LIMITED,
    LLM_REQUEST_REJECTED,
    LLM_STORED_KEY_REFUSED,
    LLM_TIMED_OUT,
    LLM_UNREACHABLE,
    Completion,
    llm_complete,
)
from language_models.model_checks import MODEL_STRING_UNKNOWN_PROVIDER, ModelStringInvalid
from language_models.scripted import MOCK_SCRIPT_LACKS_PURPOSE, LlmMockScriptError
from language_models.selectors import ModelConfig
from tests.e2e.harness import free_port
from tests.support.python_process import python_run

API_KEY = "sk-test-never-shown-0123456789"
MESSAGES = [{"role": "user", "content": "How many orders were placed in March?"}]


def _config(**overrides: object) -> ModelConfig:
    values: dict[str, object] = {
        "model": "openai/gpt-4o-mini",
        "api_key": API_KEY,
        "api_base": None,
        "temperature": 0.0,
        "max_output_tokens": 200,
        "timeout_seconds": 10.0,
        **overrides,
    }
    return ModelConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def script(tmp_path, settings):
    """Writes the mock script the calls answer from; returns its path."""
    path = tmp_path / "llm-script.json"
    settings.GATEHOUSE = {**settings.GATEHOUSE, "LLM_MOCK_RESPONSES_FILE": str(path)}

    def write(responses: dict[str, object], delays: dict[str, float] | None = None) -> Path:
        path.write_text(json.dumps({"responses": responses, "delaySeconds": delays or {}}))
        return path

    return write


async def test_a_scripted_answer_comes_back_as_a_completion(script):
    script({"sql": "SELECT count(*) FROM orders"})

    completion = await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")

    assert isinstance(completion, Completion)
    assert completion.text == "SELECT count(*) FROM orders"
    assert completion.model == "openai/gpt-4o-mini"
    assert completion.prompt_tokens > 0
    assert completion.completion_tokens > 0


async def test_a_plain_answer_is_given_to_every_call(script):
    script({"answer": "42 orders."})

    texts = [
        (await llm_complete(config=_config(), messages=MESSAGES, purpose="answer")).text for _ in range(3)
    ]

    assert texts == ["42 orders."] * 3


async def test_a_list_is_consumed_in_order_and_its_last_item_answers_for_ever(script):
    path = script({"sql": ["first", "second", "last"], "answer": "untouched"})

    texts = [(await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")).text for _ in range(5)]

    assert texts == ["first", "second", "last", "last", "last"]
    assert json.loads(path.read_text())["responses"] == {"sql": ["last"], "answer": "untouched"}


async def test_each_purpose_has_its_own_list(script):
    script({"sql": ["s1", "s2"], "answer": ["a1", "a2"]})

    order = ["sql", "answer", "answer", "sql"]
    texts = [(await llm_complete(config=_config(), messages=MESSAGES, purpose=p)).text for p in order]

    assert texts == ["s1", "a1", "a2", "s2"]


async def test_a_purpose_missing_from_the_script_is_an_error_that_says_so(script):
    path = script({"sql": "SELECT 1"})

    with pytest.raises(LlmMockScriptError) as raised:
        await llm_complete(config=_config(), messages=MESSAGES, purpose="answer")

    assert isinstance(raised.value, GatehouseError)
    assert raised.value.message == MOCK_SCRIPT_LACKS_PURPOSE.format(path=path, purpose="answer")


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param([], id="empty-list"),
        pytest.param(7, id="number"),
        pytest.param({"error": "NoSuchError"}, id="unknown-error"),
        pytest.param({"text": "hello"}, id="object-without-error"),
    ],
)
async def test_a_malformed_script_entry_is_refused(script, entry):
    script({"sql": entry})

    with pytest.raises(LlmMockScriptError, match="invalid response for the purpose 'sql'"):
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")


async def test_an_unreadable_script_is_refused(script):
    script({}).write_text("{not json")

    with pytest.raises(LlmMockScriptError, match="cannot be read"):
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")


async def test_a_scripted_delay_is_waited_for(script):
    script({"sql": "SELECT 1"}, delays={"sql": 0.4})

    started = time.monotonic()
    await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")

    assert time.monotonic() - started >= 0.4


async def test_a_model_slower_than_its_timeout_is_stopped_with_a_timeout(script):
    script({"sql": "SELECT 1"}, delays={"sql": 60})

    started = time.monotonic()
    with pytest.raises(Timeout) as raised:
        await llm_complete(config=_config(timeout_seconds=0.3), messages=MESSAGES, purpose="sql")

    # Stopped long before the model would have answered; the margin covers litellm's first import
    # (seconds on a busy machine), which the timeout does not include.
    assert time.monotonic() - started < 30
    assert raised.value.message == LLM_TIMED_OUT.format(model="openai/gpt-4o-mini", seconds=0.3)
    assert raised.value.data == {"reason": "llm_timeout", "timeoutSeconds": 0.3}
    assert raised.value.jsonrpc_code == -32004


# Each litellm exception, raised by litellm itself through mock_response: what an operator must fix
# is NotReady (-32003), what may pass is Unavailable (-32005); each subclass also names the REST
# API's status (core.errors: 400, 404, 429, 502...). Subclasses before their bases:
# ContextWindowExceededError and PaymentRequiredError are BadRequestErrors.
@pytest.mark.parametrize(
    ("litellm_error", "expected", "message", "reason"),
    [
        ("AuthenticationError", UpstreamRefused, LLM_STORED_KEY_REFUSED, "llm_credentials_refused"),
        ("PermissionDeniedError", UpstreamRefused, LLM_PERMISSION_DENIED, "llm_permission_denied"),
        ("NotFoundError", UpstreamNotFound, LLM_MODEL_NOT_FOUND, "llm_model_not_found"),
        (
            "ContextWindowExceededError",
            UpstreamRejectedRequest,
            LLM_CONTEXT_TOO_LONG,
            "llm_context_window_exceeded",
        ),
        ("PaymentRequiredError", UpstreamRefused, LLM_PAYMENT_REQUIRED, "llm_payment_required"),
        ("BadRequestError", UpstreamRejectedRequest, LLM_REQUEST_REJECTED, "llm_request_rejected"),
        ("RateLimitError", UpstreamRateLimited, LLM_RATE_LIMITED, "llm_rate_limited"),
        ("APIConnectionError", Unavailable, LLM_UNREACHABLE, "llm_unreachable"),
        ("ServiceUnavailableError", Unavailable, LLM_PROVIDER_FAILED, "llm_provider_failed"),
        ("InternalServerError", UpstreamFailed, LLM_PROVIDER_FAILED, "llm_provider_failed"),
        ("BadGatewayError", UpstreamFailed, LLM_PROVIDER_FAILED, "llm_provider_failed"),
        ("APIError", UpstreamFailed, LLM_PROVIDER_FAILED, "llm_provider_failed"),
    ],
)
async def test_each_provider_failure_has_its_own_message_and_reason(
    script, litellm_error, expected, message, reason
):
    script({"sql": {"error": litellm_error}})

    with pytest.raises(expected) as raised:
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")

    assert type(raised.value) is expected
    assert raised.value.message == message.format(model="openai/gpt-4o-mini")
    expected_data = {"reason": reason}
    if expected is UpstreamRateLimited:
        # No provider answered, so no Retry-After of its own: the default wait.
        expected_data["retryAfterSeconds"] = 30
    assert raised.value.data == expected_data
    assert raised.value.jsonrpc_code == (-32003 if issubclass(expected, NotReady) else -32005)
    # Never the provider's own text, which the scripted exception carries.
    assert "scripted" not in raised.value.message


@pytest.mark.parametrize("model", ["openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-20241022"])
async def test_a_provider_nobody_answers_at_is_unreachable_not_a_provider_error(model):
    """Shown failing before: litellm reports the refused connection as a 500 InternalServerError
    for these providers, which became 502 provider_error; the docs promise 503 unavailable."""
    config = _config(model=model, api_base=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(Unavailable) as raised:
        await llm_complete(config=config, messages=MESSAGES, purpose="sql")
    assert type(raised.value) is Unavailable
    assert raised.value.http_status == 503
    assert raised.value.data == {"reason": "llm_unreachable"}


async def test_a_provider_timeout_becomes_a_timeout(script):
    script({"sql": {"error": "Timeout"}})

    with pytest.raises(Timeout) as raised:
        await llm_complete(config=_config(timeout_seconds=45), messages=MESSAGES, purpose="sql")

    assert raised.value.data == {"reason": "llm_timeout", "timeoutSeconds": 45}


async def test_a_refused_stored_key_sends_the_operator_to_the_admin(script):
    script({"sql": {"error": "AuthenticationError"}})

    with pytest.raises(NotReady, match="An operator must enter a valid one in the admin"):
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")


async def test_a_refused_key_from_the_environment_says_it_came_from_there(script):
    script({"sql": {"error": "AuthenticationError"}})

    with pytest.raises(NotReady) as raised:
        await llm_complete(config=_config(api_key=None), messages=MESSAGES, purpose="sql")

    assert raised.value.message == LLM_ENVIRONMENT_KEY_REFUSED.format(model="openai/gpt-4o-mini")


async def test_a_model_string_naming_no_provider_is_named_in_the_message(script):
    script({"sql": "SELECT 1"})

    with pytest.raises(ModelStringInvalid) as raised:
        await llm_complete(config=_config(model="nonsense/model-x"), messages=MESSAGES, purpose="sql")

    assert raised.value.message == MODEL_STRING_UNKNOWN_PROVIDER.format(model="'nonsense/model-x'", hint="")
    assert raised.value.data == {"reason": "llm_invalid_model"}
    assert raised.value.jsonrpc_code == -32003


async def test_an_empty_answer_is_unavailable(script):
    script({"sql": ""})

    with pytest.raises(Unavailable) as raised:
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")

    assert raised.value.message == LLM_EMPTY_ANSWER.format(model="openai/gpt-4o-mini")


async def test_a_call_is_logged_with_model_purpose_tokens_and_duration(script, caplog):
    script({"answer": "42 orders."})

    with caplog.at_level(logging.INFO, logger="language_models.completion"):
        completion = await llm_complete(config=_config(), messages=MESSAGES, purpose="answer")

    [record] = [r for r in caplog.records if getattr(r, "event", None) == "llm.completed"]
    assert record.levelno == logging.INFO
    assert (record.model, record.purpose) == ("openai/gpt-4o-mini", "answer")
    assert record.prompt_tokens == completion.prompt_tokens
    assert record.completion_tokens == completion.completion_tokens
    assert record.duration_ms >= 0


@pytest.mark.parametrize("litellm_error", ["AuthenticationError", "BadRequestError", "APIError"])
async def test_the_api_key_is_in_no_message_and_no_log_line(script, caplog, litellm_error):
    script({"sql": {"error": litellm_error}})

    with caplog.at_level(logging.DEBUG), pytest.raises(GatehouseError) as raised:
        await llm_complete(config=_config(), messages=MESSAGES, purpose="sql")

    assert API_KEY not in raised.value.message
    assert API_KEY not in json.dumps(raised.value.data)
    assert caplog.records, "the failure is logged"
    assert API_KEY not in caplog.text
    assert API_KEY not in repr(_config())


# A fresh process, where litellm is not imported yet. An audit hook notes the thread that starts
# importing it, and a heartbeat task counts the loop's turns while that import is under way: on the loop, the
# import would leave it no turn at all.
_IMPORT_PROBE = """
import asyncio, json, sys, threading
imported_on = []

def on_audit(event, args):
    # importlib.import_module raises no audit event, but the package's own imports do.
    if event == "import" and args[0].partition(".")[0] == "litellm" and not imported_on:
        imported_on.append(threading.get_ident())

sys.addaudithook(on_audit)
import django
django.setup()
assert "litellm" not in sys.modules
from language_models import completion
from language_models.completion import llm_complete
from language_models.selectors import ModelConfig

async def main():
    turns, stop = 0, asyncio.Event()
    async def heartbeat():
        nonlocal turns
        while not stop.is_set():
            await asyncio.sleep(0.01)
            if imported_on and completion._litellm is None:
                turns += 1
    beating = asyncio.create_task(heartbeat())
    config = ModelConfig(model="openai/gpt-4o-mini", api_key=None, api_base=None, temperature=0.0,
                         max_output_tokens=10, timeout_seconds=30.0)
    first, second = await asyncio.gather(
        llm_complete(config=config, messages=[{"role": "user", "content": "hi"}], purpose="sql"),
        llm_complete(config=config, messages=[{"role": "user", "content": "hi"}], purpose="sql"),
    )
    stop.set()
    await beating
    print(json.dumps({"texts": [first.text, second.text], "loop_thread": threading.get_ident(),
                      "imported_on": imported_on, "turns_while_importing": turns}))

asyncio.run(main())
"""


def test_the_first_call_imports_litellm_without_stalling_the_event_loop(tmp_path):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"responses": {"sql": "SELECT 1"}}))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "import-probe",
        "LLM_MOCK_RESPONSES_FILE": str(path),
        "LOG_LEVEL": "ERROR",
    }
    result = python_run(["-c", _IMPORT_PROBE], env)

    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["texts"] == ["SELECT 1", "SELECT 1"]
    # Imported for both calls on a thread that is not the loop's.
    [importer] = report["imported_on"]
    assert importer != report["loop_thread"], report
    # The import takes seconds, and parts of it hold the GIL for a while (measured up to 0.4 s), so
    # the loop turns less often than every 10 ms; but it turns. How often depends on the machine's
    # load, hence no more than a few turns are asked for.
    assert report["turns_while_importing"] >= 3, report


_LOADED_PROBE = """
import sys
import django
django.setup()
import config.asgi, config.urls, data_agent.ask_pipeline, language_models.completion
print("language_models.scripted" in sys.modules)
"""


def test_the_script_player_is_not_loaded_by_a_server_without_a_script():
    env = {
        **{key: value for key, value in os.environ.items() if key != "LLM_MOCK_RESPONSES_FILE"},
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "SECRET_KEY": "import-probe",
        "LOG_LEVEL": "ERROR",
    }
    result = python_run(["-c", _LOADED_PROBE], env)

    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "False"


async def test_calls_and_tokens_are_counted_for_metrics(script):
    from language_models.metrics import LLM_CALLS, LLM_TOKENS

    def sample(metric, name: str, **labels: str) -> float:
        # The counters themselves: the registry's collectors include a database read, not for async code.
        wanted = {"model": "openai/gpt-4o-mini", "purpose": "metered", **labels}
        values = [
            s.value for m in metric.collect() for s in m.samples if s.name == name and s.labels == wanted
        ]
        return values[0] if values else 0.0

    calls = "gatehouse_llm_calls_total"
    before_ok, before_error = (
        sample(LLM_CALLS, calls, outcome="ok"),
        sample(LLM_CALLS, calls, outcome="error"),
    )
    before_prompt = sample(LLM_TOKENS, "gatehouse_llm_tokens_total", direction="prompt")
    script({"metered": ["fine", {"error": "RateLimitError"}]})

    completion = await llm_complete(config=_config(), messages=MESSAGES, purpose="metered")
    with pytest.raises(Unavailable):
        await llm_complete(config=_config(), messages=MESSAGES, purpose="metered")

    assert sample(LLM_CALLS, calls, outcome="ok") == before_ok + 1
    assert sample(LLM_CALLS, calls, outcome="error") == before_error + 1
    after_prompt = sample(LLM_TOKENS, "gatehouse_llm_tokens_total", direction="prompt")
    assert after_prompt == before_prompt + completion.prompt_tokens
