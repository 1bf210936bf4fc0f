// atoll view: one script for the three pages. Everything from the API is untrusted (an
// agent wrote much of it): text goes into the DOM through textContent only, never innerHTML,
// and links are built from encoded ids, never from data.
"use strict";

const REFRESH_MS = 5000;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = String(value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const enc = encodeURIComponent;
const runHref = (name) => "/runs/" + enc(name);
const trialHref = (id, run) => "/trials/" + enc(id) + (run ? "?run=" + enc(run) : "");
const fmtCost = (v) => (v === null || v === undefined ? "—" : "$" + Number(v).toFixed(4));
const fmtNum = (v, digits) => (v === null || v === undefined ? "—" : Number(v).toFixed(digits || 0));
const fmtPct = (v) => (v === null || v === undefined || Number.isNaN(v) ? "—" : (100 * v).toFixed(1) + "%");
const fmtTime = (v) => (v ? String(v).replace("T", " ").replace("+00:00", " UTC") : "—");
const badge = (text, kind) => el("span", { class: "badge " + (kind || ""), text: text === null ? "—" : text });

async function api(path) {
  const response = await fetch(path, { headers: { Accept: "application/json" } });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error((body.error && body.error.message) || response.statusText);
    error.code = body.error && body.error.code;
    throw error;
  }
  return body;
}

function show(...nodes) {
  // replaceChildren turns null into the text "null": leave out what a page did not show.
  const main = document.getElementById("main");
  main.replaceChildren(...nodes.flat(Infinity).filter((node) => node !== null && node !== undefined && node !== false));
}

function showError(error) {
  show(el("div", { class: "error-box", id: "error" }, el("strong", { text: error.code || "error" }), ": ",
    error.message));
}

function crumbs(...parts) {
  document.getElementById("crumbs").replaceChildren(...parts.map((p) => [" / ", p]).flat());
}

function stamp() {
  document.getElementById("refreshed").textContent = "updated " + new Date().toLocaleTimeString();
}

function table(headers, rows, attrs) {
  return el("table", attrs || {}, el("thead", {}, el("tr", {}, headers.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

// --- runs --------------------------------------------------------------------------------

// An agent of a run's spec: its name, then its kind and model where the spec names them
// (never "null").
function agentText(agent, withKind) {
  const parts = [withKind ? agent.agent : null, agent.model].filter((v) => v !== null && v !== undefined && v !== "");
  return (agent.name || "?") + (parts.length ? " (" + parts.join(", ") + ")" : "");
}

async function runsPage() {
  crumbs();
  const body = await api("/api/runs");
  const picked = new Set([...document.querySelectorAll("#runs-table input.pick:checked")].map((box) => box.value));
  const button = el("button", { id: "compare-button", type: "button", disabled: true, text: "Compare the two picked runs",
    onclick: () => {
      const [a, b] = [...document.querySelectorAll("#runs-table input.pick:checked")].map((box) => box.value);
      location.href = compareHref(a, b);
    } });
  const onPick = () => {
    const boxes = [...document.querySelectorAll("#runs-table input.pick")];
    const checked = boxes.filter((box) => box.checked).length;
    button.disabled = checked !== 2;
    for (const box of boxes) box.disabled = checked >= 2 && !box.checked;  // two at most
  };
  const rows = body.runs.map((run) => el("tr", { "data-run": run.name },
    el("td", {}, el("input", { type: "checkbox", class: "pick", value: run.name, checked: picked.has(run.name),
      "aria-label": "pick " + run.name + " to compare", onchange: onPick })),
    el("td", {}, el("a", { href: runHref(run.name), text: run.name })),
    el("td", {}, badge(run.status)),
    el("td", { text: run.spec.agents.map((a) => agentText(a, false)).join(", ") }),
    el("td", { text: run.spec.benchmark || "—" }),
    el("td", { class: "num", text: run.counts.done + " / " + run.counts.total }),
    el("td", { text: Object.entries(run.outcomes).map(([k, n]) => n + " " + k).join(", ") || "—" }),
    el("td", { class: "num", text: (run.cost || fmtCost(run.cost_usd)) }),
    el("td", { text: fmtTime(run.started_at) }), el("td", { text: fmtTime(run.ended_at) })));
  show(el("h1", { text: "Runs" }), el("p", { class: "muted", text: "store: " + body.store }),
    rows.length ? table(["Compare", "Run", "Status", "Agents", "Benchmark", "Done / total", "Outcomes", "Cost", "Started",
      "Ended"], rows, { id: "runs-table" }) : el("p", { text: "No runs in this store yet." }),
    rows.length > 1 ? el("div", { class: "toolbar" }, button, el("span", { class: "muted", text: "pick two runs" })) : null);
  onPick();
  stamp();
  return body.runs.some((run) => run.status === "running" || run.status === "incomplete");
}

// --- compare -----------------------------------------------------------------------------

const compareHref = (a, b) => "/compare?a=" + enc(a) + "&b=" + enc(b);
const fmtDelta = (v, pct) => (v === null || v === undefined ? "—" :
  (v > 0 ? "+" : v < 0 ? "−" : "±") + (pct ? (100 * Math.abs(v)).toFixed(1) + " pp" : "$" + Math.abs(v).toFixed(4)));
const fmtP = (v) => (v === null || v === undefined ? "—" : v < 0.001 ? v.toExponential(1) : v.toFixed(3));
const CHANGE_ORDER = ["worse", "better", "not comparable", "only in a", "only in b", "pending in a", "pending in b", "same"];

function sideText(side) {
  if (!side.runs) return "—";
  return side.passes + "/" + side.graded + " (" + side.outcomes.join(", ") + ")";
}

// Links to one side's trials of a task (each run index; an unfinished one says its state).
function sideTrials(side, run, label) {
  return (side.trials || []).map((t) => [" ", el("a", { href: trialHref(t.trial_id, run), class: "side-trial",
    "data-side": label, "data-trial": t.trial_id, text: "#" + t.run_index + (t.outcome ? "" : " " + t.state) })]);
}

function comparePair(pair, a, b) {
  const label = pair.agent_a === pair.agent_b ? pair.agent_a : pair.agent_a + " → " + pair.agent_b;
  const metricRow = (key, name, pct) => {
    const m = pair.metrics[key];
    return el("tr", { "data-metric": key }, el("td", { text: name }),
      el("td", { class: "num", text: pct ? fmtPct(m.a) : (m.a_text || fmtCost(m.a)) }),
      el("td", { class: "num", text: pct ? fmtPct(m.b) : (m.b_text || fmtCost(m.b)) }),
      el("td", { class: "num delta", text: fmtDelta(m.delta, pct) }));
  };
  const test = pair.mcnemar;
  const verdict = test.pairs === 0 ? "no paired graded runs" :
    (test.significant ? "significant" : "not significant") + " at FDR 5%";
  const tasks = [...pair.tasks].sort((x, y) => CHANGE_ORDER.indexOf(x.change) - CHANGE_ORDER.indexOf(y.change) ||
    x.task_id.localeCompare(y.task_id));
  const taskRows = tasks.map((t) => el("tr", { "data-task": t.task_id, "data-change": t.change,
    class: "change-" + t.change.replace(/ /g, "-") },
    el("td", { text: t.task_id }), el("td", { text: t.domain }),
    el("td", { class: "side-a" }, sideText(t.a), sideTrials(t.a, a, "a")),
    el("td", { class: "side-b" }, sideText(t.b), sideTrials(t.b, b, "b")), el("td", {}, badge(t.change))));
  const onlyChanged = el("input", { type: "checkbox", id: "only-changed-" + label, class: "only-changed",
    onchange: (event) => {
      for (const row of event.target.closest("section").querySelectorAll("tbody tr[data-change]")) {
        row.hidden = event.target.checked && row.dataset.change === "same";
      }
    } });
  return el("section", { class: "compare-pair", "data-agent": label },
    el("h2", { text: label }),
    table(["Metric", a, b, "Δ (b − a)"], [metricRow("pass_at_1", "Pass@1", true),
      metricRow("mean_score", "Mean score", true), metricRow("checks_pass", "Checks pass", true),
      metricRow("cost_usd", "Cost", false)], { class: "metrics" }),
    el("p", { class: "mcnemar" }, "McNemar exact test on " + test.pairs + " paired (task, run) outcomes: " +
      test.a_only + " passed only in " + a + ", " + test.b_only + " passed only in " + b +
      "; p = " + fmtP(test.p_value) + ", q = " + fmtP(test.q_value) + " — " + verdict + "."),
    el("p", { class: "muted", text: Object.entries(pair.changes).map(([k, n]) => n + " " + k).join(" · ") }),
    el("label", {}, onlyChanged, " changed tasks only"),
    table(["Task", "Domain", a + " (passes/graded)", b + " (passes/graded)", "Change"], taskRows,
      { class: "task-changes" }));
}

async function comparePage(a, b) {
  crumbs(el("a", { href: runHref(a), text: a }), el("span", { text: "vs" }), el("a", { href: runHref(b), text: b }));
  const body = await api("/api/compare?a=" + enc(a) + "&b=" + enc(b));
  const summary = (run) => el("dd", { "data-run": run.name }, el("a", { href: runHref(run.name), text: run.name }), " ", badge(run.status),
    run.progress ? [" ", badge("not finished", "o-fail unfinished")] : null,
    " · " + run.counts.done + "/" + run.counts.total + " done · " +
    (Object.entries(run.outcomes).map(([k, n]) => n + " " + k).join(", ") || "no outcomes") + " · " + (run.cost || fmtCost(run.cost_usd)));
  show(el("h1", { text: "Compare " + a + " and " + b }),
    el("dl", { class: "kv", id: "compare-summary" }, el("dt", { text: "a" }), summary(body.a),
      el("dt", { text: "b" }), summary(body.b)),
    body.notes.map((note) => el("p", { class: "error-box compare-note", text: note })),
    el("div", { id: "compare" }, body.pairs.map((pair) => comparePair(pair, a, b))));
  stamp();
  return [body.a, body.b].some((run) => run.status === "running" || run.status === "incomplete");
}

// --- run ---------------------------------------------------------------------------------

const TRIAL_COLUMNS = [
  ["task_id", "Task"], ["domain", "Domain"], ["agent", "Agent"], ["run_index", "Run"], ["outcome", "Outcome"],
  ["score", "Score"], ["end_reason", "End reason"], ["steps", "Steps"], ["tool_calls", "Tool calls"],
  ["tokens", "Tokens"], ["reasoning_tokens", "Reasoning"], ["cached_tokens", "Cached"], ["cost_usd", "Cost"],
  ["duration_s", "Duration s"],
];
const runState = { sort: "task_id", descending: false, trials: [], name: null, group: null, groups: {} };
const FILTER_KEYS = ["agent", "outcome", "domain", "end_reason", "task_id"];

function filterControls(trials) {
  const options = (key, label) => el("select", { id: "filter-" + key, "aria-label": label, onchange: renderTrials },
    el("option", { value: "", text: "all " + label }),
    [...new Set(trials.map((t) => t[key] === null ? "" : String(t[key])))].sort().map((v) =>
      el("option", { value: v, text: v || "(none)" })));
  return el("div", { class: "toolbar" },
    el("input", { type: "search", id: "search", placeholder: "search task, agent, reason, id…", oninput: renderTrials }),
    options("agent", "agents"), options("outcome", "outcomes"), options("domain", "domains"),
    options("end_reason", "end reasons"), el("span", { id: "trial-count", class: "muted" }));
}

function matchingTrials() {
  const query = (document.getElementById("search") || { value: "" }).value.trim().toLowerCase();
  const wanted = {};
  for (const key of FILTER_KEYS) {
    const select = document.getElementById("filter-" + key);
    if (select && select.value) wanted[key] = select.value;
  }
  const group = groupTrials();
  return runState.trials.filter((t) => {
    if (group && !group.has(t.trial_id)) return false;
    for (const [key, value] of Object.entries(wanted)) if (String(t[key] ?? "") !== value) return false;
    if (!query) return true;
    return [t.task_id, t.domain, t.agent, t.model, t.outcome, t.end_reason, t.error, t.trial_id]
      .some((v) => v && String(v).toLowerCase().includes(query));
  });
}

function renderTrials() {
  const key = runState.sort, sign = runState.descending ? -1 : 1;
  const trials = matchingTrials().sort((a, b) => {
    const x = a[key], y = b[key];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * sign;
  });
  const rows = trials.map((t) => el("tr", { "data-trial": t.trial_id, "data-outcome": t.outcome || "" },
    el("td", {}, el("a", { href: trialHref(t.trial_id, runState.name), text: t.task_id })),
    el("td", { text: t.domain }), el("td", { text: t.agent }), el("td", { class: "num", text: t.run_index }),
    el("td", { title: t.left_out || "" }, badge(t.outcome || t.state, "o-" + (t.outcome || "")), t.left_out ? [" ", badge("other judge")] : null),
    el("td", { class: "num", text: fmtPct(t.score) }),
    el("td", { text: t.end_reason || "—", title: t.error || null }),
    el("td", { class: "num", text: fmtNum(t.steps) }), el("td", { class: "num", text: fmtNum(t.tool_calls) }),
    el("td", { class: "num", text: fmtNum(t.tokens) }), el("td", { class: "num", text: fmtNum(t.reasoning_tokens) }),
    el("td", { class: "num", text: fmtNum(t.cached_tokens) }), el("td", { class: "num", text: t.cost || "—" }),
    el("td", { class: "num", text: fmtNum(t.duration_s, 1) })));
  document.querySelector("#trial-table tbody").replaceChildren(...rows);
  document.getElementById("trial-count").textContent = trials.length + " of " + runState.trials.length + " trials";
  showGroupChip();
  saveRunUrl();
  for (const th of document.querySelectorAll("#trial-table th")) {
    th.classList.toggle("sorted-asc", th.dataset.key === key && !runState.descending);
    th.classList.toggle("sorted-desc", th.dataset.key === key && runState.descending);
  }
}

function trialTable() {
  const head = TRIAL_COLUMNS.map(([key, label]) => el("th", { class: "sortable", "data-key": key, text: label,
    onclick: () => {
      runState.descending = runState.sort === key ? !runState.descending : false;
      runState.sort = key;
      renderTrials();
    } }));
  return el("table", { id: "trial-table" }, el("thead", {}, el("tr", {}, head)), el("tbody"));
}

function filterTo(values) {
  runState.group = null;
  const search = document.getElementById("search");
  if (search) search.value = "";
  for (const select of document.querySelectorAll(".toolbar select")) select.value = "";
  setFilters(values);
  renderTrials();
  document.getElementById("trial-table").scrollIntoView();
}

function setFilters(values) {
  for (const [key, value] of Object.entries(values)) {
    let select = document.getElementById("filter-" + key);
    if (!select) {  // task has no visible filter: a hidden one, set by the matrix
      select = el("select", { id: "filter-" + key, hidden: true });
      document.querySelector(".toolbar").append(select);
    }
    if (![...select.options].some((o) => o.value === value)) select.append(el("option", { value, text: value }));
    select.value = value;
  }
}

// --- run page: failure groups and the state kept in the URL ------------------------------

// The ids of the trials in the failure group the table is narrowed to (exactly the group's
// trials, as the API listed them), or null.
function groupTrials() {
  if (!runState.group) return null;
  const groups = runState.groups[runState.group.dimension] || [];
  const found = groups.find((g) => g.key === runState.group.key);
  return new Set(found ? found.trials : []);
}

function showGroupChip() {
  const chip = document.getElementById("group-chip");
  if (!chip) return;
  if (!runState.group) { chip.replaceChildren(); return; }
  chip.replaceChildren("failure group ", el("strong", { text: runState.group.dimension + ": " + runState.group.key }), " ",
    el("button", { type: "button", id: "group-clear", text: "show all", onclick: () => { runState.group = null; renderTrials(); } }));
}

function showGroup(dimension, key) {
  filterTo({});
  runState.group = { dimension, key };
  renderTrials();
  document.getElementById("trial-table").scrollIntoView();
}

// Filters, search, sort and the failure group go into the URL, so a view can be shared and
// survives a reload.
function saveRunUrl() {
  const query = new URLSearchParams();
  const search = document.getElementById("search");
  if (search && search.value) query.set("q", search.value);
  for (const key of FILTER_KEYS) {
    const select = document.getElementById("filter-" + key);
    if (select && select.value) query.set(key, select.value);
  }
  if (runState.sort !== "task_id" || runState.descending) {
    query.set("sort", runState.sort);
    if (runState.descending) query.set("desc", "1");
  }
  if (runState.group) { query.set("group", runState.group.dimension); query.set("key", runState.group.key); }
  const text = query.toString();
  history.replaceState(null, "", location.pathname + (text ? "?" + text : ""));
}

function loadRunUrl() {
  const query = new URLSearchParams(location.search);
  const values = {};
  for (const key of FILTER_KEYS) if (query.get(key)) values[key] = query.get(key);
  setFilters(values);
  const search = document.getElementById("search");
  if (search) search.value = query.get("q") || "";
  if (query.get("sort")) runState.sort = query.get("sort");
  runState.descending = query.get("desc") === "1";
  runState.group = query.get("group") ? { dimension: query.get("group"), key: query.get("key") || "" } : null;
}

const FAILURE_DIMENSIONS = [["criterion", "failed criterion"], ["target_kind", "grading target kind"], ["end_reason", "end reason"], ["error_kind", "error kind"],
  ["outcome", "outcome"]];

function failureAnalysis(analysis) {
  if (!analysis || !analysis.outcome.length) return null;
  return el("div", { id: "failure-analysis" }, FAILURE_DIMENSIONS.map(([dimension, label]) =>
    el("div", { class: "failure-dimension", "data-dimension": dimension }, el("h3", { text: "By " + label }),
      analysis[dimension].length ? el("ul", {}, analysis[dimension].map((g) => el("li", { "data-key": g.key },
        el("a", { href: runHref(runState.name) + "?group=" + enc(dimension) + "&key=" + enc(g.key), class: "group-link",
          text: g.count + " × " + g.key, onclick: (event) => { event.preventDefault(); showGroup(dimension, g.key); } }))))
        : el("p", { class: "muted", text: "none recorded" }))));
}

function runProgress(run) {
  if (!run.progress || run.banner) return null;
  return el("div", { class: "notice", id: "run-progress" }, el("strong", { text: run.status }), ": " + run.progress.text +
    " (refreshes every " + REFRESH_MS / 1000 + " s)");
}

function tokensText(tokens) {
  // Total tokens, and the reasoning and cached ones among them (as providers bill them).
  if (!tokens) return "—";
  const total = (tokens.prompt_tokens || 0) + (tokens.completion_tokens || 0);
  const parts = [];
  if (tokens.reasoning_tokens) parts.push(fmtNum(tokens.reasoning_tokens) + " reasoning");
  if (tokens.cached_tokens) parts.push(fmtNum(tokens.cached_tokens) + " cached");
  if (tokens.cache_write_tokens) parts.push(fmtNum(tokens.cache_write_tokens) + " cache writes");
  return fmtNum(total) + (parts.length ? " (" + parts.join(", ") + ")" : "");
}

function leaderboard(rows) {
  return table(["#", "Agent", "Model", "Pass@1 [95% CI]", "Mean score", "Checks pass", "Disagreements", "Graded / trials", "Tokens", "Cost"],
    rows.map((row, i) => el("tr", {},
      el("td", { class: "num", text: i + 1 }), el("td", { text: row.agent }), el("td", { text: row.model }),
      el("td", { text: ci(row.pass_at_1) }), el("td", { text: ci(row.mean_score) }),
      el("td", { text: ci(row.checks_pass) }),
      el("td", { class: "num disagreements", text: row.check_disagreements === null || row.check_disagreements === undefined ? "—" : row.check_disagreements }),
      el("td", { class: "num", text: row.graded + " / " + row.trials }),
      el("td", { class: "num", text: tokensText(row.tokens) }),
      el("td", { class: "num", text: row.cost || fmtCost(row.cost_usd) }))), { id: "leaderboard" });
}

function ci(entry) {
  // Undefined (no task backs it): null in the JSON, with why in entry.undefined.
  if (!entry || !entry.tasks) return entry && entry.undefined ? "— (" + entry.undefined.value + ")" : "—";
  return fmtPct(entry.value) + " [" + fmtPct(entry.ci_low) + ", " + fmtPct(entry.ci_high) + "]";
}

function matrixTable(matrix) {
  const head = el("tr", {}, el("th", { text: "Task" }), el("th", { text: "Domain" }),
    matrix.agents.map((a) => el("th", { text: a })));
  const rows = matrix.tasks.map((task) => el("tr", {}, el("td", { text: task.task_id }), el("td", { text: task.domain }),
    matrix.agents.map((agent) => {
      const cell = matrix.cells[agent][task.task_id];
      if (!cell) return el("td", { class: "muted", text: "—" });
      const share = cell.graded ? cell.passes / cell.graded : null;
      const hue = share === null ? null : Math.round(120 * share);
      const label = cell.graded ? cell.passes + "/" + cell.graded : "–";
      const extra = (cell.excluded ? " +" + cell.excluded + " excl." : "") + (cell.unfinished ? " +" + cell.unfinished + " open" : "");
      const td = el("td", { class: "cell", "data-agent": agent, "data-task": task.task_id,
        title: cell.passes + " passed of " + cell.graded + " graded; " + cell.runs + " runs",
        onclick: () => filterTo({ agent, task_id: task.task_id }) }, label + extra);
      td.style.background = hue === null ? "#eee" : "hsl(" + hue + ", 60%, 85%)";
      return td;
    })));
  return el("table", { class: "matrix", id: "matrix" }, el("thead", {}, head), el("tbody", {}, rows));
}

function failureList(groups) {
  if (!groups.length) return el("p", { class: "muted", text: "No failures." });
  return el("ul", { id: "failures" }, groups.map((g) => el("li", {},
    el("a", { href: runHref(runState.name) + "?group=reason&key=" + enc(g.reason), class: "group-link", text: g.count + " × " + g.reason,
      onclick: (event) => { event.preventDefault(); showGroup("reason", g.reason); } }),
    " — ", g.trials.slice(0, 8).map((t, i) => [i ? ", " : "",
      el("a", { href: trialHref(t.trial_id, runState.name), text: t.task_id + " / " + t.agent + " #" + t.run_index })]),
    g.trials.length > 8 ? " …" : "")));
}

async function runPage(name) {
  runState.name = name;
  crumbs(el("a", { href: runHref(name), text: name }));
  const [run, trials] = await Promise.all([api("/api/runs/" + enc(name)), api("/api/runs/" + enc(name) + "/trials")]);
  const first = !document.getElementById("trial-table");
  runState.trials = trials.trials;
  runState.groups = { ...(run.failure_analysis || {}),
    reason: run.failures.map((g) => ({ key: g.reason, trials: g.trials.map((t) => t.trial_id) })) };
  const summary = el("dl", { class: "kv", id: "run-summary" },
    el("dt", { text: "status" }), el("dd", {}, badge(run.status)),
    el("dt", { text: "benchmark" }), el("dd", { text: run.spec.benchmark || "—" }),
    el("dt", { text: "agents" }), el("dd", { text: run.spec.agents.map((a) => agentText(a, true)).join("; ") }),
    // The judge of the run's gradings (its record), never the spec's judge model.
    el("dt", { text: "judge" }), el("dd", { id: "run-judge", text: run.judge.label + " · " + run.judge.calibration }),
    el("dt", { text: "trials" }), el("dd", { text: Object.entries(run.counts).map(([k, n]) => k + " " + n).join(" · ") }),
    el("dt", { text: "outcomes" }), el("dd", { text: Object.entries(run.outcomes).map(([k, n]) => n + " " + k).join(", ") || "—" }),
    el("dt", { text: "cost" }), el("dd", { text: (run.cost || fmtCost(run.cost_usd)) }),
    el("dt", { text: "started / ended" }), el("dd", { text: fmtTime(run.started_at) + " → " + fmtTime(run.ended_at) }),
    el("dt", { text: "created / fingerprint" }), el("dd", { text: fmtTime(run.created_at) + " · " + (run.fingerprint || "—") }));
  // Why the run stopped early (aborted, cost ceiling, interrupted), in the report's words.
  const banner = run.banner && el("div", { class: "banner", id: "run-banner" },
    el("strong", { text: run.banner.title }), run.banner.message);
  const sections = [
    el("h1", { text: name }), banner, runProgress(run), summary,
    el("h2", { text: "Leaderboard" }), run.leaderboard.length ? leaderboard(run.leaderboard) : el("p", { class: "muted", text: "No finished trials yet." }),
    el("h2", { text: "Agents × tasks (passes / graded runs)" }), matrixTable(run.matrix),
    el("h2", { text: "Failures" }), failureList(run.failures),
    failureAnalysis(run.failure_analysis),
    el("h2", { text: "Trials" }),
  ].filter(Boolean);
  if (first) {
    show(...sections, filterControls(trials.trials), el("div", { id: "group-chip", class: "muted" }), trialTable());
    loadRunUrl();
  } else {  // a refresh keeps the filters, the search text and the sort the user chose
    const main = document.getElementById("main");
    const keep = [main.querySelector(".toolbar"), document.getElementById("group-chip"), document.getElementById("trial-table")];
    main.replaceChildren(...sections, ...keep);
  }
  renderTrials();
  stamp();
  return run.status === "running" || run.status === "incomplete";
}

// --- trial -------------------------------------------------------------------------------

function pre(text, attrs) {
  return el("pre", attrs || {}, typeof text === "string" ? text : JSON.stringify(text, null, 2));
}

function usageText(usage) {
  if (!usage) return "";
  const cached = [usage.cached_tokens ? usage.cached_tokens + " cached" : "",
    usage.cache_write_tokens ? usage.cache_write_tokens + " cache writes" : ""].filter(Boolean).join(", ");
  return (usage.prompt_tokens || 0) + " prompt" + (cached ? " (" + cached + ")" : "") + " + " +
    (usage.completion_tokens || 0) + " completion tokens" +
    (usage.reasoning_tokens ? " (" + usage.reasoning_tokens + " reasoning)" : "") +
    (usage.cost_usd ? ", " + fmtCost(usage.cost_usd) : "");
}

function images(urls) {
  // Only data:image URLs reach the page (the API drops others); CSP allows nothing else.
  return (urls || []).map((url) => el("img", { class: "shot", src: url, alt: "image from the transcript" }));
}

// Who decided beside the check: where both spoke, whether the judge agrees with it.
function checkNote(c) {
  if (c.check_agrees === true || c.check_agrees === false)
    return " · check " + c.check_verdict + ", judge " + (c.check_agrees ? "agrees" : "disagrees");
  return c.check_verdict && c.decided_by !== "check" ? " · check " + c.check_verdict : "";
}

function criterionView(c, judgeDiffers) {
  const agreement = c.check_agrees === true ? "agree" : c.check_agrees === false ? "disagree" : "";
  // Where the trial's grading is not the run's judge's, each verdict names its judge's prompt version too.
  const judge = c.judge_model ? " (" + c.judge_model + (judgeDiffers && c.prompt_version ? ", " + c.prompt_version : "") + ")" : "";
  return el("div", { class: "criterion", "data-verifier": c.verifier_id, "data-agreement": agreement || null },
    el("div", {}, badge(c.verdict, "v-" + c.verdict), " ",
      agreement === "disagree" ? [badge("check/judge disagree", "o-fail"), " "] : null, el("strong", { text: c.criterion })),
    el("div", { class: "muted decided", text: "decided by " + (c.decided_by || "?") + judge +
      checkNote(c) + " · " + c.verifier_id + (c.cached ? " · cached verdict" : "") }),
    el("div", { class: "rationale", text: c.rationale || "(no rationale recorded)" }),
    c.ungradeable_reason && c.ungradeable_reason !== c.rationale ? el("div", { class: "muted", text: "ungradeable: " + c.ungradeable_reason }) : null,
    c.evidence && c.evidence.length ? el("div", { class: "muted" }, "evidence shown: ", c.evidence.join(", ")) : null,
    c.evidence_note ? el("div", { class: "muted", text: c.evidence_note }) : null);
}

function fileLink(id, run, side, path, label) {
  return el("a", { href: "/api/trials/" + enc(id) + "/file/" + side + "?path=" + enc(path) + (run ? "&run=" + enc(run) : ""),
    text: label });
}

function cellTable(cells, rowClass, tableClass) {
  return table(["Sheet", "Cell", "Before", "After"], cells.map((c) =>
    el("tr", { class: rowClass, "data-sheet": c.sheet, "data-cell": c.cell }, el("td", { text: c.sheet }), el("td", { text: c.cell }),
      el("td", { class: "before", text: c.before ?? "(empty)" }), el("td", { class: "after", text: c.after ?? "(empty)" }))),
  { class: tableClass });
}

// Formula cells whose formula did not change (only the computed value shown beside it did):
// a count, their rows behind a fold.
function sameFormulas(file) {
  if (!file.formulas_unchanged) return null;
  const n = file.formulas_unchanged;
  return el("details", { class: "formulas-unchanged" },
    el("summary", { text: n + " formula cell" + (n === 1 ? "" : "s") + " kept " + (n === 1 ? "its" : "their") +
      " formula (only the computed value differs)" }),
    cellTable(file.formula_cells || [], "formula-cell", "cells"));
}

// Paragraphs, slide lines and text lines added, removed and changed in a modified file.
function lineChanges(file) {
  if (!file.line_changes || !file.line_changes.length) return null;
  return el("div", { class: "line-changes" }, file.line_changes.map((c) =>
    el("div", { class: "line-change " + c.change, "data-change": c.change },
      el("span", { class: "muted", text: c.part + " · " + c.change + " " }),
      c.before !== null ? el("del", { text: c.before }) : null, c.before !== null && c.after !== null ? " → " : null,
      c.after !== null ? el("ins", { text: c.after }) : null)));
}

// A mail, event or chat message added, removed or changed, field by field (grader.diff.record_changes):
// an addition or removal lists every field it has, a change only those that differ.
const fieldText = (value) => (value === null || value === undefined ? "" : Array.isArray(value) ? value.join(", ") : String(value));
function recordChange(record) {
  const rows = record.fields.map((f) => el("tr", { class: "field-change", "data-field": f.field },
    el("td", { text: f.field }),
    record.change === "added" ? null : el("td", { class: "before" }, f.before === null ? el("span", { class: "muted", text: "(none)" }) : el("del", { text: fieldText(f.before) })),
    record.change === "removed" ? null : el("td", { class: "after" }, f.after === null ? el("span", { class: "muted", text: "(none)" }) : el("ins", { text: fieldText(f.after) }))));
  const headers = ["Field", record.change === "added" ? null : "Before", record.change === "removed" ? null : "After"].filter(Boolean);
  return el("div", { class: "file-change record " + record.kind + " " + record.change, "data-kind": record.kind,
    "data-change": record.change, "data-record": record.id },
    el("div", {}, badge(record.kind + " " + record.action, "c-" + record.change), " ", el("strong", { text: record.title || "(untitled)" })),
    rows.length ? table(headers, rows, { class: "fields" }) : null);
}

function worldDiffView(diff, id, run) {
  if (!diff) return el("p", { class: "muted", text: "No snapshots recorded for this trial." });
  const parts = [];
  if (!diff.files.length && !(diff.records || []).length) {
    parts.push(el("p", { class: "muted", text: "The agent changed nothing in the world." }));
  }
  for (const file of diff.files) {
    const links = [];
    if (file.change !== "created") links.push(fileLink(id, run, "before", file.path, "before"));
    if (file.change !== "deleted") links.push(fileLink(id, run, "after", file.path, "after"));
    parts.push(el("div", { class: "file-change", "data-path": file.display_path },
      el("div", {}, badge(file.change), " ", el("strong", { text: file.display_path }), " ",
        el("span", { class: "muted", text: (file.size_before ?? "—") + " → " + (file.size_after ?? "—") + " bytes" }),
        " · download ", links.map((l, i) => [i ? ", " : "", l])),
      file.sub_items.length ? el("div", { class: "muted", text: "changed: " + file.sub_items.join(", ") }) : null,
      file.cell_changes.length ? cellTable(file.cell_changes, "cell-change", "cells") : null,
      sameFormulas(file), lineChanges(file),
      file.text ? el("details", {}, el("summary", { text: "extracted text" }), pre(file.text)) : null));
  }
  for (const record of diff.records || []) parts.push(recordChange(record));
  if (diff.errors.length) parts.push(el("div", { class: "error-box", text: "diff problems: " + diff.errors.join("; ") }));
  return el("div", { id: "world-diff" }, parts);
}

// A trial page reads top-down as "why did it fail?": the outcome and the failed criteria (who
// decided, why, on what evidence), then the answer, the world diff and the transcript. The
// transcript shows an outline at once, its first steps at once and the rest in slices, and
// tool results collapsed (filled in when opened), so a 1,000-step trial opens fast.

const FIRST_STEPS = 30;
const STEPS_PER_SLICE = 120;
const trialState = { id: null, running: false, steps: [], rendered: 0, current: 0, generation: 0, hits: [], hit: -1,
  listening: false, resumes: [] };

const stepFailed = (step) => step.tool_calls.some((c) => c.is_error) || Boolean(step.model_call && step.model_call.error);
const callAnchor = (c, step, position) => "call-" + (c.id || step.index + "-" + position);
const argumentsText = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

function evidenceLinks(c) {
  // Each artifact the verdict was given (file:PATH, mail:…) links to its entry in the world diff.
  const jump = (event) => {
    const id = event.currentTarget.dataset.evidence || "";
    const path = id.startsWith("file:") ? id.slice("file:".length) : null;
    const entry = path && [...document.querySelectorAll("#world-diff .file-change[data-path]")].find((node) =>
      node.dataset.path === path || path.endsWith("/" + node.dataset.path) || node.dataset.path.endsWith("/" + path));
    const record = [...document.querySelectorAll("#world-diff [data-record]")].find((node) =>
      node.dataset.record === id || node.dataset.record.startsWith(id + ":"));
    const target = entry || record || (id.startsWith("mail:") && document.querySelector("#world-diff .mail")) ||
      document.getElementById(event.currentTarget.hash.slice(1));
    if (!target) return;
    event.preventDefault();
    target.scrollIntoView({ block: "start" });
    target.classList.add("targeted");
  };
  const links = (c.evidence || []).map((id) => el("a", { href: "#world-diff-section", class: "evidence-link", "data-evidence": id,
    text: id, onclick: jump }));
  if (!links.length) {
    links.push(el("a", { href: "#final-answer", class: "evidence-link", text: "the answer", onclick: jump }),
      el("a", { href: "#world-diff-section", class: "evidence-link", text: "the world diff", onclick: jump }));
  }
  return el("div", { class: "evidence-links" }, "evidence: ", links.map((link, i) => [i ? ", " : "", link]));
}

function criterionEntry(c, judgeDiffers) {
  const node = criterionView(c, judgeDiffers);
  node.id = "criterion-" + c.verifier_id;
  node.querySelector("strong").after(" ", el("a", { href: "#" + enc(node.id), class: "anchor", text: "#", title: "link to this criterion" }));
  node.append(evidenceLinks(c));
  return node;
}

function verdictHeader(t) {
  const row = t.trial;
  const failed = t.criteria.filter((c) => c.verdict !== "met");
  const met = t.criteria.filter((c) => c.verdict === "met");
  let line;
  if (t.running) line = "running: not graded yet";
  else if (!t.criteria.length) line = row.outcome ? "no verdicts recorded" : "not finished";
  else if (failed.length) line = failed.length + " of " + t.criteria.length + " criteria not met";
  else line = "all " + t.criteria.length + " criteria met";
  const reason = row.end_reason ? " · ended: " + row.end_reason : "";
  return el("section", { id: "verdict" },
    el("h1", {}, row.task_id, " ", badge(row.outcome || row.state, "o-" + (row.outcome || ""))),
    el("p", { id: "verdict-line", text: line + (row.score === null || row.score === undefined ? "" : " · score " + fmtPct(row.score)) + reason }),
    el("div", { id: "criteria" },
      failed.length ? el("div", { id: "failed-criteria" }, el("h2", { text: "Failed criteria" }),
        failed.map((c) => criterionEntry(c, !t.judge.same))) : null,
      met.length ? el("details", { id: "met-criteria" }, el("summary", { text: met.length + " criteria met" }),
        met.map((c) => criterionEntry(c, !t.judge.same))) : null,
      t.criteria.length ? null : el("p", { class: "muted", text: t.running ? "Grading follows the run." : "Not graded." })));
}

function resumeText(r) {
  return "resumed from a checkpoint at step " + r.from_step + (r.attempt ? " by attempt " + r.attempt : "") + " at " +
    fmtTime(r.at) + " (" + fmtNum(r.elapsed_s, 1) + " s of run time before it)";
}

function trialSummary(t, id, run) {
  const row = t.trial;
  const download = (what, label) => t.downloads[what] ? el("a", { href: "/api/trials/" + enc(id) + "/download/" + what + "?run=" + enc(run), text: label }) : null;
  return el("dl", { class: "kv", id: "trial-summary" },
    el("dt", { text: "agent" }), el("dd", { text: row.agent + " (" + row.model + "), run " + row.run_index }),
    el("dt", { text: "domain" }), el("dd", { text: row.domain || "—" }),
    el("dt", { text: "score" }), el("dd", { text: fmtPct(row.score) + (row.checks_total ? " · checks " + row.checks_met + "/" + row.checks_total : "") +
      (row.check_disagreements ? " · " + row.check_disagreements + " check/judge disagreement" + (row.check_disagreements > 1 ? "s" : "") : "") }),
    el("dt", { text: "end reason" }), el("dd", { text: (row.end_reason || "—") + (t.agent_reported_status ? " (agent says " + t.agent_reported_status + ")" : "") }),
    el("dt", { text: "steps / tool calls" }), el("dd", { id: "trial-steps", text: (t.running ? fmtNum(t.running.steps) + " so far" : fmtNum(row.steps)) + " / " + fmtNum(row.tool_calls) }),
    el("dt", { text: "tokens / cost" }), el("dd", { id: "trial-cost", text: (t.usage ? tokensText(t.usage) : fmtNum(row.tokens)) + " / " + (row.cost || "—") }),
    t.judge.grading && el("dt", { text: "judge" }),
    t.judge.grading && el("dd", { id: "trial-judge", text: t.judge.grading.describe +
      (t.judge.same ? "" : " — not the run's judge " + (t.judge.run ? t.judge.run.describe : "") + "; left out of the run's metrics") }),
    t.grade && el("dt", { text: "judge tokens / cost" }),
    t.grade && el("dd", { id: "judge-cost", text: (t.grade.judge_tokens_text || fmtNum(t.grade.judge_tokens)) + " / " + t.grade.judge_cost }),
    el("dt", { text: "duration" }), el("dd", { text: fmtNum(row.duration_s, 1) + " s (" + fmtTime(t.started_at) + " → " + fmtTime(t.ended_at) + ")" }),
    (t.resumes || []).length ? [el("dt", { text: "resumes" }), el("dd", { id: "trial-resumes" }, t.resumes.map((r) => el("div", { text: resumeText(r) })))] : null,
    t.resume_refused ? [el("dt", { text: "not resumed" }), el("dd", { text: t.resume_refused })] : null,
    el("dt", { text: "trial id" }), el("dd", { text: row.trial_id }),
    el("dt", { text: "downloads" }), el("dd", {}, [download("trajectory", "trajectory.json"), download("grade", "grade.json"),
      download("before", "before snapshot"), download("after", "after snapshot")].filter(Boolean).map((a, i) => [i ? " · " : "", a])));
}

function runningNotice(t) {
  if (!t.running) return null;
  const none = t.transcript ? "" : "; no trajectory so far in " + t.running.artifacts + " yet";
  return el("div", { class: "notice", id: "trial-running", text: "running: attempt " + t.running.attempt + ", " +
    t.running.steps + " steps so far" + none + " (refreshes every " + REFRESH_MS / 1000 + " s)" });
}

function toolCallView(c, step, position) {
  const anchor = callAnchor(c, step, position);
  const result = c.result || "";
  const firstLine = result.split("\n", 1)[0].slice(0, 160);
  const box = el("details", { class: "tool-result-box" },
    el("summary", {}, "result (" + result.length + " characters)", firstLine ? [": ", el("span", { class: "preview", text: firstLine })] : null));
  // The result's text reaches the DOM when opened: a long transcript stays light.
  const fill = () => {
    if (box.open && !box.querySelector("pre")) box.append(pre(result, { class: "tool-result" }), images(c.images));
  };
  box.addEventListener("toggle", fill);
  if (c.is_error) {
    box.open = true;
    fill();
  }
  return el("div", { class: "tool-call" + (c.is_error ? " error" : ""), id: anchor },
    el("a", { href: "#" + enc(anchor), class: "tool-name", text: c.name, title: "link to this tool call" }),
    c.is_error ? [" ", badge("error", "o-fail")] : null, c.truncated ? [" ", badge("truncated")] : null,
    el("span", { class: "muted", text: c.duration_s === null || c.duration_s === undefined ? "" : " · " + fmtNum(c.duration_s, 2) + " s" }),
    pre(argumentsText(c.arguments), { class: "tool-arguments" }), box,
    c.error ? el("div", { class: "error-box", text: c.error }) : null);
}

function trialStepView(step) {
  const call = step.model_call;
  const resumed = trialState.resumes.find((r) => r.from_step === step.index - 1);
  const head = el("div", { class: "head" }, el("a", { href: "#step-" + step.index, class: "anchor", text: "step " + step.index }),
    " · " + step.kind, call ? " · " + fmtNum(call.duration_s, 2) + " s · " + usageText(call.usage) : "",
    call && call.retries ? " · " + call.retries + " retries" : "", call && call.error ? " · error: " + call.error : "");
  return el("div", { class: "step" + (stepFailed(step) ? " has-error" : ""), id: "step-" + step.index, "data-step": step.index },
    resumed ? el("div", { class: "notice resume-mark", text: resumeText(resumed) }) : null, head,
    step.reasoning ? [el("div", { class: "muted", text: "reasoning" }), pre(step.reasoning, { class: "reasoning" })] : null,
    step.text ? pre(step.text, { class: "assistant-text" }) : null, images(step.images),
    step.tool_calls.map((c, i) => toolCallView(c, step, i)), rawView(step));
}

// The model call's raw request (as sent to litellm, no key) and response, when the trial
// recorded them (record_raw): collapsed, fetched only when opened.
function rawView(step) {
  const raw = trialState.raw;
  if (!raw || !step.model_call || step.model_call.step === null || step.model_call.step === undefined) return null;
  const box = el("details", { class: "raw-box", "data-model-step": step.model_call.step },
    el("summary", { text: "raw request / response" }));
  box.addEventListener("toggle", async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = "1";
    const body = el("div", { class: "muted", text: "loading…" });
    box.append(body);
    try {
      const answer = await api("/api/trials/" + enc(raw.id) + "/raw/" + enc(step.model_call.step) + (raw.run ? "?run=" + enc(raw.run) : ""));
      body.replaceWith(...answer.exchanges.map((x) => x.omitted !== undefined
        ? el("div", { class: "muted raw-omitted", text: "not kept: " + x.omitted + " bytes past the recording's bound" })
        : el("div", { class: "raw-exchange" },
          el("div", { class: "muted", text: "request" + (x.retries ? " (after " + x.retries + " retries)" : "") }),
          pre(JSON.stringify(x.request, null, 2), { class: "raw-request" }),
          el("div", { class: "muted", text: x.error ? "error" : "response" }),
          pre(x.error ? x.error : JSON.stringify(x.response, null, 2), { class: "raw-response" }))));
    } catch (error) {
      body.replaceWith(el("div", { class: "error-box", text: (error.code || "error") + ": " + error.message }));
    }
  });
  return box;
}

function outlineEntry(step) {
  const names = step.tool_calls.map((c) => c.name).join(", ");
  const label = names || step.kind + (step.text ? ": " + step.text.slice(0, 50) : "");
  return el("a", { href: "#step-" + step.index, class: "outline-step" + (stepFailed(step) ? " error" : ""),
    "data-step": step.index, title: label }, el("span", { class: "n", text: step.index }), " ", label);
}

function renderSteps(upTo) {
  // Steps 1..upTo in the DOM (in order); the rest follow in slices.
  const box = document.getElementById("transcript");
  const end = Math.min(upTo, trialState.steps.length);
  if (!box || trialState.rendered >= end) return;
  const fragment = document.createDocumentFragment();
  for (let i = trialState.rendered; i < end; i++) fragment.append(trialStepView(trialState.steps[i]));
  box.append(fragment);
  trialState.rendered = end;
}

function renderRest(generation) {
  if (generation !== trialState.generation || trialState.rendered >= trialState.steps.length) return;
  renderSteps(trialState.rendered + STEPS_PER_SLICE);
  setTimeout(() => renderRest(generation), 0);
}

function transcriptSection(t) {
  const transcript = t.transcript;
  const count = transcript ? transcript.steps.length : 0;
  return [
    el("h2", { id: "transcript-heading", text: "Transcript (" + count + " steps)" }),
    transcript ? el("details", { id: "prompt-box", open: true }, el("summary", { text: "prompt" }), pre(transcript.prompt, { id: "prompt" })) : null,
    el("div", { class: "toolbar", id: "transcript-tools" },
      el("input", { type: "search", id: "trial-search", placeholder: "search the transcript, tool results too (Enter: next)",
        oninput: runTrialSearch, onkeydown: (event) => {
          if (event.key === "Enter") { event.preventDefault(); nextHit(event.shiftKey ? -1 : 1); }
        } }),
      el("span", { id: "search-count", class: "muted" }),
      el("span", { class: "muted", text: "keys: j / k next / previous step · n / p next / previous error · / search" })),
    el("div", { class: "transcript-area" },
      el("nav", { id: "outline", "aria-label": "steps" }, transcript ? transcript.steps.map(outlineEntry) : null),
      el("div", { id: "transcript" }, transcript ? null : el("p", { class: "muted", text: t.running ? "No steps yet." : "No trajectory recorded." }))),
  ];
}

function markCurrent(node) {
  for (const old of document.querySelectorAll(".targeted")) old.classList.remove("targeted");
  node.classList.add("targeted");
  const step = node.closest(".step");
  if (!step) return;
  trialState.current = Number(step.dataset.step);
  for (const old of document.querySelectorAll("#outline .current")) old.classList.remove("current");
  const entry = document.querySelector("#outline a[data-step='" + trialState.current + "']");
  if (entry) {
    entry.classList.add("current");
    const outline = entry.parentElement;  // keep the outline's entry in its own scroll box
    if (entry.offsetTop < outline.scrollTop || entry.offsetTop > outline.scrollTop + outline.clientHeight - 20)
      outline.scrollTop = entry.offsetTop - outline.clientHeight / 2;
  }
}

function revealHash() {
  // Deep links: #step-N, #call-ID, #criterion-ID (the page is built after the browser looked).
  let target = location.hash.slice(1);
  try {
    target = decodeURIComponent(target);
  } catch {  // a malformed escape in a hand-typed link: look it up as written
  }
  if (!target) return;
  const stepLink = /^step-(\d+)$/.exec(target);
  if (stepLink) renderSteps(Number(stepLink[1]));
  else if (target.startsWith("call-")) {
    const position = trialState.steps.findIndex((step) => step.tool_calls.some((c, i) => callAnchor(c, step, i) === target));
    if (position >= 0) renderSteps(position + 1);
  }
  const node = document.getElementById(target);
  if (!node) return;
  for (let box = node.parentElement.closest("details"); box; box = box.parentElement.closest("details")) box.open = true;
  node.scrollIntoView({ block: "start" });
  markCurrent(node);
}

function stepInView() {
  // The first rendered step whose bottom is below the window's top (binary search: steps are
  // in order), and whether the reader has reached it (its top at or above the window's top).
  const nodes = document.getElementById("transcript").children;
  let low = 0, high = nodes.length - 1, found = null;
  while (low <= high) {
    const middle = (low + high) >> 1;
    if (nodes[middle].getBoundingClientRect().bottom > 1) { found = nodes[middle]; high = middle - 1; }
    else low = middle + 1;
  }
  if (!found || !found.dataset.step) return { step: trialState.rendered + 1, reached: false };
  return { step: Number(found.dataset.step), reached: found.getBoundingClientRect().top <= 1 };
}

function moveStep(direction, errorsOnly) {
  const steps = trialState.steps;
  const node = document.getElementById("step-" + trialState.current);
  const box = node && node.getBoundingClientRect();
  let index = trialState.current;
  if (!box || box.bottom <= 0 || box.top >= innerHeight) {
    // The reader scrolled away from the current step: move from the step in view.
    const seen = stepInView();
    index = seen.reached || direction < 0 ? seen.step : seen.step - 1;
  }
  for (;;) {
    index += direction;
    if (index < 1 || index > steps.length) return;
    if (!errorsOnly || stepFailed(steps[index - 1])) break;
  }
  history.replaceState(null, "", "#step-" + index);
  revealHash();
}

function onTrialKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || !document.getElementById("transcript")) return;
  const active = document.activeElement;
  if (active && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName)) {
    if (event.key === "Escape") active.blur();
    return;
  }
  if (event.key === "/") {
    event.preventDefault();
    document.getElementById("trial-search").focus();
    return;
  }
  const move = { j: [1, false], k: [-1, false], n: [1, true], p: [-1, true] }[event.key];
  if (!move) return;
  event.preventDefault();
  moveStep(...move);
}

function runTrialSearch() {
  const query = document.getElementById("trial-search").value.trim().toLowerCase();
  const has = (text) => Boolean(text) && String(text).toLowerCase().includes(query);
  trialState.hits = [];
  trialState.hit = -1;
  if (query) {
    for (const step of trialState.steps) {
      if (has(step.text) || has(step.reasoning)) trialState.hits.push({ step: step.index, node: "step-" + step.index });
      step.tool_calls.forEach((c, i) => {
        const inResult = has(c.result);
        if (inResult || has(c.name) || has(argumentsText(c.arguments)) || has(c.error))
          trialState.hits.push({ step: step.index, node: callAnchor(c, step, i), inResult });
      });
    }
  }
  document.getElementById("search-count").textContent = !query ? "" :
    trialState.hits.length ? trialState.hits.length + " matches" : "no match";
  if (trialState.hits.length) nextHit(1);
  else if (globalThis.CSS && CSS.highlights) CSS.highlights.delete("trial-search");
}

function highlight(node, query) {
  // Marks the query's occurrences in node with the CSS Custom Highlight API (no DOM change).
  if (!(globalThis.CSS && CSS.highlights && globalThis.Highlight)) return;
  const ranges = [];
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    const lower = text.data.toLowerCase();
    for (let at = lower.indexOf(query); at >= 0; at = lower.indexOf(query, at + query.length)) {
      const range = new Range();
      range.setStart(text, at);
      range.setEnd(text, at + query.length);
      ranges.push(range);
    }
  }
  CSS.highlights.set("trial-search", new Highlight(...ranges));
}

function nextHit(direction) {
  const hits = trialState.hits;
  if (!hits.length) return;
  trialState.hit = (trialState.hit + direction + hits.length) % hits.length;
  const hit = hits[trialState.hit];
  renderSteps(hit.step);
  const node = document.getElementById(hit.node);
  if (!node) return;
  const box = node.querySelector(".tool-result-box");
  if (hit.inResult && box) {
    box.open = true;
    box.dispatchEvent(new Event("toggle"));  // fill it now, not after the next frame
  }
  for (const old of document.querySelectorAll(".search-hit")) old.classList.remove("search-hit");
  node.classList.add("search-hit");
  markCurrent(node);
  node.scrollIntoView({ block: "center" });
  highlight(node, document.getElementById("trial-search").value.trim().toLowerCase());
  document.getElementById("search-count").textContent = (trialState.hit + 1) + " of " + hits.length + " matches";
}

function attemptsTable(t, id, run) {
  return table(["Attempt", "Worker", "Outcome", "Accepted", "Error", "Duration (s)", "Steps", "Trajectory"], t.attempts.map((a) => el("tr", {},
    el("td", { class: "num", text: a.attempt }), el("td", { text: a.worker }), el("td", { text: a.outcome }),
    el("td", { text: a.accepted ? "yes" : "no" }), el("td", { text: a.error || "" }),
    el("td", { class: "num", text: fmtNum(a.duration_s, 1) }), el("td", { class: "num", text: fmtNum(a.steps) }),
    el("td", {}, a.trajectory ? el("a", { href: "/api/trials/" + enc(id) + "/download/trajectory?attempt=" + enc(a.attempt) + "&run=" + enc(run), text: "trajectory.json" }) : "—"))));
}

function updateRunningTrial(t, id, run) {
  // A refresh of a running trial: new steps are appended (the last one redrawn: its tool
  // results may have come since), so the reader keeps the place and what they opened.
  const steps = t.transcript ? t.transcript.steps : [];
  const keep = Math.max(0, Math.min(trialState.rendered, trialState.steps.length - 1, steps.length));
  for (const node of [...document.querySelectorAll("#transcript > .step, #outline > a")]) {
    if (Number(node.dataset.step) > keep) node.remove();
  }
  const empty = document.querySelector("#transcript > p");
  if (empty && steps.length) empty.remove();
  trialState.steps = steps;
  trialState.rendered = keep;
  document.getElementById("outline").append(...steps.slice(keep).map(outlineEntry));
  renderSteps(steps.length);
  document.getElementById("transcript-heading").textContent = "Transcript (" + steps.length + " steps)";
  document.getElementById("trial-running").replaceWith(runningNotice(t));
  document.getElementById("trial-summary").replaceWith(trialSummary(t, id, run));
}

async function trialPage(id, run) {
  const t = await api("/api/trials/" + enc(id) + (run ? "?run=" + enc(run) : ""));
  const row = t.trial;
  run = run || row.run;
  if (t.running && trialState.running && trialState.id === id && document.getElementById("trial-running")) {
    updateRunningTrial(t, id, run);
    stamp();
    return true;
  }
  const scrolled = trialState.id === id ? { y: scrollY, rendered: trialState.rendered } : null;
  crumbs(el("a", { href: runHref(row.run), text: row.run }), el("span", { text: row.task_id + " · " + row.agent + " #" + row.run_index }));
  Object.assign(trialState, { id, running: Boolean(t.running), steps: t.transcript ? t.transcript.steps : [], rendered: 0,
    current: 0, hits: [], hit: -1, resumes: t.resumes || [], generation: trialState.generation + 1,
    raw: t.raw_model_calls ? { id, run } : null });
  show(
    verdictHeader(t),
    runningNotice(t),
    row.error ? el("div", { class: "error-box", id: "trial-error", text: row.error }) : null,
    t.run_error ? el("div", { class: "error-box", text: (t.run_error.kind || "") + ": " + t.run_error.message }) : null,
    t.problems.length ? el("div", { class: "error-box", text: t.problems.join("; ") }) : null,
    trialSummary(t, id, run),
    el("h2", { text: "Answer" }), pre(t.final_answer || "(none)", { id: "final-answer" }),
    el("section", { id: "world-diff-section" }, el("h2", { text: "World diff" }), worldDiffView(t.world_diff, id, run)),
    transcriptSection(t),
    el("h2", { text: "Attempts" }), attemptsTable(t, id, run),
  );
  renderSteps(Math.max(FIRST_STEPS, scrolled ? scrolled.rendered : 0));
  setTimeout(() => renderRest(trialState.generation), 0);
  if (!trialState.listening) {
    trialState.listening = true;
    addEventListener("hashchange", revealHash);
    addEventListener("keydown", onTrialKey);
  }
  if (scrolled) scrollTo(0, scrolled.y);  // the trial just ended: stay where the reader was
  else revealHash();
  stamp();
  return row.outcome === null;
}

// --- routing -----------------------------------------------------------------------------

async function route() {
  const path = decodeURIComponent(location.pathname);
  const run = new URLSearchParams(location.search).get("run");
  let again = false;
  try {
    if (path.startsWith("/runs/")) again = await runPage(path.slice("/runs/".length));
    else if (path.startsWith("/trials/")) again = await trialPage(path.slice("/trials/".length), run);
    else if (path === "/compare") {
      const query = new URLSearchParams(location.search);
      again = await comparePage(query.get("a") || "", query.get("b") || "");
    }
    else again = await runsPage();
  } catch (error) {
    showError(error);
    return;
  }
  // Pages refresh while the run is going (the trial page until its trial finishes).
  if (again) setTimeout(route, REFRESH_MS);
}

route();
