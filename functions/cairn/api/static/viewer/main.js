// The inbox page: one address's events, mail, state and contacts, for a
// person. It calls the same JSON API as agents, with the read token in an
// Authorization header only; the token stays in this tab (memory and
// sessionStorage), and event content is only ever shown as text.

import * as api from "./api.js";
import * as contacts from "./contacts.js";
import * as detail from "./detail.js";
import { $, showError } from "./dom.js";
import * as list from "./events.js";
import * as feed from "./feed.js";
import * as state from "./state.js";

const STORAGE_KEY = "cairn.inbox";
const SECTIONS = ["events-section", "state-section", "contacts-section"];
let feedFailed = false;

function decodedFragment() {
  try {
    return decodeURIComponent(location.hash.slice(1));
  } catch {
    return ""; // not percent-encoding (`#%E0%A4%A`): as if there were none
  }
}

function credentials() {
  // The fragment never reaches a server; it is read once, then cleared from the address bar.
  const fragment = decodedFragment();
  if (fragment.includes(":")) {
    const [id, token] = fragment.split(":", 2);
    history.replaceState(null, "", location.pathname + location.search);
    return { id: id.trim(), token: token.trim() };
  }
  try {
    return JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "null");
  } catch {
    return null;
  }
}

function showSections(shown) {
  for (const id of SECTIONS) $(id).hidden = !shown;
}

function openEvent(id) {
  showSections(false);
  detail.show(id);
}

function backToList(id) {
  detail.close();
  showSections(true);
  list.focusLine(id);
}

function redraw() {
  list.render(feed.newestFirst());
  detail.refresh();
}

// A read that fails: a refused token closes the address, anything else is said.
async function load(what, read) {
  try {
    await read();
  } catch (error) {
    if (error.status === 401) refused();
    else showError(`The ${what} could not be read: ${error.message}`);
  }
}

// The address's name and email, which a person may want to hand on.
async function describe() {
  const { address } = await api.json("");
  $("who").textContent = [address.name, address.email].filter(Boolean).join(" · ");
}

function follow() {
  feed.follow({
    changed(events) {
      redraw();
      if (events.some((event) => event.type === "state.updated")) load("state", state.load);
    },
    status(word) {
      $("live").textContent = `(${word})`;
    },
    trouble(error) {
      // Clears only what the feed said, not another action's message.
      if (error) showError(`The feed could not be read: ${error.message}. Trying again shortly.`);
      else if (feedFailed) showError("");
      feedFailed = Boolean(error);
    },
    refused,
  });
}

function refused() {
  feed.stop();
  sessionStorage.removeItem(STORAGE_KEY);
  detail.close();
  showSections(false);
  $("open").hidden = false;
  showError("This address id and read token were refused: check them, or the address has expired or been deleted.");
}

function forget() {
  feed.stop();
  sessionStorage.removeItem(STORAGE_KEY);
  location.reload();
}

function open(found) {
  api.use(found);
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(found));
  $("open").hidden = true;
  $("who").textContent = `Address ${found.id}`;
  $("who").hidden = $("forget").hidden = false;
  showSections(true);
  load("address", describe);
  load("state", state.load);
  load("contacts", contacts.load);
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  list.setup({ find: feed.find, open: openEvent });
  detail.setup({ back: backToList, changed: redraw });
  state.setup();
  contacts.setup();
  $("forget").addEventListener("click", forget);
  $("open").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    showError("");
    open({ id: $("address-id").value.trim(), token: $("read-token").value.trim() });
  });
  const found = credentials();
  if (found?.id && found?.token) open(found);
  else $("open").hidden = false;
});
