// After "Use in compare" (chat.compare.prompt_views): send the prompt version's filled last user
// message once the socket is open; the hidden prompt_version_id goes with that one send only
// (every lane's turn records the version). No inline code (strict CSP).
(function () {
  "use strict";
  var sent = false;
  function go() {
    var inp = document.getElementById("cmp-prompt-use");
    var form = document.getElementById("compare-composer");
    var ta = document.getElementById("cmp-content");
    if (sent || !inp || !form || !ta) return;
    sent = true;
    ta.value = inp.getAttribute("data-send") || "";
    if (ta.value.trim()) form.requestSubmit();
  }
  document.addEventListener("htmx:wsOpen", function () { setTimeout(go, 0); });
  document.addEventListener("htmx:wsAfterSend", function () {
    var inp = document.getElementById("cmp-prompt-use");
    if (sent && inp) inp.remove();
  });
})();
// Lanes re-rendered over the websocket carry forms without a CSRF token ("Continue as chat",
// "Save as prompt"): add the page's token (body hx-headers) before such a form posts.
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (!f || !f.closest || !f.closest("section.lane") || (f.method || "").toLowerCase() !== "post") return;
    if (f.querySelector("[name=csrfmiddlewaretoken]")) return;
    var token = "";
    try { token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; } catch (err) { token = ""; }
    if (!token) return;
    var inp = document.createElement("input");
    inp.type = "hidden"; inp.name = "csrfmiddlewaretoken"; inp.value = token;
    f.appendChild(inp);
  }, true);
})();
