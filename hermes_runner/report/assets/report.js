// Trajectory viewer of report.html: filters, pages, conversation view. Data come from #report-data;
// every text is put in the page with textContent, never parsed as HTML.
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const items = data.items;
  const heads = data.heads.map((h) => JSON.parse(h));
  const PAGE = 50;
  const sweep = data.jobs.length > 1;
  const state = { statuses: new Set(data.statuses), tool: "", job: "", q: "", score: "", minReward: null, page: 0, selected: null, sort: "idx", desc: false, tab: "conversation" };
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
  if (items.some((it) => typeof it.reward === "number")) {
    document.getElementById("score-filter").hidden = false;
    const scoreSel = document.getElementById("filter-score"), rewardBox = document.getElementById("filter-reward");
    scoreSel.addEventListener("change", () => { state.score = scoreSel.value; state.page = 0; render(); });
    rewardBox.addEventListener("input", () => {
      state.minReward = rewardBox.value === "" ? null : Number(rewardBox.value);
      state.page = 0;
      render();
    });
  }
  const search = document.getElementById("filter-search");
  let timer = null;
  search.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      state.q = search.value.trim().toLowerCase();
      state.page = 0;
      render();
      search.dataset.shown = search.value; // the text the list is filtered by now (tests wait for it)
    }, 120);
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
    const primary = it.scores && it.scores.length ? it.scores[0] : null;  // the primary scorer comes first
    if (state.score === "unscored" && primary) return false;
    if (state.score === "passed" && !(primary && primary.passed === true)) return false;
    if (state.score === "failed" && !(primary && primary.passed === false)) return false;
    if (state.minReward !== null && !(typeof it.reward === "number" && it.reward >= state.minReward)) return false;
    if (state.q && !state.q.split(/\s+/).every((w) => haystack(it).includes(w))) return false;
    return true;
  }

  // -- list: sortable columns -------------------------------------------------------------
  const tbody = document.querySelector("#traj-list tbody");
  const thead = document.querySelector("#traj-list thead");
  const pager = document.getElementById("pager");
  const countEl = document.getElementById("result-count");
  const anyCost = items.some((it) => it.cost);
  const anyReward = items.some((it) => typeof it.reward === "number");
  const secs = (v) => Number(v || 0).toFixed(Number(v) < 10 ? 2 : 1) + "s";
  // key: item field to sort by (none: not sortable); cls: the <th> class (widths in report.css)
  const columns = [
    { key: "idx", label: "#", cls: "c-idx", cell: (it) => h("td", { text: it.idx ?? "" }) },
    sweep ? { key: "j", label: "job", cls: "c-job", cell: (it) => h("td", { class: "job", title: data.jobs[it.j] }, h("span", { class: "swatch", style: "background:" + data.colors[it.j] }), data.tags[it.j]) } : null,
    { key: "st", label: "status", cls: "c-st", cell: (it) => h("td", {}, badge(it), it.why && it.why !== "final_answer" ? h("span", { class: "why", text: it.why }) : null) },
    { key: "turns", label: "turns", cls: "c-num", cell: (it) => h("td", { class: "num", text: it.turns }) },
    { key: "tok", label: "tokens", cls: "c-tok", cell: (it) => h("td", { class: "num", text: fmt(it.tok) }) },
    { key: "dur", label: "time", cls: "c-time", cell: (it) => h("td", { class: "num", text: secs(it.dur) }) },
    anyCost ? { key: "cost", label: "cost", cls: "c-cost", cell: (it) => h("td", { class: "num", text: "$" + Number(it.cost || 0).toFixed(4) }) } : null,
    { key: "tool_errors", label: "tool errors", cls: "c-err", title: "failed tool calls", cell: (it) => h("td", { class: "num" + (it.tool_errors ? " bad" : ""), text: it.tool_errors }) },
    anyReward ? { key: "reward", label: "reward", cls: "c-reward", cell: (it) => h("td", { class: "num", text: typeof it.reward === "number" ? Number(it.reward).toFixed(2) : "–" }) } : null,
    { label: "tools", cls: "c-tools", cell: (it) => h("td", {}, it.tools.map((t) => h("span", { class: "chip" + (it.unknown.includes(t) ? " unknown" : ""), text: t }))) },
    { label: "prompt", cls: "c-prompt", cell: (it) => h("td", { class: "prompt", title: it.prompt, text: it.prompt.split("\n")[0] }) },
  ].filter(Boolean);
  const statusRank = Object.fromEntries(data.statuses.map((s, i) => [s, i]));

  function sortValue(it, key) {
    if (key === "st") return statusRank[it.st];
    const v = it[key];
    return typeof v === "number" ? v : v === undefined || v === null ? -Infinity : Number(v) || 0;
  }

  function sorted(list) {
    const key = state.sort, sign = state.desc ? -1 : 1;
    return list.slice().sort((a, b) => sign * (sortValue(a, key) - sortValue(b, key)) || a.id - b.id);
  }

  function header() {
    thead.replaceChildren(h("tr", {}, columns.map((c) => {
      const on = c.key && c.key === state.sort;
      return h("th", {
        class: [c.cls, c.key ? "sortable" : "", on ? (state.desc ? "desc" : "asc") : ""].filter(Boolean).join(" "),
        "data-sort": c.key || null, title: c.key ? `sort by ${c.title || c.label}` : null,
        "aria-sort": on ? (state.desc ? "descending" : "ascending") : null,
        onclick: c.key ? () => {
          if (state.sort === c.key) state.desc = !state.desc;
          else { state.sort = c.key; state.desc = c.key !== "idx" && c.key !== "st"; }
          state.page = 0; header(); render();
        } : null,
      }, c.label);
    })));
  }

  function badge(it) {
    return h("span", { class: "badge st-" + it.st, text: it.st });
  }

  function render() {
    const shown = sorted(items.filter(matches));
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(state.page, pages - 1);
    countEl.textContent = `${fmt(shown.length)} of ${fmt(items.length)} trajectories`;
    tbody.replaceChildren(
      ...shown.slice(state.page * PAGE, (state.page + 1) * PAGE).map((it) =>
        h("tr", { "data-id": it.id, class: it.id === state.selected ? "selected" : null, onclick: () => open(it.id) },
          columns.map((c) => c.cell(it)))
      )
    );
    if (!shown.length) tbody.append(h("tr", {}, h("td", { colspan: columns.length, class: "note", text: "No trajectory matches these filters." })));
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

  function scoresBlock(it) {
    if (!it.scores || !it.scores.length) return null;
    return h("div", { class: "scores" },
      h("div", { class: "who", text: typeof it.reward === "number" ? `scores · reward ${Number(it.reward).toFixed(3)}` : "scores" }),
      it.scores.map((sc) => h("div", { class: "score" + (sc.passed === false ? " failed" : sc.passed === true ? " passed" : "") },
        h("span", { class: "fn", text: sc.name }),
        h("b", { text: sc.value === null || sc.value === undefined ? "–" : typeof sc.value === "number" ? String(Math.round(sc.value * 1000) / 1000) : JSON.stringify(sc.value) }),
        sc.passed === true ? h("span", { class: "flag ok", text: "passed" }) : sc.passed === false ? h("span", { class: "flag", text: "failed" }) : null,
        sc.explanation ? h("pre", { class: "text", text: sc.explanation }) : null)));
  }

  function timeline(it) {
    const calls = it.timeline || [];
    if (!calls.length) return [h("p", { class: "note", text: "No per-call timing recorded for this prompt (a run of an older version, or it failed before its first call)." })];
    const end = Math.max(...calls.map((c) => (c.t || 0) + (c.dur || 0)), 1e-9);
    const bar = (c) => h("div", { class: "tl-track" }, h("div", {
      class: "tl-bar " + c.k + (c.error || c.ok === false || (c.exit !== undefined && c.exit !== 0) ? " bad" : ""),
      style: `left:${(100 * (c.t || 0) / end).toFixed(2)}%;width:${Math.max(0.4, 100 * (c.dur || 0) / end).toFixed(2)}%`,
    }));
    const model = calls.filter((c) => c.k === "model"), tools = calls.filter((c) => c.k === "tool");
    const total = (list, f) => list.reduce((a, c) => a + (Number(c[f]) || 0), 0);
    return [
      h("p", { class: "note", text: `${model.length} model calls (${secs(total(model, "dur"))}, ${fmt(total(model, "retries"))} retries), ${tools.length} tool calls (${secs(total(tools, "dur"))})` + (it.timeline_cut ? `; ${fmt(it.timeline_cut)} more calls not shown` : "") }),
      h("table", { class: "timeline" },
        h("thead", {}, h("tr", {}, ["#", "call", "start", "duration", "", "tokens in / out", "retries", "result"].map((t) => h("th", { text: t })))),
        h("tbody", {}, calls.map((c, i) => h("tr", { class: "tl-" + c.k },
          h("td", { text: i + 1 }),
          h("td", { class: "fn", text: c.k === "model" ? "model" : c.n }),
          h("td", { class: "num", text: secs(c.t) }),
          h("td", { class: "num", text: secs(c.dur) }),
          h("td", { class: "tl-cell" }, bar(c)),
          h("td", { class: "num", text: c.k === "model" && c.in !== undefined ? `${fmt(c.in)} / ${fmt(c.out)}` : "" }),
          h("td", { class: "num", text: c.k === "model" && c.retries ? c.retries : "" }),
          h("td", { text: c.k === "model" ? (c.error ? "error: " + c.error : (c.finish || "") + (c.cached ? " · from the cache" : "")) : (c.exit !== undefined ? "exit " + c.exit : "") + (c.ok === false ? (c.exit !== undefined ? " · " : "") + "error" : c.exit === undefined ? "ok" : "") }))))),
    ];
  }

  const TABS = [["conversation", "conversation"], ["timeline", "timeline"], ["raw", "raw JSON"]];

  function open(id) {
    const it = items[id];
    if (!it) return;
    state.selected = id;
    tbody.querySelectorAll("tr").forEach((tr) => tr.classList.toggle("selected", tr.dataset.id === String(id)));
    const head = it.head !== undefined ? heads[it.head] : null;
    const fact = (k, v) => h("span", {}, k + " ", h("b", { text: v }));
    const panes = {
      conversation: () => [
        head ? h("details", { class: "system" }, h("summary", { text: `system prompt and ${head.tools.length} tools offered` }),
          h("div", { class: "kv" }, h("span", { class: "k", text: "tools" }), h("span", { class: "v", text: head.tools.join(", ") })),
          h("pre", { class: "text", text: head.system || "(no system prompt)" })) : null,
        scoresBlock(it),
        ...it.msgs.map(message),
      ],
      timeline: () => timeline(it),
      raw: () => [h("pre", { class: "code raw", text: JSON.stringify(it.raw ?? {}, null, 2) })],
    };
    const pane = h("div", { class: "pane", "data-tab": state.tab });
    const tabs = h("div", { class: "detail-tabs", role: "tablist" }, TABS.map(([k, label]) =>
      h("button", { type: "button", role: "tab", class: "dtab" + (k === state.tab ? " active" : ""), "data-tab": k,
        "aria-selected": k === state.tab ? "true" : "false",
        onclick: () => { state.tab = k; open(id); } }, label + (k === "timeline" && it.timeline ? ` (${it.timeline.length})` : ""))));
    pane.replaceChildren(...panes[state.tab]().filter((x) => x !== null && x !== undefined));
    const children = [
      h("h3", {}, badge(it), ` prompt ${it.idx ?? "?"}`, sweep ? ` · ${data.jobs[it.j]}` : ""),
      h("div", { class: "facts" },
        it.why ? fact(it.st === "failed" ? "error" : it.st === "discarded" ? "reason" : "stop", it.why) : null,
        fact("turns", it.turns), fact("API calls", it.calls), fact("tokens", fmt(it.tok)),
        it.cost ? fact("cost", "$" + Number(it.cost).toFixed(4)) : null,
        fact("time", Number(it.dur).toFixed(2) + "s"), it.retries ? fact("retries", it.retries) : null,
        typeof it.reward === "number" ? fact("reward", Number(it.reward).toFixed(3)) : null,
        fact("toolsets", it.toolsets.join(", ") || "none"), it.batch !== null && it.batch !== undefined ? fact("batch", it.batch) : null,
        fact("key", it.key), it.fields && it.fields !== "{}" ? fact("fields", it.fields) : null),
      tabs,
      pane,
    ];
    detail.replaceChildren(...children);  // (replaceChildren writes a null as the text "null": none here)
    detail.scrollTop = 0;
    if (history.replaceState) history.replaceState(null, "", "#t=" + id);
  }

  function fromHash() {
    const m = /^#t=(\d+)$/.exec(location.hash);
    if (m && Number(m[1]) !== state.selected) open(Number(m[1]));
  }
  header();
  render();
  fromHash();
  window.addEventListener("hashchange", fromHash);
  document.body.dataset.ready = "1";
})();
