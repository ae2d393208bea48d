// Portico's dashboard: reads the admin JSON API with fetch every 2 s and draws it.
// Every value from the API is inserted as text (text nodes, textContent), never as HTML.
"use strict";

const REFRESH_MS = 2000;
const PAGE = 50;

// ---- DOM helpers -----------------------------------------------------------------------

// el("td", {class: "num"}, "text", childNode, ...): strings become text nodes.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "href") node.setAttribute("href", safeHref(v));
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Only links inside the dashboard (#/…) or to the admin API (/…).
function safeHref(v) {
  const s = String(v);
  return s.startsWith("#") || (s.startsWith("/") && !s.startsWith("//")) ? s : "#/";
}

function table(headers, rows, empty) {
  if (rows.length === 0) return el("div", { class: "empty" }, empty || "none");
  const head = el("tr", {}, headers.map((h) =>
    el("th", { class: h.endsWith("/s") || h.startsWith("#") ? "num" : null }, h)));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, rows));
}

function card(label, value, sub, cls) {
  return el("div", { class: "card" },
    el("div", { class: "label" }, label),
    el("div", { class: "value " + (cls || "") }, value),
    sub ? el("div", { class: "sub" }, sub) : null);
}

// ---- the API -------------------------------------------------------------------------

async function getJSON(path) {
  const resp = await fetch(path, { headers: { Accept: "application/json" }, cache: "no-store" });
  if (!resp.ok) throw new Error(`${path}: HTTP ${resp.status}`);
  const total = resp.headers.get("X-Total-Count");
  const body = await resp.json();
  return total === null ? body : { items: body, total: Number(total) };
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== undefined) q.set(k, v);
  return q.toString();
}

// ---- words -----------------------------------------------------------------------------

function ruleText(r) {
  if (r.type === "HOST_NAME") {
    return r.compare_type === "WILDCARD_LABEL" ? `Host *.${r.value}` : `Host ${r.value}`;
  }
  if (r.type === "PATH") {
    return r.compare_type === "PATH_PREFIX" ? `path prefix ${r.value}` : `path exactly ${r.value}`;
  }
  return `${r.type} ${r.compare_type} ${r.value}`;
}

function actionText(p) {
  const a = p.action;
  if (a.type === "REDIRECT_TO_POOL") return `pool ${p.poolLabel || p.pool || a.pool}`;
  if (a.type === "REJECT") return `reject with ${a.status}`;
  if (a.type === "REDIRECT_TO_HTTPS") return `redirect to HTTPS (${a.status})`;
  return a.type;
}

// "Host images.example.com, path prefix / → pool demo/webservice-images:80"
function policyText(p) {
  const when = p.rules.length ? p.rules.map(ruleText).join(", ") : "Any request";
  return `${when} → ${actionText(p)}`;
}

function objectName(o) {
  return o.namespace ? `${o.namespace}/${o.name}` : o.name;
}

function rate(n) {
  if (n === null || n === undefined) return "–";
  return n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2);
}

function percent(f) {
  return f === null || f === undefined ? "–" : `${(f * 100).toFixed(f > 0 && f < 0.01 ? 2 : 1)} %`;
}

function ms(seconds) {
  return seconds === null || seconds === undefined ? "–" : `${(seconds * 1000).toFixed(1)} ms`;
}

function ago(ms) {
  if (!ms) return "–";
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.floor(s / 60)} min ago`;
  return `${Math.floor(s / 3600)} h ago`;
}

// ---- traffic rates from two samples ------------------------------------------------------

const samples = { prev: null, last: null };

function remember(summary) {
  const sample = { t: performance.now(), traffic: summary.traffic };
  if (!samples.last || sample.t - samples.last.t > 500) {
    samples.prev = samples.last;
    samples.last = sample;
  }
}

// Rates over the last two samples: {rps, errorRate, latency} for the whole or one pool.
function rates(pool) {
  const { prev, last } = samples;
  if (!prev || !last) return { rps: null, errorRate: null, latency: null };
  const pick = (s) => (pool ? s.traffic.pools[pool] : s.traffic) || {};
  const a = pick(prev);
  const b = pick(last);
  const dt = (last.t - prev.t) / 1000;
  const dreq = (b.requests || 0) - (a.requests || 0);
  const derr = (b.errors || 0) - (a.errors || 0);
  const dcount = (b.latencyCount || 0) - (a.latencyCount || 0);
  const dsum = (b.latencySum || 0) - (a.latencySum || 0);
  return {
    rps: dt > 0 ? Math.max(0, dreq) / dt : null,
    errorRate: dreq > 0 ? derr / dreq : null,
    latency: dcount > 0 ? dsum / dcount : null,
  };
}

// ---- paged, filtered lists -----------------------------------------------------------------

// A list with a filter box and previous/next buttons over `path?limit=&offset=&q=`.
class PagedList {
  constructor(path, placeholder, render, extra) {
    this.path = path;
    this.render = render;
    this.extra = extra || {};
    this.offset = 0;
    this.q = "";
    this.input = el("input", { type: "search", placeholder, "aria-label": placeholder });
    this.input.addEventListener("input", () => {
      this.q = this.input.value.trim();
      this.offset = 0;
      this.refresh();
    });
    this.prev = el("button", { type: "button", onclick: () => this.move(-PAGE) }, "← previous");
    this.next = el("button", { type: "button", onclick: () => this.move(PAGE) }, "next →");
    this.info = el("span", { class: "muted" });
    this.body = el("div", {});
    this.node = el("div", {}, el("div", { class: "toolbar" }, this.input, this.prev, this.next, this.info), this.body);
    this.seq = 0;
  }

  move(by) {
    this.offset = Math.max(0, this.offset + by);
    this.refresh();
  }

  async refresh() {
    const seq = ++this.seq;
    const page = await getJSON(`${this.path}?${query({ limit: PAGE, offset: this.offset, q: this.q, ...this.extra })}`);
    if (seq !== this.seq) return; // a newer request was made meanwhile
    if (this.offset > 0 && this.offset >= page.total) {
      this.offset = Math.max(0, Math.floor((page.total - 1) / PAGE) * PAGE);
      return this.refresh();
    }
    const end = this.offset + page.items.length;
    this.info.textContent = page.total === 0 ? "0" : `${this.offset + 1}–${end} of ${page.total}`;
    this.prev.disabled = this.offset === 0;
    this.next.disabled = end >= page.total;
    this.body.replaceChildren(this.render(page.items));
  }
}

// ---- views ---------------------------------------------------------------------------------

const state = { summary: null, view: null, route: "" };

function lbFor(ingress) {
  const lbs = state.summary ? state.summary.loadBalancers : [];
  return lbs.find((lb) => lb.origin.kind === "Ingress" && lb.origin.namespace === ingress.namespace
      && lb.origin.name === ingress.name)
    || lbs.find((lb) => lb.origin.kind === "IngressClass" && lb.origin.name === ingress.ingressClassName);
}

function diagnosticsList(diags) {
  if (!diags.length) return el("span", { class: "ok" }, "ok");
  return diags.map((d) => el("div", { class: `diag ${d.severity}` },
    `${d.severity}: `, d.field ? `${d.field}: ` : "", d.message));
}

function ingressRows(items) {
  return table(["Ingress", "class", "address", "diagnostics", "produced"], items.map((i) => {
    const lb = i.owned ? lbFor(i) : null;
    const addr = i.status.loadBalancer.ingress.map((a) => a.ip || a.hostname).join(", ");
    const source = `${i.namespace}/${i.name}`;
    return el("tr", { "data-ingress": source },
      el("td", {}, source),
      el("td", {}, i.ingressClassName || "–", i.owned ? "" : el("span", { class: "muted" }, " (not ours)")),
      el("td", {}, addr || "–"),
      el("td", {}, diagnosticsList(i.diagnostics)),
      el("td", {}, lb
        ? el("a", { href: `#/lb/${lb.id}?source=${encodeURIComponent(source)}` }, `${lb.name}: its policies`)
        : "–"));
  }), "no Ingress matches");
}

function diagnosticRows(items) {
  return table(["object", "severity", "field", "message"], items.map((d) => el("tr", {},
    el("td", {}, `${d.object.kind} ${objectName(d.object)}`),
    el("td", { class: d.severity }, d.severity),
    el("td", {}, d.field || "–"),
    el("td", {}, d.message))), "no diagnostics");
}

function placementText(p) {
  if (!p) return "–";
  return `active ${p.active}` + (p.standby ? `, standby ${p.standby}` : "") + `, epoch ${p.epoch}`;
}

class Overview {
  constructor() {
    this.cards = el("div", { class: "cards" });
    this.lbs = el("div", {});
    this.ingresses = new PagedList("/api/v1/ingresses", "filter Ingresses by namespace/name or class", ingressRows);
    this.diagnostics = new PagedList("/api/v1/diagnostics", "filter", diagnosticRows);
    this.diagnostics.input.hidden = true;
    this.node = el("section", { id: "overview" },
      el("h2", {}, "Overview"), this.cards,
      el("h2", {}, "Load balancers"), this.lbs,
      el("h2", {}, "Ingresses"), this.ingresses.node,
      el("h2", {}, "Other diagnostics"), this.diagnostics.node);
  }

  async refresh(s) {
    const r = rates(null);
    const c = s.counts;
    this.cards.replaceChildren(
      card("Load balancers", c.loadBalancers, `${c.listeners} listeners, ${c.policies} policies`),
      card("Ingresses", c.ingresses),
      card("Pools", c.pools, `${c.membersReady} of ${c.members} members ready`),
      card("Errors", s.diagnostics.error, "diagnostics", s.diagnostics.error ? "error" : "ok"),
      card("Warnings", s.diagnostics.warning, "diagnostics", s.diagnostics.warning ? "warning" : "ok"),
      card("Requests/s", rate(r.rps), `${s.traffic.requests} since start`),
      card("Error rate", percent(r.errorRate), "5xx of answered", r.errorRate > 0 ? "bad" : ""),
      card("Generation", s.generation,
        s.appliedAtMs ? `applied ${new Date(s.appliedAtMs).toLocaleTimeString()} (${ago(s.appliedAtMs)})` : "not applied yet"));
    this.lbs.replaceChildren(table(
      ["name", "provider", "VIP", "floating IP", "placement", "listeners", "pools", "members ready", "requests/s", "error rate"],
      s.loadBalancers.map((lb) => {
        let rps = 0;
        let reqs = 0;
        let errs = 0;
        for (const p of lb.pools) {
          const pr = rates(p);
          rps += pr.rps || 0;
          const t = samples.last && samples.prev ? [samples.prev.traffic.pools[p], samples.last.traffic.pools[p]] : [];
          if (t[0] && t[1]) {
            reqs += t[1].requests - t[0].requests;
            errs += t[1].errors - t[0].errors;
          }
        }
        return el("tr", {},
          el("td", {}, el("a", { href: `#/lb/${lb.id}` }, lb.name)),
          el("td", {}, lb.provider),
          el("td", {}, lb.vip || "–"),
          el("td", {}, lb.floating_ip || "–"),
          el("td", {}, placementText(lb.placement)),
          el("td", {}, lb.listeners.map((l) => `${l.protocol} :${l.port}`).join(", ")),
          el("td", { class: "num" }, lb.pools.length),
          el("td", { class: "num" }, `${lb.membersReady} / ${lb.members}`),
          el("td", { class: "num" }, samples.prev ? rate(rps) : "–"),
          el("td", { class: "num" }, percent(reqs > 0 ? errs / reqs : null)));
      }), "no load balancer"));
    await Promise.all([this.ingresses.refresh(), this.diagnostics.refresh()]);
  }
}

class IngressesView {
  constructor() {
    this.list = new PagedList("/api/v1/ingresses", "filter Ingresses by namespace/name or class", ingressRows);
    this.node = el("section", { id: "ingresses" }, el("h2", {}, "Ingresses"), this.list.node);
  }

  refresh() {
    return this.list.refresh();
  }
}

class DiagnosticsView {
  constructor() {
    this.list = new PagedList("/api/v1/diagnostics", "filter", diagnosticRows);
    this.list.input.hidden = true;
    this.node = el("section", { id: "diagnostics" },
      el("h2", {}, "Diagnostics of objects other than Ingresses"), this.list.node,
      el("p", { class: "muted" }, "An Ingress's own diagnostics are listed with it under Ingresses."));
  }

  refresh() {
    return this.list.refresh();
  }
}

class LoadBalancerView {
  constructor(id, source) {
    this.id = id;
    this.source = source;
    this.head = el("div", {});
    this.listeners = el("div", {});
    const base = `/api/v1/loadbalancers/${encodeURIComponent(id)}`;
    this.policies = new PagedList(`${base}/policies`, "filter policies by host, path, pool or Ingress",
      (items) => this.policyList(items), source ? { source } : {});
    this.pools = new PagedList(`${base}/pools`, "filter pools", (items) => this.poolList(items));
    this.sourceNote = el("div", {});
    this.node = el("section", { id: "loadbalancer" },
      this.head,
      el("h2", {}, "Listeners"), this.listeners,
      el("h2", {}, "Policies in evaluation order"), this.sourceNote, this.policies.node,
      el("h2", {}, "Pools"), this.pools.node);
    this.poolNodes = [];
  }

  policyList(items) {
    if (!items.length) return el("div", { class: "empty" }, "no policy matches");
    return el("ol", { class: "policies", start: this.policies.offset + 1 }, items.map((p) =>
      el("li", { "data-position": p.position },
        el("span", { class: "tag" }, `${p.protocol} :${p.port}`),
        el("span", { class: "policy-text" }, policyText(p)),
        el("span", { class: "muted" }, `  from Ingress ${objectName(p.source)}`))));
  }

  poolList(items) {
    if (!items.length) return el("div", { class: "empty" }, "no pool matches");
    this.poolNodes = [];
    return el("div", {}, items.map((p) => {
      const stats = el("div", { class: "stats" });
      this.poolNodes.push({ name: p.name, stats });
      const hasHealth = p.members.some((m) => m.health !== undefined);
      const headers = ["member", "ready", "weight"].concat(hasHealth ? ["health"] : []);
      return el("div", { class: "pool", "data-pool": p.name },
        el("h3", {}, `pool ${p.label}`, el("span", { class: "muted" },
          `  ${p.name} · ${p.algorithm && typeof p.algorithm === "object" ? JSON.stringify(p.algorithm) : p.algorithm} · ${p.protocol}`)),
        stats,
        table(headers, p.members.map((m) => el("tr", {},
          el("td", {}, m.address.includes(":") ? `[${m.address}]:${m.port}` : `${m.address}:${m.port}`),
          el("td", { class: m.ready ? "ok" : "bad" }, m.ready ? "ready" : "not ready"),
          el("td", { class: "num" }, m.weight),
          hasHealth ? el("td", {}, healthText(m.health)) : null)), "no members"));
    }));
  }

  updateStats() {
    for (const { name, stats } of this.poolNodes) {
      const r = rates(name);
      const total = samples.last && samples.last.traffic.pools[name];
      stats.textContent = `${rate(r.rps)} requests/s · error rate ${percent(r.errorRate)} · `
        + `latency ${ms(r.latency)} · ${total ? total.requests : 0} requests since start`;
    }
  }

  async refresh(s) {
    const lb = s.loadBalancers.find((l) => l.id === this.id || l.name === this.id);
    if (!lb) {
      this.head.replaceChildren(el("h2", {}, `No load balancer ${this.id}`), el("a", { href: "#/" }, "back to the overview"));
      return;
    }
    this.head.replaceChildren(
      el("h2", {}, `Load balancer ${lb.name}`),
      el("dl", { class: "kv" },
        el("dt", {}, "id"), el("dd", {}, lb.id),
        el("dt", {}, "made for"), el("dd", {}, `${lb.origin.kind} ${objectName(lb.origin)}`),
        el("dt", {}, "provider"), el("dd", {}, lb.provider),
        el("dt", {}, "VIP"), el("dd", {}, lb.vip || "–"),
        el("dt", {}, "floating IP"), el("dd", {}, lb.floating_ip || "–"),
        lb.placement ? [el("dt", {}, "placement"), el("dd", {}, placementText(lb.placement))] : null,
        el("dt", {}, "members"), el("dd", {}, `${lb.membersReady} of ${lb.members} ready`)));
    this.listeners.replaceChildren(table(["name", "protocol", "port", "policies", "no policy matches →"],
      lb.listeners.map((l) => el("tr", {},
        el("td", {}, l.name), el("td", {}, l.protocol), el("td", {}, l.port), el("td", {}, l.policies),
        el("td", {}, l.defaultPool ? `pool ${l.defaultPool}` : "404 Not Found",
          l.defaultSource ? el("span", { class: "muted" }, `  from Ingress ${objectName(l.defaultSource)}`) : null))),
      "no listeners"));
    this.sourceNote.replaceChildren(this.source
      ? el("p", {}, `Only the policies of Ingress ${this.source}. `, el("a", { href: `#/lb/${lb.id}` }, "show all"))
      : "");
    await Promise.all([this.policies.refresh(), this.pools.refresh()]);
    this.updateStats();
  }
}

function healthText(h) {
  if (h === null || h === undefined) return "–";
  if (typeof h === "string") return h;
  if (typeof h === "object") {
    const word = h.state || h.status || (h.healthy === true ? "healthy" : h.healthy === false ? "unhealthy" : "");
    const extra = Object.entries(h).filter(([k]) => !["state", "status", "healthy"].includes(k))
      .map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : v}`);
    return [word].concat(extra).filter(Boolean).join(", ") || JSON.stringify(h);
  }
  return String(h);
}

// ---- routing and the refresh loop ------------------------------------------------------------

function viewFor(hash) {
  const [path, search] = hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(search || "");
  const lb = path.match(/^\/lb\/([^/]+)$/);
  if (lb) return new LoadBalancerView(decodeURIComponent(lb[1]), params.get("source") || "");
  if (path === "/ingresses") return new IngressesView();
  if (path === "/diagnostics") return new DiagnosticsView();
  return new Overview();
}

const main = () => document.getElementById("main");
const live = () => document.getElementById("live");

async function tick() {
  try {
    const s = await getJSON("/api/v1/summary");
    state.summary = s;
    remember(s);
    if (location.hash !== state.route || !state.view) {
      state.route = location.hash;
      state.view = viewFor(location.hash);
      main().replaceChildren(state.view.node);
    }
    await state.view.refresh(s);
    live().textContent = `${s.ready ? "ready" : "not ready"} · generation ${s.generation} · updated ${new Date().toLocaleTimeString()}`;
    live().className = s.ready ? "" : "warning";
  } catch (e) {
    live().textContent = `cannot reach the admin API (${e.message}); retrying`;
    live().className = "error";
  }
}

let timer = null;

function schedule() {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    await tick();
    schedule();
  }, REFRESH_MS);
}

window.addEventListener("hashchange", async () => {
  state.view = null;
  await tick();
  schedule();
});

document.addEventListener("DOMContentLoaded", async () => {
  await tick();
  schedule();
});
