/* The flow form's browser-side help (templates/flows/flow_form.html).
 *
 * The form works without this file: fixed blank rows add properties, errors
 * come with the page after saving. With it: rows are added and removed in
 * place, aria-invalid and the error summary follow the live errors htmx
 * brings, and secret values ([data-secret]) stay out of every preview
 * request: only saving sends them.
 */
(function () {
  "use strict";

  function reveal(root) {
    root.querySelectorAll("[data-add-row], [data-remove-row], #compile-preview-bar").forEach(function (el) {
      el.hidden = false;
    });
  }

  function nextIndex(list, prefix) {
    var highest = -1;
    var pattern = new RegExp("^" + prefix + "-(\\d+)-key$");
    list.querySelectorAll("input[name$='-key']").forEach(function (input) {
      var match = pattern.exec(input.name);
      if (match) highest = Math.max(highest, parseInt(match[1], 10));
    });
    return highest + 1;
  }

  function addRow(button) {
    var prefix = button.getAttribute("data-add-row");
    var list = document.getElementById(prefix + "-rows");
    var template = document.getElementById(prefix + "-row-template");
    if (!list || !template) return;
    var index = nextIndex(list, prefix);
    var html = template.innerHTML.split("__index__").join(String(index))
      .split("__number__").join(String(index + 1));
    list.insertAdjacentHTML("beforeend", html);
    var row = list.lastElementChild;
    reveal(row);
    if (window.htmx) window.htmx.process(row);
    var key = row.querySelector("input[name$='-key']");
    if (key) key.focus();
  }

  function removeRow(button) {
    var row = button.closest(".kv-row");
    var list = row && row.parentElement;
    if (!row || !list) return;
    var next = row.nextElementSibling || row.previousElementSibling;
    row.remove();
    // Focus stays in the group: the neighbouring row, else the add button.
    var target = next ? next.querySelector("input[name$='-key']") : null;
    if (!target) target = document.querySelector("[data-add-row='" + list.getAttribute("data-prefix") + "']");
    if (target) target.focus();
    list.dispatchEvent(new CustomEvent("kv-removed", { bubbles: true }));
  }

  // Inputs described by an errors container are invalid while it holds errors.
  function syncInvalid(root) {
    root.querySelectorAll(".field-errors").forEach(function (box) {
      var invalid = box.querySelector(".error") !== null;
      var field = box.closest(".field, .kv-group");
      if (field) field.classList.toggle("invalid", invalid);
      document.querySelectorAll("[aria-describedby~='" + box.id + "']").forEach(function (input) {
        if (!/^(INPUT|SELECT|TEXTAREA)$/.test(input.tagName) || input.closest(".kv-row")) return;
        if (invalid) input.setAttribute("aria-invalid", "true");
        else input.removeAttribute("aria-invalid");
      });
    });
  }

  // The summary of the last save's problems follows live validation: an
  // item goes when its field's errors container (data-errors) is empty or
  // gone, the count follows, and the box is hidden when nothing is left.
  // Problems live validation cannot see (no data-errors) stay until saving.
  function syncSummary() {
    var summary = document.getElementById("error-summary");
    if (!summary || summary.hidden) return;
    summary.querySelectorAll("li[data-errors]").forEach(function (item) {
      var box = document.getElementById(item.getAttribute("data-errors"));
      if (!box || box.querySelector(".error") === null) item.remove();
    });
    var left = summary.querySelectorAll("li").length;
    if (left === 0) {
      summary.hidden = true;
      return;
    }
    var heading = summary.querySelector("h2");
    var text = left + " problem" + (left === 1 ? "" : "s") + " to fix before saving";
    // Only a real change: the box is an alert, every change is announced.
    if (heading && heading.textContent !== text) heading.textContent = text;
  }

  // Secret inputs (data-secret) go to the server only with the real submit.
  function removeSecretValues(form, detail) {
    form.querySelectorAll("[data-secret][name]").forEach(function (input) {
      if (detail.formData && typeof detail.formData.delete === "function") detail.formData.delete(input.name);
      if (detail.parameters) delete detail.parameters[input.name];
    });
  }

  /* The picker's key ticks and the "Primary key" box are one key: a tick writes the box, typing
   * in the box ticks its columns, and a picker shown afresh (a table chosen) fills the box with the
   * key it ticked (picker.key_for: the box's own key when it names the table's columns). */
  function keyBox() { return document.getElementById("id_primary_key"); }
  function keyTicks() { return document.querySelectorAll("#source-picker input[name='pick_primary_key']"); }

  function ticksToBox() {
    var box = keyBox();
    if (!box) return;
    var names = [];
    keyTicks().forEach(function (tick) { if (tick.checked) names.push(tick.value); });
    box.value = names.join(",");
  }

  function boxToTicks() {
    var box = keyBox();
    if (!box) return;
    var names = box.value.split(",").map(function (name) { return name.trim(); });
    keyTicks().forEach(function (tick) { tick.checked = names.indexOf(tick.value) >= 0; });
  }

  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches("#source-picker input[name='pick_primary_key']")) ticksToBox();
  });
  document.addEventListener("input", function (event) {
    if (event.target === keyBox()) boxToTicks();
  });
  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail && event.detail.target;
    if (!target || target.id !== "source-picker") return;
    if (keyTicks().length) ticksToBox();  // the server ticked the box's key if it fits the table
  });

  document.addEventListener("click", function (event) {
    var add = event.target.closest("[data-add-row]");
    if (add) { event.preventDefault(); addRow(add); return; }
    var remove = event.target.closest("[data-remove-row]");
    if (remove) { event.preventDefault(); removeRow(remove); }
  });

  document.addEventListener("htmx:configRequest", function (event) {
    var form = event.detail.elt && event.detail.elt.closest("#flow-form");
    if (form) removeSecretValues(form, event.detail);
  });

  document.addEventListener("htmx:afterSettle", function () {
    var form = document.getElementById("flow-form");
    if (form) {
      syncInvalid(form);
      syncSummary();
    }
  });

  function start() {
    var form = document.getElementById("flow-form");
    if (form) reveal(form);
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
