// What every page shares: the API client, DOM helpers, signing in, the
// router (one page per address fragment: #/, #/stacks/NS/NAME, ...), and
// the live connection that tells the open page what changed.
//
// Everything is written to the page with textContent, never as HTML: a
// Stack's message or a resource's name cannot become markup.
"use strict";

const SP = {
  csrf: "",
  user: "",
  pages: {},    // name -> {show(params), change(c), resync()}
  current: null, // the page shown
};

const $ = (id) => document.getElementById(id);

async function api(method, path, body) {
  const opts = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  if (method !== "GET" && SP.csrf) opts.headers["X-Stackpilot-CSRF"] = SP.csrf;
  const res = await fetch(path, opts);
  const data = res.status === 204 ? {} : await res.json().catch(() => ({ error: res.statusText }));
  if (!res.ok) {
    const err = new Error(data.error || res.statusText);
    err.status = res.status;
    // A 401 anywhere but signing in means the session ended: back to the
    // sign-in form, saying so. (Asking who we are before signing in is
    // expected to be a 401: no message for that.)
    if (res.status === 401 && path !== "/api/session") showSignIn(err.message);
    throw err;
  }
  return data;
}

function text(el, s) { el.textContent = s == null ? "" : String(s); return el; }
function make(tag, cls, s) { const el = document.createElement(tag); if (cls) el.className = cls; if (s != null) text(el, s); return el; }
function link(href, s, cls) { const a = make("a", cls, s); a.href = href; return a; }
function svg(tag, attrs) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, v);
  return el;
}
function stackHref(ns, name, sub) {
  return "#/stacks/" + encodeURIComponent(ns) + "/" + encodeURIComponent(name) + (sub ? "/" + sub : "");
}

// since is how long ago iso was: 5s, 3m, 2h, 4d.
function since(iso) {
  if (!iso) return "";
  return duration(Math.max(0, (Date.now() - Date.parse(iso)) / 1000));
}
function duration(s) {
  s = Math.round(s);
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m" + (s % 60 ? " " + (s % 60) + "s" : "");
  if (s < 86400) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}
function counts(c) {
  c = c || {};
  const parts = [];
  if (c.create) parts.push("+" + c.create + " to create");
  if (c.update) parts.push("~" + c.update + " to update");
  if (c.replace) parts.push("+-" + c.replace + " to replace");
  if (c.delete) parts.push("-" + c.delete + " to delete");
  return parts.length ? parts.join(", ") : "no changes";
}
function stateBadges(states) {
  const box = make("span", "states");
  for (const s of states || []) box.append(make("span", "state " + s, s));
  return box;
}

// showError puts msg in the page's error line (role=alert).
function showError(el, e) { text(el, e ? (e.message || String(e)) : ""); }

// -- signing in --

async function signIn(body) {
  const who = await api("POST", "/api/session", body);
  SP.csrf = who.csrf;
  SP.user = who.user;
  return who;
}

function showSignIn(msg) {
  for (const s of document.querySelectorAll("main > section")) s.hidden = true;
  $("signin").hidden = false;
  $("nav").hidden = true;
  if (msg) text($("signin-error"), msg);
  live.stop();
}

async function start() {
  const hash = location.hash.slice(1);
  let who = null;
  if (hash.startsWith("code=")) {
    const code = new URLSearchParams(hash).get("code");
    history.replaceState(null, "", location.pathname + location.search + "#/"); // the code leaves the address bar at once
    try { who = await signIn({ code }); } catch (e) { text($("signin-error"), e.message); }
  }
  if (!who) {
    try {
      who = await api("GET", "/api/session");
      SP.csrf = who.csrf || "";
      SP.user = who.user;
    } catch (e) { if (e.status !== 401) text($("signin-error"), e.message); }
  }
  if (!who) { showSignIn(); return; }
  signedIn();
}

function signedIn() {
  $("signin").hidden = true;
  $("nav").hidden = false;
  $("signout").hidden = false;
  text($("user"), SP.user);
  live.start();
  route();
}

// -- the router --

// route shows the page the fragment names.
function route() {
  if (!SP.user) return;
  const [path, query] = location.hash.replace(/^#/, "").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  let name = "fleet";
  if (parts[0] === "stacks" && parts.length >= 3) {
    params.set("namespace", parts[1]);
    params.set("name", parts[2]);
    name = { plan: "plan", drift: "drift" }[parts[3]] || "stack";
  } else if (["graph", "blast", "objects"].includes(parts[0])) {
    name = parts[0];
  }
  for (const s of document.querySelectorAll("main > section")) s.hidden = s.id !== name;
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === name || (name !== "fleet" && a.dataset.page === "fleet" && name.match(/stack|plan|drift/)));
  if (SP.current && SP.current.leave) SP.current.leave();
  SP.current = SP.pages[name];
  if (!SP.current) {
    // The page's script did not load (its request failed): say so, where a
    // TypeError would leave the page blank.
    const p = document.createElement("p");
    p.className = "error";
    p.setAttribute("role", "alert");
    $(name).prepend(text(p, "This page's script did not load: reload the page."));
    return;
  }
  SP.current.show(params);
}

// -- live: server-sent events from the controller's watches --

const live = {
  source: null,
  lost: false, // the connection was lost since it last opened
  timer: null,
  pending: [],
  start() {
    if (this.source) return;
    const es = new EventSource("/api/events");
    this.source = es;
    es.addEventListener("open", () => {
      // Back after a lost connection: what changed meanwhile was not
      // told, so the page reads everything again.
      if (this.lost) this.queue(null);
      this.lost = false;
      this.status("live", "live");
    });
    es.addEventListener("change", (ev) => this.queue(JSON.parse(ev.data)));
    es.addEventListener("resync", () => this.queue(null));
    es.addEventListener("signedout", () => { this.stop(); showSignIn("the session ended: sign in again"); });
    es.addEventListener("error", () => {
      // EventSource reconnects by itself after a network error; one that
      // an answer closed (the session ended, or a proxy's 502 while the
      // controller restarts) does not: ask who we are, which shows the
      // sign-in on 401, and otherwise open a new one in 3 s, again until
      // one holds.
      this.lost = true;
      this.status("lost", "connection lost: reconnecting…");
      if (es.readyState === EventSource.CLOSED) {
        this.source = null;
        const again = () => setTimeout(() => { if (!this.source && !$("nav").hidden) this.start(); }, 3000);
        api("GET", "/api/session").then(again, (e) => { if (e.status !== 401) again(); });
      }
    });
  },
  stop() {
    if (this.source) this.source.close();
    this.source = null;
    this.status("off", "");
  },
  status(cls, msg) {
    const el = $("live");
    el.className = "live " + cls;
    text(el, msg);
  },
  // queue batches changes for half a second: a fleet that changes fast
  // costs a page one read per batch, not one per change.
  queue(c) {
    this.pending.push(c);
    if (this.timer) return;
    this.timer = setTimeout(() => {
      const batch = this.pending;
      this.pending = [];
      this.timer = null;
      const page = SP.current;
      if (!page) return;
      if (batch.includes(null)) { page.resync(); return; }
      if (page.change && batch.some((c) => page.change(c))) page.resync();
    }, 500);
  },
};

document.addEventListener("DOMContentLoaded", () => {
  $("signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    try { await signIn({ token: $("token").value.trim() }); $("token").value = ""; signedIn(); }
    catch (e) { text($("signin-error"), e.message); }
  });
  $("signout").addEventListener("click", async () => { try { await api("DELETE", "/api/session"); } finally { location.assign("/"); } });
  window.addEventListener("hashchange", route);
  start();
});
