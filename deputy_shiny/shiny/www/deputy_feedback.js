// deputy_shiny: a good / bad rating and an optional comment under each reply of a chat
// placed with agent_chat_ui(id, feedback=True), worded by the app's KitStrings.
//
// The server tells this script, as each reply ends, the reply's id: a random value kept
// here in memory (never in the page, where another script of the origin could read it
// and rate replies on the user's behalf). A rating counts only from a real click or key
// press (event.isTrusted); the server accepts it only for a reply of its own session.
// Everything shown is text (textContent), never markup.
(function () {
  "use strict";
  const MAX_COMMENT = 2000; // the server refuses a longer comment
  const MAX_REPLIES = 200;
  const bars = new WeakMap(); // bar element -> { reply, input }
  const byReply = new Map(); // reply id -> bar element (for the server's receipt)
  let counter = 0;

  function button(text, rating) {
    const el = document.createElement("button");
    el.type = "button";
    el.className = "btn btn-sm btn-outline-secondary deputy-feedback-" + rating;
    el.dataset.rating = rating;
    el.textContent = text;
    el.setAttribute("aria-pressed", "false");
    return el;
  }

  // The words, from the chat's data-deputy-feedback (the app's KitStrings, as JSON).
  function wordsOf(el) {
    const holder = el && el.closest("[data-deputy-feedback]");
    try {
      return JSON.parse(holder.getAttribute("data-deputy-feedback")) || {};
    } catch (_error) {
      return {};
    }
  }

  function build(reply, input, words) {
    const bar = document.createElement("div");
    bar.className = "deputy-feedback";
    bar.setAttribute("role", "group");
    bar.setAttribute("aria-label", words.group || "");
    const buttons = document.createElement("div");
    buttons.className = "deputy-feedback-buttons";
    buttons.append(button(words.good || "+", "up"), button(words.bad || "-", "down"));
    const comment = document.createElement("div");
    comment.className = "deputy-feedback-comment";
    comment.hidden = true;
    const id = "deputy-feedback-comment-" + ++counter;
    const label = document.createElement("label");
    label.htmlFor = id;
    label.textContent = words.comment || "";
    const area = document.createElement("textarea");
    area.id = id;
    area.rows = 2;
    area.maxLength = MAX_COMMENT;
    area.className = "form-control form-control-sm";
    const send = document.createElement("button");
    send.type = "button";
    send.className = "btn btn-sm btn-primary deputy-feedback-send";
    send.textContent = words.send || "";
    comment.append(label, area, send);
    const status = document.createElement("span");
    status.className = "deputy-feedback-status";
    status.setAttribute("role", "status");
    bar.append(buttons, comment, status);
    bars.set(bar, { reply: reply, input: input, rating: null });
    byReply.set(reply, bar);
    while (byReply.size > MAX_REPLIES) byReply.delete(byReply.keys().next().value);
    return bar;
  }

  function lastReply(chat) {
    const content = chat.querySelector(".shiny-chat-messages-content");
    if (!content) return null;
    const replies = content.querySelectorAll(":scope > .shiny-chat-message");
    return replies.length ? replies[replies.length - 1] : null;
  }

  function onReply(message) {
    if (!message || typeof message.reply !== "string" || typeof message.chat !== "string") return;
    if (typeof message.input !== "string") return;
    const chat = document.getElementById(message.chat);
    if (!chat || !chat.closest("[data-deputy-feedback]")) return; // feedback is off
    let tries = 0;
    (function place() {
      // The reply's last chunks may still be on their way into the page.
      const reply = lastReply(chat);
      if (!reply) {
        if (tries++ < 40) setTimeout(place, 50);
        return;
      }
      if (reply.querySelector(":scope > .deputy-feedback")) return;
      reply.appendChild(build(message.reply, message.input, wordsOf(chat)));
    })();
  }

  // A conversation shown again (a reload, a switch, another branch): its last replies,
  // in order, each with its id (null: that one may not be rated).
  function onRestored(message) {
    if (!message || !Array.isArray(message.replies) || typeof message.chat !== "string") return;
    if (typeof message.input !== "string") return;
    const ids = message.replies.slice(-MAX_REPLIES);
    const chat = document.getElementById(message.chat);
    if (!chat || !chat.closest("[data-deputy-feedback]")) return; // feedback is off
    let tries = 0;
    (function place() {
      const content = chat.querySelector(".shiny-chat-messages-content");
      const replies = content ? content.querySelectorAll(":scope > .shiny-chat-message") : [];
      if (replies.length < ids.length) {
        if (tries++ < 100) setTimeout(place, 50);
        return;
      }
      const shown = Array.prototype.slice.call(replies, replies.length - ids.length);
      ids.forEach(function (id, i) {
        if (typeof id !== "string" || shown[i].querySelector(":scope > .deputy-feedback")) return;
        shown[i].appendChild(build(id, message.input, wordsOf(chat)));
      });
    })();
  }

  function onSaved(message) {
    if (!message || typeof message.reply !== "string") return;
    const bar = byReply.get(message.reply);
    if (!bar) return;
    bar.querySelector(".deputy-feedback-status").textContent = wordsOf(bar).saved || "";
  }

  function rate(bar, rating, comment) {
    const owner = bars.get(bar);
    if (!owner || !window.Shiny) return;
    owner.rating = rating;
    const value = { reply: owner.reply, rating: rating, comment: comment };
    window.Shiny.setInputValue(owner.input, value, { priority: "event" });
  }

  document.addEventListener("click", function (event) {
    if (!event.isTrusted) return;
    const target = event.target.closest && event.target.closest(".deputy-feedback button");
    if (!target) return;
    const bar = target.closest(".deputy-feedback");
    const owner = bars.get(bar);
    if (!owner) return;
    if (target.dataset.rating) {
      bar.querySelectorAll("[data-rating]").forEach(function (el) {
        el.setAttribute("aria-pressed", el === target ? "true" : "false");
      });
      bar.querySelector(".deputy-feedback-comment").hidden = false;
      rate(bar, target.dataset.rating, "");
    } else if (target.classList.contains("deputy-feedback-send") && owner.rating) {
      const area = bar.querySelector("textarea");
      rate(bar, owner.rating, area.value.slice(0, MAX_COMMENT));
    }
  });

  function onMessages() {
    if (!window.Shiny || !window.Shiny.addCustomMessageHandler) return false;
    window.Shiny.addCustomMessageHandler("deputy-feedback-reply", onReply);
    window.Shiny.addCustomMessageHandler("deputy-feedback-restored", onRestored);
    window.Shiny.addCustomMessageHandler("deputy-feedback-saved", onSaved);
    return true;
  }
  if (!onMessages()) document.addEventListener("DOMContentLoaded", onMessages);
})();
