// The list of events: one line each, newest first, narrowed by the filters
// and shown a page at a time. Arrow keys move between lines; Enter opens one.

import { $, element, when } from "./dom.js";
import { summary } from "./summary.js";

const PAGE_SIZE = 20;
let page = 0;
let events = [];
let find = () => undefined;
let open = () => {};

export function setup(handlers) {
  ({ find, open } = handlers);
  for (const id of ["filter-unacked", "filter-type", "filter-source"]) {
    $(id).addEventListener("change", () => {
      page = 0;
      render(events);
    });
  }
  $("filters").addEventListener("submit", (submitted) => submitted.preventDefault());
  $("newer").addEventListener("click", () => turn(-1));
  $("older").addEventListener("click", () => turn(1));
  $("events").addEventListener("keydown", moveFocus);
}

export function focusLine(id) {
  const line = lineOf(id);
  if (line) line.focus();
}

// `newest` is every event, newest first.
export function render(newest) {
  events = newest;
  const focused = document.activeElement?.closest?.("#events .line")?.dataset.eventId;
  offerChoices("filter-type", newest.map((event) => event.type));
  offerChoices("filter-source", newest.map((event) => event.source));
  const shown = newest.filter(matches);
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  page = Math.min(page, pages - 1);
  const first = page * PAGE_SIZE;
  $("events").replaceChildren(...shown.slice(first, first + PAGE_SIZE).map(line));
  $("events-empty").hidden = newest.length > 0;
  $("events-none").hidden = newest.length === 0 || shown.length > 0;
  $("pager").hidden = shown.length <= PAGE_SIZE;
  $("page-status").textContent = `${first + 1}–${Math.min(first + PAGE_SIZE, shown.length)} of ${shown.length}`;
  $("newer").disabled = page === 0;
  $("older").disabled = page >= pages - 1;
  if (focused) focusLine(focused);
}

function matches(event) {
  return (
    !($("filter-unacked").checked && event.acknowledged_at) &&
    (!$("filter-type").value || event.type === $("filter-type").value) &&
    (!$("filter-source").value || event.source === $("filter-source").value)
  );
}

function offerChoices(selectId, values) {
  const select = $(selectId);
  const chosen = select.value;
  const choices = [...new Set(values)].sort();
  if (chosen && !choices.includes(chosen)) choices.push(chosen);
  // The first option is "all"; `Option` takes its label as text.
  select.replaceChildren(select.options[0], ...choices.map((value) => new Option(value, value)));
  select.value = chosen;
}

function line(event) {
  const item = element("li");
  const row = element("button", "line");
  row.type = "button";
  row.dataset.eventId = event.id;
  const meta = element("span", "line-meta");
  meta.append(element("span", "source", event.source));
  if (event.ingress_surface !== event.source) {
    meta.append(element("span", `surface ${event.ingress_surface}`, `via ${event.ingress_surface}`));
  }
  meta.append(
    event.acknowledged_at ? element("span", "acked", "acknowledged") : element("span", "unacked", "not acknowledged"),
  );
  row.append(element("span", "type", event.type), element("span", "time", when(event.created_at)));
  row.append(element("span", "what", summary(event, find)), meta);
  row.addEventListener("click", () => open(event.id));
  item.append(row);
  return item;
}

function lineOf(id) {
  return [...$("events").querySelectorAll(".line")].find((line) => line.dataset.eventId === id);
}

function turn(step) {
  page += step;
  render(events);
  // A button that just became disabled drops the keyboard's focus: hand it to the other one.
  const [pressed, other] = step > 0 ? [$("older"), $("newer")] : [$("newer"), $("older")];
  if (pressed.disabled) other.focus();
}

function moveFocus(pressed) {
  const lines = [...$("events").querySelectorAll(".line")];
  const at = lines.indexOf(document.activeElement);
  const next = { ArrowDown: at + 1, ArrowUp: at - 1, Home: 0, End: lines.length - 1 }[pressed.key];
  if (at < 0 || next === undefined || !lines[next]) return;
  pressed.preventDefault();
  lines[next].focus();
}
