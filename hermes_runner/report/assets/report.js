// Trajectory viewer of report.html: filters, pages, conversation view. Data come from #report-data;
// every text is put in the page with textContent, never parsed as HTML.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const items = data.items;
  const heads = data.heads.map((h) => JSON.parse(h));
  const PAGE = 50;
  const sweep = data.jobs.length > 1;
  const state = { statuses: new Set(data.statuses), tool: "", job: "", q: "", page: 0, selected: null };
  const hay = new Map();

  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") el.className = v;
      else if (k === "text") el.textContent = v;
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }
  const fmt = (n) => Number(n || 0).toLocaleString("en-US");

  // -- job tabs of a sweep --------------------------------------------------------------
  document.querySelectorAll(".tab").forEach((tab) =>
    tab.addEventListener("click", () => {
      document.querySelectorAll(".tab").forEach((t) => t.classList.toggle("active", t === tab));
      document.querySelectorAll(".job").forEach((j) => (j.hidden = j.dataset.job !== tab.dataset.job));
    })
  );

  // -- filters ----------------------------------------------------------------------------
  const counts = {};
  for (const it of items) counts[it.st] = (counts[it.st] || 0) + 1;
  const statusBox = document.getElementById("status-filter");
  for (const st of data.statuses) {
    if (!counts[st]) continue;
    const box = h("input", { type: "checkbox", value: st, checked: true });
    const label = h("label", { class: "st-" + st, "data-status": st }, box, st + " ", h("b", { text: fmt(counts[st]) }));
    box.addEventListener("change", () => {
      box.checked ? state.statuses.add(st) : state.statuses.delete(st);
      label.classList.toggle("off", !box.checked);
      state.page = 0;
      render();
    });
    statusBox.append(label);
  }
  const toolCounts = {};
  let withErrors = 0;
  for (const it of items) {
    for (const t of it.tools) toolCounts[t] = (toolCounts[t] || 0) + 1;
    if (it.tool_errors) withErrors++;
  }
  const toolSel = document.getElementById("filter-tool");
  for (const t of Object.keys(toolCounts).sort())
    toolSel.append(h("option", { value: t, text: `${t} (${fmt(toolCounts[t])})` }));
  toolSel.append(h("option", { value: "__none__", text: "no tool called" }));
  if (withErrors) toolSel.append(h("option", { value: "__errors__", text: `a tool call failed (${fmt(withErrors)})` }));
  toolSel.addEventListener("change", () => { state.tool = toolSel.value; state.page = 0; render(); });
  const jobSel = document.getElementById("filter-job");
  if (jobSel) {
    data.jobs.forEach((j, i) => jobSel.append(h("option", { value: String(i), text: j })));
    jobSel.addEventListener("change", () => { state.job = jobSel.value; state.page = 0; render(); });
  }
  const search = document.getElementById("filter-search");
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { state.q = search.value.trim().toLowerCase(); state.page = 0; render(); }, 120);
  });

  function haystack(it) {
    let s = hay.get(it.id);
    if (s === undefined) {
      s = [it.prompt, it.st, it.why, it.key, it.tools.join(" "), JSON.stringify(it.msgs), data.jobs[it.j]].join("\n").toLowerCase();
      hay.set(it.id, s);
    }
    return s;
  }

  function matches(it) {
    if (!state.statuses.has(it.st)) return false;
    if (state.job !== "" && String(it.j) !== state.job) return false;
    if (state.tool === "__errors__") { if (!it.tool_errors) return false; }
    else if (state.tool === "__none__") { if (it.tools.length) return false; }
    else if (state.tool && !it.tools.includes(state.tool)) return false;
    if (state.q && !state.q.split(/\s+/).every((w) => haystack(it).includes(w))) return false;
    return true;
  }

  // -- list -------------------------------------------------------------------------------
  const tbody = document.querySelector("#traj-list tbody");
  const pager = document.getElementById("pager");
  const countEl = document.getElementById("result-count");

  function badge(it) {
    return h("span", { class: "badge st-" + it.st, text: it.st });
  }

  function render() {
    const shown = items.filter(matches);
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    countEl.textContent = `${fmt(shown.length)} of ${fmt(items.length)} trajectories`;
    tbody.replaceChildren(
      ...shown.slice(state.page * PAGE, (state.page + 1) * PAGE).map((it) =>
        h("tr", { "data-id": it.id, class: it.id === state.selected ? "selected" : null, onclick: () => open(it.id) },
          h("td", { text: it.idx ?? "" }),
          sweep ? h("td", { class: "job", title: data.jobs[it.j] }, h("span", { class: "swatch", style: "background:" + data.colors[it.j] }), data.tags[it.j]) : null,
          h("td", {}, badge(it), it.why && it.why !== "final_answer" ? h("span", { class: "why", text: it.why }) : null),
          h("td", { text: it.turns }),
          h("td", {}, it.tools.map((t) => h("span", { class: "chip" + (it.unknown.includes(t) ? " unknown" : ""), text: t }))),
          h("td", { class: "prompt", title: it.prompt, text: it.prompt.split("\n")[0] })
        )
      )
    );
    if (!shown.length) tbody.append(h("tr", {}, h("td", { colspan: 6, class: "note", text: "No trajectory matches these filters." })));
    pager.replaceChildren(
      h("button", { type: "button", disabled: state.page === 0, onclick: () => { state.page--; render(); } }, "‹ prev"),
      h("span", { text: `page ${state.page + 1} of ${pages}` }),
      h("button", { type: "button", disabled: state.page >= pages - 1, onclick: () => { state.page++; render(); } }, "next ›")
    );
  }

  // -- conversation view ------------------------------------------------------------------
  const detail = document.getElementById("traj-detail");

  function isBlock(v) {
    return typeof v === "string" && (v.includes("\n") || v.length > 80);
  }

  function keyValues(obj) {
    const grid = h("div", { class: "kv" });
    for (const [k, v] of Object.entries(obj)) {
      grid.append(h("span", { class: "k", text: k }));
      if (isBlock(v)) grid.append(h("pre", { class: "code", text: v }));
      else grid.append(h("span", { class: "v", text: typeof v === "string" && v ? v : JSON.stringify(v) }));
    }
    return grid;
  }

  function toolBody(m) {
    if (!m.o) return h("pre", { class: "code", text: m.c || "" });
    const rest = Object.assign({}, m.o);
    const parts = [];
    for (const key of ["output", "content", "stdout", "stderr", "result"]) {
      if (typeof rest[key] === "string") {
        parts.push(h("pre", { class: "code", text: rest[key] || "(empty)" }));
        delete rest[key];
      }
    }
    if (rest.error === null || rest.error === undefined) delete rest.error;
    if (Object.keys(rest).length) parts.unshift(keyValues(rest));
    return parts;
  }

  function message(m) {
    if (m.r === "user") return h("div", { class: "msg user" }, h("div", { class: "who", text: "user" }), h("pre", { class: "text", text: m.c }));
    if (m.r === "error")
      return h("div", { class: "msg error" }, h("div", { class: "who", text: "error: the prompt failed" }),
        h("pre", { class: "text", text: m.c }),
        m.tb ? h("details", {}, h("summary", { text: "traceback" }), h("pre", { class: "code", text: m.tb })) : null);
    if (m.r === "tool") {
      const exit = m.o && typeof m.o.exit_code === "number" && m.o.exit_code !== 0 ? h("span", { class: "flag warn", text: "exit " + m.o.exit_code }) : null;
      return h("div", { class: "msg tool" + (m.err ? " err" : "") },
        h("div", { class: "who" }, "tool result · ", h("span", { class: "name", text: m.n }), h("span", { class: "id", text: m.id }), m.err ? h("span", { class: "flag", text: "error" }) : null, exit),
        toolBody(m));
    }
    const calls = (m.calls || []).map((c) =>
      h("div", { class: "call" + (c.bad ? " bad" : "") },
        h("span", { class: "fn", text: "→ " + c.n }), h("span", { class: "id", text: c.id }),
        c.bad ? h("span", { class: "flag", text: "arguments are not valid JSON" }) : null,
        c.bad ? h("pre", { class: "code", text: c.raw }) : keyValues(c.a)));
    return h("div", { class: "msg assistant" },
      h("div", { class: "who", text: "assistant" }),
      m.th ? h("details", { class: "reasoning" }, h("summary", { text: `reasoning (${fmt(m.th.length)} characters)` }), h("pre", { class: "text", text: m.th })) : null,
      m.c ? h("pre", { class: "text", text: m.c }) : null,
      calls);
  }

  function open(id) {
    const it = items[id];
    if (!it) return;
    state.selected = id;
    tbody.querySelectorAll("tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === String(id)));
    const head = it.head !== undefined ? heads[it.head] : null;
    const fact = (k, v) => h("span", {}, k + " ", h("b", { text: v }));
    detail.replaceChildren(
      h("h3", {}, badge(it), ` prompt ${it.idx ?? "?"}`, sweep ? ` · ${data.jobs[it.j]}` : ""),
      h("div", { class: "facts" },
        it.why ? fact(it.st === "failed" ? "error" : it.st === "discarded" ? "reason" : "stop", it.why) : null,
        fact("turns", it.turns), fact("API calls", it.calls), fact("tokens", fmt(it.tok)),
        it.cost ? fact("cost", "$" + Number(it.cost).toFixed(4)) : null,
        fact("time", Number(it.dur).toFixed(2) + "s"), it.retries ? fact("retries", it.retries) : null,
        fact("toolsets", it.toolsets.join(", ") || "none"), fact("batch", it.batch ?? "?"), fact("key", it.key),
        it.fields && it.fields !== "{}" ? fact("fields", it.fields) : null),
      head ? h("details", { class: "system" }, h("summary", { text: `system prompt and ${head.tools.length} tools offered` }),
        h("div", { class: "kv" }, h("span", { class: "k", text: "tools" }), h("span", { class: "v", text: head.tools.join(", ") })),
        h("pre", { class: "text", text: head.system || "(no system prompt)" })) : null,
      ...it.msgs.map(message)
    );
    detail.scrollTop = 0;
    if (history.replaceState) history.replaceState(null, "", "#t=" + id);
  }

  function fromHash() {
    const m = /^#t=(\d+)$/.exec(location.hash);
    if (m && Number(m[1]) !== state.selected) open(Number(m[1]));
  }
  render();
  fromHash();
  window.addEventListener("hashchange", fromHash);
  document.body.dataset.ready = "1";
})();
