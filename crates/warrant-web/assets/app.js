// Warrant's page. Every text that came from a model, a tool, a file name or a request is put in
// the page as text (textContent), never parsed as HTML. The server's CSP allows no inline script
// and no eval. State-changing calls carry the CSRF header the session gave us.
"use strict";

const S = { csrf: "", token: "", render: "text", me: null, stream: null };

// A non-loopback launch hands the token over in the fragment; keep it for this tab only and
// take it out of the address bar.
(function takeToken() {
  const m = location.hash.match(/^#token=([0-9a-f]+)$/);
  if (m) {
    sessionStorage.setItem("warrant-token", m[1]);
    history.replaceState(null, "", "/#/conversations");
  }
  S.token = sessionStorage.getItem("warrant-token") || "";
})();

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else if (k === "text") e.textContent = v;
    else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

// Text from outside (model, tool, file, request): as text. Only a debug build's negative
// control (WARRANT_TEST_DISABLE=web-escape) makes the server ask for HTML, to show what this prevents.
function outside(tag, text, cls) {
  const e = el(tag, { class: cls });
  if (S.render === "html") e.innerHTML = String(text ?? "");
  else e.textContent = String(text ?? "");
  return e;
}

async function api(method, path, body) {
  const headers = { "Accept": "application/json" };
  if (S.token) headers["Authorization"] = "Bearer " + S.token;
  if (method !== "GET") {
    headers["Content-Type"] = "application/json";
    headers["X-Warrant-CSRF"] = S.csrf;
  }
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: "same-origin" });
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (!r.ok) {
    const e = new Error((data && data.message) || r.statusText);
    e.code = data && data.code; e.status = r.status;
    throw e;
  }
  return data;
}

function flash(text, bad) {
  const f = document.getElementById("flash");
  f.textContent = text;
  f.className = bad ? "bad" : "good";
  clearTimeout(flash.t);
  flash.t = setTimeout(() => { f.textContent = ""; f.className = ""; }, 6000);
}

function fail(e) { flash((e.code ? e.code + ": " : "") + e.message, true); }

function main(...children) {
  if (S.stream) { S.stream.abort(); S.stream = null; }
  const m = document.getElementById("main");
  m.replaceChildren(...children);
  return m;
}

function field(label, input) { return el("label", { class: "field" }, el("span", { text: label }), input); }

// ---- conversations ---------------------------------------------------------------------------

function viewConversations() {
  const model = el("input", { id: "conv-model", name: "model", placeholder: "scripted:PATH or openai:MODEL", required: true, autocomplete: "off" });
  const text = el("textarea", { id: "conv-text", rows: 3, placeholder: "What should the agent do?" });
  const taskModel = el("input", { id: "run-model", placeholder: "scripted:PATH or openai:MODEL", autocomplete: "off" });
  const task = el("input", { id: "run-task", placeholder: "A task for a one-off run", autocomplete: "off" });
  main(
    el("h1", { text: "Conversations" }),
    el("section", { class: "card" },
      el("h2", { text: "Start a conversation" }),
      el("p", { class: "muted", text: "A chat session, as `warrant chat`: you send messages, the agent works under your authority, approvals come to Requests." }),
      field("Model", model), field("Message", text),
      el("button", { id: "conv-start", on: { click: async () => {
        try {
          const r = await api("POST", "/api/conversations", { model: model.value, text: text.value });
          location.hash = "#/run/" + r.run;
        } catch (e) { fail(e); }
      } } }, "Start")),
    el("section", { class: "card" },
      el("h2", { text: "Start a run" }),
      field("Model", taskModel), field("Task", task),
      el("button", { id: "run-start", on: { click: async () => {
        try {
          const r = await api("POST", "/api/runs", { model: taskModel.value, task: task.value });
          location.hash = "#/run/" + r.run;
        } catch (e) { fail(e); }
      } } }, "Run")),
    runsTable({}, "Recent"));
}

// ---- runs ------------------------------------------------------------------------------------

function runsTable(filter, title) {
  const box = el("section", { class: "card" }, el("h2", { text: title }));
  const table = el("table", { id: "runs-table" });
  box.append(table);
  const q = new URLSearchParams(filter).toString();
  api("GET", "/api/runs" + (q ? "?" + q : "")).then(d => {
    table.append(el("tr", {}, el("th", { text: "Run" }), el("th", { text: "Status" }), el("th", { text: "Who" }), el("th", { text: "Task" })));
    for (const r of d.runs.slice().reverse()) {
      table.append(el("tr", {},
        el("td", {}, el("a", { href: "#/run/" + r.run, text: r.run })),
        el("td", {}, el("span", { class: "status " + r.status, text: r.status })),
        el("td", { text: r.actor }),
        outside("td", r.task)));
    }
    if (!d.runs.length) table.append(el("tr", {}, el("td", { colspan: 4, class: "muted", text: "No runs." })));
  }).catch(fail);
  return box;
}

function viewRuns() {
  const status = el("select", { id: "filter-status" }, ...["", "queued", "running", "parked", "completed", "failed", "stopped"].map(s => el("option", { value: s, text: s || "any status" })));
  const q = el("input", { id: "filter-q", placeholder: "words of the task" });
  const holder = el("div");
  const refresh = () => holder.replaceChildren(runsTable({ status: status.value, q: q.value }, "Runs"));
  status.addEventListener("change", refresh);
  q.addEventListener("input", refresh);
  main(el("h1", { text: "Runs" }), el("div", { class: "filters" }, status, q), holder);
  refresh();
}

function describe(ev) {
  const p = ev.payload || {};
  switch (ev.kind) {
    case "run_started": return "started by " + (p.principal && p.principal.actor) + " with " + p.model + ": " + p.task;
    case "model_responded": return p.text || p.say || (p.response && p.response.text) || "";
    case "message_received": return p.text || "";
    case "action_proposed": return (p.actions || []).map(a => (a.verb || a.kind || "") + " " + (a.target || a.path || "")).join(", ");
    case "policy_decided": return (p.decision && (p.decision.verdict || p.decision.kind)) || JSON.stringify(p.decision || p);
    case "approval_requested": return (p.presentation && p.presentation.title) || "approval requested";
    default: return "";
  }
}

function eventRow(ev) {
  const said = describe(ev);
  const modelText = ev.kind === "model_responded" || ev.kind === "message_received";
  const row = el("li", { class: "event " + ev.kind, "data-seq": ev.seq },
    el("span", { class: "seq", text: "#" + ev.seq }),
    el("span", { class: "kind", text: ev.kind.replace(/_/g, " ") }),
    modelText ? outside("div", said, "said") : el("div", { class: "said", text: said }));
  const details = el("details", {}, el("summary", { text: "record" }), el("pre", { text: JSON.stringify(ev.payload, null, 2) }));
  row.append(details);
  return row;
}

// A live follow over SSE read with fetch (so the token header goes along), reconnecting from
// the last event id it saw.
function follow(run, list, statusEl, onStatus) {
  const ctl = new AbortController();
  S.stream = ctl;
  let last = 0;
  const seen = new Set();
  async function once() {
    const headers = { "Accept": "text/event-stream" };
    if (last) headers["Last-Event-ID"] = String(last);
    if (S.token) headers["Authorization"] = "Bearer " + S.token;
    const r = await fetch("/api/runs/" + run + "/stream", { headers, signal: ctl.signal, credentials: "same-origin" });
    if (!r.ok) throw new Error("stream refused: " + r.status);
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return true;
      buf += dec.decode(value, { stream: true });
      let i;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, i); buf = buf.slice(i + 2);
        let kind = "message", data = "", id = null;
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) kind = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
          else if (line.startsWith("id:")) id = line.slice(3).trim();
        }
        if (id) last = Number(id);
        if (kind === "run_event") {
          const ev = JSON.parse(data);
          if (!seen.has(ev.seq)) { seen.add(ev.seq); list.append(eventRow(ev)); }
        } else if (kind === "status") {
          const st = JSON.parse(data).status;
          statusEl.textContent = st; statusEl.className = "status " + st;
          onStatus(st);
        }
      }
    }
  }
  (async () => {
    for (let attempt = 0; !ctl.signal.aborted; attempt++) {
      try { if (await once()) return; } catch (e) { if (ctl.signal.aborted) return; }
      await new Promise(res => setTimeout(res, Math.min(5000, 500 * (attempt + 1))));
    }
  })();
}

async function viewRun(run) {
  const list = el("ol", { id: "events", class: "events" });
  const status = el("span", { id: "run-status", class: "status" });
  const pins = el("p", { id: "pins", class: "muted" });
  const composer = el("div", { id: "composer", class: "card hidden" });
  const text = el("textarea", { id: "message-text", rows: 2, placeholder: "Your next message" });
  composer.append(text,
    el("button", { id: "message-send", on: { click: async () => {
      try { await api("POST", "/api/runs/" + run + "/messages", { text: text.value }); text.value = ""; } catch (e) { fail(e); }
    } } }, "Send"),
    el("button", { class: "secondary", on: { click: async () => {
      try { await api("POST", "/api/runs/" + run + "/end", {}); flash("session ended"); } catch (e) { fail(e); }
    } } }, "End session"));
  const touched = el("div", { id: "touched" });
  main(
    el("h1", {}, "Run ", el("code", { text: run }), " ", status),
    pins,
    el("div", { class: "actions" },
      el("button", { id: "cancel", class: "danger", on: { click: async () => {
        try { await api("POST", "/api/runs/" + run + "/cancel", { reason: "cancelled from the web interface" }); flash("cancelled"); } catch (e) { fail(e); }
      } } }, "Cancel run"),
      el("button", { id: "resume", class: "secondary", on: { click: async () => {
        try { await api("POST", "/api/runs/" + run + "/resume", {}); flash("continuing"); } catch (e) { fail(e); }
      } } }, "Continue"),
      el("button", { id: "show-touched", class: "secondary", on: { click: () => showTouched(run, touched) } }, "What it touched")),
    resolveForm(run),
    list, composer, touched);
  api("GET", "/api/runs/" + run + "/pins").then(p => {
    const short = d => d ? String(d).slice(0, 19) : "none";
    if (!p.started) return;
    pins.textContent = "Pinned at start: policy " + short(p.started.policy_digest) + ", profiles " + short(p.started.profiles_digest) + ".";
    if (p.changed.length) { pins.textContent += " Changed since: " + p.changed.join(" and ") + " (a resumed run decides again under the new policy)."; pins.className = "warn"; }
  }).catch(() => {});
  let session = false;
  api("GET", "/api/runs/" + run).then(v => {
    const st = v.events.find(e => e.kind === "run_started");
    session = !!(st && st.payload.settings && st.payload.settings.session);
    if (session) composer.classList.remove("hidden");
  }).catch(fail);
  follow(run, list, status, st => {
    if (st === "parked") refreshCount();
  });
}

// An effect in doubt (started, never recorded as ended): a person says what happened to it.
function resolveForm(run) {
  const step = el("input", { id: "resolve-step", placeholder: "step (call id) in doubt" });
  const as = el("select", { id: "resolve-as" }, ...["completed", "retry", "failed"].map(r => el("option", { value: r, text: r })));
  return el("details", { class: "card" }, el("summary", { text: "Resolve an effect in doubt" }),
    el("div", { class: "actions" }, step, as, el("button", { id: "resolve", on: { click: async () => {
      try {
        await api("POST", "/api/runs/" + run + "/resolve", { step: step.value, resolution: as.value });
        await api("POST", "/api/runs/" + run + "/resume", {});
        flash("resolved as " + as.value + "; the run continues");
      } catch (e) { fail(e); }
    } } }, "Resolve")));
}

async function showTouched(run, box) {
  try {
    const t = await api("GET", "/api/runs/" + run + "/touched");
    box.replaceChildren(el("h2", { text: "What it touched" }), el("pre", { class: "outside", text: JSON.stringify(t, null, 2) }));
  } catch (e) { fail(e); }
}

// ---- requests --------------------------------------------------------------------------------

async function refreshCount() {
  try {
    const d = await api("GET", "/api/requests");
    document.getElementById("open-count").textContent = d.requests.length ? "(" + d.requests.length + ")" : "";
  } catch (_) { /* shown elsewhere */ }
}

async function viewRequests() {
  const list = el("table", { id: "requests-table" });
  main(el("h1", { text: "Requests" }), el("p", { class: "muted", text: "Approvals of actions, and the agent's questions, secrets and resources, waiting for a person." }), list);
  try {
    const d = await api("GET", "/api/requests");
    list.append(el("tr", {}, el("th", { text: "Request" }), el("th", { text: "Kind" }), el("th", { text: "What" }), el("th", { text: "Asked of" })));
    for (const r of d.requests) {
      list.append(el("tr", {},
        el("td", {}, el("a", { href: "#/request/" + r.id, text: r.id })),
        el("td", { text: r.kind }),
        outside("td", r.title || ""),
        el("td", { text: describeAsked(r.asked_of) })));
    }
    if (!d.requests.length) list.append(el("tr", {}, el("td", { colspan: 4, class: "muted", text: "Nothing waits for a person." })));
    refreshCount();
  } catch (e) { fail(e); }
}

function describeAsked(a) {
  if (!a) return "";
  if (typeof a === "string") return a;
  if (Array.isArray(a)) return a.join(", ");
  return Object.entries(a).filter(([, v]) => v && (!Array.isArray(v) || v.length)).map(([k, v]) => k.replace(/_/g, " ") + ": " + (Array.isArray(v) ? v.join(", ") : v)).join("; ");
}

async function viewRequest(id) {
  let d;
  try { d = await api("GET", "/api/requests/" + id); } catch (e) { fail(e); return; }
  const v = d.view || {};
  const ask = v.ask || {};
  const box = el("section", { class: "card" });
  box.append(
    el("dl", {},
      el("dt", { text: "Request" }), el("dd", {}, el("code", { text: id })),
      el("dt", { text: "Run" }), el("dd", {}, el("a", { href: "#/run/" + (v.run || d.item.run), text: v.run || d.item.run })),
      el("dt", { text: "Kind" }), el("dd", { text: v.kind || d.item.kind }),
      el("dt", { text: "Status" }), el("dd", { id: "request-status", text: v.status || d.item.status || "" }),
      el("dt", { text: "Risk" }), el("dd", { text: v.risk || "" }),
      el("dt", { text: "On behalf of" }), el("dd", { text: d.principal ? d.principal.actor + "@" + d.principal.tenant : "" }),
      el("dt", { text: "Asked of" }), el("dd", { id: "asked-of", text: describeAsked(d.item.asked_of) }),
      el("dt", { text: "Digest" }), el("dd", {}, el("code", { text: v.digest || "" }))),
    el("h2", {}, outside("span", ask.question || v.title || d.item.title || "", "request-title")));
  if (v.body) box.append(outside("pre", v.body, "outside request-body"));
  if (ask.type === "secret") box.append(el("dl", {},
    el("dt", { text: "Secret" }), outside("dd", ask.name),
    el("dt", { text: "For" }), outside("dd", ask.purpose),
    el("dt", { text: "Used by" }), outside("dd", ask.used_by)));
  if (ask.type === "resource") box.append(el("dl", {},
    el("dt", { text: ask.resource || "Resource" }), outside("dd", ask.name),
    el("dt", { text: "Proposed" }), outside("dd", ask.url || (ask.command || []).join(" "))));
  if (ask.type === "elicitation") {
    // The server's words, shown as outside text, and one input per field it asks for.
    box.append(el("p", { class: "muted", text: "MCP server " + ask.server + " asks (its words, untrusted):" }),
      outside("pre", ask.message || "", "outside elicitation-message"));
  }
  if (v.reply) box.append(el("p", { class: "muted", text: "Replied by " + v.reply.by.actor + " via " + v.reply.by.via + "." }));
  if (d.asked && d.asked.fell_through) box.append(el("p", { id: "asked-why", class: "muted", text: "Why them: " + d.asked.fell_through }));
  if (d.reasons && d.reasons.length) {
    const ul = el("ul", { id: "reasons" });
    for (const r of d.reasons) ul.append(el("li", {}, el("code", { text: r.policy }), el("span", { text: ": " + r.reason })));
    box.append(el("h3", { text: "Why a person is asked" }), ul);
  }
  if (d.profiles && d.profiles.length) {
    const conf = el("ul", { id: "confinement" });
    for (const p of d.profiles) conf.append(el("li", {}, el("strong", { text: p.name + ": " }), el("span", { text: p.words || p.confinement || JSON.stringify(p) })));
    box.append(el("h3", { text: "How commands are confined" }), conf);
  }
  const actions = el("div", { class: "actions" });
  const kind = v.kind || d.item.kind;
  if (kind === "approval" && (v.status === "open")) {
    const reason = el("input", { id: "deny-reason", placeholder: "Why not (the agent is told)" });
    actions.append(
      el("button", { id: "approve-once", on: { click: () => act("approve", { scope: "once" }) } }, "Approve once"),
      el("button", { id: "approve-session", class: "secondary", on: { click: () => act("approve", { scope: "session" }) } }, "Approve for the session"),
      reason,
      el("button", { id: "deny", class: "danger", on: { click: () => act("deny", { reason: reason.value }) } }, "Deny"));
  } else if (kind === "question" && v.status === "open") {
    const opts = el("div", { id: "options" });
    (ask.options || []).forEach((o, i) => opts.append(el("label", { class: "option" }, el("input", { type: "radio", name: "option", value: i + 1 }), outside("span", o))));
    const text = el("input", { id: "answer-text", placeholder: "Or answer in words" });
    actions.append(opts, text, el("button", { id: "answer", on: { click: () => {
      const chosen = document.querySelector("input[name=option]:checked");
      act("answer", chosen ? { option: Number(chosen.value) } : { text: text.value });
    } } }, "Answer"));
  } else if (kind === "elicitation" && v.status === "open") {
    const props = (ask.schema && ask.schema.properties) || {};
    const need = (ask.schema && ask.schema.required) || [];
    const inputs = {};
    const form = el("div", { id: "elicitation-fields" });
    for (const name of Object.keys(props)) {
      const p = props[name];
      const input = el("input", { id: "field-" + name, placeholder: p.default !== undefined ? "default " + JSON.stringify(p.default) : (need.includes(name) ? "required" : "optional") });
      inputs[name] = [input, p];
      form.append(el("label", { class: "option" }, outside("span", name + " (" + (p.type || "choice") + ")" + (p.description ? ": " + p.description : "")), input));
    }
    actions.append(form, el("button", { id: "answer", on: { click: () => {
      const content = {};
      for (const [name, [input, p]] of Object.entries(inputs)) {
        const raw = input.value.trim();
        if (raw === "") continue;
        if (p.type === "number" || p.type === "integer") content[name] = Number(raw);
        else if (p.type === "boolean") content[name] = raw === "true" || raw === "yes";
        else if (p.type === "array") content[name] = raw.split(",").map((x) => x.trim()).filter(Boolean);
        else content[name] = raw;
      }
      act("answer", { text: JSON.stringify(content) });
    } } }, "Answer"));
  } else if (kind === "secret" && v.status === "open") {
    const value = el("input", { id: "secret-value", type: "password", autocomplete: "off", spellcheck: "false", placeholder: "The value (stored in the vault; the agent sees a handle)" });
    actions.append(value, el("button", { id: "provide", on: { click: async () => {
      const body = { value: value.value };
      value.value = "";
      await act("provide", body);
    } } }, "Provide"));
  }
  if ((kind === "question" || kind === "secret" || kind === "resource" || kind === "elicitation") && v.status === "open") {
    const why = el("input", { id: "decline-reason", placeholder: "Why not" });
    actions.append(why, el("button", { id: "decline", class: "danger", on: { click: () => act("decline", { reason: why.value }) } }, "Decline"));
  }
  box.append(actions);
  main(el("h1", { text: "Request" }), box);

  async function act(verb, body) {
    try {
      const r = await api("POST", "/api/requests/" + id + "/" + verb, body);
      const done = r.answered || r.replied;
      flash((done.answer || done.reply) + " by " + done.by + (r.continue_error ? " (" + r.continue_error.message + ")" : "; the run continues"));
      location.hash = "#/run/" + done.run;
    } catch (e) { fail(e); }
  }
}

// ---- audit and policy ------------------------------------------------------------------------

function viewAudit() {
  const run = el("input", { id: "audit-run", placeholder: "run id" });
  const actor = el("input", { id: "audit-actor", placeholder: "actor" });
  const verb = el("input", { id: "audit-verb", placeholder: "verb (fs.write)" });
  const decision = el("input", { id: "audit-decision", placeholder: "decision" });
  const table = el("table", { id: "audit-records" });
  const verified = el("pre", { id: "verify-result", class: "outside" });
  const health = el("div", { id: "audit-status" });
  const query = async () => {
    const q = new URLSearchParams({ run: run.value, actor: actor.value, verb: verb.value, decision: decision.value }).toString();
    try {
      const d = await api("GET", "/api/audit?" + q);
      table.replaceChildren(el("tr", {}, el("th", { text: "#" }), el("th", { text: "When" }), el("th", { text: "Type" }), el("th", { text: "Record" })));
      for (const r of d.records) {
        const rec = r.record || {};
        table.append(el("tr", {}, el("td", { text: r.seq }), el("td", { text: rec.time || "" }), el("td", { text: rec.type || "" }),
          el("td", {}, el("details", {}, el("summary", { text: (rec.data && (rec.data.kind || rec.data.event)) || "record" }), el("pre", { text: JSON.stringify(rec, null, 2) })))));
      }
    } catch (e) { fail(e); }
  };
  main(el("h1", { text: "Audit" }),
    el("section", { class: "card" }, el("div", { class: "filters" }, run, actor, verb, decision, el("button", { id: "audit-query", on: { click: query } }, "Query")), table),
    el("section", { class: "card" }, el("h2", { text: "Verify the trail" }),
      el("button", { id: "verify", on: { click: async () => {
        verified.textContent = "verifying…";
        try { verified.textContent = JSON.stringify(await api("GET", "/api/audit/verify"), null, 2); } catch (e) { fail(e); verified.textContent = ""; }
      } } }, "Verify"), verified),
    el("section", { class: "card" }, el("h2", { text: "Delivery to sinks" }), health));
  query();
  api("GET", "/api/audit/status").then(s => {
    health.replaceChildren(el("p", { text: "Chain head: " + s.head }));
    const ul = el("ul");
    for (const k of s.sinks) ul.append(el("li", { text: JSON.stringify(k) }));
    health.append(ul);
  }).catch(fail);
}

function viewPolicy() {
  const action = el("input", { id: "explain-action", placeholder: "fs.write" });
  const target = el("input", { id: "explain-target", placeholder: "src/main.rs, or a command line" });
  const out = el("pre", { id: "explain-result", class: "outside" });
  main(el("h1", { text: "Policy" }),
    el("section", { class: "card" }, el("h2", { text: "Explain a decision" }), field("Action", action), field("Target", target),
      el("button", { id: "explain", on: { click: async () => {
        try {
          const r = await api("GET", "/api/explain?" + new URLSearchParams({ action: action.value, target: target.value }));
          out.textContent = JSON.stringify(r, null, 2);
        } catch (e) { fail(e); }
      } } }, "Explain"), out));
}

// ---- routing ---------------------------------------------------------------------------------

function route() {
  const h = location.hash || "#/conversations";
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", h.startsWith("#/" + a.dataset.view));
  let m;
  if ((m = h.match(/^#\/run\/([\w-]+)$/))) return viewRun(m[1]);
  if ((m = h.match(/^#\/request\/([\w-]+)$/))) return viewRequest(m[1]);
  if (h.startsWith("#/runs")) return viewRuns();
  if (h.startsWith("#/requests")) return viewRequests();
  if (h.startsWith("#/audit")) return viewAudit();
  if (h.startsWith("#/policy")) return viewPolicy();
  return viewConversations();
}

async function start() {
  try {
    const s = await api("GET", "/api/session");
    S.csrf = s.csrf; S.render = s.render; S.me = s;
    document.getElementById("who").textContent = s.actor + "@" + s.tenant;
  } catch (e) {
    main(el("p", { class: "bad", text: "Not signed in: open the address `warrant web` printed. (" + e.message + ")" }));
    return;
  }
  window.addEventListener("hashchange", route);
  route();
  refreshCount();
}

document.addEventListener("DOMContentLoaded", start);
