/* Inspect and "View code" of one turn (issue 10).
 *
 * Inspect: an answer's "Inspect" link opens the turn's record in a drawer beside the answer
 * (the fragment of /m/<id>/inspect/, fetched with HX-Request); a plain, middle or modified
 * click, or a page without JavaScript, still opens the standalone page. Esc or the close button
 * closes the drawer and focus returns to the link (or to the same answer's link after a redraw).
 * In the record (drawer or page): copy buttons for the request JSON, the response text, each raw
 * event and all events; a filter box over the events (plain substring, case-insensitive, at
 * most 200 characters, over at most the 2,000 events a turn keeps).
 *
 * View code: the code dialog shows the next turn's request (the settings panel) or this turn's
 * (the exact request an answer sent, as recorded). An answer's "View code" link opens the dialog
 * on that turn; "This turn" in the dialog shows the chosen answer, else the last one.
 * No inline script or handler anywhere (CSP); nothing here builds HTML from strings. */
(function () {
  "use strict";

  var drawer = null, opener = null, openerMid = null;

  function plainClick(e) {
    return e.button === 0 && !e.ctrlKey && !e.metaKey && !e.shiftKey && !e.altKey;
  }
  function midOf(el) {
    var foot = el && el.closest && el.closest(".msg-foot[data-mid]");
    return foot ? foot.getAttribute("data-mid") : null;
  }
  function answerOf(mid) {
    var foot = mid && document.querySelector('.msg-foot[data-mid="' + CSS.escape(mid) + '"]');
    return foot ? foot.closest(".msg") : null;
  }

  // ---- the drawer ------------------------------------------------------------------------------
  function ensureDrawer() {
    if (drawer && drawer.isConnected) return drawer;
    drawer = document.createElement("dialog");
    drawer.id = "inspect-drawer";
    drawer.className = "inspect-drawer";
    drawer.setAttribute("aria-labelledby", "inspect-title");
    document.body.appendChild(drawer);
    return drawer;
  }
  function setStatus(d, text) {
    var p = document.createElement("p");
    p.className = "muted inspect-loading";
    p.id = "inspect-title";
    p.setAttribute("tabindex", "-1");
    p.textContent = text;
    d.replaceChildren(p);
  }
  function openInspect(link) {
    var d = ensureDrawer(), mid = midOf(link);
    opener = link; openerMid = mid;
    document.querySelectorAll(".msg.inspecting").forEach(function (m) { m.classList.remove("inspecting"); });
    var art = answerOf(mid); if (art) art.classList.add("inspecting");
    setStatus(d, "Loading the turn's record…");
    if (!d.open) d.show();
    if (art) setTimeout(function () { art.scrollIntoView({ block: "nearest" }); }, 0);  // after the thread narrows
    fetch(link.getAttribute("href"), { headers: { "HX-Request": "true" }, credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) throw new Error(r.status === 404 ? "This turn is not yours or no longer exists (HTTP 404)." : "Could not load the record (HTTP " + r.status + ").");
        return r.text();
      })
      .then(function (html) {
        if (opener !== link) return;  // another Inspect was opened meanwhile
        // The server's own template output (escaped there), parsed inert and moved in.
        var doc = new DOMParser().parseFromString(html, "text/html");
        d.replaceChildren.apply(d, Array.prototype.slice.call(doc.body.childNodes));
        initRecord(d);
        var h = d.querySelector(".inspect-close") || d.querySelector("#inspect-title");
        if (h) h.focus();
      }, function (err) {
        if (opener !== link) return;
        setStatus(d, err.message || "Could not load the record.");
        var t = d.querySelector("#inspect-title"); if (t) t.focus();
      });
  }
  function closeInspect() {
    if (!drawer || !drawer.open) return false;
    drawer.close();
    document.querySelectorAll(".msg.inspecting").forEach(function (m) { m.classList.remove("inspecting"); });
    var back = opener && opener.isConnected ? opener : null;
    if (!back && openerMid) {
      var art = answerOf(openerMid);
      back = art && art.querySelector("a.inspect-link");
    }
    if (back) back.focus();
    opener = null; openerMid = null;
    return true;
  }

  document.addEventListener("click", function (e) {
    var t = e.target.closest ? e.target : e.target.parentElement;
    if (!t) return;
    var link = t.closest("a.inspect-link");
    if (link && plainClick(e) && link.closest(".msg-foot")) { e.preventDefault(); openInspect(link); return; }
    if (t.closest(".inspect-close")) { closeInspect(); return; }
    var code = t.closest("a.turn-code-link");
    if (code && plainClick(e) && document.getElementById("code-dialog") && window.htmx) {
      e.preventDefault(); openTurnCode(code.getAttribute("href"), code); return;
    }
    if (t.closest("#code-scope-this")) { thisTurn(); return; }
    var c = t.closest("button.copy-inspect, button.copy-event, button.copy-events");
    if (c) copyFrom(c);
  });
  // Esc closes the drawer (before app.js's Esc, which would stop a running answer).
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || e.shiftKey || !drawer || !drawer.open) return;
    if (document.querySelector("dialog[open]:modal")) return;  // a modal dialog closes first
    if (e.target.closest && e.target.closest(".edit-form")) return;
    e.preventDefault(); e.stopImmediatePropagation();
    closeInspect();
  }, true);

  // ---- copy and filter -------------------------------------------------------------------------
  function flash(btn, text) {
    btn.setAttribute("data-copied", "1");
    var live = document.getElementById("live-region");
    if (live) live.textContent = text;
    setTimeout(function () { btn.removeAttribute("data-copied"); }, 1200);
  }
  function writeText(text, btn) {
    var done = function () { flash(btn, "Copied"); };
    if (navigator.clipboard && window.isSecureContext) { navigator.clipboard.writeText(text).then(done, done); return; }
    var ta = document.createElement("textarea");
    ta.value = text; document.body.appendChild(ta); ta.select();
    try { document.execCommand("copy"); } catch (err) { /* nothing to do */ }
    ta.remove(); done();
  }
  function eventText(li) {
    var name = li.querySelector(".ev-name"), data = li.querySelector(".ev-data");
    return (name ? name.textContent + "\n" : "") + "data: " + (data ? data.textContent : "") + "\n";
  }
  function copyFrom(btn) {
    var root = btn.closest(".inspect-body") || document;
    if (btn.classList.contains("copy-event")) { writeText(eventText(btn.closest("li")), btn); return; }
    if (btn.classList.contains("copy-events")) {
      writeText(Array.prototype.map.call(root.querySelectorAll("ol.events li.ev"), eventText).join("\n"), btn);
      return;
    }
    var src = root.querySelector(btn.getAttribute("data-copy"));
    writeText(src ? src.textContent : "", btn);
  }
  var MAX_FILTER = 200;
  function filterEvents(input) {
    var root = input.closest(".inspect-body"), q = input.value.slice(0, MAX_FILTER).toLowerCase();
    var items = root.querySelectorAll("ol.events li.ev"), shown = 0;
    for (var i = 0; i < items.length; i++) {
      var li = items[i];
      if (li._text === undefined) li._text = li.textContent.toLowerCase();
      var on = !q || li._text.indexOf(q) >= 0;
      li.hidden = !on;
      if (on) shown++;
    }
    var count = root.querySelector(".events-count"), none = root.querySelector(".events-none");
    if (count) count.textContent = shown + " of " + items.length;
    if (none) none.hidden = shown > 0;
  }
  var filterTimer = null;
  document.addEventListener("input", function (e) {
    if (!(e.target.classList && e.target.classList.contains("events-filter"))) return;
    var input = e.target;
    clearTimeout(filterTimer);
    filterTimer = setTimeout(function () { filterEvents(input); }, 60);
  });
  function initRecord(root) {
    var f = root.querySelector(".events-filter");
    if (f && f.value) filterEvents(f);
  }

  // ---- View code: next turn or this turn ---------------------------------------------------------
  var chosenCode = null;
  function lastTurnCode() {
    var links = document.querySelectorAll("#thread .msg-assistant:not(.status-streaming) a.turn-code-link");
    return links.length ? links[links.length - 1].getAttribute("href") : null;
  }
  function openTurnCode(url, from) {
    chosenCode = url;
    var body = document.getElementById("code-dialog-body");
    htmx.ajax("GET", url, { target: body, swap: "innerHTML", source: from }).then(function () {
      var d = document.getElementById("code-dialog");
      if (d && !d.open) d.showModal();
    });
  }
  function thisTurn() {
    var url = chosenCode || lastTurnCode();
    if (url) openTurnCode(url, document.getElementById("code-scope-this"));
  }
  function syncScope() {
    var d = document.getElementById("code-dialog"), view = document.querySelector("#code-dialog-body .code-view");
    var next = document.getElementById("code-scope-next"), mine = document.getElementById("code-scope-this");
    if (!d || !next || !mine) return;
    var scope = view ? view.getAttribute("data-scope") : (d.getAttribute("data-scope") || "next");
    next.setAttribute("aria-pressed", scope === "next" ? "true" : "false");
    mine.setAttribute("aria-pressed", scope === "this" ? "true" : "false");
    var can = !!(chosenCode || lastTurnCode());
    mine.disabled = !can;
    mine.title = can ? "The request an answer sent, as recorded" : "No answer yet: send a message first";
  }
  document.addEventListener("htmx:beforeRequest", function (e) {
    var d = document.getElementById("code-dialog"), elt = e.detail && e.detail.elt;
    if (!d || !elt) return;
    if (elt.id === "view-code") chosenCode = null;  // the settings panel's button starts from the next turn
    if (elt.id === "view-code" || elt.id === "code-scope-next") d.setAttribute("data-scope", "next");
    else if (elt.id === "code-scope-this" || (elt.classList && elt.classList.contains("turn-code-link"))) d.setAttribute("data-scope", "this");
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target && e.target.id === "code-dialog-body") syncScope();
  });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll(".inspect-body").forEach(initRecord);
  });
})();
