// One event in full: what it is, its acknowledgement, and its content: a
// mail as mail, anything else as its data.

import { json } from "./api.js";
import { $, button, element, pretty, showError, when } from "./dom.js";
import * as feed from "./feed.js";
import { conversation, mailView } from "./mail.js";
import { replyPanel } from "./reply.js";
import { isOutcome, isReceivedMail, isSentMail, subjectOf, summary } from "./summary.js";

let shown = null;
let reply = null;
let back = () => {};
let changed = () => {};

// `back(id)` returns to the list from event `id`; `changed()` redraws after this view changed the feed.
export function setup(handlers) {
  ({ back, changed } = handlers);
  $("back").addEventListener("click", () => back(shown));
  $("detail").addEventListener("keydown", (pressed) => {
    if (pressed.key === "Escape" && !pressed.target.closest("textarea, input")) back(shown);
  });
}

export function show(id) {
  const event = feed.find(id);
  if (!event) return;
  close();
  shown = id;
  const mail = isReceivedMail(event) || isSentMail(event);
  $("detail-heading").textContent = mail ? subjectOf(event.data) : summary(event, feed.find) || event.type;
  drawHeader(event);
  const body = $("detail-body");
  if (isReceivedMail(event)) {
    reply = replyPanel(event);
    body.replaceChildren(mailView(event), element("div", "thread-slot"), reply);
  } else if (isSentMail(event)) {
    body.replaceChildren(mailView(event), element("div", "thread-slot"));
  } else {
    body.replaceChildren(dataView(event));
  }
  drawThread();
  $("detail").hidden = false;
  $("detail-heading").focus();
}

export function close() {
  reply?.stop();
  reply = null;
  shown = null;
  $("detail").hidden = true;
}

// New events may join the conversation or acknowledge this one; the body and any draft stay.
export function refresh() {
  const event = shown && feed.find(shown);
  if (!event) return;
  drawHeader(event);
  drawThread();
}

function drawHeader(event) {
  const meta = [
    event.type,
    `source ${event.source}`,
    `via ${event.ingress_surface}`,
    `#${event.sequence}`,
    when(event.created_at),
  ];
  $("detail-meta").replaceChildren(...meta.map((text) => element("span", "", text)));
  const state = event.acknowledged_at
    ? element("span", "acked", `acknowledged ${when(event.acknowledged_at)}`)
    : element("span", "unacked", "not acknowledged");
  const actions = [state];
  if (!event.acknowledged_at) actions.push(button("Acknowledge", "ack", () => acknowledge(event)));
  if (isOutcome(event) && feed.find(event.data.send_event_id)) {
    actions.push(button("Show the mail sent", "link", () => show(event.data.send_event_id)));
  }
  $("detail-actions").replaceChildren(...actions);
}

function drawThread() {
  const slot = $("detail-body").querySelector(".thread-slot");
  const event = feed.find(shown);
  if (slot && event) slot.replaceChildren(conversation(event, feed.newestFirst(), show));
}

function dataView(event) {
  const view = element("div", "data-view");
  if (event.ingress_surface === "http") {
    const warning =
      event.type.startsWith("email.")
        ? "Posted to the inbox URL, not received as mail: whoever holds that URL wrote every field below."
        : "Posted to the inbox URL: its content is whatever the poster sent.";
    view.append(element("p", "note", warning));
  }
  if (event.content_type) view.append(element("p", "muted", `Content type ${event.content_type}`));
  if (event.headers) view.append(element("h3", "", "Headers kept"), element("pre", "data", pretty(event.headers)));
  const encoded = event.data_encoding === "json_text";
  view.append(element("h3", "", "Data"), element("pre", "data", encoded ? event.data : pretty(event.data)));
  return view;
}

async function acknowledge(event) {
  try {
    const answer = await json(`events/${encodeURIComponent(event.id)}/ack`, { method: "POST" });
    feed.acknowledged(event.id, answer.event.acknowledged_at);
    changed();
    // The button is gone with the acknowledgement: keep the keyboard's place in the view.
    $("detail-heading").focus();
    showError("");
  } catch (error) {
    showError(`Could not acknowledge event ${event.sequence}: ${error.message}`);
  }
}
