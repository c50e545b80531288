// fedbound design explorer: one page over the paper registry.  Every number comes from the JSON API
// (/api/plan, /api/curve, /api/claims: the CLI's JSON); this script only builds inputs, keeps the page
// state in the URL and draws.  Nothing here knows a paper by name.
"use strict";

const DEBOUNCE_MS = 120;
const SLIDER_STEPS = 1000;
const page = { papers: {}, form: null, paper: null, controller: null, seq: 0, timer: null, vacuity: null };

const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

// Matplotlib mathtext in labels ("$\epsilon$=3") as plain Unicode.
const GREEK = { epsilon: "ε", varepsilon: "ε", delta: "δ", Theta: "Θ", theta: "θ", lambda: "λ", sigma: "σ",
  mu: "μ", rho: "ρ", tau: "τ", eta: "η", alpha: "α", beta: "β", gamma: "γ", Phi: "Φ", phi: "φ", psi: "ψ",
  Omega: "Ω", omega: "ω", kappa: "κ", xi: "ξ", pi: "π", infty: "∞", le: "≤", ge: "≥", cdot: "·", times: "×" };
function tex(s) {
  return String(s ?? "").replace(/\$([^$]*)\$/g, (_, m) =>
    m.replace(/\\([A-Za-z]+)/g, (w, name) => GREEK[name] ?? name).replace(/[{}]/g, "").replace(/\^/g, "")
     .replace(/_/g, ""));
}

function fmt(v) {
  if (v === null || v === undefined) return "–";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  if (Array.isArray(v)) {
    const nums = v.flat(Infinity).filter((x) => typeof x === "number");
    if (nums.length === v.length && nums.length) {
      const lo = Math.min(...nums), hi = Math.max(...nums);
      return lo === hi ? `${fmt(lo)} (all ${nums.length})` : `${fmt(lo)} to ${fmt(hi)} (${nums.length} values)`;
    }
    return v.map(fmt).join(", ");
  }
  if (typeof v === "object") return Object.entries(v).map(([k, x]) => `${k} ${fmt(x)}`).join(", ");
  return String(v);
}

// ---- sliders: log scale for positive reals (their domains span decades), linear for integers ----

function inDomain(f, v) {
  if (f.low !== null && (f.low_open ? v <= f.low : v < f.low)) return false;
  if (f.high !== null && (f.high_open ? v >= f.high : v > f.high)) return false;
  return true;
}

function sliderScale(f, start) {
  if (f.kind !== "int" && f.kind !== "float") return null;
  const center = Number.isFinite(start) ? start : (f.low !== null && f.low > 0 ? f.low * 10 : 1);
  const log = f.kind === "float" && center > 0 && (f.low === null || f.low >= 0);
  let lo, hi;
  if (log) { lo = center / 100; hi = center * 100; }
  else if (f.kind === "int") { lo = f.low ?? 0; hi = Math.max(4 * center, lo + 10); }
  else { lo = center - 4 * Math.abs(center) - 1; hi = center + 4 * Math.abs(center) + 1; }
  if (f.low !== null && lo <= f.low) lo = f.low_open ? (f.low > 0 ? f.low * 1.001 : f.low + (hi - f.low) / SLIDER_STEPS) : f.low;
  if (f.high !== null && hi >= f.high) hi = f.high_open ? f.high - (f.high - lo) / SLIDER_STEPS : f.high;
  return { log, lo, hi, int: f.kind === "int" };
}

function fromSlider(f, scale, pos) {
  const t = pos / SLIDER_STEPS;
  const v = scale.log ? scale.lo * Math.pow(scale.hi / scale.lo, t) : scale.lo + t * (scale.hi - scale.lo);
  if (scale.int) return String(Math.round(v));
  for (const digits of [3, 6, 12]) {
    const r = Number(v.toPrecision(digits));
    if (inDomain(f, r)) return String(r);
  }
  return String(v);
}

function toSlider(scale, v) {
  if (!Number.isFinite(v)) return SLIDER_STEPS / 2;
  const t = scale.log ? Math.log(v / scale.lo) / Math.log(scale.hi / scale.lo) : (v - scale.lo) / (scale.hi - scale.lo);
  return Math.round(Math.min(1, Math.max(0, t)) * SLIDER_STEPS);
}

// ---- the form ----

function buildForm(values) {
  const form = $("form");
  form.replaceChildren();
  for (const f of page.form.fields) {
    const id = `in-${f.key}`;
    const text = el("input", { type: "text", id, name: f.key, "data-key": f.key, inputmode: "decimal",
      placeholder: f.default !== null ? `default ${fmt(f.default)}` : (f.optional ? "optional" : "required") });
    let input = text;
    if (f.choices) {
      input = el("select", { id, name: f.key, "data-key": f.key }, el("option", { value: "", text: "(default)" }),
        ...f.choices.map((c) => el("option", { value: c, text: c })));
    } else if (f.kind === "bool") {
      input = el("select", { id, name: f.key, "data-key": f.key }, el("option", { value: "", text: "(default)" }),
        el("option", { value: "true", text: "true" }), el("option", { value: "false", text: "false" }));
    }
    const row = el("div", { class: "field", id: `field-${f.key}` }, el("label", { for: id, text: f.key }));
    const given = values[f.key];
    input.value = given === undefined || given === null ? "" : String(given);
    const scale = f.choices || f.kind === "bool" || f.kind === "str" ? null
      : sliderScale(f, Number(given ?? f.default));
    if (scale) {
      const slider = el("input", { type: "range", id: `slider-${f.key}`, min: 0, max: SLIDER_STEPS, step: 1,
        "aria-label": `${f.key} (${scale.log ? "log" : "linear"} scale)` });
      slider.value = toSlider(scale, Number(input.value === "" ? f.default : input.value));
      slider.addEventListener("input", () => { input.value = fromSlider(f, scale, Number(slider.value)); changed(); });
      input.addEventListener("input", () => {
        if (input.value.trim() !== "" && Number.isFinite(Number(input.value))) slider.value = toSlider(scale, Number(input.value));
        changed();
      });
      row.append(slider);
    } else {
      input.addEventListener(input.tagName === "SELECT" ? "change" : "input", changed);
    }
    row.append(" ", input, el("div", { class: "meaning" }, el("span", { class: "domain", text: f.domain }),
      ` ${f.meaning}`), el("div", { class: "field-error", id: `err-${f.key}` }));
    form.append(row);
  }
}

function parseValue(f, text) {
  const t = text.trim();
  if (f.kind === "bool") return t === "true" ? true : t === "false" ? false : t;
  if ((f.kind === "int" || f.kind === "float") && t !== "" && Number.isFinite(Number(t))) return Number(t);
  return t;
}

// The non-empty inputs as typed: {key: text}.
function typed() {
  const out = {};
  for (const f of page.form.fields) {
    const text = $(`in-${f.key}`).value.trim();
    if (text !== "") out[f.key] = text;
  }
  return out;
}

// The setting: {key: value} for every non-empty input (the `--set` keys), numbers as numbers.
function setting() {
  const fields = Object.fromEntries(page.form.fields.map((f) => [f.key, f]));
  return Object.fromEntries(Object.entries(typed()).map(([k, text]) => [k, parseValue(fields[k], text)]));
}

// ---- URL state, config and command ----

function stateQuery() {
  const q = new URLSearchParams({ paper: page.paper, variant: $("variant").value, vs: $("vs").value });
  for (const [k, text] of Object.entries(typed())) q.set(k, text);
  return q;
}

function syncURL() {
  history.replaceState(null, "", `${location.pathname}?${stateQuery()}`);
}

function tomlValue(v) {
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

function configText() {
  const lines = [`[${page.paper}]`, ...Object.entries(setting()).map(([k, v]) => `${k} = ${tomlValue(v)}`)];
  return lines.join("\n") + "\n";
}

function shellWord(s) {
  return /^[A-Za-z0-9_.=+\-:]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}

function commandText() {
  const words = ["fedbound", "plan", page.paper];
  for (const [k, v] of Object.entries(setting())) words.push("--set", shellWord(`${k}=${v}`));
  if ($("variant").value !== "paper") words.push("--variant", shellWord($("variant").value));
  return words.join(" ");
}

function copy(text) {
  $("copied").textContent = text;
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).catch(() => {});
}

// ---- talking to the API ----

async function getJSON(url, options = {}) {
  const response = await fetch(url, options);
  const body = await response.json();
  return { ok: response.ok, status: response.status, body };
}

function post(url, body, signal) {
  return getJSON(url, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body), signal });
}

function changed() {
  syncURL();
  clearTimeout(page.timer);
  page.timer = setTimeout(update, DEBOUNCE_MS);
}

function clearErrors() {
  $("error").textContent = "";
  for (const node of document.querySelectorAll(".field-error")) node.textContent = "";
  for (const node of document.querySelectorAll(".field.invalid")) node.classList.remove("invalid");
}

function showError(err) {
  const target = err.parameter && $(`err-${err.parameter}`);
  if (target) {
    target.textContent = err.detail;
    $(`field-${err.parameter}`).classList.add("invalid");
  } else {
    $("error").textContent = err.detail;
  }
}

async function update() {
  const seq = ++page.seq;
  if (page.controller) page.controller.abort();
  const controller = new AbortController();
  page.controller = controller;
  document.body.dataset.state = "busy";
  const started = performance.now();
  const body = setting();
  const variant = encodeURIComponent($("variant").value);
  const vs = encodeURIComponent($("vs").value);
  try {
    const [plan, curve] = await Promise.all([
      page.form.supports.includes("plan")
        ? post(`/api/plan/${page.paper}?variant=${variant}`, body, controller.signal) : null,
      page.form.plots.length
        ? post(`/api/curve/${page.paper}?vs=${vs}&variant=${variant}`, body, controller.signal) : null,
    ]);
    if (seq !== page.seq) return;
    clearErrors();
    const bad = [plan, curve].find((r) => r && !r.ok);
    if (bad) {
      showError(bad.body);
      document.body.dataset.state = "error";
    } else {
      if (plan) renderPlan(plan.body);
      if (curve) renderCurve(curve.body);
      document.body.dataset.state = "ready";
      explainVacuity(plan ? plan.body : null, body, variant, seq);
    }
    $("status").textContent = `updated in ${Math.round(performance.now() - started)} ms`;
    document.body.dataset.updates = String(Number(document.body.dataset.updates) + 1);
  } catch (exc) {
    if (exc.name === "AbortError" || seq !== page.seq) return;
    $("error").textContent = `the explorer server did not answer (${exc.message}); is fedbound serve running?`;
    document.body.dataset.state = "error";
  }
}

// ---- rendering ----

function renderPlan(plan) {
  const rec = plan.recommendation;
  const dl = $("recommendation");
  dl.replaceChildren();
  const items = [
    ["T", rec.T, "rec-T"], ["K", rec.K ?? "all clients every round", "rec-K"],
    ...Object.entries(rec.sigma).map(([stage, v]) => [`σ ${stage}`, v, `rec-sigma-${stage}`]),
    ["bound", rec.bound, "rec-bound"], ["accounting", rec.accounting], ["why", rec.why],
    ...rec.premises.map((p) => ["rests on", p]),
    ...Object.entries(plan.optima).map(([k, o]) => [`optimum ${k}`, `${fmt(o.x)} (${o.method}${o.success === false ? ", not certified" : ""})`]),
  ];
  if (plan.assumed.length) items.push(["assumed", plan.assumed.join(", ")]);
  for (const [name, value, id] of items) {
    dl.append(el("dt", { text: name }), el("dd", id ? { id, text: fmt(value) } : { text: fmt(value) }));
  }
  const table = $("rows");
  table.replaceChildren(el("tr", {}, el("th", { text: "quantity" }), el("th", { text: "paper" }),
    el("th", { text: "tight" }), el("th", { text: "note" })));
  for (const r of plan.rows) {
    table.append(el("tr", {}, el("td", { text: r.quantity }), el("td", { class: "num", text: fmt(r.paper) }),
      el("td", { class: "num", text: fmt(r.tight) }), el("td", { text: r.note })));
  }
  $("differences").replaceChildren(...plan.differences.map((d) => el("li", { text: d })));
  $("warnings").replaceChildren(...(plan.warnings.length ? plan.warnings.map((w) => el("li", { text: w }))
    : [el("li", { text: "none" })]));
}

// ---- a vacuous recommendation: what it means and what to change (/api/vacuity, each change planned) ----

async function explainVacuity(plan, body, variant, seq) {
  const box = $("vacuity");
  const why = plan && plan.recommendation && String(plan.recommendation.why);
  if (page.vacuity) page.vacuity.abort();
  if (!why || !why.startsWith("VACUOUS")) {
    box.hidden = true;
    box.dataset.state = "none";
    return;
  }
  box.hidden = false;
  box.dataset.state = "loading";
  $("vacuity-why").textContent = `the bound ${fmt(plan.recommendation.bound)} does not fall below the level ` +
    "it must beat to promise anything (the why above says which), so the paper's theorem supports no design " +
    "for this setting; the design shown is the least vacuous one.";
  $("vacuity-text").textContent = "checking which single change makes it informative ...";
  $("vacuity-changes").replaceChildren();
  const controller = new AbortController();
  page.vacuity = controller;
  try {
    const { ok, body: answer } = await post(`/api/vacuity/${page.paper}?variant=${variant}`, body, controller.signal);
    if (seq !== page.seq) return;
    if (!ok) { $("vacuity-text").textContent = answer.detail; box.dataset.state = "error"; return; }
    $("vacuity-text").textContent = answer.text;
    $("vacuity-changes").replaceChildren(...answer.changes.map((c) => {
      const button = el("button", { type: "button", text: `apply: ${c.text.split(" (")[0]}` });
      button.addEventListener("click", () => applyChange(c));
      return button;
    }));
    box.dataset.state = "ready";
  } catch (exc) {
    if (exc.name !== "AbortError") $("vacuity-text").textContent = `no answer (${exc.message})`;
  }
}

// Put a suggested change into the form (a key set to null is cleared) and plan it.
function applyChange(change) {
  const to = typeof change.to === "object" && change.to !== null ? change.to : { [change.key]: change.to };
  const values = { ...typed() };
  for (const [k, v] of Object.entries(to)) {
    if (v === null) delete values[k]; else values[k] = String(v);
  }
  buildForm(values);
  changed();
}

function axis(scale, label, range) {
  const out = { title: { text: tex(label) }, type: scale === "log" ? "log" : "linear", automargin: true };
  if (range) out.range = scale === "log" ? range.map((r) => Math.log10(Math.max(r, 1e-300))) : range;
  return out;
}

function renderCurve(fig) {
  const traces = fig.curves.map((c) => ({ x: c.x, y: c.y, name: tex(c.label), mode: "lines",
    line: { color: c.color, dash: c.dash } }));
  for (const p of fig.points) {
    traces.push({ x: p.x, y: p.y, name: tex(p.label) || "optimum", mode: "markers", showlegend: Boolean(p.label),
      marker: { color: p.color, size: 9 } });
  }
  const shapes = [], annotations = [];
  for (const h of fig.hlines) {
    shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, y0: h.y, y1: h.y, line: { color: h.color, dash: h.dash } });
    if (h.label) annotations.push({ xref: "paper", x: 1, y: h.y, text: tex(h.label), showarrow: false, xanchor: "right", yanchor: "bottom" });
  }
  for (const v of fig.vlines) {
    shapes.push({ type: "line", yref: "paper", y0: 0, y1: 1, x0: v.x, x1: v.x, line: { color: v.color, dash: v.dash } });
    if (v.label) annotations.push({ yref: "paper", y: 1, x: v.x, text: tex(v.label), showarrow: false, yanchor: "bottom" });
  }
  for (const n of fig.notes) {
    annotations.push({ x: fig.xscale === "log" ? Math.log10(n.x) : n.x, y: fig.yscale === "log" ? Math.log10(n.y) : n.y,
      text: tex(n.text), showarrow: false, xanchor: "left", yanchor: "bottom", font: { size: 11 },
      xshift: (n.dx ?? 4) * 4 / 3, yshift: (n.dy ?? 6) * 4 / 3 });  // points -> CSS px: no two notes overlap
  }
  const layout = { title: { text: tex(fig.title), font: { size: 13 } }, margin: { t: 50, r: 20 },
    xaxis: axis(fig.xscale, fig.xlabel), yaxis: axis(fig.yscale, fig.ylabel, fig.ylim), shapes, annotations,
    legend: { font: { size: 11 } } };
  Plotly.react("chart", traces, layout, { displaylogo: false, responsive: true });
}

async function loadClaims() {
  const paper = page.paper, table = $("claims");
  if (!$("claims-box").open || table.dataset.paper === paper) return;
  table.dataset.paper = paper;
  table.dataset.state = "loading";
  table.replaceChildren(el("tr", {}, el("td", { text: "checking the claims ..." })));
  const { ok, body } = await getJSON(`/api/claims/${paper}`);
  if (paper !== page.paper) return;
  table.replaceChildren();
  if (!ok) { table.append(el("tr", {}, el("td", { class: "error", text: body.detail }))); return; }
  table.append(el("tr", {}, el("th", { text: "id" }), el("th", { text: "status" }), el("th", { text: "claim" }),
    el("th", { text: "fails in / counterexamples" })));
  for (const c of body.claims) {
    const where = el("td", {}, c.fails_in);
    c.counterexamples.forEach((text, i) => {
      const query = c.explore[i];
      where.append(el("br"), query ? el("a", { href: `?${query}`, text }) : text);
    });
    table.append(el("tr", {}, el("td", { text: c.id }),
      el("td", { class: `status-${c.status.split(" ")[0]}`, text: c.status }), el("td", { text: c.statement }), where));
  }
  table.dataset.state = "ready";
}

function fillSelect(select, options, value) {
  select.replaceChildren(...options.map((o) => el("option", { value: o, text: o })));
  select.value = options.includes(value) ? value : options[0];
}

async function loadPaper(name, query) {
  page.paper = name;
  $("paper").value = name;
  const { ok, body } = await getJSON(`/api/form/${encodeURIComponent(name)}`);
  if (!ok) { $("error").textContent = body.detail; return; }
  page.form = body;
  const info = page.papers[name];
  $("citation").textContent = `${info.short}: ${info.citation}. ${info.summary}`;
  const values = {};
  const keys = new Set(body.fields.map((f) => f.key));
  const fromURL = query && [...query.keys()].some((k) => keys.has(k));
  if (fromURL) for (const [k, v] of query) { if (keys.has(k)) values[k] = v; }
  else Object.assign(values, body.start);
  buildForm(values);
  startNote(body, fromURL);
  fillSelect($("variant"), body.variants, query?.get("variant") ?? "paper");
  fillSelect($("vs"), body.plots, query?.get("vs") ?? body.start_vs ?? body.plots[0]);
  syncURL();
  $("claims-box").hidden = !body.supports.includes("claims");
  loadClaims().catch(() => {});
  await update();
}

// Where the page's starting setting differs from the paper's own experiment (the registry's explore: the
// experiment's recommendation is vacuous there), say so, and offer the experiment itself.
function startNote(form, fromURL) {
  const changed = Object.keys({ ...form.example, ...form.start })
    .filter((k) => JSON.stringify(form.example[k]) !== JSON.stringify(form.start[k]));
  $("start-note").hidden = fromURL || changed.length === 0;
  const fields = Object.fromEntries(form.fields.map((f) => [f.key, f]));
  const given = (v, k) => v !== undefined ? fmt(v)
    : (fields[k] && fields[k].default !== null ? `default ${fmt(fields[k].default)}` : "unset");
  const words = changed.map((k) => `${k} ${form.start[k] === undefined ? "unset" : `= ${fmt(form.start[k])}`}` +
    ` (the paper's experiment: ${given(form.example[k], k)})`);
  $("start-text").textContent = `Opened on an informative setting: ${words.join(", ")}; at the paper's own ` +
    "experiment this paper's bound is vacuous (the recommendation promises nothing there).";
}

function loadExample() {
  $("start-note").hidden = true;
  buildForm(Object.fromEntries(Object.entries(page.form.example).map(([k, v]) => [k, String(v)])));
  changed();
}

// The paper the page opens on when the URL names none: the one README and the docs' getting-started page walk
// through (the registry's order would open on whichever paper registers first).
const START_PAPER = "nbafl";

async function init() {
  const { body } = await getJSON("/api/papers");
  for (const p of body.papers) page.papers[p.name] = p;
  const names = body.papers.filter((p) => p.supports.includes("plan")).map((p) => p.name);
  fillSelect($("paper"), names, null);
  const query = new URLSearchParams(location.search);
  const start = [query.get("paper"), START_PAPER].find((n) => names.includes(n)) ?? names[0];
  $("paper").addEventListener("change", () => loadPaper($("paper").value, null));
  $("variant").addEventListener("change", changed);
  $("vs").addEventListener("change", changed);
  $("copy-config").addEventListener("click", () => copy(configText()));
  $("copy-command").addEventListener("click", () => copy(commandText()));
  $("copy-link").addEventListener("click", () => copy(location.href));
  $("load-example").addEventListener("click", loadExample);
  $("claims-box").addEventListener("toggle", () => loadClaims().catch(() => {}));
  await loadPaper(start, query);
}

init().catch((exc) => { $("error").textContent = `the page could not start: ${exc.message}`; });
