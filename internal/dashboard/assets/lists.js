// Two list pages: the blast radius (each change waiting to land, a commit
// with pending plans or a previewed pull request, and every Stack it
// touches with its counts) and the Receivers and Alerts (state, last event,
// last error).
"use strict";

SP.pages.blast = {
  show() { this.load(); },
  change(c) { return c.kind === "Stack"; },
  resync() { this.load(); },

  async load() {
    let b;
    try { b = await api("GET", "/api/blast-radius"); } catch (e) { showError($("b-error"), e); return; }
    showError($("b-error"), null);
    const box = $("b-body");
    box.replaceChildren();
    if (!b.changes.length) { box.append(make("p", "note", "No change waits to land: no Stack holds a pending plan or a pull request's preview.")); return; }
    for (const g of b.changes) {
      const sec = make("section", "change " + g.kind);
      const what = g.kind === "pullRequest" ? "Pull request #" + g.number + " at " + g.revision : "Commit " + g.revision;
      sec.append(make("h3", null, what), make("p", "note", g.source + " · " + g.stacks.length + " Stacks · " + counts(g.totals)));
      const table = make("table");
      const hr = make("tr");
      for (const h of ["Namespace", "Name", "Phase", "Changes", "Plan", "Message"]) hr.append(make("th", null, h));
      const thead = make("thead");
      thead.append(hr);
      const tb = make("tbody");
      for (const s of g.stacks) {
        const tr = make("tr");
        tr.dataset.namespace = s.namespace;
        tr.dataset.name = s.name;
        const name = make("td");
        name.append(link(stackHref(s.namespace, s.name, g.kind === "commit" ? "plan" : ""), s.name));
        tr.append(make("td", null, s.namespace), name, make("td", null, s.phase), make("td", null, s.changes ? counts(s.changes) : ""), make("td", null, s.plan), make("td", "message", s.message));
        tb.append(tr);
      }
      table.append(thead, tb);
      sec.append(table);
      box.append(sec);
    }
  },
};

SP.pages.objects = {
  show() { this.load(); },
  change(c) { return c.kind === "Receiver" || c.kind === "Alert"; },
  resync() { this.load(); },

  async load() {
    let rs, as;
    try { [rs, as] = await Promise.all([api("GET", "/api/receivers"), api("GET", "/api/alerts")]); } catch (e) { showError($("o-error"), e); return; }
    showError($("o-error"), null);
    fill("#o-receivers tbody", rs.receivers, (r) => [r.namespace, r.name, r.type, r.suspended ? "Suspended" : r.ready,
      r.lastEvent ? r.lastEvent.event + " " + (r.lastEvent.repository || "") + " " + (r.lastEvent.ref || "") + " → " + r.lastEvent.stacks + " Stacks" : "none yet",
      since(r.lastEventAt), r.ready === "False" ? r.message : ""]);
    fill("#o-alerts tbody", as.alerts, (a) => [a.namespace, a.name, a.provider + (a.channel ? " " + a.channel : ""), a.suspended ? "Suspended" : a.ready,
      a.sent + " sent, " + a.failures + " given up", since(a.lastSent), a.lastError ? a.lastError + " (" + since(a.lastErrorAt) + " ago)" : ""]);
  },
};

// fill writes one row per item, its cells from cells(item).
function fill(selector, items, cells) {
  const body = document.querySelector(selector);
  body.replaceChildren();
  for (const it of items) {
    const tr = make("tr");
    tr.dataset.namespace = it.namespace;
    tr.dataset.name = it.name;
    for (const c of cells(it)) tr.append(make("td", null, c));
    body.append(tr);
  }
  if (!items.length) {
    const tr = make("tr");
    tr.append(make("td", "note", "none you may see"));
    body.append(tr);
  }
}
