// What kind of event this is, and the one line that says who or what it is about.

// Surfaces a person or Cairn itself writes on; any other surface is the deployment's mail surface.
const NOT_MAIL = new Set(["http", "state", "outbound"]);

export function isReceivedMail(event) {
  return event.type === "email.received" && !NOT_MAIL.has(event.ingress_surface) && isObject(event.data);
}

export function isSentMail(event) {
  return event.type === "email.sent" && event.ingress_surface === "outbound" && isObject(event.data);
}

export function isOutcome(event) {
  return event.ingress_surface === "outbound" && event.type !== "email.sent" && isObject(event.data);
}

export function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

// The address part of `Name <user@host>` (or of a bare `user@host`), lower-cased as contacts are.
export function emailOf(sender) {
  if (typeof sender !== "string") return null;
  const first = sender.split(",")[0];
  const bracketed = first.match(/<([^<>\s]+@[^<>\s]+)>/);
  const found = bracketed ? bracketed[1] : first.trim();
  return /^[^\s@]+@[^\s@]+$/.test(found) ? found.toLowerCase() : null;
}

export function subjectOf(data) {
  return typeof data.subject === "string" && data.subject ? data.subject : "(no subject)";
}

// `find` looks up another event by id: an outcome names the send it reports on.
export function summary(event, find) {
  const data = event.data;
  if (isReceivedMail(event)) return `${data.from ?? "(no sender)"} — ${subjectOf(data)}`;
  if (isSentMail(event)) return `to ${data.to} — ${subjectOf(data)}`;
  if (isOutcome(event)) {
    const send = find(data.send_event_id);
    if (send && isSentMail(send)) return `to ${send.data.to} — ${subjectOf(send.data)}`;
    return String(data.detail ?? data.message_id ?? "");
  }
  if (event.type === "state.updated" && isObject(data)) return `${data.op} ${data.key} (revision ${data.revision})`;
  const text = typeof data === "string" ? data : JSON.stringify(data) ?? "";
  return text.length > 160 ? text.slice(0, 159) + "…" : text;
}
