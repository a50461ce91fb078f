// Modes (raw completion, embeddings): follow a run over its websocket, stop it, nearest view.
// No inline scripts or styles (strict CSP): everything is wired here by class and data attributes.
(function () {
  "use strict";

  // The same tint classes as the final page (chat/modes/views.py _logprob_tokens).
  function tokenSpan(token, logprob) {
    const p = Math.exp(Math.min(0, Math.max(-1000, Number(logprob) || -1000)));
    const span = document.createElement("span");
    span.className = "lp " + (p >= 0.9 ? "p-high" : p >= 0.5 ? "p-mid" : p >= 0.2 ? "p-low" : "p-vlow");
    span.title = (p * 100).toFixed(1) + "%";
    span.textContent = token;
    return span;
  }

  function follow(status) {
    const url = status.dataset.ws;
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const ws = new WebSocket(scheme + location.host + url);
    const target = document.querySelector("[data-stream-target]");
    const state = status.querySelector(".run-state");
    let ended = false;
    ws.addEventListener("message", function (event) {
      let frame;
      try { frame = JSON.parse(event.data); } catch (e) { return; }
      if (frame.t === "delta" && target) {
        const lp = frame.lp || [];
        if (lp.length && lp.map(function (t) { return t[0]; }).join("") === frame.text) {
          lp.forEach(function (t) { target.appendChild(tokenSpan(t[0], t[1])); });  // tinted as it streams
        } else if (frame.text) {
          target.appendChild(document.createTextNode(frame.text));
        }
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

  // Size and type checked in the page before anything is uploaded (the server checks again).
  const AUDIO_EXT = ["flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm"];
  function checkFile(input) {
    const out = input.closest("label").querySelector(".file-error");
    const f = input.files && input.files[0];
    let problem = "";
    if (f) {
      const ext = (f.name.split(".").pop() || "").toLowerCase();
      const max = parseInt(input.dataset.maxBytes, 10);
      if (f.size > max) problem = "The file has " + f.size.toLocaleString() + " bytes: at most " + max.toLocaleString() + ".";
      else if (!f.size) problem = "The file is empty.";
      else if (AUDIO_EXT.indexOf(ext) < 0 && !(f.type || "").startsWith("audio/")) problem = "Not an audio file the API takes (FLAC, MP3, MP4, MPEG, MPGA, M4A, Ogg, WAV, WebM).";
    }
    out.textContent = problem;
    out.hidden = !problem;
    input.setCustomValidity(problem);
    return !problem;
  }

  // Record in the browser (MediaRecorder); the recording becomes the form's file.
  function recorder(button, input) {
    const state = document.getElementById("record-state");
    const label = button.querySelector(".rec-label") || button;
    if (!window.MediaRecorder || !navigator.mediaDevices) { button.disabled = true; state.textContent = "Recording is not available in this browser."; return; }
    let rec = null;
    let chunks = [];
    button.addEventListener("click", async function () {
      if (rec && rec.state === "recording") { rec.stop(); return; }
      try {
        const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
        chunks = [];
        rec = new MediaRecorder(stream);
        rec.addEventListener("dataavailable", function (e) { if (e.data.size) chunks.push(e.data); });
        rec.addEventListener("stop", function () {
          stream.getTracks().forEach(function (t) { t.stop(); });
          const type = (rec.mimeType || "audio/webm").split(";")[0];
          const ext = type.indexOf("ogg") >= 0 ? "ogg" : type.indexOf("mp4") >= 0 ? "m4a" : "webm";
          const fileObj = new File(chunks, "recording." + ext, { type: type });
          const dt = new DataTransfer();
          dt.items.add(fileObj);
          input.files = dt.files;
          checkFile(input);
          label.textContent = "Record"; button.setAttribute("aria-pressed", "false");
          state.textContent = "Recorded " + fileObj.size.toLocaleString() + " bytes (" + type + ").";
        });
        rec.start();
        label.textContent = "Stop recording"; button.setAttribute("aria-pressed", "true");
        state.textContent = "Recording…";
      } catch (err) {
        state.textContent = "Cannot record: " + err.message;
      }
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

    document.querySelectorAll(".seg-play").forEach(function (button) {
      button.addEventListener("click", function () {
        const player = document.getElementById("run-audio");
        if (!player) return;
        player.currentTime = parseFloat(button.dataset.start) || 0;
        player.play().catch(function () {});
      });
    });

    const file = document.getElementById("id_file");
    if (file) file.addEventListener("change", function () { checkFile(file); });
    const record = document.getElementById("record-btn");
    if (record) recorder(record, file);

    const form = document.getElementById("mode-form");
    if (form) form.addEventListener("keydown", function (event) {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) { event.preventDefault(); form.requestSubmit(); }
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
