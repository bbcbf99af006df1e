// The address's mail contacts: who it may write to, each verified by a code
// mailed to them and typed in here by the person who received it.

import { json } from "./api.js";
import { $, attempt, element, statusLine } from "./dom.js";

let contacts = [];
let configured = true;
const listeners = new Set();

export function statusOf(email) {
  return contacts.find((contact) => contact.email === email)?.status ?? null;
}

export function canSend() {
  return configured;
}

// `listener` runs after every change; the returned function stops that.
export function subscribe(listener) {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

export async function load() {
  const answer = await json("email/contacts");
  contacts = answer.contacts;
  configured = answer.outbound_configured;
  render();
  for (const listener of listeners) listener();
}

export function setup() {
  $("contact-form").addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const asked = () => askForCode($("contact-email").value.trim());
    if (await attempt(statusLine($("contact-form")), asked, "A code was mailed.")) $("contact-email").value = "";
  });
}

export async function askForCode(email) {
  await json("email/contacts", { method: "POST", json: { email } });
  await load();
}

// A form that confirms `email` with the code its owner received.
export function codeForm(email) {
  const form = element("form", "inline-form code-form");
  const input = element("input");
  Object.assign(input, { inputMode: "numeric", autocomplete: "one-time-code", required: true, maxLength: 64 });
  const label = element("label", "", `Code mailed to ${email}`);
  label.append(input);
  const submit = element("button", "", "Verify");
  submit.type = "submit";
  form.append(label, submit);
  form.addEventListener("submit", async (submitted) => {
    submitted.preventDefault();
    const confirm = () => json("email/contacts", { method: "POST", json: { email, code: input.value.trim() } });
    if (await attempt(statusLine(form), confirm, `${email} is verified.`)) await load();
  });
  return form;
}

function render() {
  $("contacts-note").textContent = configured
    ? "Mail goes only to verified contacts: ask for a code, and whoever receives it types it in here."
    : "This server is not set up to send mail.";
  $("contact-form").hidden = !configured;
  $("contacts").replaceChildren(
    ...contacts.map((contact) => {
      const item = element("li", "contact");
      const badge = element("span", `badge ${contact.status}`, contact.status);
      item.append(element("span", "contact-email", contact.email), badge);
      if (contact.status === "pending") item.append(codeForm(contact.email));
      return item;
    }),
  );
}
