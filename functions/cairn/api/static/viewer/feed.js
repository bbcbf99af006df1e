// The address's feed: every retained event, kept in this tab's memory and
// followed live with long-polls. A feed holds at most a thousand or so
// events, so filtering and paging happen here, on what was read.

import { json } from "./api.js";

const WAIT_SECONDS = 25;
const byId = new Map();
let cursor = 0;
let stopped = true;

export function newestFirst() {
  return [...byId.values()].sort((a, b) => b.sequence - a.sequence);
}

export function find(id) {
  return byId.get(id);
}

export function acknowledged(id, at) {
  const event = byId.get(id);
  if (event) byId.set(id, { ...event, acknowledged_at: at });
}

export function stop() {
  stopped = true;
}

// Reads pages until the feed is caught up, then waits for what comes next. `changed` gets each batch
// of new events; `status` a word for the live marker; `trouble` an error worth saying (null once over);
// a refused token ends the loop through `refused`.
export async function follow({ changed, status, trouble, refused }) {
  byId.clear();
  cursor = 0;
  stopped = false;
  let wait = 0;
  while (!stopped) {
    try {
      status(wait ? "live" : "loading");
      const page = await json(`events?after=${cursor}&wait=${wait}`);
      for (const event of page.events) byId.set(event.id, event);
      cursor = page.next_cursor;
      if (page.events.length || !wait) changed(page.events);
      wait = page.has_more ? 0 : WAIT_SECONDS;
      trouble(null);
    } catch (error) {
      if (error.status === 401) return refused();
      trouble(error);
      await new Promise((resolve) => setTimeout(resolve, 1000 * (error.retryAfter || 5)));
    }
  }
}
