"""The benchmark's browser phase: ``python -m bench.browser PLAN.json RESULT.json``.

One Chromium page (Debian's ``/usr/bin/chromium`` through Playwright's sync API, the flags of
``tests/conftest.py``'s ``CHROMIUM_ARGS``) opens a real conversation page on the benchmark's
daphne, logged in with a session cookie, sends one message from the composer (Enter) and
receives the lean upstream's ``bench-md`` answer (10,000 tokens of paragraphs, code blocks,
lists and tables at 200 tokens/s by default). It records, from the send to 1 s after the final
frame:

- ``script_s``: CDP ``Performance.getMetrics`` ``ScriptDuration`` delta (all script the page
  ran: htmx, the page's own code and this module's observer, whose own time ``observer_ms`` is
  measured in the page and subtracted: see :func:`bench.stats.browser_summary`), with
  ``TaskDuration``, ``LayoutDuration`` and ``RecalcStyleDuration`` beside it;
- ``longest_task_ms``: the longest task of the renderer's main thread (``CrRendererMain``) in a
  Chromium trace (category ``disabled-by-default-devtools.timeline``, events ``RunTask``) over
  the same window (the ten longest in ``longest_tasks_ms``, with their thread CPU time in
  ``longest_tasks_cpu_ms``: on a busy machine a task's wall time includes preemption), and
  ``longtasks_ms``:
  PerformanceObserver ``longtask`` entries (> 50 ms), split into those that started while the
  answer streamed and after its last word arrived (the final swap);
- ``recreated_nodes``: DOM nodes re-created above the streaming point, measured generically
  (the page's markup may change) by a MutationObserver: the *answer root* is the lowest common
  ancestor of the nodes added while the answer streams whose text carries the answer's words
  (every word of ``bench-md`` contains "vex", which no other page text does); its child nodes
  are the *blocks*, the last one is the open block. A node counts (with all its descendants)
  when it is removed while it was in a completed block (a block followed by another one), or
  when it is a completed block removed itself, or when the whole root is removed while the
  answer streams (all its blocks but the last). Removals from the batch that brings the
  answer's last word ("vexend") on are the final swap and count apart
  (``final_swap_removed_nodes``).

May import: the standard library, playwright, ``bench.frames``.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench.frames import classify

CHROMIUM = "/usr/bin/chromium"
#: ``tests/conftest.py``'s ``CHROMIUM_ARGS`` (kept equal by tests/test_bench_stats.py).
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]
TRACE_CATEGORIES = ["disabled-by-default-devtools.timeline"]

#: Installed before the page's own scripts (``add_init_script``); ``window.__bench.arm()``
#: starts counting, ``window.__bench.report()`` returns the counts.
OBSERVER_JS = r"""
(() => {
  const WORD = /vex/, END = 'vexend';
  const B = window.__bench = {
    armed: false, root: null, complete: false, t0: 0, wsOpen: false,
    recreated: 0, recreatedEvents: 0, finalRemoved: 0, rootResets: 0, additions: 0,
    firstAnswerMs: null, completeMs: null, observerMs: 0, longtasks: [], rootSeen: '',
  };
  document.addEventListener('htmx:wsOpen', () => { B.wsOpen = true; }, true);
  const content = n => n && (n.nodeType === 1 || (n.nodeType === 3 && n.data.trim() !== ''));
  const nextContent = n => { while (n && !content(n)) n = n.nextSibling; return n; };
  const text = n => (n.nodeType === 3 ? n.data : (n.textContent || ''));
  const size = n => {
    let c = 1;
    const w = document.createTreeWalker(n, NodeFilter.SHOW_ELEMENT | NodeFilter.SHOW_TEXT);
    while (w.nextNode()) c++;
    return c;
  };
  const sum = nodes => nodes.reduce((a, n) => a + size(n), 0);
  const lca = (a, b) => { let x = b; while (x && !x.contains(a)) x = x.parentNode; return x; };
  const describe = n => n ? (n.nodeName.toLowerCase() + (n.id ? '#' + n.id : '') +
    (n.className && typeof n.className === 'string' ? '.' + n.className.trim().split(/\s+/).join('.') : '')) : '';
  const blockOf = n => { let x = n; while (x && x.parentNode !== B.root) x = x.parentNode; return x; };

  function track(n) {
    B.additions++;
    if (B.firstAnswerMs === null) B.firstAnswerMs = performance.now() - B.t0;
    const parent = n.parentNode;
    if (!parent) return;
    B.root = (B.root && B.root.isConnected) ? lca(B.root, parent) : parent;
    B.rootSeen = describe(B.root);
  }

  function removals(r, final) {
    const root = B.root;
    if (!root) return;
    const removed = Array.from(r.removedNodes);
    let counted = 0, whole = false;
    if (removed.some(n => n === root || n.contains(root))) {
      const blocks = Array.from(root.childNodes).filter(content);
      counted = final ? sum(blocks) : sum(blocks.slice(0, -1));
      B.root = null; B.rootResets++; whole = true;
    } else if (r.target === root) {
      const done = removed.filter(content);
      counted = sum(nextContent(r.nextSibling) ? done : done.slice(0, -1));
    } else if (root.contains(r.target)) {
      const block = blockOf(r.target);
      if (block && nextContent(block.nextSibling)) counted = sum(removed.filter(content));
    }
    if (final) B.finalRemoved += counted;
    else if (counted) { B.recreated += counted; B.recreatedEvents++; }
    return whole;
  }

  new MutationObserver(records => {
    if (!B.armed) return;
    const t = performance.now();
    let completes = false;
    if (!B.complete) {
      for (const r of records) {
        for (const n of r.addedNodes) if (content(n) && text(n).includes(END)) completes = true;
        if (r.type === 'characterData' && r.target.data.includes(END)) completes = true;
      }
    }
    const final = B.complete || completes;
    for (const r of records) {
      if (r.type === 'characterData') {
        if (!final && WORD.test(r.target.data)) track(r.target);
        continue;
      }
      if (r.removedNodes.length) removals(r, final);
      if (!final) for (const n of r.addedNodes) if (content(n) && WORD.test(text(n))) track(n);
    }
    if (completes) { B.complete = true; B.completeMs = performance.now() - B.t0; }
    B.observerMs += performance.now() - t;
  }).observe(document, {childList: true, subtree: true, characterData: true});

  try {
    new PerformanceObserver(list => {
      for (const e of list.getEntries()) if (B.armed && e.startTime >= B.t0) B.longtasks.push([e.startTime - B.t0, e.duration]);
    }).observe({type: 'longtask', buffered: false});
  } catch (e) { B.longtasks = null; }

  B.arm = () => { B.armed = true; B.t0 = performance.now(); };
  B.report = () => ({
    recreated: B.recreated, recreatedEvents: B.recreatedEvents, finalRemoved: B.finalRemoved,
    rootResets: B.rootResets, additions: B.additions, firstAnswerMs: B.firstAnswerMs,
    completeMs: B.completeMs, observerMs: B.observerMs, longtasks: B.longtasks,
    root: B.rootSeen, complete: B.complete,
  });
})();
"""


def main_tasks_ms(trace: bytes) -> list[tuple[float, float | None]]:
    """(wall ms, thread CPU ms or None) of the ``RunTask`` events on any ``CrRendererMain``
    thread of a Chromium trace (JSON bytes from ``browser.stop_tracing()``; ``dur`` and
    ``tdur`` in µs), longest wall time first. On a busy machine wall exceeds CPU: the task was
    preempted."""
    doc = json.loads(trace)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    main = {
        (e["pid"], e["tid"])
        for e in events
        if e.get("ph") == "M" and e.get("name") == "thread_name"
        and (e.get("args") or {}).get("name") == "CrRendererMain"
    }
    tasks = [
        (e["dur"] / 1000.0, e["tdur"] / 1000.0 if "tdur" in e else None)
        for e in events
        if e.get("ph") == "X" and e.get("name") == "RunTask" and (e.get("pid"), e.get("tid")) in main
    ]
    return sorted(tasks, key=lambda t: t[0], reverse=True)


def _metrics(cdp: Any) -> dict[str, float]:
    return {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}


def run(plan: dict[str, Any]) -> dict[str, Any]:
    """Open the page, send, wait for the final frame, return the record (see the module
    docstring). ``plan``: ``server_port``, ``spec`` (``conversation_id``, ``session``),
    ``tokens``, ``model``, ``timeout_s``, ``trace`` (bool), ``text`` (the user message)."""
    from playwright.sync_api import sync_playwright

    base = f"http://127.0.0.1:{plan['server_port']}"
    frames: list[tuple[float, str]] = []  # (perf_counter s, kind)
    final: dict[str, Any] = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        context.add_cookies([{"name": "sessionid", "value": plan["spec"]["session"], "url": base}])
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.add_init_script(OBSERVER_JS)

        def on_ws(ws: Any) -> None:
            def on_frame(payload: Any) -> None:
                now = time.perf_counter()
                msg = payload if isinstance(payload, str) else payload.decode()
                f = classify(msg)
                frames.append((now, "delta" if f.deltas else "other"))
                if f.status and "at" not in final:
                    final.update(at=now, status=f.status, bytes=len(msg.encode()))

            ws.on("framereceived", on_frame)

        page.on("websocket", on_ws)
        page.goto(f"{base}/c/{plan['spec']['conversation_id']}/")
        try:
            page.wait_for_function("window.__bench && window.__bench.wsOpen", timeout=15_000)
        except Exception:
            page.wait_for_timeout(2000)  # no htmx:wsOpen event: give the socket time
        composer = page.locator("#composer textarea[name=content]")
        try:
            composer.wait_for(timeout=15_000)
        except Exception as exc:
            raise RuntimeError(
                f"no composer on {page.url} (status page text: {page.inner_text('body')[:300]!r})"
            ) from exc
        composer.fill(plan["text"])
        cdp = context.new_cdp_session(page)
        cdp.send("Performance.enable")
        if plan.get("trace", True):
            browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        if plan.get("cpu_profile"):
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 200})
            cdp.send("Profiler.start")
        m0 = _metrics(cdp)
        page.evaluate("window.__bench.arm()")
        sent = time.perf_counter()
        composer.press("Enter")
        deadline = sent + plan["timeout_s"]
        while "at" not in final and time.perf_counter() < deadline:
            page.wait_for_timeout(200)
        page.wait_for_timeout(1000)
        m1 = _metrics(cdp)
        if plan.get("cpu_profile"):
            with open(plan["cpu_profile"], "w") as f:
                json.dump(cdp.send("Profiler.stop")["profile"], f)
        trace = browser.stop_tracing() if plan.get("trace", True) else None
        report = page.evaluate("window.__bench.report()")
        nodes = page.evaluate("document.getElementsByTagName('*').length")
        context.close()
        browser.close()
    tasks = main_tasks_ms(trace) if trace else []
    complete_ms = report["completeMs"]
    long_tasks = report["longtasks"] or []
    deltas = [t for t, kind in frames if kind == "delta"]

    def d(name: str) -> float | None:
        return round(m1[name] - m0[name], 4) if name in m1 and name in m0 else None

    return {
        "tokens": plan["tokens"],
        "model": plan["model"],
        "final_status": final.get("status"),
        "final_frame_bytes": final.get("bytes"),
        "answer_s": round(final["at"] - sent, 2) if "at" in final else None,
        "first_delta_s": round(deltas[0] - sent, 3) if deltas else None,
        "delta_frames": len(deltas),
        "frames": len(frames),
        "script_s": d("ScriptDuration"),
        "task_s": d("TaskDuration"),
        "layout_s": d("LayoutDuration"),
        "recalc_style_s": d("RecalcStyleDuration"),
        "observer_ms": round(report["observerMs"], 1),
        "longest_task_ms": round(tasks[0][0], 1) if tasks else None,
        "longest_tasks_ms": [round(w, 1) for w, _ in tasks[:10]],
        "longest_tasks_cpu_ms": [None if c is None else round(c, 1) for _, c in tasks[:10]],
        "longest_task_by_cpu_ms": max((c for _, c in tasks if c is not None), default=None),
        "traced_tasks": len(tasks),
        "longtasks_ms": [round(d, 1) for _, d in long_tasks],
        "longtasks_while_streaming_ms": [round(d, 1) for t, d in long_tasks if complete_ms is None or t < complete_ms],
        "longtasks_after_answer_complete_ms": [round(d, 1) for t, d in long_tasks if complete_ms is not None and t >= complete_ms],
        "recreated_nodes": report["recreated"] if report["additions"] else None,
        "recreated_events": report["recreatedEvents"],
        "final_swap_removed_nodes": report["finalRemoved"],
        "answer_root": report["root"],
        "answer_root_resets": report["rootResets"],
        "answer_additions": report["additions"],
        "first_answer_text_ms": report["firstAnswerMs"],
        "answer_complete_ms": report["completeMs"],
        "dom_elements_after": nodes,
        "page_errors": errors[:5],
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.browser PLAN.json RESULT.json``."""
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        plan = json.load(f)
    result = run(plan)
    with open(argv[1], "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
