// The fleet page: counts by state and one page of the Stacks at a time.
// Filtering, sorting and paging are the server's, so 10,000 Stacks cost
// this page 50 rows. Its filters live in the address (#/?state=Failing),
// so a filtered view can be bookmarked and shared.
"use strict";

const fleetStates = ["Ready", "Failing", "Drifted", "PlanPending", "Suspended", "Running"];

SP.pages.fleet = {
  view: { namespace: "", selector: "", state: "", name: "", sort: "name", page: 1, pageSize: 50 },

  show(params) {
    const v = this.view;
    for (const k of Object.keys(v)) {
      if (!params.has(k)) continue;
      v[k] = k === "page" || k === "pageSize" ? Number(params.get(k)) || v[k] : params.get(k);
    }
    $("f-name").value = v.name; $("f-namespace").value = v.namespace; $("f-selector").value = v.selector; $("f-state").value = v.state;
    this.load();
  },
  change(c) { return c.kind === "Stack"; },
  resync() { this.load(); },

  query() {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(this.view)) if (v !== "" && v != null) q.set(k, v);
    return q.toString();
  },

  // go changes the view and reads its page.
  go(changes) {
    Object.assign(this.view, changes);
    history.replaceState(null, "", "#/?" + this.query());
    this.load();
  },

  async load() {
    const v = this.view;
    let f;
    try { f = await api("GET", "/api/fleet?" + this.query()); } catch (e) { showError($("fleet-error"), e); return; }
    showError($("fleet-error"), null);
    this.renderCounts(f.counts || {});
    this.renderRows(f.rows || []);
    $("partial").hidden = !f.partial;
    const pages = Math.max(1, Math.ceil(f.total / f.pageSize));
    text($("pageinfo"), `page ${f.page} of ${pages} · ${f.total} Stacks`);
    $("prev").disabled = f.page <= 1;
    $("next").disabled = f.page >= pages;
    for (const th of document.querySelectorAll("th[data-sort]")) {
      const key = th.dataset.sort;
      th.classList.toggle("sorted", v.sort.replace(/^-/, "") === key);
      th.classList.toggle("desc", v.sort === "-" + key);
    }
  },

  renderCounts(counts) {
    const box = $("counts");
    box.replaceChildren();
    for (const s of fleetStates) {
      const b = make("button", "count " + s + (this.view.state === s ? " active" : ""));
      b.type = "button";
      b.dataset.state = s;
      b.append(make("strong", null, counts[s] || 0), make("span", null, s));
      b.addEventListener("click", () => this.go({ state: this.view.state === s ? "" : s, page: 1 }));
      box.append(b);
    }
  },

  renderRows(rows) {
    const body = document.querySelector("#stacks tbody");
    body.replaceChildren();
    for (const r of rows) {
      const tr = make("tr");
      tr.dataset.namespace = r.namespace;
      tr.dataset.name = r.name;
      const name = make("td", "name");
      name.append(link(stackHref(r.namespace, r.name), r.name));
      const rev = make("td", "revision", shortRevision(r.revision));
      rev.title = r.revision || "";
      tr.append(make("td", "namespace", r.namespace), name, make("td", null), rev,
        make("td", null, r.operation), make("td", null, since(r.updated)), make("td", "message", r.message));
      tr.children[2].append(stateBadges(r.states));
      body.append(tr);
    }
  },
};

// shortRevision cuts a revision's digest to 12 characters, as Git hosts
// show commits: main@sha1:0123456789ab (the whole one is the cell's title).
function shortRevision(rev) {
  return (rev || "").replace(/(sha1|sha256):([0-9a-f]{12})[0-9a-f]+/, "$1:$2");
}

document.addEventListener("DOMContentLoaded", () => {
  const page = SP.pages.fleet;
  const sel = $("f-state");
  for (const s of fleetStates) { const o = make("option", null, s); o.value = s; sel.append(o); }
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    page.go({ name: $("f-name").value.trim(), namespace: $("f-namespace").value.trim(),
      selector: $("f-selector").value.trim(), state: $("f-state").value, page: 1 });
  });
  for (const th of document.querySelectorAll("th[data-sort]")) {
    th.addEventListener("click", () => { const k = th.dataset.sort; page.go({ sort: page.view.sort === k ? "-" + k : k }); });
  }
  $("prev").addEventListener("click", () => page.go({ page: Math.max(1, page.view.page - 1) }));
  $("next").addEventListener("click", () => page.go({ page: page.view.page + 1 }));
});
