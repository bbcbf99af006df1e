// Answering a received mail from the page: the send route mails only
// verified contacts, so the panel offers, in turn, a verification code, the
// code's confirmation, then the reply itself.

import { json } from "./api.js";
import * as contacts from "./contacts.js";
import { attempt, button, element, statusLine } from "./dom.js";
import { emailOf } from "./summary.js";

// The panel for `event`, kept current as contacts change; `panel.stop()` ends that.
export function replyPanel(event) {
  const panel = element("section", "reply");
  const sender = emailOf(event.data.from);
  const draft = replyForm(event, sender);
  const draw = () => panel.replaceChildren(element("h3", "", "Reply"), ...parts(sender, draft));
  draw();
  panel.stop = contacts.subscribe(draw);
  return panel;
}

function parts(sender, draft) {
  if (!sender) return [element("p", "note", "This mail names no sender address to answer.")];
  if (!contacts.canSend()) return [element("p", "note", "This server is not set up to send mail.")];
  const status = contacts.statusOf(sender);
  if (status === "verified") return [draft];
  if (status === "pending") return [element("p", "", `A code was mailed to ${sender}.`), contacts.codeForm(sender)];
  const form = element("form", "inline-form");
  form.append(
    element("p", "", `Replies go only to verified contacts, and ${sender} is not one yet.`),
    button(`Send ${sender} a verification code`, "verify", () => {
      attempt(statusLine(form), () => contacts.askForCode(sender), "A code was mailed.");
    }),
  );
  return [form];
}

// The draft survives redraws: it is made once per opened mail.
function replyForm(event, sender) {
  const form = element("form", "reply-form");
  const text = element("textarea");
  Object.assign(text, { rows: 6, required: true, id: "reply-text" });
  const label = element("label", "", `Reply to ${sender}`);
  label.append(text);
  const submit = element("button", "", "Send reply");
  submit.type = "submit";
  form.append(label, submit);
  // One key per text: a retry of the same reply after a failure is recognized by the server and sent once.
  let keyFor = { text: null, key: null };
  form.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    if (keyFor.text !== text.value) keyFor = { text: text.value, key: randomKey() };
    const send = () =>
      json("email/send", {
        method: "POST",
        json: { to: sender, text: text.value, reply_to_event_id: event.id },
        headers: { "Idempotency-Key": keyFor.key },
      });
    if (await attempt(statusLine(form), send, `Sent to ${sender}.`)) text.value = "";
  });
  return form;
}

function randomKey() {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}
