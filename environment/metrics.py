"""Prometheus metrics of one environment (own registry, so several apps can share a process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_TRANSFER_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)


class EnvironmentMetrics:
    """The counters and histograms the environment exports at ``/metrics``."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.tool_calls = Counter(
            "atoll_env_tool_calls",
            "MCP tool calls through the gateway",
            ["server", "tool", "outcome"],
            registry=r,
        )
        self.tool_call_seconds = Histogram(
            "atoll_env_tool_call_seconds",
            "MCP tool call latency inside the gateway",
            ["server", "tool"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.gateway_swaps = Counter(
            "atoll_env_gateway_swaps", "POST /apps outcomes", ["outcome"], registry=r
        )
        self.gateway_servers = Gauge(
            "atoll_env_gateway_servers", "MCP servers in the live gateway", registry=r
        )
        self.gateway_tools = Gauge("atoll_env_gateway_tools", "tools in the live gateway", registry=r)
        self.populate_bytes = Counter(
            "atoll_env_populate_bytes", "bytes written into the world by populate", registry=r
        )
        self.populate_seconds = Histogram(
            "atoll_env_populate_seconds",
            "populate duration",
            ["outcome"],
            buckets=_TRANSFER_BUCKETS,
            registry=r,
        )
        self.snapshot_bytes = Counter(
            "atoll_env_snapshot_bytes", "compressed snapshot bytes produced", registry=r
        )
        self.snapshot_seconds = Histogram(
            "atoll_env_snapshot_seconds",
            "snapshot duration",
            ["outcome"],
            buckets=_TRANSFER_BUCKETS,
            registry=r,
        )

    def render(self) -> bytes:
        """The registry in Prometheus text exposition format."""
        return generate_latest(self.registry)
