/**
 * The dashboard's script and stylesheet, served by app.ts at /dashboard.js and /dashboard.css so that the
 * pages' Content-Security-Policy allows neither inline scripts nor inline styles ('self' only).
 *
 * They are strings in a module, not files read at run time: `bun build --compile` bundles this module into
 * the single binary, which then needs nothing beside it on disk.
 *
 * The script does one thing: it opens the page's event stream (the body's `data-events`, a same-origin
 * path) and replaces each section the server sends (`sections` events: a JSON object of element id to
 * HTML the server rendered and escaped) in place, so the page never reloads. It builds no markup of its own
 * and evaluates nothing it receives. It counts the updates in the body's `data-updates` and says in
 * #live-status whether the stream is live. Without JavaScript the page reloads itself instead (a meta
 * refresh inside <noscript>).
 */

export const DASHBOARD_SCRIPT = `"use strict";
(function () {
  var body = document.body;
  var url = body.getAttribute("data-events");
  var status = document.getElementById("live-status");
  function say(text, state) {
    if (!status) return;
    status.textContent = text;
    status.setAttribute("data-state", state);
  }
  if (!url || typeof EventSource === "undefined") return;
  var updates = 0;
  var source = new EventSource(url);
  source.addEventListener("open", function () {
    say("Live: connected.", "open");
  });
  source.addEventListener("sections", function (event) {
    var sections;
    try {
      sections = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    Object.keys(sections).forEach(function (id) {
      var element = document.getElementById(id);
      if (element && typeof sections[id] === "string") element.outerHTML = sections[id];
    });
    updates += 1;
    body.setAttribute("data-updates", String(updates));
    say("Live: updated at " + new Date().toLocaleTimeString() + ".", "live");
  });
  source.addEventListener("end", function () {
    source.close();
    say("Live updates stopped: the broker is shutting down.", "ended");
  });
  source.addEventListener("error", function () {
    if (source.readyState === EventSource.CLOSED) say("Live updates refused by the broker; reload the page to try again.", "closed");
    else say("Live updates interrupted; reconnecting.", "error");
  });
})();
`;

export const DASHBOARD_STYLE = `body{font:14px/1.4 system-ui,sans-serif;margin:1.5rem;color:#1d2430;background:#fafbfc}
h1{font-size:1.4rem;margin:0 0 .25rem}h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
table{border-collapse:collapse;background:#fff}th,td{padding:.25rem .6rem;border:1px solid #dde2e8;text-align:left}
table.grid td{font-variant-numeric:tabular-nums}thead th{background:#eef1f5}
.facts th{background:#f4f6f8;font-weight:600}
.feature{display:inline-block;padding:0 .4rem;border-radius:.3rem;margin-right:.3rem}
.feature.on{background:#dff5e3}.feature.off{background:#f5e9d8}
.not-implemented{background:#f5e9d8;padding:.5rem .75rem;border-radius:.3rem;max-width:60rem}
.muted,.note{color:#5c6773}
h3{font-size:1rem;margin:1rem 0 .4rem}
.txn-count{display:inline-block;padding:0 .4rem;margin-right:.3rem;border-radius:.3rem;background:#eef1f5}
.txn-count.some{background:#dfe9f5}
.warning{background:#fbe3e1;border:1px solid #e3a29b;padding:.5rem .75rem;border-radius:.3rem;max-width:70rem}
.warning ul{margin:.3rem 0}.ok{color:#2f6b3a}
tr.timed-out td{background:#fbe3e1}td.lso-lag.lagging,td.lagging{background:#fff4d6}
#live-status[data-state=error],#live-status[data-state=closed]{color:#a61e1e}
.charts{display:flex;flex-wrap:wrap;gap:1rem}
figure.chart{margin:0;background:#fff;border:1px solid #dde2e8;padding:.5rem .75rem}
figure.chart figcaption{font-weight:600;margin-bottom:.25rem;max-width:560px}
figure.chart .legend{margin:.25rem 0 0}
svg .plot{fill:#fff;stroke:#dde2e8}
svg .grid{stroke:#eef1f5;stroke-width:1}
svg .axis{font-size:10px;fill:#5c6773}
svg .line{fill:none;stroke-width:2;stroke-linejoin:round}
.line.s0{stroke:#1f6fd1}.line.s1{stroke:#e8590c}.line.s2{stroke:#2f9e44}.line.s3{stroke:#9c36b5}.line.s4{stroke:#c92a2a}.line.s5{stroke:#5c6773}
.key{margin-right:.8rem}.key::before{content:"";display:inline-block;width:.8em;height:.8em;margin-right:.3em;border-radius:.15em;background:currentColor}
.key.s0{color:#1f6fd1}.key.s1{color:#e8590c}.key.s2{color:#2f9e44}.key.s3{color:#9c36b5}.key.s4{color:#c92a2a}.key.s5{color:#5c6773}
.group{margin-bottom:1rem}
ol.timeline{padding-left:1.5rem}ol.timeline li{margin:.15rem 0}ol.timeline time{font-variant-numeric:tabular-nums;color:#5c6773;margin-right:.5rem}
ol.timeline .kind{font-weight:600;margin-right:.4rem}
`;
