import asyncio

from atoll.llm import ProviderLimiter, provider_of


def test_provider_of():
    assert provider_of("openai/gpt-4o") == "openai" and provider_of("gpt-4o") == "gpt-4o"


def test_window_halves_on_rate_limits_and_recovers_additively():
    async def scenario():
        limiter = ProviderLimiter({"openai": 8})
        assert limiter.limit("openai") == 8
        await limiter.report("openai", rate_limited=True)
        await limiter.report("openai", rate_limited=True)
        assert limiter.limit("openai") == 2
        for _ in range(3):
            await limiter.report("openai", rate_limited=False)
        assert limiter.limit("openai") == 5
        for _ in range(10):
            await limiter.report("openai", rate_limited=False)
        assert limiter.limit("openai") == 8  # never above the configured maximum
        for _ in range(10):
            await limiter.report("openai", rate_limited=True)
        assert limiter.limit("openai") == 1  # never below one

    asyncio.run(scenario())


def test_slots_cap_concurrency_per_provider_independently():
    async def scenario():
        limiter = ProviderLimiter({"openai": 2}, default=1)
        running = {"openai": 0, "anthropic": 0}
        peak = {"openai": 0, "anthropic": 0}

        async def call(provider):
            async with limiter.slot(provider):
                running[provider] += 1
                peak[provider] = max(peak[provider], running[provider])
                await asyncio.sleep(0.01)
                running[provider] -= 1

        await asyncio.gather(*(call("openai") for _ in range(6)), *(call("anthropic") for _ in range(4)))
        return peak

    assert asyncio.run(scenario()) == {"openai": 2, "anthropic": 1}
