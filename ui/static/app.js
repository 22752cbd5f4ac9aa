// EIM web UI: progressive enhancement only. Every page works without this
// file; with it, pages that show changing state refresh themselves when
// the server says something changed (server-sent events from the change
// feed), the provisioning log follows new lines (long poll), and a few
// controls get shortcuts. No inline script anywhere (the CSP forbids it).
(function () {
  "use strict";

  var logAbort = null;

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }

  function enhanceControls(root) {
    $all("[data-autosubmit]", root).forEach(function (el) {
      el.addEventListener("change", function () { el.form.submit(); });
    });
    $all("[data-select-all]", root).forEach(function (box) {
      box.addEventListener("change", function () {
        $all('input[type=checkbox][name=id]', box.form || document).forEach(function (c) { c.checked = box.checked; });
      });
    });
  }

  // followLog long-polls the provisioning log of a host page and appends
  // the lines that arrive.
  function followLog() {
    if (logAbort) { logAbort.abort(); logAbort = null; }
    var ol = $("ol.log[data-log]");
    if (!ol || ol.dataset.finished === "true" || !window.fetch || !window.AbortController) { return; }
    var ctl = new AbortController();
    logAbort = ctl;
    var next = parseInt(ol.dataset.next || "0", 10);
    function poll() {
      fetch(ol.dataset.log + "?after=" + next, { credentials: "same-origin", signal: ctl.signal, headers: { "Accept": "application/json" } })
        .then(function (r) { if (!r.ok) { throw new Error("HTTP " + r.status); } return r.json(); })
        .then(function (d) {
          (d.entries || []).forEach(function (e) {
            if (ol.querySelector('li[data-seq="' + e.seq + '"]')) { return; }
            var li = document.createElement("li");
            li.dataset.seq = e.seq;
            if (e.failed) { li.className = "failed"; }
            var t = document.createElement("time"); t.textContent = e.time;
            var a = document.createElement("span"); a.className = "act"; a.textContent = e.action;
            var s = document.createElement("span"); s.className = "st"; s.textContent = e.state || "";
            var x = document.createElement("span"); x.className = "txt"; x.textContent = e.text || "";
            li.append(t, " ", a, " ", s, " ", x);
            ol.appendChild(li);
          });
          next = d.next || next;
          ol.dataset.next = String(next);
          var st = $("[data-log-state]");
          if (st && d.state) { st.textContent = d.state + (d.attempt ? ", attempt " + d.attempt : ""); }
          if (d.finished) { ol.dataset.finished = "true"; return; }
          poll();
        })
        .catch(function (err) {
          if (ctl.signal.aborted) { return; }
          setTimeout(poll, 2000);
        });
    }
    poll();
  }

  // busy reports whether the user is in the middle of something the
  // refresh would undo: a selection, or typing in a field of the content.
  function busy(live) {
    if ($all('input[type=checkbox][name=id]:checked', live).length > 0) { return true; }
    var a = document.activeElement;
    return a && live.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName);
  }

  function refresh() {
    var live = $("#live");
    if (!live || busy(live)) { return; }
    fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var doc = new DOMParser().parseFromString(html, "text/html");
        var fresh = doc.getElementById("live");
        if (!fresh || busy(live)) { return; }
        live.innerHTML = fresh.innerHTML;
        enhanceControls(live);
        followLog();
        var s = $("#live-status");
        if (s) { s.textContent = "Updated " + new Date().toLocaleTimeString(); }
      })
      .catch(function () {});
  }

  function goLive() {
    var url = document.body.dataset.live;
    if (!url || !window.EventSource) { return; }
    var es = new EventSource(url);
    var s = $("#live-status");
    es.addEventListener("hello", function () { if (s) { s.textContent = "Live"; } });
    es.addEventListener("change", refresh);
    es.onerror = function () { if (s) { s.textContent = "Reconnecting…"; } };
  }

  document.addEventListener("DOMContentLoaded", function () {
    document.documentElement.classList.add("js");
    enhanceControls(document);
    followLog();
    goLive();
  });
})();
