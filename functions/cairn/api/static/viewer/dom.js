// Building the page. Everything shown comes through `element` as text
// (textContent), never as HTML: event content is written by strangers.

export const $ = (id) => document.getElementById(id);

export function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

export function button(text, className, onClick) {
  const node = element("button", className, text);
  node.type = "button";
  node.addEventListener("click", onClick);
  return node;
}

// A `<dl>` of the pairs whose value is present.
export function fields(pairs) {
  const list = element("dl", "fields");
  for (const [name, value] of pairs) {
    if (value === undefined || value === null || value === "") continue;
    list.append(element("dt", "", name), element("dd", "", value));
  }
  return list;
}

export function when(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

export function size(bytes) {
  if (bytes < 1000) return `${bytes} bytes`;
  const units = ["kB", "MB", "GB"];
  let value = bytes;
  let unit = -1;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

export function showError(text) {
  $("error").textContent = text;
  $("error").hidden = !text;
}

export function pretty(value) {
  return JSON.stringify(value, null, 2) ?? "null";
}

// Runs `action`, saying in `status` how it went; true when it succeeded.
export async function attempt(status, action, success) {
  status.classList.remove("failed");
  status.textContent = "Working…";
  try {
    await action();
    status.textContent = success;
    return true;
  } catch (error) {
    status.classList.add("failed");
    status.textContent = error.message;
    return false;
  }
}

// The status line that follows `form`, made on first use; screen readers hear what it says.
export function statusLine(form) {
  let status = form.nextElementSibling;
  if (!status?.classList.contains("status")) {
    status = element("p", "status");
    status.setAttribute("role", "status");
    form.after(status);
  }
  return status;
}
