// Refreshes the page's content every data-refresh seconds (0: never)
// without reloading: the new page is fetched and its <main> swapped in.
// A hidden tab is not refreshed; a failed fetch keeps what is shown.
(function () {
  "use strict";
  var secs = parseInt(document.body.dataset.refresh || "0", 10);
  if (!(secs > 0)) {
    return;
  }
  var busy = false;
  function refresh() {
    if (busy || document.hidden) {
      return;
    }
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (r) {
        if (!r.ok) {
          throw new Error(r.status);
        }
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.getElementById("content");
        var cur = document.getElementById("content");
        if (next && cur) {
          cur.replaceWith(next);
        }
      })
      .catch(function () {})
      .then(function () {
        busy = false;
      });
  }
  window.setInterval(refresh, secs * 1000);
})();
