// What each panel shows, from the answers of the gateway's routes. Text from the gateway
// (event text, categories, reasons, names) is always set as text, never parsed as markup.

import { may, serverNow } from "./api.js";
import { bar, clock, duration, el, seconds, setText, stamp, sync, textBlock } from "./dom.js";
import { named, withNames } from "./names.js";

const $ = (id) => document.getElementById(id);
let lastId = 0;
const uid = (prefix) => `${prefix}-${++lastId}`;

// --- limits: per level of the tree, value and rule, like `notifier status` ---

let currentOverrides = {}; // override name (see overrideName) -> override in force, for the tag beside each value

/** How `GET /v1/limits` names an override: the root's name, a category's name, or `level=value`. */
export function overrideName(level, value, root) {
  if (level === root) return level;
  return level === "category" ? value : `${level}=${value}`;
}

/** The tree of a `GET /v1/limits` answer: the root, then each value of each level below it. */
export function treeOf(limits) {
  const levels = limits.levels || [{ name: "global", key: null, rules: limits.global || [] }];
  const root = levels[0].name;
  const items = [{ id: root, name: root, label: root, rules: levels[0].rules || [] }];
  for (const level of levels.slice(1)) {
    for (const value of Object.keys(level.values || {}).sort()) {
      const name = overrideName(level.name, value, root);
      // A category shows by its name alone, as before the tree; any other value with its level.
      const label = level.name === "category" ? value : `${level.name} ${value}`;
      items.push({ id: `${level.name}\u0000${value}`, name, label, rules: level.values[value] });
    }
  }
  return items;
}

/** Show `GET /v1/limits`: one item per level value, one row per rule (and the shared and reserved parts). */
export function showLimits(limits) {
  currentOverrides = limits.overrides || {};
  sync($("levels"), treeOf(limits), (l) => l.id, makeLevel, $("limits-title"));
}

function makeLevel(level) {
  const name = el("span", { className: "name", text: level.label });
  const tag = el("span", { className: "tag" });
  const rules = el("ul", { className: "rules" });
  const node = el("li", { className: "level" }, el("div", { className: "level-head" }, name, tag), rules);
  return {
    node,
    update(current) {
      const override = currentOverrides[current.name];
      setText(tag, override ? `override ${override.rules}` : "");
      tag.hidden = !override;
      const rows = current.rules.flatMap((rule, index) => ruleRows(rule, index));
      sync(rules, rows, (r) => r.key, makeRuleRow);
    },
  };
}

function ruleRows(rule, index) {
  const free = rule.remaining > 0 ? "free now" : `next free in ${duration(rule.available_in)}`;
  const rows = [{ key: `${index}`, kind: "rule", label: rule.rule, used: rule.used, limit: rule.limit, note: free }];
  if (rule.shared) {
    const shared = rule.shared;
    const note = shared.free > 0 ? `${shared.free} free` : "full";
    rows.push({ key: `${index}:shared`, kind: "shared", label: "shared", used: shared.used, limit: shared.slots, note });
  }
  for (const reserve of rule.reserves || []) {
    rows.push({
      key: `${index}:reserve:${reserve.class}`,
      kind: "reserve",
      label: `${reserve.class} (${reserve.share})`,
      used: reserve.used,
      limit: reserve.slots,
      note: `reserved, ${reserve.free ?? Math.max(0, reserve.slots - reserve.used)} free`,
    });
  }
  return rows;
}

function makeRuleRow(row) {
  const label = el("span", { className: "rule-name" });
  const meter = bar();
  const count = el("span", { className: "count" });
  const note = el("span", { className: "rule-note" });
  const node = el("li", { className: `rule ${row.kind}` }, label, meter.node, count, note);
  return {
    node,
    update(current) {
      setText(label, current.label);
      meter.update(current.used, current.limit);
      setText(count, `${current.used}/${current.limit}`);
      setText(note, current.note);
    },
  };
}

// --- overrides and mutes ---

/** Show the overrides in force, each with its time left and the button that lifts it. */
export function showOverrides(overrides, lift) {
  const items = Object.entries(overrides || {}).map(([level, o]) => ({ level, ...o }));
  $("overrides-empty").hidden = items.length > 0;
  sync($("overrides"), items, (o) => o.level, (o) => makeOverride(o, lift), $("overrides-title"));
}

/** A mute is an override of a category to `0/DURATION`. */
export function isMute(override) {
  return override.level !== "global" && /^\s*0\s*\//.test(override.rules);
}

function makeOverride(first, lift) {
  const id = uid("override");
  const name = el("span", { className: "name", id });
  const what = el("span");
  const left = el("span", { className: "left" });
  const by = el("span", { className: "by" });
  const button = el("button", { type: "button", "aria-describedby": id });
  let current = first;
  button.addEventListener("click", () => lift(current, button));
  const node = el("li", {}, el("div", { className: "line" }, name, what), el("div", { className: "meta" }, left, by), button);
  return {
    node,
    update(o) {
      current = o;
      setText(name, o.level);
      setText(what, isMute(o) ? `muted (${o.rules})` : `rules ${o.rules}`);
      const rest = o.until === null || o.until === undefined ? null : o.until - serverNow();
      setText(left, rest === null ? "until removed" : `${duration(rest)} left (until ${clock(o.until)})`);
      setText(by, o.by ? `by ${withNames(o.by)}` : "");
      setText(button, isMute(o) ? "Unmute" : "Restore");
      button.hidden = !may("admin");
    },
  };
}

/** Offer the known categories, and the tree's level values (`level=value`), in the forms' lists. */
export function showKnownCategories(names, levels = ["global", ...names]) {
  const options = (list) => (n) => ({ node: el("option", { value: n }), update() {} });
  sync($("known-categories"), names, (n) => n, options());
  sync($("known-levels"), [...new Set([...levels, ...names])], (n) => n, options());
}

// --- windows: maintenance windows and quiet hours ---

/** The windows of a `GET /v1/windows` answer, whether it lists them in one array or by kind. */
export function windowsOf(answer) {
  if (Array.isArray(answer)) return answer;
  const found = [];
  for (const [kind, value] of Object.entries(answer || {})) {
    if (!Array.isArray(value)) continue;
    for (const item of value) found.push({ kind: kindOf(kind), ...item });
  }
  return found;
}

function kindOf(key) {
  return /quiet/i.test(key) ? "quiet hours" : /maint/i.test(key) ? "maintenance" : key;
}

function isMaintenance(window) {
  return !/quiet/i.test(String(window.kind || window.type || "maintenance"));
}

/** Show the windows, each with when it is in force, what it holds and (maintenance) a button to end it. */
export function showWindows(answer, end) {
  const items = windowsOf(answer);
  $("windows-empty").hidden = items.length > 0;
  const keyOf = (w) => `${w.kind || ""}:${w.name || w.channel || ""}`;
  sync($("windows"), items, keyOf, (w) => makeWindow(w, end), $("windows-title"));
}

function makeWindow(first, end) {
  const id = uid("window");
  const name = el("span", { className: "name", id });
  const kind = el("span", { className: "tag" });
  const when = el("span", { className: "left" });
  const scope = el("span");
  const note = el("p", { className: "text" });
  const button = el("button", { type: "button", "aria-describedby": id, text: "End window" });
  let current = first;
  button.addEventListener("click", () => end(current, button));
  const node = el("li", {}, el("div", { className: "line" }, name, kind), el("div", { className: "meta" }, when, scope), note, button);
  return {
    node,
    update(w) {
      current = w;
      setText(name, w.name || w.channel || "window");
      setText(kind, w.kind || w.type || "");
      setText(when, windowTime(w));
      const parts = [listed("categories", w.categories), listed("channels", w.channels || (w.channel ? [w.channel] : []))];
      if (w.by) parts.push(`by ${withNames(w.by)}`);
      setText(scope, parts.filter(Boolean).join(" · "));
      setText(note, w.note || w.windows || w.window || "");
      note.hidden = !note.textContent;
      button.hidden = !isMaintenance(w) || !may("admin");
    },
  };
}

function listed(label, values) {
  return Array.isArray(values) && values.length ? `${label}: ${values.join(", ")}` : "";
}

/** When a window is in force: its own start and end while it is, else its next ones. */
function windowTime(w) {
  const start = seconds(w.start);
  const end = seconds(w.end);
  if (Number.isNaN(start) || Number.isNaN(end)) return "not in force, none to come";
  const now = serverNow();
  const inForce = w.in_force ?? (start <= now && now < end);
  if (inForce) return `in force, ${duration(end - now)} left (ends ${stamp(w.end)})`;
  if (start > now) return `starts in ${duration(start - now)} (${stamp(w.start)}), ends ${stamp(w.end)}`;
  return `ended ${stamp(w.end)}`;
}

// --- open alerts ---

/** Show `GET /v1/alerts`: newest first, each with who acknowledged it and the button to (un)acknowledge. */
export function showAlerts(answer, toggle) {
  const alerts = answer.alerts || [];
  $("alerts-empty").hidden = alerts.length > 0;
  $("alerts-more").hidden = !answer.cursor;
  sync($("alerts"), alerts, (a) => a.dedup_key, (a) => makeAlert(a, toggle), $("alerts-title"));
}

function makeAlert(first, toggle) {
  const id = uid("alert");
  const severity = el("span", { className: "tag" });
  const category = el("span", { className: "name", id });
  const key = el("span", { className: "key" });
  const title = el("p", { className: "title" });
  const text = textBlock();
  const seen = el("span");
  const ack = el("span", { className: "ack" });
  const more = el("span");
  const button = el("button", { type: "button", "aria-describedby": id });
  let current = first;
  button.addEventListener("click", () => toggle(current, button));
  const node = el(
    "li",
    { className: "alert" },
    el("div", { className: "line" }, severity, category, key),
    title,
    text.node,
    el("div", { className: "meta" }, seen, ack, more),
    button,
  );
  return {
    node,
    update(a) {
      current = a;
      setText(severity, a.severity || "");
      severity.className = `tag severity-${/^[a-z]+$/.test(a.severity) ? a.severity : "info"}`;
      setText(category, a.category || "");
      setText(key, a.dedup_key);
      setText(title, a.title || "");
      title.hidden = !a.title;
      text.update(a.text);
      const times = a.seen > 1 ? `seen ${a.seen} times, first ${clock(a.first_seen)}, last` : "seen once,";
      setText(seen, `${times} ${clock(a.last_seen)}`);
      const acked = a.acknowledged_by !== null && a.acknowledged_by !== undefined;
      const via = a.acknowledged_via ? ` (via ${a.acknowledged_via})` : "";
      setText(ack, acked ? `Acknowledged by ${withNames(a.acknowledged_by)}${a.acknowledged_at ? " at " + clock(a.acknowledged_at) : ""}${via}` : "not acknowledged");
      ack.classList.toggle("done", acked);
      const extra = [];
      const steps = Array.isArray(a.escalations) ? a.escalations.length : Number(a.escalations) || 0;
      if (steps) extra.push(`${steps} escalation step${steps === 1 ? "" : "s"} posted`);
      if (a.reopened) extra.push(`reopened ${a.reopened === 1 ? "once" : `${a.reopened} times`}`);
      if (a.held) extra.push("held by a window");
      if (a.channel) extra.push(`in ${named(a.channel)}`);
      setText(more, extra.join(" · "));
      setText(button, acked ? "Unacknowledge" : "Acknowledge");
      button.hidden = !may("ack");
    },
  };
}

// --- drops per category, from the differences between answers of `GET /v1/stats` ---

const WINDOW = 60; // seconds of history the recent drops are counted over
const SHOWN = 20; // categories listed, most recently dropped first
const samples = [];

/** Show per category what was dropped in the last minute (or since the page opened) and in all, and the totals. */
export function showStats(stats) {
  const now = Date.now() / 1000;
  const dropped = Object.fromEntries(Object.entries(stats.by_category || {}).map(([c, v]) => [c, v.dropped || 0]));
  if (samples.length && (stats.dropped || 0) < samples[samples.length - 1].total) samples.length = 0; // counters reset
  samples.push({ at: now, total: stats.dropped || 0, dropped });
  while (samples.length > 2 && samples[1].at <= now - WINDOW) samples.shift();
  const base = samples[0];
  const since = now - base.at >= WINDOW - 1 ? "in the last minute" : `since ${clock(base.at)}`;
  const rows = Object.entries(dropped)
    .filter(([, total]) => total > 0)
    .map(([category, total]) => ({ category, total, recent: total - (base.dropped[category] || 0) }))
    .sort((a, b) => b.recent - a.recent || b.total - a.total || a.category.localeCompare(b.category))
    .slice(0, SHOWN);
  setText($("drops-since"), `${(stats.dropped || 0) - base.total} dropped ${since}; per category, recent and in all:`);
  $("drops-empty").hidden = rows.length > 0;
  const make = () => {
    const name = el("span", { className: "name" });
    const count = el("span", { className: "count" });
    const update = (r) => (setText(name, r.category), setText(count, `${r.recent} ${since}, ${r.total} in all`));
    return { node: el("li", {}, name, count), update };
  };
  sync($("drops"), rows, (r) => r.category, make);
  showTotals(stats);
}

function showTotals(stats) {
  // Drops by the level that refused them, every level of the tree in its order.
  const by = Object.entries(stats.dropped_by_limit || {}).map(([level, n]) => `${level} ${n}`);
  const rows = [
    ["accepted", stats.accepted],
    ["dropped", `${stats.dropped ?? 0} (${by.join(", ")})`],
    ["duplicates", stats.duplicates],
    ["delivered", stats.delivered],
    ["dead-lettered", stats.dead_lettered],
  ].filter(([, v]) => v !== undefined);
  const make = () => {
    const term = el("dt");
    const value = el("dd");
    const node = el("div", {}, term, value);
    return { node, update: ([t, v]) => (setText(term, t), setText(value, v)) };
  };
  sync($("totals"), rows, ([t]) => t, make);
}

// --- dead letters ---

/** Show `GET /v1/dead`: each with its reason and a button to requeue it; a button to requeue all. */
export function showDead(answer, requeue) {
  const entries = answer.entries || [];
  const count = answer.count ?? entries.length;
  setText($("dead-count"), `${count} dead letter${count === 1 ? "" : "s"}${entries.length < (answer.count ?? 0) ? `, the oldest ${entries.length} shown` : ""}`);
  $("requeue-all").hidden = entries.length === 0 || !may("admin");
  sync($("dead"), entries, (d) => d.dead_id || d.id, (d) => makeDead(d, requeue), $("dead-title"));
}

function makeDead(first, requeue) {
  const id = uid("dead");
  const name = el("span", { className: "name", id });
  const where = el("span");
  const reason = el("span", { className: "reason" });
  const when = el("span");
  const text = textBlock();
  const button = el("button", { type: "button", "aria-describedby": id, text: "Requeue" });
  let current = first;
  button.addEventListener("click", () => requeue(current, button));
  const node = el("li", {}, el("div", { className: "line" }, name, where), el("div", { className: "meta" }, reason, when), text.node, button);
  return {
    node,
    update(d) {
      current = d;
      setText(name, d.id);
      setText(where, [d.category, d.channel].filter(Boolean).join(" → "));
      setText(reason, d.reason || "");
      setText(when, d.dead_at_ms ? `since ${stamp(d.dead_at_ms / 1000)}` : "");
      text.update(d.text);
      button.hidden = !may("admin");
    },
  };
}
