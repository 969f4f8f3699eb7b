// Slack users and channels by name, the id beside (`dana (U0123ABCD)`), from `GET /v1/names`,
// which asks Slack once for the fleet. An id with no name known (no bot token, not yet asked,
// Slack does not know it) is shown as the gateway gave it. Names go in as text, like all else.

import { call } from "./api.js";

const USER = "[UW][A-Z0-9]{2,24}";
// The forms a Slack user takes in the gateway's answers: `<@U1>` (an acknowledgement from a
// click), `slack:<@U1>` (an override's author), `slack:U1` (an audit entry's author).
const MENTION = new RegExp(`(?:slack:)?<@(${USER})>|slack:(${USER})(?![A-Z0-9])`, "g");
const ID = /^[UWCGD][A-Z0-9]{2,24}$/;
const MAX_ASKED = 100; // ids per request, as the route allows
const AGAIN_AFTER = 30000; // ms before an id with no name is asked for again

const names = new Map(); // id -> name, or null (asked: no name)
const askedAt = new Map(); // id -> when it was last asked for (ms)
const wanted = new Set(); // ids shown since the last lookup

/** An id as shown: `name (id)` once its name is known, else `fallback` (the id itself by default). */
export function named(id, fallback = id) {
  if (!ID.test(id)) return fallback;
  wanted.add(id);
  const name = names.get(id);
  return name ? `${name} (${id})` : fallback;
}

/** A text with every Slack user it mentions shown by name (`dana (U1)`); the rest as it was. */
export function withNames(text) {
  return String(text ?? "").replace(MENTION, (whole, mention, author) => named(mention || author, whole));
}

/** Ask the gateway for the names of the ids shown and not known (at most 100 at a time). */
export async function lookUp() {
  const now = Date.now();
  const due = [...wanted].filter((id) => !names.get(id) && now - (askedAt.get(id) || 0) > AGAIN_AFTER);
  wanted.clear();
  if (!due.length) return;
  const ids = due.slice(0, MAX_ASKED);
  for (const id of ids) askedAt.set(id, now);
  const answer = await call("GET", `/v1/names?ids=${ids.join(",")}`);
  for (const [id, name] of Object.entries(answer.names || {})) names.set(id, typeof name === "string" && name ? name : null);
}
