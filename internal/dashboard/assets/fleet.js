// The fleet page: signs in (a one-use code in the URL's fragment, which
// `stackpilot dashboard` got for the user's token; or a pasted token),
// then asks the controller
// for one page of the fleet at a time: filtering, sorting and paging are
// the server's, so 10,000 Stacks cost this page 50 rows.
"use strict";

const states = ["Ready", "Failing", "Drifted", "PlanPending", "Suspended", "Running"];
const view = { namespace: "", selector: "", state: "", name: "", sort: "name", page: 1, pageSize: 50 };
let csrf = "";

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const opts = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET" && csrf) opts.headers["X-Stackpilot-CSRF"] = csrf;
  const res = await fetch(path, opts);
  const data = res.status === 204 ? {} : await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    throw err;
  }
  return data;
}

function text(el, s) { el.textContent = s == null ? "" : String(s); return el; }
function make(tag, cls, s) { const el = document.createElement(tag); if (cls) el.className = cls; if (s != null) text(el, s); return el; }

function since(iso) {
  if (!iso) return "";
  const s = Math.max(0, Math.round((Date.now() - Date.parse(iso)) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.round(s / 60) + "m";
  if (s < 86400) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}

async function signIn(token) {
  const who = await api("POST", "/api/session", { token });
  csrf = who.csrf;
  return who;
}

async function signInWithCode(code) {
  const who = await api("POST", "/api/session", { code });
  csrf = who.csrf;
  return who;
}

async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  let who = null;
  if (hash.get("code")) {
    history.replaceState(null, "", location.pathname + location.search); // the code leaves the address bar at once
    try { who = await signInWithCode(hash.get("code")); } catch (e) { text($("signin-error"), e.message); }
  }
  if (!who) {
    try { who = await api("GET", "/api/session"); csrf = who.csrf || ""; } catch (e) { if (e.status !== 401) text($("signin-error"), e.message); }
  }
  if (!who) { $("signin").hidden = false; return; }
  showFleet(who.user);
}

function showFleet(user) {
  $("signin").hidden = true;
  $("fleet").hidden = false;
  $("signout").hidden = false;
  text($("user"), user);
  const params = new URLSearchParams(location.search);
  for (const k of Object.keys(view)) if (params.has(k)) view[k] = k === "page" || k === "pageSize" ? Number(params.get(k)) || view[k] : params.get(k);
  $("f-name").value = view.name; $("f-namespace").value = view.namespace; $("f-selector").value = view.selector;
  load();
}

function query() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(view)) if (v !== "" && v != null) q.set(k, v);
  return q.toString();
}

async function load() {
  text($("fleet-error"), "");
  history.replaceState(null, "", "/?" + query());
  let f;
  try { f = await api("GET", "/api/fleet?" + query()); } catch (e) {
    if (e.status === 401) { $("fleet").hidden = true; $("signin").hidden = false; }
    text($("fleet-error"), e.message);
    return;
  }
  renderCounts(f.counts || {});
  renderRows(f.rows || []);
  $("partial").hidden = !f.partial;
  const pages = Math.max(1, Math.ceil(f.total / f.pageSize));
  text($("pageinfo"), `page ${f.page} of ${pages} · ${f.total} Stacks`);
  $("prev").disabled = f.page <= 1;
  $("next").disabled = f.page >= pages;
  for (const th of document.querySelectorAll("th[data-sort]")) {
    const key = th.dataset.sort;
    th.classList.toggle("sorted", view.sort.replace(/^-/, "") === key);
    th.classList.toggle("desc", view.sort === "-" + key);
  }
}

function renderCounts(counts) {
  const box = $("counts");
  box.replaceChildren();
  for (const s of states) {
    const b = make("button", "count " + s + (view.state === s ? " active" : ""));
    b.type = "button";
    b.dataset.state = s;
    b.append(make("strong", null, counts[s] || 0), make("span", null, s));
    b.addEventListener("click", () => { view.state = view.state === s ? "" : s; view.page = 1; load(); });
    box.append(b);
  }
}

function renderRows(rows) {
  const body = document.querySelector("#stacks tbody");
  body.replaceChildren();
  for (const r of rows) {
    const tr = make("tr");
    tr.dataset.namespace = r.namespace;
    tr.dataset.name = r.name;
    const st = make("td");
    for (const s of r.states || []) st.append(make("span", "state " + s, s));
    tr.append(make("td", null, r.namespace), make("td", "name", r.name), st, make("td", "revision", r.revision),
      make("td", null, r.operation), make("td", null, since(r.updated)), make("td", "message", r.message));
    body.append(tr);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const sel = $("f-state");
  for (const s of states) { const o = make("option", null, s); o.value = s; sel.append(o); }
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { const who = await signIn($("token").value.trim()); $("token").value = ""; showFleet(who.user); }
    catch (e) { text($("signin-error"), e.message); }
  });
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    view.name = $("f-name").value.trim(); view.namespace = $("f-namespace").value.trim();
    view.selector = $("f-selector").value.trim(); view.state = $("f-state").value; view.page = 1;
    load();
  });
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => { const k = th.dataset.sort; view.sort = view.sort === k ? "-" + k : k; load(); });
  }
  $("prev").addEventListener("click", () => { view.page = Math.max(1, view.page - 1); load(); });
  $("next").addEventListener("click", () => { view.page += 1; load(); });
  $("signout").addEventListener("click", async () => { try { await api("DELETE", "/api/session"); } finally { location.assign("/"); } });
  start();
});
