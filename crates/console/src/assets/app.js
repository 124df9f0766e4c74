// toolhost console: the live calls over server-sent events. Rows are
// built with textContent only, never from HTML text.
(function () {
  "use strict";
  var table = document.getElementById("calls");
  if (!table || !window.EventSource) { return; }
  var body = table.tBodies[0];
  var state = document.getElementById("live-state");
  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }
  function row(c) {
    if (document.getElementById("c-" + c.call_id)) { return; }
    var tr = document.createElement("tr");
    tr.id = "c-" + c.call_id;
    tr.setAttribute("data-call", c.call_id);
    tr.setAttribute("data-at", String(c.started_us));
    var a = document.createElement("a");
    a.href = "/console/call/" + encodeURIComponent(c.call_id) + "?at=" + c.started_us;
    a.textContent = c.time;
    cell(tr, "").appendChild(a);
    cell(tr, c.trajectory);
    cell(tr, c.tool);
    var s = document.createElement("span");
    s.className = "status s-" + c.status.replace(/[^a-z_]/g, "");
    s.textContent = c.status;
    cell(tr, "").appendChild(s);
    cell(tr, c.duration_ms, "num");
    cell(tr, String(c.output_bytes), "num");
    cell(tr, c.error_code);
    cell(tr, c.token.slice(0, 12), "id");
    tr.className = "fresh";
    // Newest first, by start time.
    var before = null;
    for (var i = 0; i < body.rows.length; i++) {
      if (Number(body.rows[i].getAttribute("data-at") || 0) < c.started_us) { before = body.rows[i]; break; }
    }
    body.insertBefore(tr, before);
    while (body.rows.length > 500) { body.deleteRow(body.rows.length - 1); }
  }
  var es = new EventSource(table.getAttribute("data-events"));
  es.addEventListener("call", function (ev) { row(JSON.parse(ev.data)); });
  es.addEventListener("open", function () { if (state) { state.textContent = "Live: new calls appear as they end (newest first)."; } });
  es.addEventListener("ended", function () { es.close(); window.location = "/console/login"; });
  es.addEventListener("error", function () { if (state) { state.textContent = "Reconnecting to the live stream…"; } });
}());
