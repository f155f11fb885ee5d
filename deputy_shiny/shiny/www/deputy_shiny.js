// deputy_shiny: collect answers from the approval and ask_user modals and send them to
// the server through one input. The server only accepts an answer for the request id
// it is showing in this session, with that prompt's key.
//
// Decisions count only from a real user gesture: every handler here ignores events a
// page script made (element.click(), dispatchEvent: event.isTrusted is false), and a
// prompt's key lives only in this closure, never in the page, so a script calling
// Shiny.setInputValue with the request id it reads from the page decides nothing. That
// is a second line of defence: the first is that the server never lets model-written
// text become markup. Nothing from the server is ever inserted as HTML here.
(function () {
  "use strict";
  const INPUT = "deputy_modal_answer";
  const KEY_MESSAGE = "deputy-prompt-key";
  const keys = new Map(); // request id -> the prompt's key (never in the DOM)
  const MAX_KEYS = 50;

  // Saved conversations (KitPersistence). The server keeps the browser's token in an
  // HttpOnly cookie this script never sees. What the script keeps is the *binding*: a
  // random value in this origin's localStorage (which pages of other ports or
  // subdomains cannot write, though they can plant cookies here), sent in a cookie
  // before Shiny connects. The server honours a token only together with the binding
  // it was issued to, so a planted token is ignored.
  const DIR = window.location.pathname.replace(/[^/]*$/, "") || "/";
  const BINDING_COOKIE = "deputy_shiny_binding";
  const BINDING_STORE = "deputy_shiny.binding:" + DIR;
  const SHAPE = /^[A-Za-z0-9_-]{43}$/;
  const SECURE = window.location.protocol === "https:";

  function newBinding() {
    const bytes = new Uint8Array(32);
    window.crypto.getRandomValues(bytes);
    let text = "";
    bytes.forEach(function (b) { text += String.fromCharCode(b); });
    return window.btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  }

  try {
    // The token itself once lived in localStorage (readable by any page of the origin)
    // and in a script-set cookie: both are dropped.
    const legacy = "deputy_shiny.conversation:" + window.location.pathname;
    if (window.localStorage.getItem(legacy) !== null) {
      window.localStorage.removeItem(legacy);
      document.cookie = "deputy_shiny_conversation=; path=" + window.location.pathname +
        "; max-age=0";
    }
    let binding = window.localStorage.getItem(BINDING_STORE);
    if (!binding || !SHAPE.test(binding)) {
      binding = newBinding();
      window.localStorage.setItem(BINDING_STORE, binding);
    }
    document.cookie = BINDING_COOKIE + "=" + binding + "; path=" + DIR + "; SameSite=Strict" +
      (SECURE ? "; Secure" : "");
  } catch (e) { /* no localStorage: nothing is saved for this browser */ }

  // A running tool card's progress: the server puts an empty placeholder naming the card
  // in its title (shinychat cannot update a card in place), and sends each report here.
  // The latest report of each card is kept, so a placeholder shinychat (re)renders later
  // is filled in too. Text nodes and a <progress> element only: nothing is parsed as HTML.
  const PROGRESS_ATTR = "data-deputy-progress";
  const progress = new Map(); // card id -> {message, fraction}
  const MAX_PROGRESS = 100;
  let watching = null;

  function paint(el) {
    const report = progress.get(el.getAttribute(PROGRESS_ATTR));
    if (!report) return;
    const parts = [];
    if (typeof report.fraction === "number") {
      const bar = document.createElement("progress");
      bar.className = "deputy-tool-progress-bar";
      bar.max = 1;
      bar.value = report.fraction;
      bar.setAttribute("aria-label", Math.round(report.fraction * 100) + "%");
      parts.push(bar);
    }
    const text = document.createElement("span");
    text.className = "deputy-tool-progress-text";
    text.textContent = report.message;
    parts.push(text);
    el.replaceChildren.apply(el, parts);
  }

  function paintAll(card) {
    document.querySelectorAll("[" + PROGRESS_ATTR + "]").forEach(function (el) {
      if (card === undefined || el.getAttribute(PROGRESS_ATTR) === card) paint(el);
    });
  }

  function watch() {
    if (watching || !window.MutationObserver) return;
    watching = new MutationObserver(function (records) {
      for (const record of records) {
        for (const node of record.addedNodes) {
          if (node.nodeType !== 1) continue;
          if (node.hasAttribute(PROGRESS_ATTR)) paint(node);
          node.querySelectorAll("[" + PROGRESS_ATTR + "]").forEach(paint);
        }
      }
    });
    watching.observe(document.body, { childList: true, subtree: true });
  }

  function onProgress(message) {
    if (!message || typeof message.card !== "string") return;
    if (message.done) {
      progress.delete(message.card);
      if (progress.size === 0 && watching) { watching.disconnect(); watching = null; }
      return;
    }
    if (typeof message.message !== "string") return;
    const fraction = typeof message.fraction === "number" && isFinite(message.fraction)
      ? Math.min(1, Math.max(0, message.fraction)) : null;
    progress.delete(message.card); // re-inserted last: the oldest card goes first
    progress.set(message.card, { message: message.message, fraction: fraction });
    while (progress.size > MAX_PROGRESS) progress.delete(progress.keys().next().value);
    watch();
    paintAll(message.card);
  }

  function onMessages() {
    if (!window.Shiny || !window.Shiny.addCustomMessageHandler) return false;
    window.Shiny.addCustomMessageHandler("deputy-conversation-token", function (message) {
      // A route of this session whose answer sets the HttpOnly token cookie.
      if (typeof message.url !== "string" || !/^session\/[^?#]+\?[^#]*$/.test(message.url)) return;
      const url = message.url + "&path=" + encodeURIComponent(DIR) + (SECURE ? "&secure=1" : "");
      window.fetch(url, { credentials: "same-origin", cache: "no-store" }).catch(function () {
        /* offline: the next visit gets a new token */
      });
    });
    window.Shiny.addCustomMessageHandler("deputy-tool-progress", onProgress);
    window.Shiny.addCustomMessageHandler("deputy-drawer", function (message) {
      // This chat's drawer is served: its button may show (hidden until then by the CSS).
      const chat = typeof message.id === "string" ? document.getElementById(message.id) : null;
      if (chat) chat.setAttribute("data-deputy-drawer", "");
    });
    window.Shiny.addCustomMessageHandler("deputy-reload", function (_message) {
      window.location.reload();
    });
    window.Shiny.addCustomMessageHandler(KEY_MESSAGE, function (message) {
      if (!message || typeof message.request_id !== "string" || typeof message.key !== "string") {
        return;
      }
      keys.set(message.request_id, message.key);
      while (keys.size > MAX_KEYS) keys.delete(keys.keys().next().value);
    });
    // Another chat of this session queued a prompt behind the open one (or one left):
    // the open modal's "1 of N waiting" line follows, as text; nothing else changes.
    window.Shiny.addCustomMessageHandler("deputy-prompt-waiting", function (message) {
      if (!message || typeof message.request_id !== "string" || typeof message.text !== "string") {
        return;
      }
      document.querySelectorAll("#shiny-modal [data-request-id]").forEach(function (root) {
        if (root.dataset.requestId !== message.request_id) return;
        let line = root.querySelector(".deputy-waiting");
        if (message.text === "") { if (line) line.remove(); return; }
        if (!line) {
          line = document.createElement("p");
          line.className = "deputy-waiting text-muted small";
          root.prepend(line);
        }
        line.textContent = message.text;
      });
    });
    return true;
  }
  if (!onMessages()) document.addEventListener("DOMContentLoaded", onMessages);

  function typed(el) {
    const kind = el.dataset.type;
    if (kind === "boolean") return el.checked;
    if (kind === "integer") { const n = parseInt(el.value, 10); return Number.isNaN(n) ? el.value : n; }
    if (kind === "number") { const n = parseFloat(el.value); return Number.isNaN(n) ? el.value : n; }
    return el.value;
  }

  // Only fields the person touched are sent: the browser normalizes what it shows
  // (CRLF to LF, a textarea's leading newline), so an untouched field sent back would
  // quietly change the approved arguments. Touched means by the person (a trusted
  // event), recorded here rather than in the page, where a script could mark a field.
  const edited = new WeakSet();
  function markEdited(event) {
    if (!event.isTrusted) return;
    const el = event.target.closest && event.target.closest("[data-arg]");
    if (el) edited.add(el);
  }
  document.addEventListener("input", markEdited);
  document.addEventListener("change", markEdited);

  function approvalAnswer(root, action) {
    const values = {};
    root.querySelectorAll("[data-arg]").forEach((el) => {
      if (edited.has(el)) values[el.dataset.arg] = typed(el);
    });
    const message = root.querySelector(".deputy-deny-message");
    return { action: action, values: values, message: message ? message.value : "" };
  }

  function questionsAnswer(root, action) {
    const answers = [];
    root.querySelectorAll(".deputy-question").forEach((set) => {
      const other = set.querySelector(".deputy-other");
      if (other && other.value.trim() !== "") { answers.push(other.value.trim()); return; }
      const chosen = Array.from(set.querySelectorAll("input:checked")).map((el) => el.value);
      answers.push(chosen);
    });
    return { action: action, answers: answers };
  }

  // MCP panel buttons: connect / disconnect one configured server of this session.
  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return;
    const button = event.target.closest("[data-deputy-mcp]");
    if (!button || !window.Shiny) return;
    button.disabled = true;
    const value = { server: button.dataset.server, action: button.dataset.deputyMcp };
    window.Shiny.setInputValue(button.dataset.input, value, { priority: "event" });
  });

  // Subagent panel buttons: open a delegation's transcript, or stop it. The server acts
  // only on a delegation of this session's agent that its user may see.
  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return;
    const button = event.target.closest("[data-deputy-subagent]");
    if (!button || !window.Shiny) return;
    if (button.dataset.deputySubagent === "interrupt") button.disabled = true;
    const value = { delegation_id: button.dataset.delegation, action: button.dataset.deputySubagent };
    window.Shiny.setInputValue(button.dataset.input, value, { priority: "event" });
  });

  // Conversation panel: rewind the files to a checkpoint (the server asks to confirm).
  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return;
    const button = event.target.closest("[data-deputy-rewind]");
    if (!button || !window.Shiny) return;
    const value = { checkpoint_id: button.dataset.deputyRewind };
    window.Shiny.setInputValue(button.dataset.input, value, { priority: "event" });
  });

  // Conversation panel: download the conversation. This session's server answers the
  // request (over its own websocket: no URL serves a conversation) with the file's name,
  // type and text; the text goes into a Blob saved as a download, never into the page.
  const FILE_NAME = /^conversation-[0-9]{8}-[0-9]{6}\.(md|json)$/;
  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return;
    const button = event.target.closest("[data-deputy-download]");
    if (!button || !window.Shiny || !window.Shiny.shinyapp) return;
    window.Shiny.shinyapp.makeRequest(button.dataset.method, [button.dataset.deputyDownload],
      function (file) {
        if (!file || typeof file.text !== "string" || typeof file.filename !== "string" ||
            !FILE_NAME.test(file.filename)) return;
        const type = file.media_type === "application/json" ? "application/json" : "text/markdown";
        const url = URL.createObjectURL(new Blob([file.text], { type: type }));
        const link = document.createElement("a");
        link.href = url;
        link.download = file.filename;
        link.hidden = true;
        document.body.appendChild(link);
        link.click();
        link.remove();
        setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
      },
      function (error) { console.warn("deputy_shiny: the download failed: " + error); });
  });

  // Clickjacking: a page of another origin can frame the app (the frame's own origin is
  // the app's, so its websocket is accepted) and lure a real click onto Approve under
  // something else. Framed by another origin, this page decides nothing: the modal says
  // why, and the decision waits for the app in a tab of its own.
  function framedByAnotherOrigin() {
    if (window.top === window.self) return false;
    try {
      return window.top.location.origin !== window.location.origin;
    } catch (error) {
      return true; // reading another origin's location throws
    }
  }

  function refuseFramed(root) {
    if (root.querySelector(".deputy-framed")) return;
    const note = document.createElement("p");
    note.className = "deputy-framed text-danger small";
    note.textContent = "This app is shown inside another site's page, so it takes no " +
      "decision here. Open it in a tab of its own to answer.";
    root.prepend(note);
  }

  // Focus and keys of the kit's prompts (approval, question, confirm). The prompts are
  // modeless on purpose (another chat of the page stays usable), so the dialog does not
  // claim aria-modal. When one opens, focus moves to the dialog itself (role="dialog",
  // labelled by its heading), not to a field or a button: a keystroke already in flight
  // from the chat input (an Enter, a word being typed) then lands on nothing. It can
  // neither approve nor type into an argument that Approve would send. Tab reaches the
  // fields, then Approve. A button activated by a key (a click with detail 0) within
  // GUARD_MS of the opening is ignored too. Escape decides nothing: it hands the focus
  // back to the chat input and leaves the prompt waiting. When the prompt closes, focus
  // returns to where it was (the chat input) unless the person has moved it elsewhere.
  const GUARD_MS = 700;
  let openedAt = 0;
  let returnTo = null;

  function kitModal(target) {
    return target && target.id === "shiny-modal" && target.querySelector("[data-request-id]")
      ? target : null;
  }

  function chatInput() {
    if (returnTo && returnTo.isConnected && !returnTo.disabled) return returnTo;
    return document.querySelector("shiny-chat-container [role='textbox'], shiny-chat-container textarea");
  }

  // The element that had the focus as the dialog began to open: if the person puts the
  // focus elsewhere during the fade-in (clicks another chat of the page), it stays there.
  let focusAtShow = null;
  document.addEventListener("show.bs.modal", function (event) {
    if (kitModal(event.target)) focusAtShow = document.activeElement;
  });

  document.addEventListener("shown.bs.modal", function (event) {
    const modal = kitModal(event.target);
    if (!modal) return;
    modal.removeAttribute("aria-modal"); // Bootstrap sets it; the page stays usable
    openedAt = Date.now();
    const active = document.activeElement;
    if (active !== focusAtShow && active !== document.body && !modal.contains(active)) return;
    if (active && active !== document.body && !modal.contains(active)) returnTo = active;
    modal.focus({ preventScroll: true });
  });

  // The chat's input takes no focus while its run goes on (shinychat disables it): try
  // again until it does, as long as the person has not put the focus anywhere else.
  function restoreFocus(input, tries) {
    if (!input || !input.isConnected) return;
    const active = document.activeElement;
    if (active !== document.body && active !== null) return;
    input.focus();
    if (document.activeElement !== input && tries < 300) {
      setTimeout(function () { restoreFocus(input, tries + 1); }, 200);
    }
  }

  function onHidden(event) {
    if (!kitModal(event.target)) return;
    const active = document.activeElement;
    if (!active || active === document.body || event.target.contains(active)) {
      restoreFocus(chatInput(), 0);
    }
    returnTo = null;
  }
  // Shiny removes the modal in a jQuery handler of the same event, before Bootstrap's
  // native event is dispatched (a detached element's event never reaches document):
  // listen through jQuery, whose event path was set before the removal.
  if (window.jQuery) window.jQuery(document).on("hidden.bs.modal", onHidden);
  else document.addEventListener("hidden.bs.modal", onHidden);

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    const modal = kitModal(document.getElementById("shiny-modal"));
    if (!modal || !modal.contains(event.target)) return;
    event.preventDefault();
    event.stopPropagation(); // no "static backdrop" bounce: Escape only moves the focus
    const input = chatInput();
    if (input) input.focus();
  }, true);

  function tooSoon(event) {
    return event.detail === 0 && Date.now() - openedAt < GUARD_MS;
  }

  // Approve, Deny, Always allow, Stop the run, Submit, Cancel, Confirm: a decision.
  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return; // element.click() or dispatchEvent from page script
    const button = event.target.closest("[data-deputy-action]");
    if (!button || !window.Shiny || tooSoon(event)) return;
    const root = button.closest("[data-request-id]");
    if (!root) return;
    if (framedByAnotherOrigin()) {
      refuseFramed(root);
      return;
    }
    const requestId = root.dataset.requestId;
    const key = keys.get(requestId);
    if (!key) {
      console.warn("deputy_shiny: no key for this prompt; the answer was not sent");
      return;
    }
    const action = button.dataset.deputyAction;
    const answer = root.classList.contains("deputy-approval")
      ? approvalAnswer(root, action)
      : questionsAnswer(root, action);
    answer.request_id = requestId;
    answer.key = key;
    keys.delete(requestId);
    root.querySelectorAll("[data-deputy-action]").forEach((b) => { b.disabled = true; });
    window.Shiny.setInputValue(INPUT, answer, { priority: "event" });
  });
})();
