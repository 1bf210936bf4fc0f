"""A self-contained HTML report: inline SVG plots (matplotlib) and the report's tables."""

from __future__ import annotations

import html
import io
import re
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (backend must be chosen first)

from orchestrator.report import leaderboard_rows  # noqa: E402

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _svg(figure: Figure) -> str:
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
    errors = [
        [v - lo for v, lo in zip(values, lows, strict=True)],
        [hi - v for v, hi in zip(values, highs, strict=True)],
    ]
    axis.barh(names, values, xerr=errors, color="#3b6ea8", capsize=4)
    axis.set_xlabel("Pass@1 (%) with 95% bootstrap CI")
    axis.set_xlim(0, 100)
    return _svg(figure)


def _plotted(entry: dict[str, Any]) -> float:
    """A metric in percent; an undefined one (null in report.json) is a gap in the line."""
    return float("nan") if entry["value"] is None else 100 * entry["value"]


def _k_plot(report: dict[str, Any]) -> str:
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.2))
    for agent, metrics in report["metrics"]["overall"].items():
        ks = [int(k) for k in metrics["pass_at_k"]]
        left.plot(ks, [_plotted(metrics["pass_at_k"][str(k)]) for k in ks], marker="o", label=agent)
        right.plot(ks, [_plotted(metrics["pass_hat_k"][str(k)]) for k in ks], marker="o", label=agent)
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


def _usage_panels(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, title) of the usage panels that carry information: a cost panel only when some
    agent has a known, non-zero cost; steps and tool calls only when some are non-zero."""
    agents = report["agents"].values()
    panels = []
    if any((entry["mean_cost_usd"] or 0) > 0 for entry in agents):
        panels.append(("mean_cost_usd", "mean cost per priced trial ($)"))
    panels += [
        (key, title)
        for key, title in (("mean_steps", "mean steps"), ("mean_tool_calls", "mean tool calls"))
        if any(entry[key] > 0 for entry in agents)
    ]
    return panels


def _usage_plot(report: dict[str, Any], panels: list[tuple[str, str]]) -> str:
    agents = list(report["agents"])
    figure, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3), squeeze=False)
    for axis, (key, title) in zip(axes[0], panels, strict=True):
        values = [report["agents"][agent][key] for agent in agents]
        axis.bar(agents, [value or 0.0 for value in values], color="#7a9e5b")
        for index, value in enumerate(values):
            if value is None:  # no priced trial: say so instead of drawing a zero
                axis.annotate("unknown", (index, 0), ha="center", va="bottom", fontsize="small", color="#a33")
        axis.set_ylim(bottom=0)
        axis.set_title(title)
        axis.tick_params(axis="x", labelrotation=30)
    return _svg(figure)


_LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")
_BOLD = re.compile(r"\*\*([^*]+)\*\*")
_RATIO = re.compile(r"^(\d+)/(\d+)\b")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def _inline(text: str) -> str:
    """Escaped text with Markdown `code` spans as <code>, [links](url) as <a>, **bold** as <b>."""
    parts = html.escape(text, quote=True).split("`")
    out = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(f"<code>{part}</code>")
            continue
        part = _LINK.sub(_anchor, part)
        out.append(_BOLD.sub(r"<b>\1</b>", part))
    return "".join(out)


def _anchor(match: re.Match[str]) -> str:
    text, url = match.group(1), match.group(2)
    # Web pages, local files and paths relative to the report (its artifacts); never another
    # scheme (javascript:, data:).
    relative = _SCHEME.match(url) is None and not url.startswith("//")
    if not (relative or url.startswith(("http://", "https://", "file://"))):
        return f"{text} ({url})"
    return f'<a href="{url}">{text}</a>'


def _cell_html(cell: str) -> str:
    """A table cell; a matrix cell ("passes/graded") is coloured by its pass share."""
    match = _RATIO.match(cell)
    if not match or int(match.group(2)) == 0:
        return f"<td>{cell}</td>"
    share = int(match.group(1)) / int(match.group(2))
    hue = round(120 * share)  # red (0) to green (120)
    return f"<td class='cell' style='background:hsl({hue},60%,85%)'>{cell}</td>"


def _markdown_tables_to_html(markdown: str) -> str:
    """Render the report's Markdown (headings, tables, bullets, paragraphs) as HTML."""
    out: list[str] = []
    table: list[list[str]] = []

    def flush_table() -> None:
        if not table:
            return
        head, *body = table
        out.append("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in head) + "</tr></thead><tbody>")
        out.extend("<tr>" + "".join(_cell_html(c) for c in row) + "</tr>" for row in body)
        out.append("</tbody></table>")
        table.clear()

    for line in markdown.splitlines():
        if line.startswith("|"):
            cells = [_inline(cell.strip()) for cell in line.strip().strip("|").split("|")]
            if not all(set(cell) <= {"-"} for cell in cells):
                table.append(cells)
            continue
        flush_table()
        if line.startswith("> "):
            out.append(f"<div class='banner'>{_inline(line[2:])}</div>")
        elif line.startswith("### "):
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
:root{color-scheme:light dark}
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222;background:#fff}
table{border-collapse:collapse;margin:1em 0;font-size:.9em}td,th{border:1px solid #ccc;padding:4px 8px}
th{background:#f2f2f2}h2{margin-top:1.6em}.note{color:#555;margin:.2em 0}figure{margin:1em 0}
.banner{background:#fde2e1;border:2px solid #c0392b;padding:.8em 1em;margin:1em 0;font-size:1.05em}
a{color:#1f5fa8}td.cell{color:#222}
@media (prefers-color-scheme: dark){
body{color:#e6edf3;background:#0d1117}td,th{border-color:#30363d}th{background:#161b22}
.note{color:#9198a1}.banner{background:#3d1518;border-color:#f85149}a{color:#4493f8}
figure svg{background:#fff;border-radius:4px}
}
"""


def plots(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(caption, SVG) of the charts that carry information: no Pass@k chart with a single k,
    no cost panel when every cost is zero or unknown, no usage chart when all of it is zero."""
    rows = leaderboard_rows(report)
    drawn = []
    if rows:
        drawn.append(("Leaderboard (Pass@1 with 95% CI)", _leaderboard_plot(rows)))
    if int(report["runs_per_task"]) > 1 and report["metrics"]["overall"]:
        drawn.append(("Pass@k and Pass^k against k", _k_plot(report)))
    panels = _usage_panels(report)
    if panels:
        titles = ", ".join(title.split(" (")[0] for _key, title in panels)
        drawn.append((titles[0].upper() + titles[1:], _usage_plot(report, panels)))
    return drawn


def render_html(report: dict[str, Any], markdown: str) -> str:
    figures = "\n".join(
        f"<figure><figcaption>{html.escape(title)}</figcaption>{svg}</figure>" for title, svg in plots(report)
    )
    # The outcome, the failures and the matrix first; then the leaderboard and its charts;
    # then the other statistics and tables.
    head, _, rest = markdown.partition("\n## Leaderboard\n")
    board, marker, tail = rest.partition("\n## ")
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(report['experiment'])} — atoll report</title><style>{_STYLE}</style></head><body>"
        f"{_markdown_tables_to_html(head)}\n{_markdown_tables_to_html('## Leaderboard' + chr(10) + board)}\n"
        f"{figures}\n{_markdown_tables_to_html(marker.lstrip() + tail)}"
        "</body></html>\n"
    )
