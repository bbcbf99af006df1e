// The JSON API of the open address. The read token travels in the
// Authorization header only: never in a URL, never stored beyond the tab.

export class ApiError extends Error {
  constructor(message, status, details, retryAfter) {
    super(message);
    this.status = status;
    this.code = details.code;
    this.details = details;
    this.retryAfter = retryAfter;
  }
}

let address = null;

export function use(found) {
  address = found;
}

// `path` is relative to the address, e.g. "events?after=3" ("" is the address itself); the page's own
// URL is the base, so a deployment under a path prefix works unchanged.
export async function call(path, { method = "GET", json, headers = {} } = {}) {
  const init = {
    method,
    headers: { Authorization: `Bearer ${address.token}`, ...headers },
    cache: "no-store",
    referrerPolicy: "no-referrer",
  };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  }
  const root = `api/v1/addresses/${encodeURIComponent(address.id)}`;
  const response = await fetch(path ? `${root}/${path}` : root, init);
  if (!response.ok) throw await failure(response);
  return response;
}

export async function json(path, options) {
  return (await call(path, options)).json();
}

async function failure(response) {
  let details = { code: "http_" + response.status };
  let message = `The server answered ${response.status}.`;
  try {
    details = (await response.json()).error;
    message = `${details.message} (${details.code})`;
  } catch {
    // Not Cairn's JSON error: the status says enough.
  }
  return new ApiError(message, response.status, details, Number(response.headers.get("Retry-After")) || 0);
}
