// One way, site-wide, for an htmx request that was refused to say so where the
// user is looking. htmx drops 4xx/5xx answers by default, so without this a
// form that the server refused (with a good message) changed nothing on screen.
//  - 400 and 422 answers are our re-rendered parts with their errors in them:
//    they are swapped like a success.
//  - any other refusal (403, 404, 409, 413, 5xx) or no answer at all puts its
//    message in an alert right after the element that sent the request.
(function () {
  "use strict";

  function messageOf(xhr) {
    var type = xhr.getResponseHeader("Content-Type") || "";
    var text = xhr.responseText || "";
    if (type.indexOf("json") !== -1) {
      try {
        var body = JSON.parse(text);
        if (body.detail) return String(body.detail);
        return Object.keys(body).map(function (k) { return k + ": " + [].concat(body[k]).join(" "); }).join("; ");
      } catch (ignored) { /* not JSON after all: fall through */ }
    }
    if (type.indexOf("html") !== -1) {
      var page = new DOMParser().parseFromString(text, "text/html");
      var reason = page.querySelector("[data-error-reason], .errors, [role=alert], main p");
      if (reason && reason.textContent.trim()) return reason.textContent.trim();
    } else if (text.trim() && text.length < 500) {
      return text.trim();
    }
    return "The portal answered " + xhr.status + (xhr.statusText ? " " + xhr.statusText : "") + ".";
  }

  function show(elt, message) {
    var anchor = elt.closest("form") || elt;
    var alert = anchor.nextElementSibling;
    if (!alert || !alert.classList.contains("htmx-error")) {
      alert = document.createElement("p");
      alert.className = "htmx-error errors";
      alert.setAttribute("role", "alert");
      anchor.insertAdjacentElement("afterend", alert);
    }
    alert.textContent = message;
  }

  function clear(elt) {
    var anchor = elt.closest("form") || elt;
    var alert = anchor.nextElementSibling;
    if (alert && alert.classList.contains("htmx-error")) alert.remove();
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status;
    if (status === 400 || status === 422) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    if (event.detail.successful) clear(event.detail.elt);
  });
  document.addEventListener("htmx:responseError", function (event) {
    var status = event.detail.xhr.status;
    if (status !== 400 && status !== 422) show(event.detail.elt, messageOf(event.detail.xhr));
  });
  document.addEventListener("htmx:sendError", function (event) {
    show(event.detail.elt, "The portal did not answer; check your connection and try again.");
  });
})();
