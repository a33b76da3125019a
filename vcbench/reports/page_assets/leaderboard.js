// Draws the leaderboard page from window.LEADERBOARD, which data.js sets (written by
// vcbench/reports/leaderboard_page.py). Plain DOM calls, no framework, no network: the page
// must work opened from disk. Text from the data is set with textContent, never as HTML.
"use strict";

(function () {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MISSING = "\u2014";  // An em dash: no result.
  const data = window.LEADERBOARD;
  const state = {key: "overall_rank", dir: "asc"};  // The initial order: the overall ranking.

  function el(tag, attrs, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function svgEl(tag, attrs, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function isMissing(v) {
    return v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v));
  }

  // Every data column with the benchmark it belongs to (links are per benchmark).
  function columns() {
    return data.benchmarks.flatMap((bench) => (bench.columns || []).map((col) => ({bench, col})));
  }

  function formatValue(v, col) {
    const digits = col.digits ?? 1;
    const unit = col.unit || "";
    const text = v.toFixed(digits);
    return unit === "" ? text : unit === "%" ? text + "%" : text + " " + unit;
  }

  function formatRank(v) {
    return isMissing(v) ? MISSING : Number.isInteger(v) ? String(v) : v.toFixed(2);
  }

  function valueOf(row, key) {
    if (key === "pvr") return row.pvr;
    if (key === "overall_rank") return row.overall_rank;
    return (row.values || {})[key];
  }

  // The direction of a first click: best first (ranks and lower-is-better columns ascending).
  function bestFirstDir(key) {
    if (key === "pvr" || key === "overall_rank") return "asc";
    const found = columns().find(({col}) => col.key === key);
    return found && found.col.higher_is_better === false ? "asc" : "desc";
  }

  // Missing values sort last in both directions: they are not "worst", they are absent.
  function compareRows(a, b) {
    const va = valueOf(a, state.key), vb = valueOf(b, state.key);
    if (isMissing(va) || isMissing(vb)) return isMissing(va) - isMissing(vb);
    const order = typeof va === "string" ? va.localeCompare(vb) : va - vb;
    return state.dir === "asc" ? order : -order;
  }

  // The best value of every column (bold in the table), respecting higher_is_better.
  function bestValues() {
    const best = {overall_rank: Math.min(...data.rows.map((r) => r.overall_rank ?? Infinity))};
    for (const {col} of columns()) {
      const vals = data.rows.map((r) => valueOf(r, col.key)).filter((v) => !isMissing(v));
      if (vals.length) best[col.key] = col.higher_is_better === false
        ? Math.min(...vals) : Math.max(...vals);
    }
    return best;
  }

  function sortableHeader(key, label, attrs) {
    const th = el("th", Object.assign({"data-key": key, scope: "col"}, attrs));
    const button = el("button", {type: "button", class: "sort"}, label);
    button.appendChild(el("span", {class: "arrow", "aria-hidden": "true"}));
    button.addEventListener("click", () => {
      if (state.key === key) state.dir = state.dir === "asc" ? "desc" : "asc";
      else Object.assign(state, {key, dir: bestFirstDir(key)});
      render();
    });
    th.appendChild(button);
    return th;
  }

  // Two header rows: benchmark names spanning their columns, then the columns themselves.
  function buildHeader(thead) {
    const top = el("tr"), bottom = el("tr");
    top.appendChild(sortableHeader("pvr", "PVR", {rowspan: "2", class: "pvr"}));
    top.appendChild(sortableHeader("overall_rank", "Overall rank", {rowspan: "2"}));
    for (const bench of data.benchmarks) {
      const cols = bench.columns || [];
      if (!cols.length) continue;
      const th = el("th", {colspan: String(cols.length), scope: "colgroup", class: "bench"});
      if (bench.report) th.appendChild(el("a", {href: bench.report}, bench.name));
      else th.textContent = bench.name;
      top.appendChild(th);
      for (const col of cols) {
        const lower = col.higher_is_better === false ? " (lower is better)" : "";
        const title = (col.help || "") + lower;
        bottom.appendChild(sortableHeader(col.key, col.label, {title: title.trim()}));
      }
    }
    thead.append(top, bottom);
  }

  // The sort state on the headers: an arrow, and aria-sort for screen readers.
  function updateHeader() {
    for (const th of document.querySelectorAll("#leaderboard th[data-key]")) {
      const active = th.dataset.key === state.key;
      const arrow = th.querySelector(".arrow");
      if (active) th.setAttribute("aria-sort", state.dir === "asc" ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
      arrow.textContent = active ? (state.dir === "asc" ? " \u25B2" : " \u25BC") : " \u2195";
      arrow.classList.toggle("idle", !active);
    }
  }

  function provenance(row) {
    const prov = row.provenance || {};
    const details = el("details", {class: "provenance"});
    details.appendChild(el("summary", {}, "provenance"));
    const dl = el("dl");
    const add = (term, value) => {
      dl.appendChild(el("dt", {}, term));
      dl.appendChild(el("dd", {}, isMissing(value) || value === "" ? MISSING : String(value)));
    };
    add("code version", prov.code_version);
    add("checkpoint", prov.checkpoint);
    add("checkpoint sha256", prov.checkpoint_sha256);
    for (const bench of data.benchmarks) add(`config hash (${bench.name})`,
      (prov.config_hash || {})[bench.key]);
    details.appendChild(dl);
    return details;
  }

  // A value cell: the value links to the records, a small gear to the exact config.
  function valueCell(row, bench, col, best) {
    const td = el("td", {class: "num", "data-key": col.key});
    const v = valueOf(row, col.key);
    if (isMissing(v)) {
      td.appendChild(el("span", {class: "missing", title: "no result"}, MISSING));
      return td;
    }
    const err = (row.errors || {})[col.key];
    const ci = isMissing(err) ? "" : " \u00B1 " + err.toFixed(col.digits ?? 1);
    const text = formatValue(v, col) + ci;
    const links = (row.links || {})[bench.key] || {};
    const value = links.records ? el("a", {class: "value", href: links.records,
      title: "records: " + links.records}, text) : el("span", {class: "value"}, text);
    if (v === best[col.key]) td.classList.add("best");
    td.appendChild(value);
    if (links.config) {
      const title = "config: " + links.config;
      td.appendChild(el("a", {class: "config", href: links.config, title}, "\u2699"));
    }
    return td;
  }

  function renderBody(tbody) {
    const best = bestValues();
    const rows = data.rows.slice().sort(compareRows);  // Stable: ties keep the table's order.
    tbody.replaceChildren();
    for (const row of rows) {
      const tr = el("tr", {class: "row", "data-pvr": row.pvr});
      const name = el("th", {scope: "row", class: "pvr"});
      name.append(el("span", {class: "name"}, row.pvr), provenance(row));
      tr.appendChild(name);
      const rank = el("td", {class: "num rank"}, formatRank(row.overall_rank));
      if (!isMissing(row.overall_rank) && row.overall_rank === best.overall_rank) {
        rank.classList.add("best");
      }
      tr.appendChild(rank);
      for (const {bench, col} of columns()) tr.appendChild(valueCell(row, bench, col, best));
      tbody.appendChild(tr);
    }
  }

  // One horizontal bar chart of a column: a bar per PVR with a value, best first.
  function barChart(col) {
    const figure = el("figure", {class: "chart"});
    const caption = el("figcaption", {}, col.label + (col.unit ? ` (${col.unit})` : ""));
    if (col.higher_is_better === false) {
      caption.appendChild(el("span", {class: "lower"}, " \u00B7 lower is better"));
    }
    figure.appendChild(caption);
    const rows = data.rows.filter((r) => !isMissing(valueOf(r, col.key)));
    const sign = col.higher_is_better === false ? 1 : -1;
    rows.sort((a, b) => sign * (valueOf(a, col.key) - valueOf(b, col.key)));
    const W = 380, LABEL = 130, VALUE = 70, BAR = 16, GAP = 4;
    const height = Math.max(1, rows.length) * (BAR + GAP) + GAP;
    const svg = svgEl("svg", {class: "plot", "data-column": col.key, width: W, height,
      viewBox: `0 0 ${W} ${height}`, role: "img", "aria-label": col.label});
    if (!rows.length) {
      svg.appendChild(svgEl("text", {x: LABEL, y: BAR, class: "empty"}, "no values"));
    }
    const vals = rows.map((r) => valueOf(r, col.key));
    const lo = Math.min(0, ...vals), hi = Math.max(0, ...vals);
    const scale = (v) => LABEL + (W - LABEL - VALUE) * (v - lo) / ((hi - lo) || 1);
    rows.forEach((row, i) => {
      const v = valueOf(row, col.key), y = GAP + i * (BAR + GAP);
      const x0 = scale(0), x1 = scale(v);
      const name = row.pvr.length > 20 ? row.pvr.slice(0, 19) + "\u2026" : row.pvr;
      const label = svgEl("text", {x: LABEL - 6, y: y + BAR - 4, "text-anchor": "end"}, name);
      label.appendChild(svgEl("title", {}, row.pvr));
      svg.appendChild(label);
      svg.appendChild(svgEl("rect", {x: Math.min(x0, x1), y, height: BAR,
        width: Math.max(1, Math.abs(x1 - x0)), class: "bar"}));
      svg.appendChild(svgEl("text", {x: Math.max(x0, x1) + 4, y: y + BAR - 4, class: "value"},
        formatValue(v, col)));
    });
    figure.appendChild(svg);
    return figure;
  }

  function drawPlots(section) {
    section.appendChild(el("h2", {}, "Per-benchmark plots"));
    for (const bench of data.benchmarks) {
      if (!(bench.columns || []).length) continue;
      const block = el("div", {class: "bench-plots"});
      block.appendChild(el("h3", {}, bench.name));
      const charts = el("div", {class: "charts"});
      for (const col of bench.columns) charts.appendChild(barChart(col));
      block.appendChild(charts);
      section.appendChild(block);
    }
  }

  function render() {
    renderBody(document.querySelector("#leaderboard tbody"));
    updateHeader();
  }

  function init() {
    if (!data) {  // data.js missing or broken: say so on the page rather than show nothing.
      const message = document.getElementById("message");
      message.textContent = "The leaderboard data (data.js) did not load.";
      message.hidden = false;
      return;
    }
    document.getElementById("subtitle").textContent =
      `${data.variant} variant \u00B7 generated ${data.generated} \u00B7 code ${data.code_version}`;
    buildHeader(document.querySelector("#leaderboard thead"));
    render();
    drawPlots(document.getElementById("plots"));
    const notes = document.getElementById("notes");
    for (const note of data.notes || []) notes.appendChild(el("li", {}, note));
    notes.closest("footer").hidden = !(data.notes || []).length;
  }

  init();
}());
