// A mail shown as mail (its subject is the view's heading): its headers,
// the checks the receiving server made, the text body with its line breaks,
// attachments to download, and the conversation it belongs to.

import { call } from "./api.js";
import { button, element, fields, showError, size, when } from "./dom.js";
import { isReceivedMail, subjectOf } from "./summary.js";
import { threadOf } from "./thread.js";

const CHECKS = [
  ["spf", "SPF"],
  ["dkim", "DKIM"],
  ["dmarc", "DMARC"],
];
const PASSED = new Set(["pass"]);
const FAILED = new Set(["fail", "softfail", "permerror", "temperror", "quarantine", "reject"]);

export function mailView(event) {
  const data = event.data;
  const received = isReceivedMail(event);
  const view = element("article", "mail");
  view.append(
    fields([
      ["From", data.from],
      ["To", Array.isArray(data.to) ? data.to.join(", ") : data.to],
      ["Cc", Array.isArray(data.cc) ? data.cc.join(", ") : data.cc],
      ["Date", received && data.date ? when(data.date) : when(event.created_at)],
    ]),
  );
  if (received) view.append(verdicts(data.verdicts));
  view.append(body(data));
  if (data.truncated) {
    const cut = Array.isArray(data.truncated_fields) ? data.truncated_fields.join(", ") : "";
    view.append(element("p", "note", `Cut to the size limits (${cut}); the whole message stays stored.`));
  }
  if (received && Array.isArray(data.attachments) && data.attachments.length) view.append(attachments(event));
  return view;
}

// The other mail of this conversation, oldest first; `open` shows one of them.
export function conversation(event, events, open) {
  const thread = threadOf(event, events);
  const section = element("section", "thread");
  if (thread.length < 2) return section;
  section.append(element("h3", "", `Conversation (${thread.length} messages)`));
  const list = element("ol");
  for (const each of thread) {
    const who = isReceivedMail(each) ? `from ${each.data.from}` : `to ${each.data.to}`;
    const label = `${who} — ${subjectOf(each.data)} — ${when(each.created_at)}`;
    const item = element("li");
    if (each.id === event.id) {
      item.append(element("span", "current", label));
      item.setAttribute("aria-current", "true");
    } else {
      item.append(button(label, "link", () => open(each.id)));
    }
    list.append(item);
  }
  section.append(list);
  return section;
}

function verdicts(found) {
  const list = element("ul", "badges");
  list.setAttribute("aria-label", "Checks by the receiving server");
  for (const [field, name] of CHECKS) {
    const verdict = typeof found?.[field] === "string" ? found[field] : null;
    const kind = verdict === null ? "unchecked" : PASSED.has(verdict) ? "pass" : FAILED.has(verdict) ? "fail" : "other";
    list.append(element("li", `badge verdict ${kind}`, `${name} ${verdict ?? "not checked"}`));
  }
  return list;
}

function body(data) {
  if (typeof data.text === "string") return element("pre", "mail-body", data.text);
  if (typeof data.html === "string") {
    const wrapper = element("div");
    wrapper.append(
      element("p", "note", "This mail has an HTML part only, shown here as its text."),
      element("pre", "mail-body", htmlAsText(data.html)),
    );
    return wrapper;
  }
  return element("p", "note", "This mail has no text.");
}

// A stranger's HTML as plain text, without ever parsing it into elements (even an inert document
// would hold their attributes): tags are dropped, a block's end or a <br> becomes a line break, and the
// common character references are decoded. The result is only ever shown as text.
const COMMENTS = /<!--[\s\S]*?(-->|$)/g;
const HIDDEN = /<(script|style|template|noscript|title|head)\b[\s\S]*?(<\/\1\s*>|$)/gi;
const BREAKS = /<\/(p|div|li|tr|h[1-6]|blockquote|pre|table|ul|ol)\s*>|<br\b[^>]*>/gi;
const TAGS = /<\/?[a-z!?][^>]*(>|$)/gi;
const REFERENCES = /&(#x[0-9a-f]{1,6}|#[0-9]{1,7}|[a-z]{2,6});/gi;
const NAMED = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'", nbsp: "\u00a0" };

export function htmlAsText(html) {
  return html
    .replace(COMMENTS, "")
    .replace(HIDDEN, "")
    .replace(/\s+/g, " ")
    .replace(BREAKS, "\n")
    .replace(TAGS, "")
    .replace(REFERENCES, character)
    .replace(/ *\n */g, "\n")
    .replace(/\n{3,}/g, "\n\n")
    .trim();
}

function character(reference, name) {
  if (name[0] !== "#") return NAMED[name.toLowerCase()] ?? reference;
  const code = /^#x/i.test(name) ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
  return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : reference;
}

function attachments(event) {
  const section = element("section", "attachments");
  section.append(element("h3", "", "Attachments"));
  const list = element("ul");
  for (const attachment of event.data.attachments) {
    const item = element("li");
    const name = button(attachment.filename, "download", () => save(event, attachment));
    name.setAttribute("aria-label", `Download ${attachment.filename}`);
    item.append(name, element("span", "muted", `${size(attachment.size)} · ${attachment.content_type ?? ""}`));
    list.append(item);
  }
  section.append(list);
  return section;
}

// The bytes come with the token in a header, so the file is handed to the browser as a blob.
async function save(event, attachment) {
  try {
    const path = `events/${encodeURIComponent(event.id)}/attachments/${encodeURIComponent(attachment.id)}`;
    const blob = await (await call(path)).blob();
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

