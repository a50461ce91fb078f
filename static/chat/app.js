/* The playground's small client script: what htmx cannot do by itself.
 * Streaming answers (deltas at server-computed offsets, closed blocks rendered by the server and
 * appended once, the open last block rendered here with the vendored markdown-it + DOMPurify
 * under the same rules), Enter-to-send, the waiting counter, autoscroll, copy buttons,
 * Retry-After countdowns, model list loading and endpoint presets, confirmations, and the
 * websocket message size check. No framework, no CDN, and nothing inline in the pages: the
 * Content-Security-Policy allows scripts from this site only (no inline handlers, no eval). */
(function () {
  "use strict";

  // ---- streaming answers ----------------------------------------------------------------------
  // A streamed text (#t<k> answer, #r<k> reasoning) keeps: end (code points received), u (the
  // offset up to which the server's rendered blocks cover it), open (the text after u: the open
  // block), raw (everything received, for Copy and tests). Deltas (<x-d s e>) append to it when
  // they start where it ends; blocks (<x-b u>) are inserted once before the open block, which is
  // re-rendered at most once per animation frame and never touches the blocks above it.
  var ALLOWED_TAGS = ["p", "br", "hr", "strong", "em", "del", "s", "code", "pre", "blockquote", "ul", "ol", "li",
    "h1", "h2", "h3", "h4", "h5", "h6", "table", "thead", "tbody", "tr", "th", "td", "a", "span", "div"];
  var md = null;
  function renderer() {
    if (md || !window.markdownit) return md;
    md = window.markdownit("commonmark", { html: false, linkify: false, breaks: true }).enable(["table", "strikethrough"]);
    var esc = md.utils.escapeHtml;
    md.renderer.rules.image = function (tokens, idx, options, env, self) {
      var t = tokens[idx], alt = self.renderInlineAsText(t.children || [], options, env) || "image";
      return '<a href="' + esc(t.attrGet("src") || "") + '">[image: ' + esc(alt) + "]</a>";
    };
    md.renderer.rules.fence = md.renderer.rules.code_block = function (tokens, idx) {
      var t = tokens[idx], lang = ((t.info || "").trim().split(/\s+/)[0] || "text").slice(0, 40);
      return '<div class="codeblock"><div class="codebar"><span class="codelang">' + esc(lang) +
        '</span></div><pre><code class="language-' + esc(lang) + '">' + esc(t.content) + "</code></pre></div>";
    };
    if (window.DOMPurify) {
      DOMPurify.addHook("afterSanitizeAttributes", function (node) {
        if (node.tagName === "A") node.setAttribute("rel", "noopener noreferrer nofollow");
      });
    }
    return md;
  }
  // Sanitize into ``target``: DOMPurify returns the cleaned nodes as a fragment, moved in as is
  // (its HTML string would be parsed a second time by innerHTML; measured in Chromium on a
  // 200–400 character block: 0.28–0.33 ms against 0.43–0.81 ms per render).
  var PURIFY = { RETURN_DOM_FRAGMENT: true, ALLOWED_TAGS: ALLOWED_TAGS,
    ALLOWED_ATTR: ["href", "title", "class", "start", "dir"], ALLOWED_URI_REGEXP: /^(?:https?|mailto):/i };
  function purifyInto(target, html) {
    if (!window.DOMPurify) { target.textContent = ""; return; }
    target.replaceChildren(DOMPurify.sanitize(html, PURIFY));
  }
  // Partial syntax never shows raw and never becomes live: an open fence is closed for display,
  // a link whose URL is still arriving shows only its text, a half image shows nothing, an open
  // ** / __ / ~~ / ` is closed.
  function tolerant(text) {
    var lines = text.split("\n"), fence = null;
    for (var i = 0; i < lines.length; i++) {
      var m = /^ {0,3}(`{3,}|~{3,})/.exec(lines[i]);
      if (!m) continue;
      if (!fence) fence = m[1];
      else if (m[1][0] === fence[0] && m[1].length >= fence.length && !lines[i].replace(/^ {0,3}[`~]+/, "").trim()) fence = null;
    }
    if (fence) return text + "\n" + fence;
    text = text.replace(/!\[[^\]\n]*(\]\([^)\n]*)?$/, "").replace(/\[([^\]\n]*)\]\([^)\n]*$/, "$1").replace(/\[([^\]\n]*)$/, "$1");
    ["**", "__", "~~"].forEach(function (mark) {
      if ((text.split(mark).length - 1) % 2) text += mark;
    });
    if ((text.split("`").length - 1) % 2) text += "`";
    return text;
  }
  function cpLen(s) { var n = 0; for (var i = 0; i < s.length; i++) { var c = s.charCodeAt(i); if (c < 0xD800 || c > 0xDBFF) n++; } return n; }
  function dropCp(s, n) {
    var i = 0;
    while (n > 0 && i < s.length) { var c = s.charCodeAt(i); i += (c >= 0xD800 && c <= 0xDBFF) ? 2 : 1; n--; }
    return s.slice(i);
  }
  function unescapeText(s) {
    if (s.indexOf("&") < 0) return s;
    return s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&#13;/g, "\r").replace(/&quot;/g, '"').replace(/&#x27;/g, "'").replace(/&amp;/g, "&");
  }
  function streamOf(el) {
    if (el._s) return el._s;
    var src = el.querySelector(":scope > template.md-src"), closed = el.querySelector(":scope > template.md-raw");
    var open = src ? src.content.textContent : "";
    var st = el._s = { end: parseInt(el.getAttribute("data-end") || "0", 10), u: parseInt(el.getAttribute("data-u") || "0", 10),
      open: open, openEl: el.querySelector(":scope > .md-open"), raw: "", queued: false };
    // The raw text from offset 0 when the page has it (a streaming answer), else from here on.
    if (closed || !st.u) { st.raw = (closed ? closed.content.textContent : "") + open; st.base = 0; } else st.base = st.end;
    if (src) src.remove();
    if (closed) closed.remove();
    return st;
  }
  var toRender = [];
  function schedule(el, st) {
    if (st.queued) return;
    st.queued = true;
    toRender.push(el);
    if (toRender.length === 1) requestAnimationFrame(renderPending);
  }
  function renderPending() {
    var els = toRender; toRender = [];
    els.forEach(function (el) {
      var st = el._s; st.queued = false;
      if (!st.openEl || !el.isConnected) return;
      var r = renderer();
      if (!st.open) st.openEl.textContent = "";
      else if (r) purifyInto(st.openEl, r.render(tolerant(st.open)));
      else st.openEl.textContent = st.open;
    });
    if (stickBottom) scrollDown(); else ui.pill();
  }
  function mark(el, kind) {
    var art = el.closest(".msg-assistant");
    if (!art) return;
    art.classList.add("has-tokens");
    if (kind === "r") art.classList.add("has-reasoning");
  }
  function applyDelta(el, s, e, text) {
    var st = streamOf(el);
    if (s > st.end) { (window.__pgGaps = window.__pgGaps || []).push([el.id, st.end, s, e]); gapped(el); return false; }
    if (e <= st.end) return true;  // a repeat after a snapshot: nothing new
    if (s < st.end) text = dropCp(text, st.end - s);
    st.open += text; st.end = e;
    st.raw += text;
    el.setAttribute("data-end", String(e));
    mark(el, el.id[0]);
    schedule(el, st);
    el.dispatchEvent(new CustomEvent("pg:text", { bubbles: true }));
    return true;
  }
  function applyBlocks(el, u, html) {
    var st = streamOf(el);
    if (html && st.openEl) st.openEl.insertAdjacentHTML("beforebegin", html);
    if (u > st.u) { st.open = dropCp(st.open, u - st.u); st.u = u; el.setAttribute("data-u", String(u)); }
    schedule(el, st);
  }
  var gaps = {};
  function gapped(el) {
    var art = el.closest(".msg-assistant");
    if (art && !gaps[art.id] && window.htmx) {
      gaps[art.id] = true;
      setTimeout(function () { delete gaps[art.id]; }, 2000);
      var ws = lastSocket;
      if (ws) ws.send(JSON.stringify({ action: "sync", streaming: [art.id.slice(2)], gap: [art.id.slice(2)] }));
    }
  }
  // Every streamed piece of one websocket message, parsed here: a message made only of them never
  // goes through htmx's HTML parsing.
  // Two forms: the hot path's short <x-d i=t<k> s e> and the hx-swap-oob one (any message).
  var PIECE = /<x-(d|b) (?:hx-swap-oob="beforeend:#(\w+)"|i=(\w+)) (?:s=(\d+) e=(\d+)|u=(\d+))>([\s\S]*?)<\/x-\1>/g;
  function applyPieces(msg) {
    PIECE.lastIndex = 0;
    var m, at = 0;
    var found = [];
    while ((m = PIECE.exec(msg))) {
      if (m.index !== at) return false;
      found.push(m); at = PIECE.lastIndex;
    }
    if (!found.length || at !== msg.length) return false;
    found.forEach(function (p) {
      var el = document.getElementById(p[2] || p[3]);
      if (!el) return;
      if (p[1] === "d") applyDelta(el, +p[4], +p[5], unescapeText(p[7]));
      else applyBlocks(el, +p[6], p[7]);
    });
    window.__pgFrames = (window.__pgFrames || 0) + 1;
    return true;
  }
  // Autoscroll sticks while the reader is at the bottom: tracked on scroll (and resize), not
  // measured per frame (reading the scroll height forces a layout for every websocket message).
  var stickBottom = true, lastSocket = null;
  function trackScroll() { stickBottom = nearBottom(); }
  document.addEventListener("scroll", trackScroll, { capture: true, passive: true });
  window.addEventListener("resize", trackScroll, { passive: true });
  document.addEventListener("htmx:wsBeforeMessage", function (e) {
    lastSocket = e.detail.socketWrapper || lastSocket;
    if (applyPieces(e.detail.message)) e.preventDefault();
  });
  // Pieces inside a mixed message (the final frame) reach htmx's oob handling: apply them here.
  document.addEventListener("htmx:oobBeforeSwap", function (e) {
    var frag = e.detail.fragment, target = e.detail.target;
    if (!frag || !frag.tagName || !target) return;
    var tag = frag.tagName.toLowerCase();
    if (tag === "x-d") {
      e.detail.shouldSwap = false;
      applyDelta(target, +frag.getAttribute("s"), +frag.getAttribute("e"), frag.textContent);
    } else if (tag === "x-b") {
      e.detail.shouldSwap = false;
      applyBlocks(target, +frag.getAttribute("u"), frag.innerHTML);
    }
  });
  // The final frame swaps the head and the foot: the message takes the foot's status.
  function finalize(root) {
    (root || document).querySelectorAll(".msg-foot[data-final]").forEach(function (foot) {
      foot.removeAttribute("data-final");
      var art = foot.closest(".msg-assistant");
      if (!art) return;
      var status = foot.getAttribute("data-status");
      art.className = art.className.replace(/\bstatus-\w+/, "status-" + status);
      art.setAttribute("data-status", status);
      var w = art.querySelector(".waiting"); if (w) w.remove();
      var th = art.querySelector("details.thinking");
      if (th) { th.open = false; th.classList.add("done"); if (!art.classList.contains("has-reasoning")) th.hidden = true; }
      announce(art, status);
    });
    ui.syncComposer();
  }
  // The polite live region speaks once per answer, when it ends (never per token). An error's
  // box is an alert when it arrives (role="alert" on the final frame only: old errors are not).
  function announce(art, status) {
    var t = art.querySelector(".answer"), text = ((t && t.textContent) || "").trim().slice(0, 200);
    if (status === "complete") ui.say("Answer complete: " + text);
    else if (status === "stopped") ui.say("Answer stopped.");
  }
  function initStreams(root) {
    (root || document).querySelectorAll(".md[data-u]").forEach(function (el) {
      var st = streamOf(el);
      if (st.open) schedule(el, st);
    });
  }
  // For tests and tools: what a streamed text received since the page took it over: the text
  // from code point ``base`` to ``end``.
  window.pgStream = function (el) { var st = el && streamOf(el); return st ? { base: st.base, end: st.end, u: st.u, raw: st.raw, open: st.open } : null; };

  function uuid4() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID();
    return "10000000-1000-4000-8000-100000000000".replace(/[018]/g, function (c) {
      return (c ^ (crypto.getRandomValues(new Uint8Array(1))[0] & (15 >> (c / 4)))).toString(16);
    });
  }

  var pendingTurn = null, appendPending = false;

  function thread() { return document.getElementById("thread"); }
  function nearBottom() {
    var el = document.scrollingElement || document.documentElement;
    var t = thread();
    if (t && t.scrollHeight > t.clientHeight + 4) return t.scrollHeight - t.scrollTop - t.clientHeight < 120;
    return el.scrollHeight - el.scrollTop - el.clientHeight < 120;
  }
  function scrollDown() {
    var t = thread();
    if (t) t.scrollTop = t.scrollHeight;
  }

  // Esc closes what is open (a dialog closes itself; a drawer or the menu), else stops the
  // running answer.
  document.addEventListener("keydown", function (e) {
    if (e.key !== "Escape" || e.shiftKey || e.defaultPrevented) return;
    if (document.querySelector("dialog[open]")) return;
    if (ui.closeAll(true)) { e.preventDefault(); return; }
    var stop = document.querySelector(".msg-assistant.status-streaming button.stop");
    if (stop) { e.preventDefault(); stop.click(); }
  });

  // Enter sends, Shift+Enter adds a line.
  document.addEventListener("keydown", function (e) {
    var ta = e.target;
    if (ta && ta.id === "content" && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      var form = document.getElementById("composer");
      if (ta.value.trim() && form) form.requestSubmit();
      return;
    }
    // A tool result box works like the composer: Enter sends the result, Shift+Enter adds a line.
    var tool = ta && ta.tagName === "TEXTAREA" && ta.closest && ta.closest("form.tool-result-form");
    if (tool && e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      if (ta.value.trim()) tool.requestSubmit();
    }
  });

  // An answer's action (Regenerate, Retry, Continue…) goes once: a double click would ask again
  // about an answer the first click already replaced ("not on the current branch"). The server
  // redraws the message; if it refuses instead, the buttons come back after a moment.
  document.addEventListener("htmx:wsConfigSend", function (e) {
    var b = e.target;
    if (e.defaultPrevented || !(b && b.tagName === "BUTTON" && b.closest && b.closest(".msg-actions"))) return;
    var row = b.closest(".msg-actions"), held = [];
    row.querySelectorAll("button[ws-send]:not([disabled])").forEach(function (x) { x.disabled = true; held.push(x); });
    setTimeout(function () { held.forEach(function (x) { if (x.isConnected) x.disabled = false; }); }, 2000);
  });

  // Remember which turn we sent; the text stays in the box until the server shows the message.
  document.addEventListener("htmx:wsConfigSend", function (e) {
    var form = document.getElementById("composer");
    var ev = e.detail.triggeringEvent, submitter = ev && ev.submitter;
    var asker = e.target.closest && e.target.closest("[data-confirm]");
    if (asker && !window.confirm(asker.getAttribute("data-confirm"))) { e.preventDefault(); return; }
    if (e.target.classList && e.target.classList.contains("tool-result-form")) {
      // The result is on its way: the form closes (the thread comes back with it shown).
      var sent = document.createElement("div");
      sent.className = "tool-sent muted"; sent.textContent = "Sending the result…";
      var f = e.target;
      setTimeout(function () { f.replaceWith(sent); }, 0);
      return;
    }
    if (e.target.classList && e.target.classList.contains("edit-form")) {
      e.detail.parameters.resend = submitter && submitter.value === "resend" ? "true" : "";
      if (e.detail.parameters.resend) e.detail.parameters.turn_id = uuid4();
      var art = e.target.closest(".msg");
      setTimeout(function () { e.target.remove(); if (art) art.classList.remove("editing"); }, 0);
      return;
    }
    if (form && e.target === form) {
      // Warn before sending images to a model that /models says cannot read them.
      var model = (document.getElementById("model") || {}).value || "";
      var opt = document.querySelector('#model-list option[value="' + CSS.escape(model) + '"]');
      var hasImage = !!document.querySelector('#attach-chips .chip[data-kind="image"]');
      if (hasImage && opt && opt.dataset.inputs && opt.dataset.inputs.split(" ").indexOf("image") < 0 &&
          !window.confirm("According to GET /models, " + model + " reads only: " + opt.dataset.inputs + ". Send the image anyway?")) {
        e.preventDefault(); return;
      }
      e.detail.parameters.mode = (submitter && submitter.value === "append") || e.detail.parameters.role === "system" ? "append" : "send";
      meter();
      var over = document.querySelector("#ctx-meter.over .ctx-text");
      if (over && e.detail.parameters.mode === "send" &&
          !window.confirm("This send would overflow the model's context window (" + over.textContent.replace(/ — .*/, "") + "). Send anyway?")) {
        e.preventDefault(); return;
      }
      pendingTurn = e.detail.parameters.mode === "append" ? null : form.querySelector("[name=turn_id]").value;
      ui.echo(e.detail.parameters.content || "", e.detail.parameters.role || "user", e);
      if (e.detail.parameters.mode === "append") appendPending = true;
      var send = document.getElementById("send");
      if (send) send.disabled = true;
      setTimeout(function () { if (send) send.disabled = document.body.classList.contains("chat-deleting"); }, 1500);
    }
  });

  // The server (daphne) drops a websocket message over its limit and closes the socket, which
  // then reconnects without a word: check the size before sending and say why instead.
  function notice(text, level) {
    var n = document.getElementById("notice");
    if (n) { n.textContent = text; n.className = "notice notice-" + (level || "error"); }
  }
  document.addEventListener("htmx:wsConfigSend", function (e) {
    if (e.defaultPrevented) return;
    var app = document.querySelector("[data-ws-max-bytes]");
    var max = app ? parseInt(app.getAttribute("data-ws-max-bytes"), 10) : 0;
    if (!max) return;
    var body = Object.assign({}, e.detail.parameters);
    if (e.detail.headers) body.HEADERS = e.detail.headers;
    var size = new TextEncoder().encode(JSON.stringify(body)).length;
    if (size <= max) return;
    e.preventDefault();
    if (e.target === document.getElementById("composer")) {
      pendingTurn = null; appendPending = false;
      var send = document.getElementById("send");
      if (send) send.disabled = document.body.classList.contains("chat-deleting");
    }
    notice("Not sent: this message is " + (size / 1048576).toFixed(2) + " MiB and the server takes at most " +
      (max / 1048576).toFixed(2) + " MiB per message. Shorten the text, the system prompt, the schema or the tools " +
      "(images and audio go as attachments and do not count). Your text is still in the box.", "error");
  });

  function clearComposer() {
    var form = document.getElementById("composer");
    form.querySelector("[name=content]").value = "";
    var chips = document.getElementById("attach-chips");
    if (chips) chips.innerHTML = "";
    form.querySelector("[name=turn_id]").value = uuid4();
    var role = document.getElementById("role");
    if (role) role.value = "user";  // a prefill or system message is a one-off: the next one is the user's
    pendingTurn = null;
    var send = document.getElementById("send");
    if (send) send.disabled = document.body.classList.contains("chat-deleting");
    ui.dropEcho();
    // A notice about an earlier send (refused, too large) is gone with its cause.
    var n = document.getElementById("notice");
    if (n && n.textContent) { n.textContent = ""; n.className = ""; }
  }

  function afterFrame(frameText) {
    var form = document.getElementById("composer");
    if (frameText && frameText.indexOf('id="notice"') >= 0) ui.dropEcho();
    if (appendPending && frameText && frameText.indexOf('id="thread"') >= 0) { appendPending = false; clearComposer(); }
    if (pendingTurn && form && document.querySelector('[data-turn-id="' + pendingTurn + '"]')) clearComposer();
  }

  document.addEventListener("htmx:wsAfterMessage", function (e) {
    afterFrame(e.detail && e.detail.message);
    finalize();
    initStreams();
    if (stickBottom) scrollDown();
    ui.afterSwap();
  });
  // A snapshot for a message the page does not show yet: append it.
  document.body && document.body.addEventListener("htmx:oobErrorNoTarget", function (e) {
    var c = e.detail.content, t = thread();
    if (c && t && c.id && /^m-/.test(c.id) && !document.getElementById(c.id)) {
      c.removeAttribute("hx-swap-oob");
      t.appendChild(c);
      htmx.process(c);
    }
  });

  // Connection state.
  function connState(text, cls) {
    var s = document.getElementById("conn-state");
    if (s) { s.textContent = text; s.className = "conn-state " + cls; }
  }
  document.addEventListener("htmx:wsOpen", function (e) {
    connState("connected", "ok");
    // Before any queued frame: which answers this page shows as running, and a send it has not
    // seen come back. The server sends the thread again if one of them ended meanwhile.
    var running = Array.prototype.map.call(document.querySelectorAll(".msg-assistant.status-streaming"), function (m) { return m.id.slice(2); });
    var ws = e.detail && e.detail.socketWrapper;
    if (ws && (running.length || pendingTurn)) ws.sendImmediately(JSON.stringify({ action: "sync", streaming: running, turn_id: pendingTurn || "" }));
  });
  document.addEventListener("htmx:wsClose", function (e) {
    var code = e.detail && e.detail.event && e.detail.event.code;
    if (code === 4401 || code === 4403 || code === 4404) connState("not allowed (" + code + ")", "bad");
    else connState("reconnecting…", "warn");
  });

  // Waiting counter and Retry-After countdowns.
  setInterval(function () {
    var now = Date.now() / 1000;
    document.querySelectorAll(".status-streaming .waiting[data-since]").forEach(function (w) {
      var since = parseFloat(w.getAttribute("data-since"));
      if (!isNaN(since)) w.querySelector(".elapsed").textContent = Math.max(0, Math.floor(now - since));
    });
    document.querySelectorAll("button.retry[data-retry-after]").forEach(function (b) {
      if (!b.dataset.until) b.dataset.until = String(now + parseFloat(b.dataset.retryAfter));
      var left = Math.ceil(parseFloat(b.dataset.until) - now);
      var cd = b.querySelector(".countdown");
      if (left > 0) { b.disabled = true; if (cd) cd.textContent = "in " + left + " s"; }
      else { b.disabled = false; if (cd) cd.textContent = ""; b.removeAttribute("data-retry-after"); }
    });
  }, 250);

  // Inline SVG icons for buttons made here (the templates use ui/icon.html): decorative, the
  // button carries the name.
  var ICONS = { close: "M6 6l12 12M18 6L6 18", down: "M12 5v14M6 13l6 6 6-6" };
  function icon(name) {
    var NS = "http://www.w3.org/2000/svg", svg = document.createElementNS(NS, "svg"), path = document.createElementNS(NS, "path");
    svg.setAttribute("class", "icon"); svg.setAttribute("aria-hidden", "true"); svg.setAttribute("focusable", "false");
    svg.setAttribute("viewBox", "0 0 24 24");
    path.setAttribute("d", ICONS[name]); path.setAttribute("fill", "none"); path.setAttribute("stroke", "currentColor");
    path.setAttribute("stroke-width", "2.2"); path.setAttribute("stroke-linecap", "round"); path.setAttribute("stroke-linejoin", "round");
    svg.appendChild(path);
    return svg;
  }

  // Copy buttons.
  function copy(text, btn) {
    var done = function () { var old = btn.textContent; btn.textContent = "Copied"; setTimeout(function () { btn.textContent = old; }, 1200); };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, done);
    else { var ta = document.createElement("textarea"); ta.value = text; document.body.appendChild(ta); ta.select(); try { document.execCommand("copy"); } catch (err) {} ta.remove(); done(); }
  }
  // Editors open in place of the message (their text comes from the server on demand).
  document.addEventListener("htmx:afterSwap", function (e) {
    var form = e.target && e.target.querySelector && e.target.querySelector(":scope > .edit-form");
    if (!form) return;
    var art = form.closest(".msg");
    art.classList.add("editing");
    var ta = form.querySelector("textarea");
    if (ta) { ta.focus(); ta.setSelectionRange(ta.value.length, ta.value.length); }
  });
  document.addEventListener("click", function (e) {
    var cancel = e.target.closest && e.target.closest("button.edit-cancel");
    if (cancel) {
      var art = cancel.closest(".msg");
      cancel.closest(".edit-form").remove();
      if (art) { art.classList.remove("editing"); var b = art.querySelector("button.edit-open"); if (b) b.focus(); }
    }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape" && e.target.closest && e.target.closest(".edit-form")) {
      var c = e.target.closest(".edit-form").querySelector(".edit-cancel");
      if (c) { e.preventDefault(); e.stopPropagation(); c.click(); }
    }
  }, true);

  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("button.copy-msg, button.copy-code");
    if (!b) return;
    if (b.classList.contains("copy-msg")) {
      fetch(b.getAttribute("data-raw-url"), { credentials: "same-origin" })
        .then(function (r) { return r.text(); }).then(function (text) { copy(text, b); });
    } else {
      var code = b.closest(".codeblock").querySelector("pre");
      copy(code ? code.textContent : "", b);
    }
  });

  // Model list follows the endpoint.
  document.addEventListener("change", function (e) {
    if (e.target.id === "endpoint") {
      var opt = e.target.selectedOptions[0];
      if (!opt) return;
      // The model follows the endpoint: its default model, else (once its list arrives) its only
      // model, else empty with the list open. The previous endpoint's model id is never kept.
      var model = document.getElementById("model");
      if (model) {
        model.value = opt.dataset.defaultModel || "";
        modelPick = !opt.dataset.defaultModel;
        checkModel();
      }
      htmx.ajax("GET", opt.dataset.modelsUrl, { target: "#model-options", swap: "innerHTML" });
    }
    if (e.target.id === "preset") {
      var presets = JSON.parse(e.target.dataset.presets || "{}"), p = presets[e.target.value];
      if (!p) return;
      var f = function (n) { return document.querySelector("[name=" + n + "]"); };
      if (f("base_url")) f("base_url").value = p.base_url;
      if (f("api_style")) f("api_style").value = p.api_style;
      if (f("name") && !f("name").value) f("name").value = e.target.value;
    }
  });

  // ---- settings panel: only what the endpoint's API style accepts --------------------------
  function currentStyle() {
    var sel = document.getElementById("endpoint");
    var opt = sel && sel.selectedOptions[0];
    return opt ? opt.dataset.style : "openai_chat";
  }
  function applyStyle() {
    var style = currentStyle();
    document.querySelectorAll("#settings [data-styles]").forEach(function (el) {
      el.hidden = el.getAttribute("data-styles").split(" ").indexOf(style) < 0;
    });
    var rf = document.getElementById("response_format");
    var sf = document.querySelector(".schema-fields");
    if (rf && sf) sf.hidden = rf.value !== "json_schema";
    meter();
  }
  document.addEventListener("change", function (e) {
    if (e.target.id === "endpoint" || e.target.id === "response_format") applyStyle();
    if (e.target.name === "max_tokens" || e.target.id === "model") meter();
  });

  // ---- context-window meter: estimated prompt tokens + max tokens vs context length -------
  function meter() {
    var box = document.getElementById("ctx-meter");
    if (!box) return;
    var model = (document.getElementById("model") || {}).value || "";
    var listed = function (id) { return document.querySelector('#model-list option[value="' + CSS.escape(id) + '"]:not([data-scenario])'); };
    // A simulator scenario id ("sim-fast?fault=429") has its base model's context length.
    var opt = listed(model) || (model.indexOf("?") > 0 ? listed(model.slice(0, model.indexOf("?"))) : null);
    var ctx = opt ? parseInt(opt.dataset.context || "0", 10) : 0;
    var chars = parseInt(box.dataset.promptChars || "0", 10) + ((document.getElementById("content") || {}).value || "").length;
    var prompt = Math.ceil(chars / 4);
    var maxTok = parseInt((document.querySelector("[name=max_tokens]") || {}).value || "0", 10) || 0;
    var text = box.querySelector(".ctx-text"), bar = box.querySelector(".ctx-bar span");
    var mini = document.getElementById("ctx-mini");
    if (!ctx) { text.textContent = "≈" + prompt + " prompt tokens (context length unknown)"; bar.style.width = "0%"; box.className = "ctx-meter"; if (mini) { mini.textContent = "≈" + prompt + " tok"; mini.className = "ctx-mini muted"; } return; }
    var used = prompt + maxTok, pct = Math.min(100, Math.round(100 * used / ctx));
    bar.style.width = pct + "%";
    box.className = "ctx-meter" + (used > ctx ? " over" : pct > 80 ? " warn" : "");
    text.textContent = "≈" + prompt + (maxTok ? " + " + maxTok : "") + " / " + ctx + " tokens" + (used > ctx ? " — this send would overflow the context window" : "");
    if (mini) {
      mini.textContent = "≈" + used + " / " + ctx + " tok";
      mini.className = "ctx-mini" + (used > ctx ? " over" : pct > 80 ? " warn" : " muted");
      mini.title = text.textContent;
    }
  }
  document.addEventListener("input", function (e) { if (e.target.id === "content") meter(); });
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target.id !== "model-options") return;
    var model = document.getElementById("model");
    var ids = modelIds();
    if (model && modelPick && !model.value && !document.querySelector("#model-options [hx-trigger=load]")) {
      modelPick = false;
      if (ids.length === 1) model.value = ids[0];
      else if (ids.length > 1) { model.focus(); if (model.showPicker) { try { model.showPicker(); } catch (err) { /* not allowed */ } } }
    }
    checkModel();
    meter();
  });

  // A model id the endpoint's list does not contain is flagged before sending (it may still be
  // sent: some servers serve more than they list).
  var modelPick = false;
  function modelIds() {
    return Array.prototype.map.call(document.querySelectorAll("#model-list option"), function (o) { return o.value; });
  }
  function checkModel() {
    var model = document.getElementById("model"), hint = document.getElementById("model-hint");
    if (!model || !hint) return;
    var ids = modelIds(), v = model.value.trim(), msg = "";
    if (!v) msg = ids.length ? "Pick a model from this endpoint's list." : "Type the model id.";
    // The simulator takes options after "?" on any listed model ("sim-fast?fault=429").
    var base = v.indexOf("?") > 0 && document.querySelector("#model-list option[data-scenario]") ? v.slice(0, v.indexOf("?")) : v;
    if (v && ids.length && ids.indexOf(v) < 0 && ids.indexOf(base) < 0) msg = "“" + v + "” is not in this endpoint's model list.";
    hint.textContent = msg;
    hint.hidden = !msg;
    if (msg && v) model.setAttribute("aria-invalid", "true"); else model.removeAttribute("aria-invalid");
  }
  document.addEventListener("input", function (e) { if (e.target.id === "model") checkModel(); });
  document.addEventListener("DOMContentLoaded", checkModel);

  document.addEventListener("click", function (e) {
    if (e.target.id === "refresh-models") {
      var opt = document.getElementById("endpoint").selectedOptions[0];
      if (opt) htmx.ajax("POST", opt.dataset.modelsUrl, { target: "#model-options", swap: "innerHTML" });
    }
  });

  // ---- attachments: picker, paste, drop, URL ----------------------------------------------
  function csrf() {
    var h = document.body.getAttribute("hx-headers");
    try { return JSON.parse(h)["X-CSRFToken"]; } catch (err) { return ""; }
  }
  function upload(formData) {
    var url = document.getElementById("upload-form").getAttribute("hx-post");
    var chips = document.getElementById("attach-chips");
    return fetch(url, { method: "POST", body: formData, headers: { "X-CSRFToken": csrf() }, credentials: "same-origin" })
      .then(function (r) {
        if (r.ok) return r.text().then(function (html) { chips.insertAdjacentHTML("beforeend", html); });
        errorChip(r.status === 413 || r.status === 400
          ? "Upload refused (HTTP " + r.status + "): larger than the server accepts in one request; attach fewer or smaller files."
          : "Upload failed (HTTP " + r.status + ").");
      }, function () { errorChip("Upload failed: the server could not be reached."); });
  }
  function errorChip(text) {
    var chip = document.createElement("span"), rm = document.createElement("button");
    chip.className = "chip chip-error"; chip.setAttribute("role", "alert"); chip.textContent = text;
    rm.type = "button"; rm.className = "chip-remove"; rm.title = "Dismiss"; rm.setAttribute("aria-label", "Dismiss"); rm.appendChild(icon("close"));
    chip.appendChild(rm);
    document.getElementById("attach-chips").appendChild(chip);
  }
  function uploadFiles(files) {
    if (!files || !files.length) return;
    var fd = new FormData();
    for (var i = 0; i < files.length; i++) fd.append("file", files[i]);
    upload(fd);
  }
  document.addEventListener("click", function (e) {
    if (e.target.id === "attach-button") document.getElementById("attach-file").click();
    if (e.target.id === "attach-url-button") {
      var u = window.prompt("Image URL (http or https)");
      if (u) { var fd = new FormData(); fd.append("url", u); upload(fd); }
    }
    var rm = e.target.closest && e.target.closest(".chip-remove");
    if (rm) {
      var chip = rm.closest(".chip"), del = chip.getAttribute("data-delete-url");
      // An unsent upload counts against the per-message and quota limits until deleted.
      if (del) fetch(del, { method: "POST", headers: { "X-CSRFToken": csrf() }, credentials: "same-origin" });
      chip.remove();
    }
  });
  document.addEventListener("htmx:afterRequest", function (e) {
    if (e.target.id === "upload-form") document.getElementById("attach-file").value = "";
  });
  document.addEventListener("paste", function (e) {
    if (e.target.id !== "content" || !e.clipboardData) return;
    var files = [];
    for (var i = 0; i < e.clipboardData.items.length; i++) {
      var it = e.clipboardData.items[i];
      if (it.kind === "file") files.push(it.getAsFile());
    }
    if (files.length) { e.preventDefault(); uploadFiles(files); }
  });
  document.addEventListener("dragover", function (e) { if (e.target.closest && e.target.closest(".composer")) e.preventDefault(); });
  document.addEventListener("drop", function (e) {
    if (!(e.target.closest && e.target.closest(".composer"))) return;
    e.preventDefault();
    uploadFiles(e.dataTransfer.files);
  });

  // ---- "View code" dialog ------------------------------------------------------------------
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target.id === "code-dialog-body") {
      var d = document.getElementById("code-dialog");
      if (d && !d.open) d.showModal();
    }
  });
  document.addEventListener("click", function (e) {
    if (e.target.classList.contains("close-dialog")) e.target.closest("dialog").close();
    if (e.target.classList.contains("tab")) {
      var view = e.target.closest(".code-view");
      view.querySelectorAll(".tab").forEach(function (t) {
        var on = t === e.target;
        t.classList.toggle("active", on); t.setAttribute("aria-selected", on ? "true" : "false"); t.tabIndex = on ? 0 : -1;
      });
      view.querySelectorAll(".tab-panel").forEach(function (p) { p.hidden = p.dataset.panel !== e.target.dataset.tab; });
    }
    if (e.target.classList.contains("copy-snippet")) {
      copy(e.target.closest(".tab-panel").querySelector("pre").textContent, e.target);
    }
  });

  // Tabs: Left/Right move between them (one tab stop for the whole list).
  document.addEventListener("keydown", function (e) {
    if (!(e.target.classList && e.target.classList.contains("tab")) || (e.key !== "ArrowLeft" && e.key !== "ArrowRight")) return;
    var tabs = Array.prototype.slice.call(e.target.closest("[role=tablist]").querySelectorAll("[role=tab]"));
    var next = tabs[(tabs.indexOf(e.target) + (e.key === "ArrowRight" ? 1 : tabs.length - 1)) % tabs.length];
    e.preventDefault(); next.focus(); next.click();
  });

  // Confirmations of plain forms (delete buttons), instead of inline onsubmit handlers.
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.matches && f.matches("form[data-confirm]:not([ws-send])") && !window.confirm(f.getAttribute("data-confirm"))) {
      e.preventDefault();
    }
  });


  // ---- layout, keyboard and screen readers (issue 10) ---------------------------------------
  // Below 900 px the conversation list (#sidebar) and the settings (#settings) are drawers opened
  // by the top bar's buttons (aria-controls / aria-expanded); Esc or the backdrop closes them and
  // focus returns to the button. The site menu works the same way. Shortcuts are listed in
  // templates/ui/shortcuts.html. Focus never falls to <body> after a swap: it goes back to the
  // same control of the same message, else to its nearest sensible neighbour, else the composer.
  var ui = (function () {
    var $ = function (id) { return document.getElementById(id); };
    var narrow = window.matchMedia("(max-width: 900px)");
    var opener = null, focusMemo = null, echoEl = null;
    function visible(el) { return !!(el && el.isConnected && !el.disabled && el.getClientRects().length); }
    function focusFirst(root) {
      var el = root && root.querySelector("input:not([type=hidden]), select, textarea, button, a[href]");
      if (el) el.focus();
    }
    function openDrawer(id, focusId) {
      var d = $(id), btn = document.querySelector('[aria-controls="' + id + '"]');
      if (!d) return;
      closeAll(false);
      opener = btn || document.activeElement;
      d.classList.add("open");
      if (btn) btn.setAttribute("aria-expanded", "true");
      var bd = $("drawer-backdrop"); if (bd) bd.hidden = false;
      // Wait for the slide-in to make the drawer focusable (visibility).
      setTimeout(function () { if (focusId && $(focusId)) $(focusId).focus(); else focusFirst(d); }, 0);
    }
    function closeAll(returnFocus) {
      var closed = false;
      document.querySelectorAll(".drawer.open, #site-nav.open").forEach(function (d) {
        d.classList.remove("open"); closed = true;
        var btn = document.querySelector('[aria-controls="' + d.id + '"]');
        if (btn) btn.setAttribute("aria-expanded", "false");
      });
      var bd = $("drawer-backdrop"); if (bd) bd.hidden = true;
      if (closed && returnFocus && opener && opener.isConnected) opener.focus();
      if (closed) opener = null;
      return closed;
    }
    document.addEventListener("click", function (e) {
      var t = e.target.closest ? e.target : e.target.parentElement;
      if (!t) return;
      var tog = t.closest(".drawer-toggle");
      if (tog) {
        var id = tog.getAttribute("aria-controls");
        if ($(id) && $(id).classList.contains("open")) closeAll(true); else openDrawer(id);
        return;
      }
      if (t.closest("#nav-toggle")) {
        var nav = $("site-nav"), open = !nav.classList.contains("open");
        closeAll(false);
        if (open) { nav.classList.add("open"); $("nav-toggle").setAttribute("aria-expanded", "true"); opener = $("nav-toggle"); focusFirst(nav); }
        return;
      }
      if (t.id === "drawer-backdrop") { closeAll(true); return; }
      if (!t.closest("#site-nav") && $("site-nav") && $("site-nav").classList.contains("open")) closeAll(false);
      if (t.closest("#theme-toggle")) { toggleTheme(); return; }
      if (t.closest("#shortcuts-open")) { sheet(); return; }
      if (t.closest("#composer-stop")) { stopRunning(); return; }
      if (t.closest("#new-output")) { scrollDown(); hidePill(); var c = $("content"); if (c) c.focus(); }
    });
    narrow.addEventListener && narrow.addEventListener("change", function () { if (!narrow.matches) closeAll(false); });

    // Theme: follows the system until the toggle picks one (kept in localStorage).
    function systemDark() { return window.matchMedia("(prefers-color-scheme: dark)").matches; }
    function applyTheme() {
      var saved = null;
      try { saved = localStorage.getItem("pg-theme"); } catch (err) { /* storage off */ }
      if (saved === "dark" || saved === "light") document.documentElement.setAttribute("data-theme", saved);
      else document.documentElement.removeAttribute("data-theme");
      var dark = saved ? saved === "dark" : systemDark();
      var b = $("theme-toggle"); if (b) b.setAttribute("aria-pressed", dark ? "true" : "false");
    }
    function toggleTheme() {
      var dark = $("theme-toggle").getAttribute("aria-pressed") === "true";
      try { localStorage.setItem("pg-theme", dark ? "light" : "dark"); } catch (err) { /* storage off */ }
      applyTheme();
    }
    applyTheme();

    // Live announcements: one polite sentence, replaced (never appended per token).
    function say(text) {
      var live = $("live-region");
      if (!live) return;
      live.textContent = "";
      setTimeout(function () { live.textContent = text; }, 30);
    }

    // Send turns into Stop while a turn streams.
    function running() { return document.querySelector(".msg-assistant.status-streaming button.stop"); }
    function stopRunning() { var s = running(); if (s) s.click(); }
    function syncComposer() {
      var send = $("send"), stop = $("composer-stop");
      if (!send || !stop) return;
      var on = !!running(), hadSend = document.activeElement === send, hadStop = document.activeElement === stop;
      send.hidden = on; stop.hidden = !on;
      if (on && hadSend) stop.focus();
      if (!on && hadStop) { var c = $("content"); if (c) c.focus(); }
      if (!on) hidePill();
    }

    // Where focus was in the thread, to put it back after the server swaps that part.
    document.addEventListener("focusin", function (e) {
      var t = e.target, art = t.closest && t.closest("#thread .msg");
      if (!art) { if (t !== document.body) focusMemo = null; return; }
      var cls = t.closest(".edit-form") ? "edit-open" : (t.classList && t.classList[0]) || "";
      focusMemo = { id: art.id, cls: cls, assistant: art.classList.contains("msg-assistant") };
    });
    var FALLBACK = { stop: ["regenerate", "retry", "copy-msg"], regenerate: ["stop", "regenerate"], retry: ["stop", "retry", "regenerate"],
      "continue": ["stop", "regenerate"], "sib-prev": ["sib-next", "regenerate", "edit-open"], "sib-next": ["sib-prev", "regenerate", "edit-open"] };
    function restoreFocus() {
      var a = document.activeElement;
      if (a && a !== document.body && a.isConnected) return;
      if (document.querySelector("dialog[open]")) return;
      var m = focusMemo, art = m && $(m.id), target = null;
      if (art) {
        [m.cls].concat(FALLBACK[m.cls] || []).some(function (c) {
          var el = c && art.querySelector("button." + c);
          if (visible(el)) { target = el; return true; }
          return false;
        });
        if (!target) target = Array.prototype.find.call(art.querySelectorAll(".msg-actions button"), visible) || null;
      } else if (m && running()) {
        target = running();
      }
      if (!target) target = $("content");
      if (target) target.focus();
    }

    // The optimistic echo: your message shows at once, until the server's copy replaces it.
    function echo(text, role, ev) {
      setTimeout(function () {
        var t = thread();
        if (!t || (ev && ev.defaultPrevented) || !text.trim()) return;
        dropEcho();
        echoEl = document.createElement("article");
        echoEl.className = "msg msg-" + (role === "assistant" ? "assistant" : role === "system" ? "system" : "user") + " msg-pending";
        echoEl.setAttribute("aria-busy", "true");
        var head = document.createElement("div"), who = document.createElement("span"), st = document.createElement("span");
        head.className = "msg-role"; who.textContent = role === "user" ? "You" : role; st.className = "muted"; st.textContent = "· sending…";
        head.appendChild(who); head.appendChild(st);
        var body = document.createElement("div");
        body.className = "msg-body user-text"; body.setAttribute("dir", "auto"); body.textContent = text;
        echoEl.appendChild(head); echoEl.appendChild(body);
        t.appendChild(echoEl);
        scrollDown();
        var mine = echoEl;
        setTimeout(function () { if (echoEl === mine) dropEcho(); }, 15000);
      }, 0);
    }
    function dropEcho() { if (echoEl) { echoEl.remove(); echoEl = null; } }

    // "↓ new output": you scrolled up while an answer streams; the view stays where you are.
    function pill() {
      if (!running()) return;
      var p = $("new-output");
      if (!p) {
        var chat = document.querySelector(".chat");
        if (!chat) return;
        p = document.createElement("button");
        p.type = "button"; p.id = "new-output"; p.className = "new-output primary";
        p.appendChild(icon("down")); p.appendChild(document.createTextNode(" new output"));
        p.setAttribute("aria-label", "New output below: scroll to the end");
        chat.appendChild(p);
      }
      p.hidden = false;
    }
    function hidePill() { var p = $("new-output"); if (p) p.hidden = true; }
    document.addEventListener("scroll", function (e) { if (e.target === thread() && nearBottom()) hidePill(); }, true);

    // The shortcut sheet.
    function sheet() { var d = $("shortcuts-dialog"); if (d && !d.open) { closeAll(false); d.showModal(); } }
    function lastAssistant() { var all = document.querySelectorAll("#thread .msg-assistant"); return all[all.length - 1] || null; }
    function focusSearch() {
      var s = $("conv-search");
      if (!s) return;
      if (narrow.matches) openDrawer("sidebar", "conv-search"); else { s.focus(); s.select(); }
    }
    document.addEventListener("keydown", function (e) {
      if (e.defaultPrevented || e.isComposing || !$("composer")) return;
      var t = e.target, typing = t.closest && t.closest("input, textarea, select, [contenteditable=true]");
      var mod = e.ctrlKey || e.metaKey;
      if (mod && !e.shiftKey && !e.altKey && (e.key === "k" || e.key === "K")) { e.preventDefault(); focusSearch(); return; }
      if (e.key === "Escape" && e.shiftKey) { e.preventDefault(); closeAll(false); $("content").focus(); return; }
      if (e.altKey && e.shiftKey && !mod) {
        var last = lastAssistant(), b = null;
        if (e.code === "KeyN") { e.preventDefault(); var n = $("new-chat"); if (n) n.click(); return; }
        if (e.code === "KeyR") {
          e.preventDefault();
          b = last && (last.querySelector("button.regenerate") || last.querySelector("button.retry"));
          if (b && !b.disabled) b.click(); else say(last ? "Nothing to regenerate yet: the answer is still running or waiting." : "No answer to regenerate yet.");
          return;
        }
        if (e.code === "KeyC") {
          e.preventDefault();
          b = last && last.querySelector("button.copy-msg");
          if (b) { b.click(); say("Copied the last answer."); } else say("No answer to copy yet.");
          return;
        }
      }
      if (e.key === "?" && !typing && !mod && !e.altKey) { e.preventDefault(); sheet(); }
    });

    // The header shows the title and its actions as soon as the conversation has a title (it
    // arrives with the sidebar after the first answer).
    function syncHead() {
      var empty = $("chat-title-empty"), input = $("conv-title");
      if (!empty || empty.hidden || !input) return;
      var cur = document.querySelector("#conversation-list li.current .conv-title") || document.querySelector("#conversation-list li.current a");
      var title = cur && cur.textContent.trim();
      if (!title) return;
      input.value = title;
      empty.hidden = true;
      document.querySelectorAll("#chat-head [data-titled]").forEach(function (f) { f.hidden = false; });
      document.title = title + " · LLM Playground";
    }

    // Delete with undo instead of confirm(): the form is sent after a few seconds unless Undo
    // is pressed; leaving the page first sends it at once (sendBeacon).
    var UNDO_S = 6, pendingDelete = null;
    function undoToast(form) {
      var toast = document.createElement("div"), text = document.createElement("span"), undo = document.createElement("button");
      toast.className = "toast"; toast.setAttribute("role", "status");
      text.textContent = form.getAttribute("data-undo") + " ";
      undo.type = "button"; undo.className = "undo"; undo.textContent = "Undo";
      toast.appendChild(text); toast.appendChild(undo);
      document.body.appendChild(toast);
      // A sidebar row's delete hides the row at once; data-undo-stay (not the page's own
      // conversation) deletes in the background and keeps this page.
      var row = form.closest("#conversation-list li");
      if (row) { var menu = row.querySelector("details.row-menu"); if (menu) menu.open = false; row.hidden = true; }
      ensureCsrf(form);
      // Deleting the chat this page shows: nothing can be sent into it while Undo is offered
      // (a turn would run and then be deleted with the chat).
      var own = !form.hasAttribute("data-undo-stay");
      if (own) holdComposer(true);
      var timer = setTimeout(function () {
        pendingDelete = null;
        if (form.hasAttribute("data-undo-stay")) stayDelete(form, toast, row); else form.submit();
      }, UNDO_S * 1000);
      pendingDelete = { form: form, timer: timer, toast: toast, row: row };
      undo.addEventListener("click", function () {
        clearTimeout(timer); pendingDelete = null; toast.remove();
        if (own) holdComposer(false);
        if (row) row.hidden = false;
        var b = row ? row.querySelector("details.row-menu > summary") : form.querySelector("button"); if (b) b.focus();
        say("Delete undone.");
      });
      undo.focus();
    }
    function holdComposer(on) {
      document.body.classList.toggle("chat-deleting", on);
      ["content", "send"].forEach(function (id) { var el = $(id); if (el) el.disabled = on; });
      var c = $("content");
      if (!c) return;
      if (on) { c.dataset.placeholder = c.placeholder; c.placeholder = "This chat is being deleted (Undo keeps it)."; }
      else if (c.dataset.placeholder) c.placeholder = c.dataset.placeholder;
    }
    document.addEventListener("htmx:wsConfigSend", function (e) {
      if (document.body.classList.contains("chat-deleting")) { e.preventDefault(); say("This chat is being deleted: Undo keeps it."); }
    });
    // Forms rendered into websocket frames have no CSRF field: take the page's token.
    function ensureCsrf(form) {
      var field = form.querySelector("input[name=csrfmiddlewaretoken]");
      if (field && field.value) return;
      var token = "";
      try { token = JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || ""; } catch (err) { /* none */ }
      if (!field) { field = document.createElement("input"); field.type = "hidden"; field.name = "csrfmiddlewaretoken"; form.appendChild(field); }
      field.value = token;
    }
    function stayDelete(form, toast, row) {
      fetch(form.action, { method: "POST", body: new FormData(form), credentials: "same-origin", redirect: "manual" }).then(function (r) {
        if (!(r.ok || r.type === "opaqueredirect")) throw new Error("HTTP " + r.status);
        var hadFocus = toast.contains(document.activeElement);
        var next = row && (row.nextElementSibling || row.previousElementSibling);
        if (row) row.remove();
        toast.remove();
        if (hadFocus) { var to = next && next.querySelector("a") || $("conv-search"); if (to) to.focus(); }
        say("Conversation deleted.");
      }).catch(function () {
        if (row) row.hidden = false;
        toast.remove();
        say("The conversation could not be deleted. Try again.");
      });
    }
    document.addEventListener("submit", function (e) {
      var f = e.target;
      if (!(f.matches && f.matches("form[data-undo]"))) return;
      e.preventDefault();
      // A second row deleted during the undo time: the first one goes now, without its toast.
      var p = pendingDelete;
      if (p && p.row && p.form.hasAttribute("data-undo-stay")) { clearTimeout(p.timer); pendingDelete = null; stayDelete(p.form, p.toast, p.row); }
      if (!pendingDelete) undoToast(f);
    });
    window.addEventListener("pagehide", function () {
      if (!pendingDelete) return;
      clearTimeout(pendingDelete.timer);
      navigator.sendBeacon(pendingDelete.form.action, new FormData(pendingDelete.form));
      pendingDelete = null;
    });

    // A long pasted message is folded, with "Show all" (a button, so keyboard and touch work).
    var foldN = 0;
    function fold() {
      document.querySelectorAll("#thread .msg-body.user-text:not([data-fold])").forEach(function (el) {
        el.setAttribute("data-fold", "1");
        if (el.scrollHeight <= 380) return;
        if (!el.id) el.id = "fold-" + (++foldN);
        el.classList.add("folded");
        var b = document.createElement("button");
        b.type = "button"; b.className = "show-all linklike small"; b.setAttribute("aria-expanded", "false");
        b.setAttribute("aria-controls", el.id);
        b.textContent = "Show all (" + el.textContent.split("\n").length + " lines)";
        el.insertAdjacentElement("afterend", b);
      });
    }
    document.addEventListener("click", function (e) {
      var b = e.target.closest && e.target.closest("button.show-all");
      if (!b) return;
      var el = $(b.getAttribute("aria-controls")), open = b.getAttribute("aria-expanded") !== "true";
      el.classList.toggle("folded", !open);
      b.setAttribute("aria-expanded", open ? "true" : "false");
      b.textContent = open ? "Show less" : "Show all (" + el.textContent.split("\n").length + " lines)";
    });
    document.addEventListener("htmx:afterSwap", fold);

    return {
      say: say, closeAll: closeAll, syncComposer: syncComposer, echo: echo, dropEcho: dropEcho, pill: pill,
      afterSwap: function () { syncComposer(); syncHead(); fold(); restoreFocus(); },
      init: function () {
        applyTheme(); syncComposer(); fold();
        var c = $("content");
        if (c && !location.hash) c.focus();
      },
    };
  })();

  // ---- sidebar row menus (issue 10) -----------------------------------------------------------
  // Each conversation row has a <details class="row-menu"> (also "New chat from a prompt"): it
  // opens with Enter/Space or a tap, the arrow keys move between its items, Esc closes it and
  // focus goes back to its button; opening one closes the others, a click outside closes all.
  // Rename turns the row into a text field (Enter saves through htmx, Esc cancels, leaving the
  // field saves a changed title); the server keeps the list's order, search and current row.
  (function () {
    function items(menu) { return Array.prototype.slice.call(menu.querySelectorAll("[role=menuitem]")); }
    function closeMenus(except) {
      document.querySelectorAll("details.row-menu[open]").forEach(function (d) { if (d !== except) d.open = false; });
    }
    document.addEventListener("toggle", function (e) {
      var d = e.target;
      if (!(d.matches && d.matches("details.row-menu"))) return;
      var s = d.querySelector(":scope > summary");
      if (s) s.setAttribute("aria-expanded", d.open ? "true" : "false");
      if (!d.open) return;
      closeMenus(d);
      if (d.contains(document.activeElement)) { var first = items(d)[0]; if (first) first.focus(); }
    }, true);
    document.addEventListener("click", function (e) {
      var t = e.target.closest ? e.target : e.target.parentElement;
      if (!t) return;
      if (!t.closest("details.row-menu")) closeMenus(null);
      var rn = t.closest("button.row-rename");
      if (rn) startRename(rn.closest("li"));
    });
    document.addEventListener("keydown", function (e) {
      var t = e.target;
      if (!t.closest) return;
      var form = t.closest(".row-rename-form");
      if (form && e.key === "Escape") { e.preventDefault(); e.stopPropagation(); endRename(form, true); return; }
      var menu = t.closest("details.row-menu[open]");
      if (!menu) return;
      if (e.key === "Escape") {
        e.preventDefault(); e.stopPropagation();
        menu.open = false; menu.querySelector(":scope > summary").focus();
        return;
      }
      var list = items(menu), i = list.indexOf(t);
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        var n = list.length, j = i < 0 ? 0 : (i + (e.key === "ArrowDown" ? 1 : n - 1)) % n;
        if (list[j]) list[j].focus();
      } else if (e.key === "Home" || e.key === "End") {
        e.preventDefault();
        var k = e.key === "Home" ? list[0] : list[list.length - 1]; if (k) k.focus();
      } else if (e.key === "Tab" && i >= 0) {
        menu.open = false;
      }
    }, true);
    var renaming = null;
    function startRename(li) {
      if (!li) return;
      var menu = li.querySelector("details.row-menu"), form = li.querySelector(".row-rename-form"), link = li.querySelector("a.conv-link");
      if (!form) return;
      if (menu) { menu.open = false; menu.hidden = true; }
      if (link) link.hidden = true;
      form.hidden = false;
      var input = form.querySelector("input[name=title]");
      input.value = input.defaultValue;
      input.focus(); input.select();
    }
    function endRename(form, cancel) {
      var li = form.closest("li"), menu = li.querySelector("details.row-menu"), link = li.querySelector("a.conv-link");
      var input = form.querySelector("input[name=title]");
      form.hidden = true;
      if (link) link.hidden = false;
      if (menu) menu.hidden = false;
      if (cancel) { input.value = input.defaultValue; if (menu) menu.querySelector(":scope > summary").focus(); }
    }
    document.addEventListener("submit", function (e) {
      var form = e.target;
      if (!(form.matches && form.matches(".row-rename-form"))) return;
      var input = form.querySelector("input[name=title]");
      if (!input.value.trim() || input.value.trim() === input.defaultValue) {
        e.preventDefault(); e.stopPropagation(); endRename(form, true); return;
      }
      renaming = { id: form.closest("li").getAttribute("data-conv"), title: input.value.trim() };
    }, true);
    document.addEventListener("focusout", function (e) {
      var form = e.target.closest && e.target.closest(".row-rename-form");
      if (!form || form.hidden || (e.relatedTarget && form.contains(e.relatedTarget))) return;
      var input = form.querySelector("input[name=title]");
      setTimeout(function () {
        if (form.hidden || !form.isConnected) return;
        if (input.value.trim() && input.value.trim() !== input.defaultValue) form.requestSubmit(); else endRename(form, false);
      }, 0);
    });
    // After the list comes back: the renamed row keeps focus on its menu button; renaming the
    // page's own conversation updates the header and the tab title too.
    document.addEventListener("htmx:afterSettle", function () {
      if (!renaming) return;
      var r = renaming; renaming = null;
      var li = document.querySelector('#conversation-list li[data-conv="' + r.id + '"]');
      if (li && li.classList.contains("current")) {
        var input = document.getElementById("conv-title");
        if (input) { input.value = r.title; input.defaultValue = r.title; }
        document.title = r.title + " · LLM Playground";
      }
      var b = li && li.querySelector("details.row-menu > summary");
      if (b) b.focus();
      ui.say("Renamed to " + r.title + ".");
    });
  })();

  document.addEventListener("DOMContentLoaded", function () {
    // "/" without an empty conversation: its form creates one by POST (a GET never writes).
    var start = document.querySelector("form[data-autosubmit]");
    if (start) { start.submit(); return; }
    initStreams(); afterFrame(); scrollDown(); applyStyle();
    ui.init();
  });
})();
