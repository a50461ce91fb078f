// After "Use prompt": send the filled last user message once the socket is open; the hidden
// prompt_version_id field goes with that one send only (the turn records the version).
(function () {
  "use strict";
  var sent = false;
  function go() {
    var inp = document.getElementById("prompt-use-version");
    var form = document.getElementById("composer");
    var ta = document.getElementById("content");
    if (sent || !inp || !form || !ta) return;
    sent = true;
    ta.value = inp.getAttribute("data-send") || "";
    form.requestSubmit();
  }
  document.addEventListener("htmx:wsOpen", function () { setTimeout(go, 0); });
  document.addEventListener("htmx:wsAfterSend", function () {
    var inp = document.getElementById("prompt-use-version");
    if (sent && inp) inp.remove();
  });
})();
