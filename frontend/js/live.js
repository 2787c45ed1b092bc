// A part of a page that refreshes itself (hx-trigger="every 2s", outerHTML) never replaces
// what the user is working with. A refresh is skipped, and the part's "refreshing" note says
// so, while a confirmation (<details>) or a <dialog> in it is open, or while the focus is on
// something in it that has no id: htmx gives the focus back after a swap only to an element
// with an id, so the focus would be lost. The next tick after that refreshes as usual.
// Escape, or its Cancel button, closes an open confirmation and gives the focus back to its summary.
(function () {
  "use strict";
  var POLLING = /^\s*every\s/;
  function pausedBecause(part) {
    if (part.querySelector("details[open], dialog[open]")) return "the confirmation is open";
    var focused = document.activeElement;
    if (focused && focused !== part && part.contains(focused) && !focused.id) return "you are on one of its controls";
    return "";
  }
  function sayPaused(part, reason) {
    var note = part.querySelector(".live");
    if (!note) return;
    if (!note.dataset.running) note.dataset.running = note.textContent;
    note.textContent = reason ? "refresh paused while " + reason : note.dataset.running;
  }
  document.addEventListener("htmx:beforeRequest", function (event) {
    var part = event.detail.elt || event.target;
    if (!POLLING.test(part.getAttribute("hx-trigger") || "")) return; // htmx passes a poll no event
    var reason = pausedBecause(part);
    sayPaused(part, reason);
    if (reason) event.preventDefault();
  });
  // Opened or closed, the note says it at once rather than at the next tick.
  document.addEventListener(
    "toggle",
    function (event) {
      var part = event.target.closest && event.target.closest('[hx-trigger^="every"]');
      if (part) sayPaused(part, pausedBecause(part));
    },
    true
  );
  function closeConfirmation(open) {
    open.open = false;
    var summary = open.querySelector("summary");
    if (summary) summary.focus();
  }
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape" || !event.target.closest) return;
    var open = event.target.closest("details.confirm[open]");
    if (open) closeConfirmation(open);
  });
  // A confirmation's Cancel button closes it, as Escape does.
  document.addEventListener("click", function (event) {
    var cancel = event.target.closest && event.target.closest("details.confirm [data-cancel]");
    if (cancel) closeConfirmation(cancel.closest("details.confirm"));
  });
})();
