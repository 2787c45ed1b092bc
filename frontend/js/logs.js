// Following a running job's log (#22): while "Follow" is ticked, each log
// box is kept scrolled to its end as the page refreshes it (htmx swaps
// #job-log every 2 s while the attempt runs). Unticked, the boxes stay where
// the reader scrolled them.
(function () {
  "use strict";
  function follow() {
    var box = document.getElementById("follow-log");
    if (!box || !box.checked) return;
    document.querySelectorAll("#job-log pre.log-full").forEach(function (pre) {
      pre.scrollTop = pre.scrollHeight;
    });
  }
  function setUp() {
    follow();
    document.body.addEventListener("htmx:afterSettle", follow);
    var box = document.getElementById("follow-log");
    if (box) box.addEventListener("change", follow);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
