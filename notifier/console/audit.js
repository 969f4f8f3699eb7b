// The latest entries of the audit log (`GET /v1/audit?limit=10`): when, who (Slack users by
// name), from where, what and to what. Every part is text from the gateway, set as text.

import { el, setText, stamp, sync } from "./dom.js";
import { named, withNames } from "./names.js";

const $ = (id) => document.getElementById(id);
export const AUDIT_PATH = "/v1/audit?limit=10";

/** Show a page of `GET /v1/audit`, newest first. */
export function showAudit(answer) {
  const entries = answer.entries || [];
  $("audit-empty").hidden = entries.length > 0;
  sync($("audit"), entries, (entry) => entry.id, makeEntry, $("audit-title"));
}

function makeEntry() {
  const action = el("span", { className: "name" });
  const target = el("span");
  const who = el("span");
  const when = el("span");
  const change = el("p", { className: "audit-change" });
  const node = el("li", {}, el("div", { className: "line" }, action, target), el("div", { className: "meta" }, who, when), change);
  return {
    node,
    update(entry) {
      setText(action, entry.action);
      setText(target, describe(entry.target));
      setText(who, `by ${withNames(entry.by)} via ${entry.via}`);
      setText(when, stamp(entry.at));
      const moved = [entry.before, entry.after].some((v) => v !== null && v !== undefined);
      setText(change, moved ? `${describe(entry.before)} → ${describe(entry.after)}` : "");
      change.hidden = !moved;
    },
  };
}

const IDS = new Set(["channel", "channel_id", "user"]); // keys whose values are Slack ids

/** A target, or a value before or after, as one line: `level=category value=db` (Slack ids by name). */
function describe(value) {
  if (value === null || value === undefined) return "none";
  if (typeof value !== "object") return withNames(value);
  return Object.entries(value)
    .filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => `${k}=${typeof v === "object" ? JSON.stringify(v) : IDS.has(k) ? named(String(v)) : withNames(v)}`)
    .join(" ");
}
