// The dashboard's one script, served from the binary at /static/live.js. Every page
// works without it, as of when it was loaded; with it, the overview follows the
// daemon's event stream (the server renders and escapes each fragment; this only puts
// it in place), the log follows new lines, and times count up and down in place.
(function () {
  "use strict";

  function duration(ms) {
    var s = Math.max(0, Math.floor(ms / 1000));
    if (s < 60) return s + "s";
    if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
    if (s < 86400) return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
    return Math.floor(s / 86400) + "d " + Math.floor((s % 86400) / 3600) + "h";
  }

  function tick() {
    var now = Date.now();
    document.querySelectorAll("[data-since-ms]").forEach(function (el) {
      el.textContent = duration(now - Number(el.dataset.sinceMs));
    });
    document.querySelectorAll("[data-until-ms]").forEach(function (el) {
      el.textContent = (el.dataset.prefix || "") + duration(Number(el.dataset.untilMs) - now);
    });
  }
  setInterval(tick, 1000);

  var note = document.getElementById("freshness");
  function say(text) {
    if (note) note.textContent = text;
  }

  var live = document.getElementById("live");
  if (live && live.dataset.events && window.EventSource) {
    var source = new EventSource(live.dataset.events);
    source.addEventListener("live", function (e) {
      live.innerHTML = e.data;
      tick();
    });
    source.onopen = function () { say("Live: this page follows the daemon as it changes."); };
    source.onerror = function () { say("Reconnecting to mcpd…"); };
  }

  var log = document.getElementById("log-lines");
  if (log && log.dataset.events && window.EventSource) {
    var logs = new EventSource(log.dataset.events);
    logs.addEventListener("line", function (e) {
      var holder = document.createElement("tbody");
      holder.innerHTML = e.data;
      while (holder.firstChild) log.appendChild(holder.firstChild);
      while (log.rows.length > 2000) log.deleteRow(0);
    });
    logs.onopen = function () { say("Live: new lines appear as they are logged."); };
    logs.onerror = function () { say("Reconnecting to mcpd…"); };
  }
})();
