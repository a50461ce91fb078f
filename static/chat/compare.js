/* The compare page's client (chat.compare): adds every lane's settings to each websocket send,
 * Enter-to-send, clears the composer once the server shows the prompt, refreshes the turn table
 * and chart when a lane finishes, and shows lane notices. Streaming itself is app.js's: each
 * answer's deltas address its own element, so lanes never mix. No inline code (strict CSP). */
(function () {
  "use strict";
  function app() { return document.querySelector(".compare-app"); }
  function uuid4() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, function (c) {
      return (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16);
    });
  }
  var FIELDS = ["endpoint_id", "model", "system_prompt", "temperature", "top_p", "max_tokens", "seed", "prompt_version_id"];
  function lanes() {
    return Array.prototype.map.call(document.querySelectorAll("form.lane-form"), function (f) {
      var out = { lane_id: f.getAttribute("data-lane-id") };
      FIELDS.forEach(function (n) { var el = f.querySelector("[name=" + n + "]"); if (el && el.value !== "") out[n] = el.value; });
      if (out.system_prompt === undefined) out.system_prompt = "";
      return out;
    });
  }
  var pendingTurn = null;
  document.addEventListener("htmx:wsConfigSend", function (e) {
    if (!app()) return;
    var asker = e.target.closest && e.target.closest("[data-confirm]");
    if (asker && asker.hasAttribute("ws-send")) return;  // app.js asks
    var p = e.detail.parameters;
    if (p.action === "send" || p.action === "retry" || p.action === "regenerate") p.lanes = lanes();
    if (e.target.id === "compare-composer") {
      pendingTurn = p.turn_id;
      var b = document.getElementById("cmp-send");
      if (b) { b.disabled = true; setTimeout(function () { b.disabled = false; }, 1500); }
    }
  });
  document.addEventListener("keydown", function (e) {
    var ta = e.target;
    if (ta && ta.id === "cmp-content" && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (ta.value.trim()) document.getElementById("compare-composer").requestSubmit();
    }
  });
  var refreshTimer = null;
  function refreshSummary() {
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(function () {
      var s = document.getElementById("compare-summary");
      if (s && window.htmx) htmx.trigger(s, "pg:refresh");
    }, 250);
  }
  document.addEventListener("htmx:wsAfterMessage", function (e) {
    if (!app()) return;
    var msg = (e.detail && e.detail.message) || "";
    if (pendingTurn && document.querySelector('.lane [data-turn-id="' + pendingTurn + '"]')) {
      var f = document.getElementById("compare-composer");
      f.querySelector("[name=content]").value = "";
      f.querySelector("[name=turn_id]").value = uuid4();
      pendingTurn = null;
      var b = document.getElementById("cmp-send"); if (b) b.disabled = false;
      refreshSummary();
    }
    if (msg.indexOf("data-final") >= 0 || msg.indexOf('id="lanes"') >= 0) refreshSummary();
  });
  // A snapshot of an answer the page does not show (it missed the start): ask for the lanes again.
  document.addEventListener("htmx:oobErrorNoTarget", function (e) {
    if (!app()) return;
    var c = e.detail.content;
    if (c && c.id && /^m-/.test(c.id) && sock) sock.send(JSON.stringify({ action: "resync" }));
  });
  var sock = null;
  document.addEventListener("htmx:wsOpen", function (e) { sock = (e.detail && e.detail.socketWrapper) || sock; });
  // Lane edits answer with a notice header (HX-Trigger pg:notice).
  document.body && document.body.addEventListener("pg:notice", function (e) {
    var n = document.getElementById("notice");
    if (n) { n.textContent = e.detail.value || ""; n.className = "notice notice-error"; }
  });
  document.addEventListener("htmx:responseError", function (e) {
    if (!app() || !e.detail.elt.classList.contains("lane-form")) return;
    var n = document.getElementById("notice");
    if (n) { n.textContent = "Lane not saved: " + (e.detail.xhr.responseText || "").slice(0, 300); n.className = "notice notice-error"; }
  });
  // The lane's header follows its form as it is edited (label and model), before any save.
  document.addEventListener("input", function (e) {
    var form = e.target.closest && e.target.closest("form.lane-form");
    var lane = form && form.closest("section.lane");
    if (!lane) return;
    if (e.target.name === "model") {
      var m = lane.querySelector(".lane-head .lane-model");
      if (m) m.textContent = e.target.value;
    } else if (e.target.name === "label") {
      var l = lane.querySelector(".lane-head .lane-label");
      if (l) l.textContent = e.target.value || e.target.placeholder;
    }
  });
  // Each pager says how many runs finished, and which wait for a slot (their queue positions).
  function runStates() {
    document.querySelectorAll(".run-pager").forEach(function (pager) {
      var slots = pager.nextElementSibling.querySelectorAll(":scope > .run-slot"), done = 0, queued = [];
      slots.forEach(function (s) {
        var m = s.querySelector(".msg-assistant");
        if (!m || !m.classList.contains("status-streaming")) { done++; return; }
        var q = s.querySelector(".queue-pos"), pos = q && /position (\d+)/.exec(q.textContent);
        if (pos) queued.push(+pos[1]);
      });
      queued.sort(function (a, b) { return a - b; });
      var out = "· " + done + "/" + slots.length + " done";
      if (queued.length) out += ", " + queued.length + " queued (position " + queued[0] + (queued.length > 1 ? "–" + queued[queued.length - 1] : "") + ")";
      pager.querySelector(".run-state").textContent = out;
    });
  }
  document.addEventListener("htmx:wsAfterMessage", runStates);
  document.addEventListener("DOMContentLoaded", runStates);
  // Browse the repeat runs of a lane's answer (1/N).
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest(".run-prev, .run-next");
    if (!b) return;
    var pager = b.closest(".run-pager"), slots = pager.nextElementSibling.querySelectorAll(":scope > .run-slot");
    var at = 0;
    slots.forEach(function (s, i) { if (!s.hidden) at = i; });
    var to = (at + (b.classList.contains("run-next") ? 1 : -1) + slots.length) % slots.length;
    slots.forEach(function (s, i) { s.hidden = i !== to; });
    pager.querySelector(".run-pos").textContent = String(to + 1);
  });
  // Confirm lane removal (hx-post buttons with data-confirm).
  document.addEventListener("htmx:confirm", function (e) {
    var q = e.target.getAttribute && e.target.getAttribute("data-confirm");
    if (q && e.target.classList.contains("lane-remove")) { e.preventDefault(); if (window.confirm(q)) e.detail.issueRequest(true); }
  });
  // The first send names the comparison: its title arrives with the sidebar list; show it in
  // the head (the rename form) and the tab, as the chat page does.
  function syncTitle() {
    var empty = document.getElementById("compare-title-empty"), input = document.getElementById("compare-title");
    if (!empty || empty.hidden || !input) return;
    var cur = document.querySelector("#compare-list li.current a");
    var title = cur && cur.textContent.trim();
    if (!title) return;
    input.value = title;
    empty.hidden = true;
    document.getElementById("compare-rename").hidden = false;
    document.title = title + " · LLM Playground";
  }
  document.addEventListener("htmx:wsAfterMessage", function () { if (app()) syncTitle(); });
  // Turning blind mode off while a vote is open shows every lane's model: the vote of that
  // turn is then skipped for good, so ask first.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (!app() || !f.querySelector || !f.querySelector("#blind-toggle") || !document.querySelector(".vote-box")) return;
    if (f.querySelector("input[name=blind]").value !== "off") return;
    if (!window.confirm("Show every lane's endpoint and model now? This turn's vote will be skipped.")) e.preventDefault();
  });
  // A phone starts with the comparisons panel folded (a desktop shows it beside the lanes).
  document.addEventListener("DOMContentLoaded", function () {
    var side = document.querySelector(".compare-side");
    if (side && window.matchMedia("(max-width: 900px)").matches) side.open = false;
  });
})();
