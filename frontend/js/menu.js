// The top menu on narrow screens (#22): folded behind a "Menu" button that
// opens and closes it (aria-expanded says which; Escape closes it and gives
// the focus back to the button). Without this script the menu simply stays
// open, so every page remains reachable.
(function () {
  "use strict";
  function setUp() {
    var bar = document.querySelector(".topbar");
    var button = bar && bar.querySelector(".menu-toggle");
    var menu = button && document.getElementById(button.getAttribute("aria-controls"));
    if (!menu) return;
    function setOpen(open) {
      button.setAttribute("aria-expanded", open ? "true" : "false");
      bar.classList.toggle("menu-open", open);
    }
    button.hidden = false;
    bar.classList.add("menu-ready");
    button.addEventListener("click", function () {
      setOpen(button.getAttribute("aria-expanded") !== "true");
    });
    bar.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && bar.classList.contains("menu-open")) {
        setOpen(false);
        button.focus();
      }
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setUp);
  else setUp();
})();
