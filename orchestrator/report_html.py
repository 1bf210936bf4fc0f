"""A self-contained HTML report: inline SVG plots (matplotlib) and the report's tables."""

from __future__ import annotations

import html
import io
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)

from orchestrator.report import leaderboard_rows  # noqa: E402


def _svg(figure: Any) -> str:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _leaderboard_plot(rows: list[dict[str, Any]]) -> str:
    figure, axis = plt.subplots(figsize=(7, 0.5 + 0.45 * max(len(rows), 1)))
    names = [row["agent"] for row in rows][::-1]
    values = [100 * row["pass_at_1"]["value"] if row["pass_at_1"]["tasks"] else 0.0 for row in rows][::-1]
    lows = [100 * row["pass_at_1"]["ci_low"] if row["pass_at_1"]["tasks"] else 0.0 for row in rows][::-1]
    highs = [100 * row["pass_at_1"]["ci_high"] if row["pass_at_1"]["tasks"] else 0.0 for row in rows][::-1]
    errors = [[v - lo for v, lo in zip(values, lows, strict=True)], [hi - v for v, hi in zip(values, highs, strict=True)]]
    axis.barh(names, values, xerr=errors, color="#3b6ea8", capsize=4)
    axis.set_xlabel("Pass@1 (%) with 95% bootstrap CI")
    axis.set_xlim(0, 100)
    return _svg(figure)


def _k_plot(report: dict[str, Any]) -> str:
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    for agent, metrics in report["metrics"]["overall"].items():
        ks = [int(k) for k in metrics["pass_at_k"]]
        left.plot(ks, [100 * metrics["pass_at_k"][str(k)]["value"] for k in ks], marker="o", label=agent)
        right.plot(ks, [100 * metrics["pass_hat_k"][str(k)]["value"] for k in ks], marker="o", label=agent)
    ks = list(range(1, int(report["runs_per_task"]) + 1))
    for axis, title in ((left, "Pass@k"), (right, "Pass^k")):
        axis.set_title(title)
        axis.set_xlabel("k")
        axis.set_xticks(ks)
        axis.set_ylabel("%")
        axis.set_ylim(0, 100)
    if report["metrics"]["overall"]:
        left.legend(fontsize="small")
    return _svg(figure)


def _usage_plot(report: dict[str, Any]) -> str:
    agents = list(report["agents"])
    figure, axes = plt.subplots(1, 3, figsize=(10, 3))
    for axis, key, title in (
        (axes[0], "mean_cost_usd", "mean cost per trial ($)"),
        (axes[1], "mean_steps", "mean steps"),
        (axes[2], "mean_tool_calls", "mean tool calls"),
    ):
        axis.bar(agents, [report["agents"][agent][key] for agent in agents], color="#7a9e5b")
        axis.set_ylim(bottom=0)
        axis.set_title(title)
        axis.tick_params(axis="x", labelrotation=30)
    return _svg(figure)


def _inline(text: str) -> str:
    """Escaped text with Markdown `code` spans as <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{part}</code>" if index % 2 else part for index, part in enumerate(parts))


def _markdown_tables_to_html(markdown: str) -> str:
    """Render the report's Markdown (headings, tables, bullets, paragraphs) as HTML."""
    out: list[str] = []
    table: list[list[str]] = []

    def flush_table() -> None:
        if not table:
            return
        head, *body = table
        out.append("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr></thead><tbody>")
        out.extend("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body)
        out.append("</tbody></table>")
        table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [_inline(cell.strip()) for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= {"-"} for cell in cells):
                table.append(cells)
            continue
        flush_table()
        if line.startswith("### "):
            out.append(f"<h3>{html.escape(line[4:])}</h3>")
        elif line.startswith("## "):
            out.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("# "):
            out.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("- "):
            out.append(f"<p class='note'>• {_inline(line[2:])}</p>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
    flush_table()
    return "\n".join(out)


_STYLE = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:4px 8px}
th{background:#f2f2f2}h2{margin-top:1.6em}.note{color:#555;margin:.2em 0}figure{margin:1em 0}
"""


def render_html(report: dict[str, Any], markdown: str) -> str:
    rows = leaderboard_rows(report)
    plots = [
        ("Leaderboard (Pass@1 with 95% CI)", _leaderboard_plot(rows)),
        ("Pass@k and Pass^k against k", _k_plot(report)),
        ("Cost, steps and tool calls", _usage_plot(report)),
    ]
    figures = "\n".join(f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>" for title, svg in plots)
    # Title and summary line first, then the plots, then the tables.
    head, _, tables = markdown.partition("## Leaderboard")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(report['experiment'])} — atoll report</title><style>{_STYLE}</style></head><body>"
        f"{_markdown_tables_to_html(head)}\n{figures}\n{_markdown_tables_to_html('## Leaderboard' + tables)}"
        "</body></html>\n"
    )
