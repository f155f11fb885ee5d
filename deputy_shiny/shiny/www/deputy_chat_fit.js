// deputy_shiny: the chat keeps its input and newest reply on screen, in any layout.
//
// In a fillable container the chat (.deputy-chat) is a fill item and the stylesheet does
// the work. Where the page flows instead (a page_sidebar or Express page that is not
// fillable, and every fillable page on a phone: bslib lets it flow below 576px), nothing
// bounds the chat, so it grew with each reply and the page scrolled past its input. Here
// each chat gets the screen's height below its top (as the page is laid out when
// scrolled to the top, less the padding of what holds it) as --deputy-chat-room: the
// stylesheet makes that its height, so it scrolls its own messages. In a fillable
// container flex grows or shrinks the chat from there to fill it, so the value is
// harmless. A chat that starts low on a long page still gets a usable MIN_ROOM.
(function () {
  "use strict";
  const ROOM = "--deputy-chat-room";
  const MIN_ROOM = 288; // px (18rem): the input and a few lines of the newest reply

  function px(value) {
    const number = parseFloat(value);
    return Number.isFinite(number) ? number : 0;
  }

  // How far the chat's top is from the top of the page, every scrolling box it sits in
  // (the page itself, a sidebar layout's main area) scrolled back to its start.
  function topOnPage(chat) {
    let top = chat.getBoundingClientRect().top;
    for (let box = chat.parentElement; box; box = box.parentElement) top += box.scrollTop;
    return top;
  }

  // The space that its containers keep below the chat: their bottom padding, border and
  // margin (the page's own padding, a card's body, a sidebar layout's main area).
  function spaceBelow(chat) {
    let space = px(getComputedStyle(chat).marginBottom);
    for (let box = chat.parentElement; box; box = box.parentElement) {
      const style = getComputedStyle(box);
      space += px(style.paddingBottom) + px(style.borderBottomWidth) + px(style.marginBottom);
    }
    return space;
  }

  function fit(chat) {
    if (!chat.isConnected || chat.getClientRects().length === 0) return; // hidden: later
    const screen = document.documentElement.clientHeight;
    const room = Math.max(MIN_ROOM, Math.floor(screen - topOnPage(chat) - spaceBelow(chat)));
    // Only a real change is written, so the resize this causes settles at once.
    if (chat.style.getPropertyValue(ROOM) !== room + "px") chat.style.setProperty(ROOM, room + "px");
  }

  let queued = false;
  function fitAll() {
    if (queued) return;
    queued = true;
    window.requestAnimationFrame(function () {
      queued = false;
      document.querySelectorAll(".deputy-chat").forEach(fit);
    });
  }

  // What can move a chat's top or change the screen: the window, the page's content
  // above it (outputs, a banner), a tab or sidebar shown, a chat added by dynamic UI.
  const observer = typeof ResizeObserver === "function" ? new ResizeObserver(fitAll) : null;
  function start() {
    if (observer) observer.observe(document.body);
    fitAll();
  }
  window.addEventListener("resize", fitAll);
  ["shiny:connected", "shiny:value", "shown.bs.tab", "bslib.sidebar"].forEach(function (name) {
    document.addEventListener(name, fitAll);
  });
  if (document.body) start();
  else document.addEventListener("DOMContentLoaded", start);
})();
