// State: every key with its revision and size, a value viewer, and an edit
// that applies only to the revision it started from (`if_revision`). When
// someone else wrote first, both values are shown and the person chooses.

import { json } from "./api.js";
import { $, button, element, pretty, size, statusLine, when } from "./dom.js";

let viewing = null; // the key's answer as last read, while the viewer is open
let editing = false;

export function setup() {
  $("state-keys").addEventListener("keydown", (pressed) => {
    if (pressed.key === "Escape") closeViewer();
  });
  $("state-view").addEventListener("keydown", (pressed) => {
    if (pressed.key === "Escape" && !editing) closeViewer();
  });
}

export async function load() {
  const listing = await json("state");
  const usage = listing.usage;
  $("state-usage").textContent =
    `${usage.keys} of ${usage.max_keys} keys, ${size(usage.bytes)} of ${size(usage.max_bytes)} used.`;
  $("state-empty").hidden = listing.keys.length > 0;
  const focused = document.activeElement?.closest?.("#state-keys .key-line")?.dataset.key;
  $("state-keys").replaceChildren(...listing.keys.map(keyLine));
  if (focused !== undefined) lineOf(focused)?.focus();
  if (viewing && !editing) {
    const now = listing.keys.find((key) => key.key === viewing.key);
    if (!now) drawGone(viewing.key);
    else if (now.revision !== viewing.revision) await view(viewing.key);
  }
}

function keyLine(key) {
  const item = element("li");
  const line = element("button", "key-line");
  line.type = "button";
  line.dataset.key = key.key;
  line.setAttribute("aria-expanded", String(viewing?.key === key.key));
  line.append(
    element("span", "key-name", key.key),
    element("span", "muted", `revision ${key.revision} · ${size(key.size)} · ${when(key.updated_at)}`),
  );
  line.addEventListener("click", () => view(key.key));
  item.append(line);
  return item;
}

function lineOf(key) {
  return [...$("state-keys").querySelectorAll(".key-line")].find((line) => line.dataset.key === key);
}

async function view(key) {
  const status = element("p", "status");
  try {
    viewing = await json(`state/${encodeURIComponent(key)}`);
    editing = false;
    drawViewer(viewing);
  } catch (error) {
    status.textContent = `Could not read ${key}: ${error.message}`;
    panel(status);
  }
  for (const line of $("state-keys").querySelectorAll(".key-line")) {
    line.setAttribute("aria-expanded", String(line.dataset.key === key));
  }
}

function closeViewer() {
  const key = viewing?.key;
  viewing = null;
  editing = false;
  $("state-view").hidden = true;
  if (key !== undefined) {
    lineOf(key)?.setAttribute("aria-expanded", "false");
    lineOf(key)?.focus();
  }
}

function panel(...children) {
  $("state-view").replaceChildren(...children);
  $("state-view").hidden = false;
}

function valueText(entry) {
  return entry.value_encoding === "json_text" ? entry.value : pretty(entry.value);
}

function drawViewer(entry) {
  const actions = element("div", "actions");
  actions.append(button("Edit", "edit", () => drawEditor(entry, valueText(entry))), button("Close", "", closeViewer));
  panel(
    element("h3", "state-key", entry.key),
    element("p", "muted", `revision ${entry.revision} · ${when(entry.updated_at)}`),
    element("pre", "value", valueText(entry)),
    actions,
  );
}

function keep(key, current) {
  editing = false;
  if (!current) return drawGone(key);
  viewing = current;
  drawViewer(current);
}

function drawGone(key) {
  viewing = null;
  const gone = element("p", "note", "This key was deleted.");
  panel(element("h3", "state-key", key), gone, button("Close", "", closeViewer));
}

// `base` is the answer the edit started from: the write goes through only at its revision.
function drawEditor(base, text) {
  editing = true;
  const form = element("form", "state-edit");
  const area = element("textarea", "value-input");
  Object.assign(area, { rows: 8, value: text, spellcheck: false });
  const label = element("label", "", `New value of ${base.key} (JSON)`);
  label.append(area);
  const actions = element("div", "actions");
  const save = element("button", "", "Save");
  save.type = "submit";
  actions.append(save, button("Cancel", "", () => drawViewer(viewing)));
  form.append(label, element("p", "muted", `Saved only if the key is still at revision ${base.revision}.`), actions);
  form.addEventListener("submit", (submitted) => {
    submitted.preventDefault();
    write(form, base.key, area.value, base.revision);
  });
  panel(element("h3", "state-key", base.key), form);
  area.focus();
}

async function write(form, key, text, revision) {
  const status = statusLine(form);
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    status.textContent = `Not JSON: ${error.message}`;
    return;
  }
  status.textContent = "Saving…";
  try {
    viewing = await json(`state/${encodeURIComponent(key)}`, { method: "PUT", json: { value, if_revision: revision } });
  } catch (error) {
    if (error.code === "revision_conflict") await drawConflict(key, text);
    else status.textContent = error.message;
    return;
  }
  editing = false;
  drawViewer(viewing);
  await load();
}

// Someone wrote the key after the edit began: what the person typed beside what is stored now.
async function drawConflict(key, mine) {
  let current = null;
  try {
    current = await json(`state/${encodeURIComponent(key)}`);
  } catch (error) {
    // Deleted meanwhile (404) is an answer too; anything else is said where the value would be.
    if (error.status !== 404) current = { key, revision: 0, value: null, failed: error.message };
  }
  const theirs = element("div", "side theirs");
  theirs.append(
    element("h4", "", current ? `Stored now, revision ${current.revision}` : "Stored now: the key was deleted"),
    element("pre", "value", current?.failed ?? (current ? valueText(current) : "")),
  );
  const yours = element("div", "side yours");
  yours.append(element("h4", "", "Your edit, not saved"), element("pre", "value", mine));
  const both = element("div", "conflict");
  both.append(yours, theirs);
  const actions = element("div", "actions");
  const base = current ?? { key, revision: 0 };
  actions.append(
    button("Edit mine again over the stored value", "", () => drawEditor(base, mine)),
    button("Keep the stored value", "", () => keep(key, current)),
  );
  panel(
    element("h3", "state-key", key),
    element("p", "note", "Someone else changed this key after your edit began. Nothing of yours was saved."),
    both,
    actions,
  );
}
