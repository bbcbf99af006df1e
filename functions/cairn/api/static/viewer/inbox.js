// The inbox page: one address's feed, state and attachments for a person.
// It calls the same JSON API as agents, with the read token in an
// Authorization header only. Event content comes from strangers: it is only
// ever put into the page as text (textContent), never as HTML.
"use strict";

const STORAGE_KEY = "cairn.inbox";
const WAIT_SECONDS = 25;
const $ = (id) => document.getElementById(id);

let address = null;
let cursor = 0;
let stopped = false;

function credentials() {
  // The fragment never reaches a server; it is read once, then cleared from the address bar.
  const fragment = decodeURIComponent(location.hash.slice(1));
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

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

async function api(path, options = {}) {
  const response = await fetch(`api/v1/addresses/${encodeURIComponent(address.id)}/${path}`, {
    ...options,
    headers: { Authorization: `Bearer ${address.token}`, ...(options.headers || {}) },
    cache: "no-store",
    referrerPolicy: "no-referrer",
  });
  if (!response.ok) {
    let message = `The server answered ${response.status}.`;
    try {
      const body = await response.json();
      message = `${body.error.message} (${body.error.code})`;
    } catch {
      // Not JSON: keep the status.
    }
    const error = new Error(message);
    error.status = response.status;
    error.retryAfter = Number(response.headers.get("Retry-After")) || 0;
    throw error;
  }
  return response;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderEvent(event) {
  const existing = document.querySelector(`[data-event-id="${CSS.escape(event.id)}"]`);
  const item = element("li", "event");
  item.dataset.eventId = event.id;
  const meta = element("div", "meta");
  meta.append(
    element("span", "type", event.type),
    element("span", `surface ${event.ingress_surface}`, event.ingress_surface),
    element("span", "time", `#${event.sequence} · ${new Date(event.created_at).toLocaleString()}`),
    element("span", "acked", event.acknowledged_at ? `acknowledged ${new Date(event.acknowledged_at).toLocaleString()}` : "not acknowledged"),
  );
  item.append(meta, element("pre", "data", JSON.stringify(event.data, null, 2)));
  const actions = element("div", "actions");
  if (!event.acknowledged_at) {
    const ack = element("button", "ack", "Acknowledge");
    ack.type = "button";
    ack.addEventListener("click", () => acknowledge(event));
    actions.append(ack);
  }
  const attachments = event.type === "email.received" && Array.isArray(event.data?.attachments) ? event.data.attachments : [];
  for (const attachment of attachments) {
    const download = element("button", "download", `Download ${attachment.filename} (${attachment.size} bytes)`);
    download.type = "button";
    download.addEventListener("click", () => save(event, attachment));
    actions.append(download);
  }
  if (actions.childElementCount) item.append(actions);
  if (existing) existing.replaceWith(item);
  else $("feed").prepend(item);
  $("feed-empty").hidden = true;
}

async function acknowledge(event) {
  try {
    const answer = await (await api(`events/${encodeURIComponent(event.id)}/ack`, { method: "POST" })).json();
    renderEvent({ ...event, acknowledged_at: answer.event.acknowledged_at });
    showError("");
  } catch (error) {
    showError(`Could not acknowledge event ${event.sequence}: ${error.message}`);
  }
}

async function save(event, attachment) {
  try {
    const path = `events/${encodeURIComponent(event.id)}/attachments/${encodeURIComponent(attachment.id)}`;
    const blob = await (await api(path)).blob();
    const link = element("a");
    link.href = URL.createObjectURL(blob);
    link.download = attachment.filename;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 60_000);
    showError("");
  } catch (error) {
    showError(`Could not download ${attachment.filename}: ${error.message}`);
  }
}

async function loadState() {
  const listing = await (await api("state")).json();
  const list = $("state");
  const entries = await Promise.all(listing.keys.map(async (key) => (await api(`state/${encodeURIComponent(key.key)}`)).json()));
  list.replaceChildren();
  for (const entry of entries) {
    const value = element("dd");
    value.append(element("span", "revision", `revision ${entry.revision}`), element("pre", "value", JSON.stringify(entry.value, null, 2)));
    list.append(element("dt", "key", entry.key), value);
  }
  $("state-empty").hidden = entries.length > 0;
}

async function follow() {
  let wait = 0;
  while (!stopped) {
    try {
      $("live").textContent = wait ? "(live)" : "(loading)";
      const page = await (await api(`events?after=${cursor}&wait=${wait}`)).json();
      page.events.forEach(renderEvent);
      if (page.events.some((event) => event.type === "state.updated")) await loadState();
      cursor = page.next_cursor;
      $("feed-empty").hidden = $("feed").childElementCount > 0;
      wait = page.has_more ? 0 : WAIT_SECONDS;
      showError("");
    } catch (error) {
      if (error.status === 401) return refused();
      showError(`The feed could not be read: ${error.message}. Trying again shortly.`);
      await new Promise((resolve) => setTimeout(resolve, 1000 * (error.retryAfter || 5)));
    }
  }
}

function refused() {
  stopped = true;
  sessionStorage.removeItem(STORAGE_KEY);
  $("state-section").hidden = $("feed-section").hidden = true;
  $("open").hidden = false;
  showError("This address id and read token were refused: check them, or the address has expired or been deleted.");
}

function forget() {
  stopped = true;
  sessionStorage.removeItem(STORAGE_KEY);
  location.reload();
}

async function open(found) {
  address = found;
  stopped = false;
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(found));
  $("open").hidden = true;
  $("who").textContent = `Address ${found.id}`;
  $("who").hidden = $("forget").hidden = false;
  $("state-section").hidden = $("feed-section").hidden = false;
  try {
    await loadState();
  } catch (error) {
    if (error.status === 401) return refused();
    showError(`The state could not be read: ${error.message}`);
  }
  follow();
}

document.addEventListener("DOMContentLoaded", () => {
  $("forget").addEventListener("click", () => forget());
  $("open").addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    open({ id: $("address-id").value.trim(), token: $("read-token").value.trim() });
  });
  const found = credentials();
  if (found && found.id && found.token) open(found);
  else $("open").hidden = false;
});
