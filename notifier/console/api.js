// The gateway's JSON routes, as any client calls them; the token and what it may do; the store's clock.
//
// The token lives in sessionStorage only (gone with the tab), goes out as a bearer
// token, and is never put in a URL, localStorage or a cookie. What it may do is what
// `GET /v1/token` answers: its name and scopes (send, read, ack, admin).

const TOKEN_KEY = "notifier.token";

/** Whether this gateway asks for a token (written into the page by the server). */
export const tokenRequired = document.body.dataset.auth === "token";

/** The optional routes this version of the gateway has. */
export const routes = new Set((document.body.dataset.routes || "").split(" ").filter(Boolean));

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
  caller = null; // who it is: asked again
}

export function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  caller = null;
}

// Who the token in use is, as `GET /v1/token` answered ({name, scopes, ...}); null until it did.
let caller = null;

/** The caller the gateway named for the token in use; null before it answered (or with no token). */
export function currentCaller() {
  return caller;
}

/** Ask the gateway who the token in use is; rejects like `call` (401: it does not know the token). */
export async function identify() {
  caller = null;
  if (!tokenRequired || !token()) return null;
  const given = token();
  const answer = await call("GET", "/v1/token");
  if (token() === given) caller = answer; // not a token replaced meanwhile
  return caller;
}

/**
 * Whether an action that needs `scope` is offered. Without tokens, every one; before a token is
 * given, every one too (acting asks for the token); with a token, those its scopes allow, once
 * the gateway said which (none before: offering one that then answers 403 helps nobody).
 */
export function may(scope) {
  if (!tokenRequired || !token()) return true;
  return caller !== null && Array.isArray(caller.scopes) && caller.scopes.includes(scope);
}

/** Whether event content may be read now: no token needed, or one is given whose scopes include read. */
export function mayReadContent() {
  return !tokenRequired || (token() !== "" && may("read"));
}

/** An answer other than 2xx: its status and the gateway's error text. */
export class Refused extends Error {
  constructor(status, body) {
    super(describe(status, body));
    this.status = status;
    this.body = body;
  }
}

function describe(status, body) {
  const details = Array.isArray(body.details)
    ? body.details.map((d) => [d.field, d.message].filter(Boolean).join(": ")).filter(Boolean)
    : [];
  const text = body.error || (status === 404 ? "not found" : "refused");
  return `${status} ${text}${details.length ? " (" + details.join("; ") + ")" : ""}`;
}

// Seconds to add to this browser's clock to get the gateway's, from the Date header of its
// answers; whole seconds only, so it corrects a clock that is off, not one that is close.
let skew = 0;

/** Now, in unix seconds, as the gateway's clock reads it (within a second). */
export function serverNow() {
  return Date.now() / 1000 + skew;
}

function observeClock(response) {
  const date = Date.parse(response.headers.get("Date") || "");
  if (Number.isNaN(date)) return;
  const offset = date / 1000 - Date.now() / 1000;
  skew = Math.abs(offset) > 2 ? offset : 0;
}

/** No answer at all: the gateway (or the network to it) is down. */
export class Unreachable extends Error {}

/** One JSON request; resolves to the parsed answer, rejects with Refused or Unreachable. */
export async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  const given = token();
  if (given) headers.Authorization = `Bearer ${given}`;
  const init = { method, headers, cache: "no-store", credentials: "omit", redirect: "error" };
  // Every change says it is JSON, a body or not: in open mode the gateway takes no change without it
  // (a page of another site cannot send that header without a preflight, which it never grants).
  if (body !== undefined || method !== "GET") headers["Content-Type"] = "application/json";
  if (body !== undefined) init.body = JSON.stringify(body);
  let response;
  try {
    // Relative to the page, so a gateway behind a proxy under a path prefix works the same.
    response = await fetch(new URL(`.${path}`, document.baseURI), init);
  } catch (error) {
    throw new Unreachable(String(error));
  }
  observeClock(response);
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) throw new Refused(response.status, answer || {});
  return answer;
}

/** A path segment: category names, alert keys and window names may hold any character. */
export function segment(value) {
  return encodeURIComponent(value);
}
