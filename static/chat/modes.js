// Modes (raw completion, embeddings): follow a run over its websocket, stop it, nearest view.
// No inline scripts or styles (strict CSP): everything is wired here by class and data attributes.
(function () {
  "use strict";

  function follow(status) {
    const url = status.dataset.ws;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + url);
    const target = document.getElementById("raw-completion");
    const state = status.querySelector(".run-state");
    let ended = false;
    ws.addEventListener("message", function (event) {
      let frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame.t === "delta" && target) {
        if (frame.text) target.appendChild(document.createTextNode(frame.text));
        if (state) state.textContent = "Streaming…";
      } else if (frame.t === "queued" && state) {
        state.textContent = "Waiting for a slot (position " + frame.position + ")…";
      } else if (frame.t === "final") {
        ended = true;
        status.dataset.status = frame.status;
        ws.close();
        location.reload();
      }
    });
    ws.addEventListener("close", function (event) {
      if (!ended && state) state.textContent = event.code === 4404 ? "No such run." : "Connection closed; reload to see the result.";
    });
    const stop = status.querySelector(".stop-run");
    if (stop) stop.addEventListener("click", function () {
      if (ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ action: "stop" }));
      stop.disabled = true;
    });
  }

  function init() {
    const status = document.getElementById("run-status");
    if (status && status.dataset.ws) follow(status);
    else if (status && status.dataset.status === "streaming") setTimeout(function () { location.reload(); }, 2000);

    const select = document.getElementById("nearest-select");
    if (select) select.addEventListener("change", function () {
      document.querySelectorAll(".nearest-list").forEach(function (ol) { ol.hidden = ol.dataset.i !== select.value; });
    });

    document.querySelectorAll(".hm-cell").forEach(function (cell) {
      cell.addEventListener("mouseenter", function () {
        const out = document.getElementById("hm-hover");
        if (out) out.textContent = cell.title;
      });
    });

    const form = document.getElementById("mode-form");
    if (form) form.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
