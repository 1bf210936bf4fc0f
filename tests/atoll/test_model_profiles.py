"""Per-model parameter profiles: the judge's defaults and each thinking level become arguments
the model accepts (checked with litellm's own request mapping, which raises for a parameter a
model refuses), and a parameter a model refuses is refused when the experiment is loaded,
naming the model and the parameter."""

import pytest

from atoll.errors import AtollError
from atoll.experiment_file import parse_experiment
from atoll.judge import JudgeConfig
from atoll.llm.errors import ModelErrorKind, classify
from atoll.llm.profiles import (
    ProfileError,
    call_arguments,
    checked_judge,
    experiment_judge,
    judge_arguments,
    profile_of,
    structured_output,
)

# The APEX-Agents paper's models, as litellm spells them (docs/models.md).
PAPER_MODELS = [
    "gemini/gemini-3-flash-preview",
    "gemini/gemini-3-pro-preview",
    "openai/gpt-5.2",
    "openai/gpt-5.2-pro",
    "openai/gpt-5",
    "anthropic/claude-opus-4-5-20251101",
    "xai/grok-4",
    "moonshot/kimi-k2-thinking",
    "together_ai/openai/gpt-oss-120b",
]


def _litellm_request(model: str, arguments: dict) -> dict:
    """What litellm would put in the provider's request; raises UnsupportedParamsError for a
    parameter litellm knows the model refuses."""
    import litellm
    from litellm.utils import get_optional_params

    name, provider, _, _ = litellm.get_llm_provider(model)
    return get_optional_params(model=name, custom_llm_provider=provider, **arguments)


@pytest.mark.parametrize("model", PAPER_MODELS)
def test_the_judges_defaults_are_accepted_by_every_model_in_the_table(model):
    arguments = judge_arguments(JudgeConfig(model=model))
    _litellm_request(model, arguments)  # raises for a refused parameter (gpt-5: temperature 0)
    if model in ("openai/gpt-5", "openai/gpt-5.2-pro") or model.startswith("gemini/"):
        assert "temperature" not in arguments  # refused, or the provider advises its default
    else:
        assert arguments["temperature"] == 0.0


def test_the_judge_asks_for_temperature_0_only_where_the_model_takes_it():
    assert judge_arguments(JudgeConfig(model="openai/gpt-4o-mini")) == {"temperature": 0.0}
    assert judge_arguments(JudgeConfig(model="openai/gpt-5")) == {}
    assert judge_arguments(JudgeConfig(model="openai/gpt-5.2")) == {"temperature": 0.0}  # effort none
    assert judge_arguments(JudgeConfig(model="openai/gpt-5.2", thinking="high")) == {
        "reasoning_effort": "high"
    }
    # Google advises Gemini 3's default temperature: the judge leaves it.
    assert judge_arguments(JudgeConfig(model="gemini/gemini-3-flash-preview")) == {}


def test_thinking_high_on_anthropic_is_a_budget_below_max_tokens_without_temperature():
    model = "anthropic/claude-opus-4-5-20251101"
    arguments = call_arguments(model, {}, thinking="high", preferred={"temperature": 0.0})
    budget = arguments["thinking"]["budget_tokens"]
    assert arguments["thinking"]["type"] == "enabled" and budget >= 1024
    assert arguments["max_tokens"] > budget and arguments["max_tokens"] <= 21_333
    assert "temperature" not in arguments
    sent = _litellm_request(model, arguments)
    assert sent["thinking"] == {"type": "enabled", "budget_tokens": budget} and sent["max_tokens"] > budget
    # thinking off: no thinking, and the judge's temperature 0 is back
    assert call_arguments(model, {}, thinking="off", preferred={"temperature": 0.0}) == {"temperature": 0.0}


def test_thinking_levels_map_to_each_providers_parameter():
    assert call_arguments("openai/gpt-5", {}, thinking="high") == {"reasoning_effort": "high"}
    assert call_arguments("openai/gpt-5", {}, thinking="off") == {"reasoning_effort": "minimal"}
    assert call_arguments("openai/gpt-5.2", {}, thinking="off") == {"reasoning_effort": "none"}
    sent = _litellm_request(
        "gemini/gemini-3-pro-preview", call_arguments("gemini/gemini-3-pro-preview", {}, thinking="high")
    )
    assert sent["thinkingConfig"]["thinkingLevel"] == "high"
    sent = _litellm_request(
        "gemini/gemini-3-flash-preview", call_arguments("gemini/gemini-3-flash-preview", {}, thinking="low")
    )
    assert sent["thinkingConfig"]["thinkingLevel"] == "low"
    assert call_arguments("together_ai/openai/gpt-oss-120b", {}, thinking="medium") == {
        "reasoning_effort": "medium"
    }


def test_max_tokens_becomes_max_completion_tokens_for_openai_reasoning_models():
    arguments = call_arguments("openai/gpt-5", {"max_tokens": 4000})
    assert arguments == {"max_completion_tokens": 4000}
    assert "max_tokens" not in _litellm_request("openai/gpt-5", arguments)


@pytest.mark.parametrize(
    ("model", "asked", "thinking", "named"),
    [
        ("openai/gpt-5", {"temperature": 0}, None, "temperature: 0"),
        ("openai/gpt-5.2-pro", {"top_p": 0.5}, None, "top_p: 0.5"),
        ("openai/gpt-5.2", {"temperature": 0.2}, "high", "temperature: 0.2"),
        ("openai/gpt-5.2-pro", {}, "low", "thinking: low"),
        ("anthropic/claude-opus-4-5-20251101", {"temperature": 0}, "high", "temperature: 0"),
        ("anthropic/claude-opus-4-5-20251101", {"max_tokens": 4000}, "high", "max_tokens: 4000"),
        ("gemini/gemini-3-pro-preview", {}, "off", "thinking: off"),
        ("xai/grok-4", {}, "high", "thinking: high"),
        ("moonshot/kimi-k2-thinking", {}, "low", "thinking: low"),
        ("openai/gpt-4o-mini", {}, "high", "thinking: high"),
        ("openai/gpt-5", {"max_completion_tokens": 500_000}, None, "max_completion_tokens: 500000"),
        ("xai/grok-4", {"presence_penalty": 0.5}, None, "presence_penalty: 0.5"),
        ("xai/grok-4", {"reasoning_effort": "high"}, None, "reasoning_effort: high"),
        ("moonshot/kimi-k2-thinking", {"reasoning_effort": "low"}, None, "reasoning_effort: low"),
        ("openai/gpt-4o-mini", {"reasoning_effort": "low"}, None, "reasoning_effort: low"),
        # Anthropic's extended thinking refuses top_k and forced tool use (Feature compatibility)
        ("anthropic/claude-opus-4-5-20251101", {"top_k": 5}, "high", "top_k: 5"),
        ("anthropic/claude-opus-4-5-20251101", {"tool_choice": "required"}, "low", 'tool_choice: "required"'),
        (
            "anthropic/claude-opus-4-5-20251101",
            {"tool_choice": {"type": "function", "function": {"name": "f"}}, "reasoning_effort": "high"},
            None,
            "tool_choice: ",
        ),
    ],
)
def test_a_refused_parameter_is_named_with_the_model(model, asked, thinking, named):
    with pytest.raises(ProfileError) as raised:
        call_arguments(model, asked, thinking=thinking)
    assert f"model {model} does not accept {named}" in raised.value.message


def test_claude_takes_top_k_and_a_forced_tool_without_thinking_and_auto_with_it():
    claude = "anthropic/claude-opus-4-5-20251101"
    assert call_arguments(claude, {"top_k": 5, "tool_choice": "required"}, thinking="off")["top_k"] == 5
    assert call_arguments(claude, {"tool_choice": "auto"}, thinking="high")["tool_choice"] == "auto"


def _experiment(agent: dict, judge: dict | None = None) -> str:
    import yaml

    return yaml.safe_dump(
        {"name": "e", "benchmark": "b", "agents": [{"name": "a", **agent}], "judge": judge or {}}
    )


def test_an_experiment_forcing_temperature_0_on_gpt5_is_refused_when_loaded():
    with pytest.raises(AtollError) as raised:
        parse_experiment(
            _experiment({"model": "openai/gpt-5", "extra_args": {"temperature": 0}}), source="x.yaml"
        )
    assert raised.value.code == "bad_experiment"
    assert (
        "x.yaml" in raised.value.message
        and "agent a: model openai/gpt-5 does not accept temperature: 0" in (raised.value.message)
    )
    with pytest.raises(AtollError, match="judge: model xai/grok-4 does not accept thinking: high"):
        parse_experiment(
            _experiment({"model": "replay", "agent": "replay"}, {"model": "xai/grok-4", "thinking": "high"})
        )
    with pytest.raises(
        AtollError, match="agent a: model gemini/gemini-3-pro-preview does not accept thinking: off"
    ):
        parse_experiment(_experiment({"model": "gemini/gemini-3-pro-preview", "config": {"thinking": "off"}}))


def test_thinking_is_read_per_agent_and_for_the_judge():
    spec = parse_experiment(
        _experiment(
            {"model": "anthropic/claude-opus-4-5-20251101", "thinking": "high"},
            {"model": "gemini/gemini-3-flash-preview", "thinking": "high"},
        )
    )
    assert spec.agents[0].thinking == "high"
    judge = JudgeConfig.for_experiment(spec)
    assert judge is not None and judge.thinking == "high"
    assert judge.request()["thinking"] == "high"  # the wire form carries it to a grading service
    with pytest.raises(AtollError, match="thinking"):
        parse_experiment(_experiment({"model": "openai/gpt-5", "thinking": "extreme"}))


def test_a_judge_config_that_asks_a_refused_parameter_is_refused():
    """The contract holds data (it imports no kit); the kit refuses it where configs are read and
    where grading starts (checked_judge)."""
    config = JudgeConfig(model="openai/gpt-5", temperature=0.0)
    with pytest.raises(ProfileError, match="model openai/gpt-5 does not accept temperature: 0.0"):
        checked_judge(config)
    assert checked_judge(JudgeConfig(model="openai/gpt-5")).model == "openai/gpt-5"


def test_the_structured_output_form_follows_the_model_and_thinking():
    assert structured_output("openai/gpt-5") == "json_schema"
    assert structured_output("moonshot/kimi-k2-thinking") == "json_object"
    assert structured_output("openai/some-local-model") == "prompt"
    assert profile_of("bedrock/us.anthropic.claude-opus-4-5-20251101-v1:0").thinking == "anthropic"


def test_litellms_refusal_is_a_configuration_error_in_atolls_words():
    import litellm

    with pytest.raises(Exception) as raised:
        litellm.completion(
            model="openai/gpt-5",
            messages=[{"role": "user", "content": "x"}],
            temperature=0,
            api_base="http://127.0.0.1:9",
            api_key="x",
        )
    error = classify(raised.value, model="openai/gpt-5", api_base="http://127.0.0.1:9")
    assert error.kind is ModelErrorKind.configuration
    assert "temperature" in error.message and "drop_params" not in error.message
    assert "docs/models.md" in error.message


def test_an_output_limit_keeps_its_name_except_where_the_provider_renames_it():
    assert call_arguments("openai/gpt-4o-mini", {"max_tokens": 300}) == {"max_tokens": 300}
    assert call_arguments("openai/gpt-5.2", {"max_tokens": 300}) == {"max_completion_tokens": 300}
    claude = call_arguments(
        "anthropic/claude-opus-4-5-20251101", {"max_completion_tokens": 30_000}, thinking="low"
    )
    assert claude["max_tokens"] == 30_000 and "max_completion_tokens" not in claude


def test_a_thinking_level_and_a_hand_written_thinking_parameter_are_not_both_taken():
    with pytest.raises(ProfileError, match="not both"):
        call_arguments(
            "anthropic/claude-opus-4-5-20251101",
            {"thinking": {"type": "enabled", "budget_tokens": 2048}},
            thinking="high",
        )
    with pytest.raises(ProfileError, match="not both"):
        call_arguments("openai/gpt-5", {"reasoning_effort": "low"}, thinking="high")


def test_a_regrade_judge_that_refuses_the_experiments_thinking_is_one_line():
    spec = parse_experiment(
        _experiment(
            {"model": "replay", "agent": "replay"},
            {"model": "gemini/gemini-3-flash-preview", "thinking": "medium"},
        )
    )
    with pytest.raises(AtollError) as raised:
        experiment_judge(spec, model="gemini/gemini-3-pro-preview")
    assert raised.value.code == "bad_input"
    assert "model gemini/gemini-3-pro-preview does not accept thinking: medium" in raised.value.message
    assert "\n" not in raised.value.message
