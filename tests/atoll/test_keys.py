"""Where a provider key may go (atoll.llm.endpoints), enforced on every call through litellm's
real provider code: an endpoint the operator did not list never receives the service's key,
not through ``api_base``, ``extra_args`` (fallbacks, base_url, headers…) or a secret bound
elsewhere. The scripted server plays the submitter's own endpoint and records what it got."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from atoll.llm import CostLedger, Endpoint, ModelError, ModelErrorKind, ProviderLimiter, RetryPolicy, complete
from atoll.llm.endpoints import KeyPolicy, forget_trusted_endpoints, parse_endpoint, redact
from atoll.testing.scripted_llm import ScriptedLLM, refused_api_base

ENV_KEY = "sk-ENV-CANARY-7d1f0c"
SECRET = "sk-SECRET-CANARY-4b2e9a"
OK = {"content": "fine"}
MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture(autouse=True)
def service_keys(monkeypatch):
    """A service holding provider keys in its environment, as a shared worker does."""
    forget_trusted_endpoints()
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "XAI_API_KEY", "MOONSHOT_API_KEY"):
        monkeypatch.setenv(name, ENV_KEY)
    for name in (
        "ATOLL_KEY_ENDPOINTS",
        "ATOLL_API_BASE",
        "ATOLL_JUDGE_API_BASE",
        "ATOLL_MODEL",
        "ATOLL_JUDGE_MODEL",
        "ATOLL_SECRETS_DIR",
    ):
        monkeypatch.delenv(name, raising=False)
    yield
    forget_trusted_endpoints()


async def call(endpoint: Endpoint, **options):
    options.setdefault("retry", RetryPolicy(max_retries=0))
    options.setdefault("limiter", ProviderLimiter())
    options.setdefault("ledger", CostLedger())
    return await complete(endpoint, MESSAGES, **options)


def authorizations(llm: ScriptedLLM) -> list[str]:
    return [headers.get("authorization", "") for headers in llm.request_headers]


class CatchAll:
    """Any-path HTTP server that records every request's path and headers (answers 500):
    a submitter's endpoint for providers the scripted server does not speak."""

    def __init__(self) -> None:
        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                seen.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> CatchAll:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def leaked(self) -> bool:
        return any(
            ENV_KEY in value or SECRET in value for _, headers in self.seen for value in headers.values()
        )


# --- the environment's key ---------------------------------------------------------------------


async def test_an_unlisted_endpoint_gets_a_placeholder_never_the_environments_key():
    with ScriptedLLM([OK]) as submitter:
        done = await call(Endpoint("openai/x", submitter.api_base))
    assert done.text == "fine"
    assert authorizations(submitter) == ["Bearer none"]


async def test_an_endpoint_the_operator_lists_gets_the_key(monkeypatch):
    with ScriptedLLM([OK]) as proxy:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={proxy.api_base}")
        await call(Endpoint("openai/x", proxy.api_base))
    assert authorizations(proxy) == [f"Bearer {ENV_KEY}"]


async def test_a_listed_endpoint_is_listed_for_its_provider_only(monkeypatch):
    with ScriptedLLM([OK]) as proxy:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"anthropic={proxy.url}")
        await call(Endpoint("openai/x", proxy.api_base))
    assert authorizations(proxy) == ["Bearer none"]


async def test_the_operators_api_base_gets_the_key_of_its_models_provider_only(monkeypatch):
    """ATOLL_API_BASE set for ATOLL_MODEL (a vLLM box serving openai/…) is trusted with the
    OpenAI key, never with the Anthropic key the same service holds."""
    with CatchAll() as vllm:
        monkeypatch.setenv("ATOLL_MODEL", "openai/local")
        monkeypatch.setenv("ATOLL_API_BASE", vllm.url)
        with pytest.raises(ModelError):
            await call(Endpoint("anthropic/claude-opus-4-5", vllm.url))
    assert vllm.seen and not vllm.leaked()
    with ScriptedLLM([OK]) as vllm:
        monkeypatch.setenv("ATOLL_API_BASE", vllm.api_base)
        await call(Endpoint("openai/local", vllm.api_base))
    assert authorizations(vllm) == [f"Bearer {ENV_KEY}"]


async def test_the_demos_judge_endpoint_gets_the_key_of_the_judges_provider_only(monkeypatch):
    """ATOLL_JUDGE_API_BASE, set for ATOLL_JUDGE_MODEL, is trusted with that model's provider's
    key and no other; without ATOLL_JUDGE_MODEL it is trusted with nothing."""
    with ScriptedLLM([OK]) as judge_box:
        monkeypatch.setenv("ATOLL_JUDGE_API_BASE", judge_box.api_base)
        await call(Endpoint("openai/judge", judge_box.api_base))
    assert authorizations(judge_box) == ["Bearer none"]  # no judge model named: the URL alone trusts nothing
    with CatchAll() as judge_box:
        monkeypatch.setenv("ATOLL_JUDGE_MODEL", "openai/judge")
        monkeypatch.setenv("ATOLL_JUDGE_API_BASE", judge_box.url)
        with pytest.raises(ModelError):
            await call(Endpoint("anthropic/claude-opus-4-5", judge_box.url))
    assert judge_box.seen and not judge_box.leaked()
    with ScriptedLLM([OK]) as judge_box:
        monkeypatch.setenv("ATOLL_JUDGE_API_BASE", judge_box.api_base)
        await call(Endpoint("openai/judge", judge_box.api_base))
    assert authorizations(judge_box) == [f"Bearer {ENV_KEY}"]


async def test_an_endpoint_trusted_for_one_model_is_not_trusted_for_another_provider():
    from atoll.llm.endpoints import trust_endpoints

    with CatchAll() as judge_box:
        trust_endpoints([("openai/judge", judge_box.url)])  # the grading service's own judge
        with pytest.raises(ModelError):
            await call(Endpoint("anthropic/claude-opus-4-5", judge_box.url))
    assert judge_box.seen and not judge_box.leaked()


@pytest.mark.parametrize(
    "model, path",
    [("anthropic/claude-opus-4-5", "/v1/messages"), ("gemini/gemini-3-flash", "generateContent")],
    ids=["anthropic", "gemini"],
)
async def test_other_providers_keys_stay_home_too(model, path):
    with CatchAll() as submitter:
        base = submitter.url if model.startswith("anthropic") else f"{submitter.url}/v1beta"
        with pytest.raises(ModelError):
            await call(Endpoint(model, base))
    assert submitter.seen and path in submitter.seen[0][0]  # the call went there…
    assert not submitter.leaked()  # …without the service's key (x-api-key, ?key=, Bearer)


async def test_a_provider_with_environment_credentials_is_not_called_off_the_list():
    with CatchAll() as submitter, pytest.raises(ModelError) as raised:
        await call(Endpoint("azure/gpt-4o", submitter.url))
    assert raised.value.kind is ModelErrorKind.configuration
    assert "ATOLL_KEY_ENDPOINTS" in str(raised.value) and submitter.seen == []


@pytest.mark.parametrize(
    "arguments",
    [
        lambda evil: {"fallbacks": [{"model": "openai/x", "api_base": evil}]},
        lambda evil: {"context_window_fallbacks": [{"model": "openai/x", "api_base": evil}]},
        lambda evil: {"api_base": evil},
        lambda evil: {"base_url": evil},
        lambda evil: {"api_key": ENV_KEY},
        lambda evil: {"extra_headers": {"Authorization": f"Bearer {ENV_KEY}"}},
        lambda evil: {"model_list": [{"model_name": "x", "litellm_params": {"api_base": evil}}]},
        lambda evil: {"custom_llm_provider": "openai"},
        lambda evil: {"mock_response": "fine"},
        lambda evil: {"extra_body": {"api_key": "sk-inline"}},
    ],
    ids=[
        "fallbacks",
        "context_window_fallbacks",
        "api_base",
        "base_url",
        "api_key",
        "extra_headers",
        "model_list",
        "custom_llm_provider",
        "mock_response",
        "extra_body.api_key",
    ],
)
async def test_arguments_that_could_move_a_key_are_refused_before_anything_is_sent(monkeypatch, arguments):
    with ScriptedLLM([{"status": 500}, OK]) as home, ScriptedLLM([OK]) as evil:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={home.api_base}")
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", home.api_base), arguments=arguments(evil.api_base))
        assert home.requests == [] and evil.requests == []
    assert raised.value.kind is ModelErrorKind.configuration
    assert "arguments." in str(raised.value)


async def test_generation_parameters_pass():
    with ScriptedLLM([OK]) as llm:
        arguments = {"temperature": 0.2, "top_p": 0.9, "seed": 7, "max_completion_tokens": 9, "stop": ["x"]}
        await call(Endpoint("openai/x", llm.api_base), arguments=arguments)
    assert {llm.requests[0][name] for name in ("temperature", "seed")} == {0.2, 7}


# --- keys named by settings and provisioned secrets --------------------------------------------


async def test_a_key_named_by_the_services_settings_goes_only_to_listed_endpoints(monkeypatch):
    monkeypatch.setenv("JUDGE_KEY", ENV_KEY)
    with ScriptedLLM([OK]) as listed, ScriptedLLM([OK]) as other:
        monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", f"openai={listed.api_base}")
        await call(Endpoint("openai/x", listed.api_base, key_env="JUDGE_KEY"))
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", other.api_base, key_env="JUDGE_KEY"))
    assert authorizations(listed) == [f"Bearer {ENV_KEY}"] and other.requests == []
    assert "$JUDGE_KEY" in str(raised.value)


async def test_a_provisioned_secret_goes_to_its_endpoint_and_nowhere_else(monkeypatch):
    with ScriptedLLM([OK]) as own, ScriptedLLM([OK]) as other:
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A", SECRET)
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", own.api_base)
        await call(Endpoint("openai/x", own.api_base, secret="TEAM_A"))
        for endpoint in (
            Endpoint("openai/x", other.api_base, secret="TEAM_A"),
            Endpoint("openai/x", None, secret="TEAM_A"),
            Endpoint("openai/x", own.api_base, secret="TEAM_B"),
        ):
            with pytest.raises(ModelError) as raised:
                await call(endpoint)
            assert raised.value.kind is ModelErrorKind.configuration
    assert authorizations(own) == [f"Bearer {SECRET}"] and other.requests == []


async def test_secrets_can_be_files_in_the_secrets_folder(monkeypatch, tmp_path):
    with ScriptedLLM([OK]) as own:
        (tmp_path / "TEAM_A").write_text(SECRET + "\n")
        (tmp_path / "TEAM_A.endpoints").write_text(own.api_base + "\n")
        monkeypatch.setenv("ATOLL_SECRETS_DIR", str(tmp_path))
        await call(Endpoint("openai/x", own.api_base, secret="TEAM_A"))
    assert authorizations(own) == [f"Bearer {SECRET}"]


async def test_a_key_echoed_in_an_error_is_redacted(monkeypatch):
    echo = {"status": 401, "body": {"error": {"message": f"Incorrect API key provided: {SECRET}"}}}
    with ScriptedLLM([echo]) as own:
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A", SECRET)
        monkeypatch.setenv("ATOLL_SECRET_TEAM_A_ENDPOINTS", own.api_base)
        with pytest.raises(ModelError) as raised:
            await call(Endpoint("openai/x", own.api_base, secret="TEAM_A"))
    assert SECRET not in str(raised.value) and "[redacted]" in str(raised.value)
    assert redact(f"x {ENV_KEY} y") == "x [redacted] y"


# --- matching endpoints ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "candidate",
    [
        "https://api.openai.com@evil.example/v1",
        "https://api.openai.com.evil.example/v1",
        "http://api.openai.com/v1",  # plain text: another scheme is another endpoint
        "https://api.openai.com:8443/v1",
        "https://evil.example/https://api.openai.com/v1",
        "https://api.openai.com\\@evil.example/v1",
        "https://api.openai.com\n.evil.example",
        "file:///etc/passwd",
        "",
    ],
)
def test_lookalikes_of_a_listed_endpoint_are_not_listed(candidate):
    assert not KeyPolicy.current().allows("openai", candidate)


def test_listed_endpoints_match_by_origin_and_path_prefix(monkeypatch):
    monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", "openai=https://proxy.corp/team-a,*=http://vllm:8000")
    policy = KeyPolicy.current()
    assert policy.allows("openai", "https://PROXY.corp:443/team-a/v1")
    assert not policy.allows("openai", "https://proxy.corp/team-ab/v1")
    assert not policy.allows("openai", "https://api.openai.com/v1")  # the setting replaced the default
    assert policy.allows("anthropic", "https://api.anthropic.com") and policy.allows(
        "xai", "http://vllm:8000/v1"
    )
    assert parse_endpoint("https://user:pw@proxy.corp/") is None


async def test_a_malformed_setting_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("ATOLL_KEY_ENDPOINTS", "openai:https://proxy")
    with pytest.raises(ModelError, match="ATOLL_KEY_ENDPOINTS: 'openai:https://proxy' is not PROVIDER="):
        await call(Endpoint("openai/x", refused_api_base()))


async def test_a_url_in_the_model_name_is_never_called(monkeypatch):
    # litellm's huggingface provider takes "huggingface/https://…" as the endpoint, with the key.
    monkeypatch.setenv("HUGGINGFACE_API_KEY", ENV_KEY)
    monkeypatch.setenv("HF_TOKEN", ENV_KEY)
    with CatchAll() as submitter:
        with pytest.raises(ModelError) as raised:
            await call(Endpoint(f"huggingface/{submitter.url}/v1"))
        assert submitter.seen == []
    assert raised.value.kind is ModelErrorKind.configuration and "not a plain model name" in str(raised.value)
