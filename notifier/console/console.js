// The console: reads the gateway's JSON routes every second and acts through them, like any
// client (the same routes and token checks as `notifier status`, `mute` and the API).

import {
  Refused,
  Unreachable,
  call,
  currentCaller,
  forgetToken,
  identify,
  may,
  mayReadContent,
  routes,
  segment,
  serverNow,
  setToken,
  token,
  tokenRequired,
} from "./api.js";
import { AUDIT_PATH, showAudit } from "./audit.js";
import * as chart from "./chart.js";
import { clock, setText } from "./dom.js";
import { lookUp } from "./names.js";
import * as panels from "./panels.js";

const EVERY = 1000; // ms between two reads: changes show within 2 s
const HIDDEN_EVERY = 10000; // while the tab is hidden: a forgotten tab costs the gateway little
const $ = (id) => document.getElementById(id);

// --- reading: every panel from its route ---

// Category names each answer names, and the tree's level values, for the forms' lists.
const known = { limits: [], stats: [], levels: [] };

function showKnown() {
  panels.showKnownCategories([...new Set([...known.limits, ...known.stats])].sort(), known.levels);
}

/** The path of an override: `level=value` is `/v1/limits/level/value`; a name alone, the root or a category. */
function overridePath(name) {
  const at = name.indexOf("=");
  if (at < 1) return `/v1/limits/${segment(name)}`;
  return `/v1/limits/${segment(name.slice(0, at))}/${segment(name.slice(at + 1))}`;
}

const READS = [
  {
    path: "/v1/limits",
    show(answer) {
      panels.showLimits(answer);
      panels.showOverrides(answer.overrides, lift);
      known.limits = Object.keys(answer.categories || {});
      known.levels = panels.treeOf(answer).map((item) => item.name);
      showKnown();
    },
  },
  {
    path: "/v1/stats",
    show(answer) {
      panels.showStats(answer);
      chart.showLevels(answer.by_level);
      known.stats = Object.keys(answer.by_category || {}).filter((c) => c !== "(other)");
      showKnown();
    },
  },
  { path: "/v1/windows", panel: "windows-panel", show: (answer) => panels.showWindows(answer, endWindow) },
  { path: "/v1/alerts", panel: "alerts-panel", content: true, show: (answer) => panels.showAlerts(answer, toggleAck) },
  { path: "/v1/dead", panel: "dead-panel", content: true, show: (answer) => panels.showDead(answer, requeue) },
  { path: "/v1/stats/history", url: chart.historyPath, panel: "history-panel", content: true, show: chart.showHistory },
  { path: "/v1/audit", url: () => AUDIT_PATH, panel: "audit-panel", content: true, show: showAudit },
];

function available(read) {
  return !read.panel || !$(read.panel).dataset.route || routes.has(read.path);
}

async function read(one) {
  let answer;
  try {
    answer = await call("GET", one.url ? one.url() : one.path);
  } catch (error) {
    if (error instanceof Refused && error.status === 401) askForToken("The gateway refused the token (401): enter it again.");
    throw error;
  }
  try {
    one.show(answer);
  } catch (error) {
    throw new Unshown(one.path, error);
  }
}

/** An answer the console could not show: a fault of the console, reported once in the browser's console. */
class Unshown extends Error {
  constructor(path, cause) {
    super(`could not show ${path}: ${cause}`);
    if (!reported.has(this.message)) console.error(this.message, cause);
    reported.add(this.message);
  }
}

const reported = new Set();

async function refresh() {
  if (tokenRequired && token() && currentCaller() === null) await identifyToken();
  const due = READS.filter((r) => available(r) && (!r.content || mayReadContent()));
  const results = await Promise.allSettled(due.map(read));
  // Names of the Slack users and channels shown (asked of Slack once); without them, ids alone.
  if (mayReadContent() && routes.has("/v1/names")) await lookUp().catch(() => {});
  const failures = results.filter((r) => r.status === "rejected").map((r) => r.reason);
  showStatus(failures);
}

function showStatus(failures) {
  const unreachable = failures.find((f) => f instanceof Unreachable);
  const refused = failures.find((f) => f instanceof Refused && f.status !== 401);
  const unshown = failures.find((f) => f instanceof Unshown);
  const status = unreachable
    ? "Gateway unreachable: retrying every second."
    : refused
      ? `The gateway answered ${refused.message}: retrying every second.`
      : unshown
        ? `The console ${unshown.message}.`
        : "Live: follows the gateway every second.";
  const bad = Boolean(unreachable || refused || unshown);
  setText($("status"), status);
  $("status").classList.toggle("bad", bad);
  if (!bad) setText($("updated"), `updated ${clock(serverNow())}`);
}

// One read at a time; an action asks for the next one at once.
let timer = 0;
let running = false;
let again = false;

async function tick() {
  if (running) {
    again = true;
    return;
  }
  running = true;
  clearTimeout(timer);
  try {
    await refresh();
  } finally {
    running = false;
  }
  if (again) {
    again = false;
    tick();
  } else timer = setTimeout(tick, document.hidden ? HIDDEN_EVERY : EVERY);
}

// --- the token: asked for once, kept in sessionStorage for this tab only ---

function askForToken(reason, focus = false) {
  forgetToken();
  $("token-form").hidden = false;
  say($("token-note"), reason, true);
  showLocks();
  if (focus) $("token").focus();
}

const ABLE = {
  send: "send events",
  read: "read alerts and dead letters",
  ack: "acknowledge alerts",
  admin: "change limits and windows and requeue dead letters",
};

/** Learn who the token in use is (`GET /v1/token`), then offer only what it may do. */
async function identifyToken() {
  try {
    const who = await identify();
    if (who) {
      const able = (who.scopes || []).map((scope) => ABLE[scope] || scope);
      say($("token-note"), `Token ${who.name}: may ${able.length ? able.join(", ") : "nothing but read counts"}.`);
    }
  } catch (error) {
    if (error instanceof Refused && error.status === 401) askForToken("The gateway does not know this token (401): enter it again.", true);
    else if (!(error instanceof Unreachable || error instanceof Refused)) throw error; // else asked again with the next read
  }
  showLocks();
}

/** Offer an action only when the token in use may do it (a form, button or panel names its scope). */
function showScopes() {
  for (const node of document.querySelectorAll("[data-scope]")) node.hidden = !may(node.dataset.scope);
}

function showLocks() {
  showScopes();
  const open = mayReadContent();
  const who = currentCaller();
  for (const panel of document.querySelectorAll("section")) {
    const locked = panel.querySelector(".locked");
    if (!locked) continue;
    locked.dataset.ask ??= locked.textContent;
    locked.textContent = who && !open ? `Token ${who.name} lacks scope read: it may not see event content.` : locked.dataset.ask;
    locked.hidden = open;
    panel.classList.toggle("is-locked", !open);
  }
  if (!open) {
    panels.showAlerts({ alerts: [] }, toggleAck);
    panels.showDead({ entries: [], count: 0 }, requeue);
  }
}

function setUpToken() {
  const form = $("token-form");
  form.hidden = !tokenRequired;
  if (tokenRequired) {
    say($("token-note"), token() ? "A token is in use in this tab." : "Counts show without a token; event content and actions need it.");
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const value = $("token").value.trim();
    if (!value) return;
    setToken(value);
    $("token").value = "";
    say($("token-note"), "Token in use in this tab.");
    showLocks();
    tick(); // learns who the token is first
  });
  $("forget-token").addEventListener("click", () => {
    forgetToken();
    say($("token-note"), "Token forgotten.");
    showLocks();
  });
  showLocks();
}

// --- acting: each action is one call of a route, then a read at once ---

function say(note, text, bad = false) {
  note.textContent = text;
  note.classList.toggle("bad", bad);
}

async function act(note, work, done) {
  say(note, "Working…");
  try {
    say(note, done(await work()));
  } catch (error) {
    if (error instanceof Refused && error.status === 401) {
      say(note, "Refused: this needs the API token (401).", true);
      askForToken("The gateway asks for the API token (401): enter it, then try again.", true);
    } else if (error instanceof Refused) say(note, `Refused: ${error.message}`, true);
    else if (error instanceof Unreachable) say(note, "The gateway is unreachable: nothing was changed.", true);
    else throw error;
  } finally {
    tick();
  }
}

const until = (answer) => (answer.until ? `until ${clock(answer.until)}` : "until restored");

function mute(event) {
  event.preventDefault();
  const form = event.target;
  const category = form.category.value.trim();
  const length = form.duration.value.trim();
  act(
    form.querySelector(".note"),
    () => call("PUT", `/v1/limits/${segment(category)}`, { rules: `0/${length}`, for: length }),
    (answer) => `Muted ${answer.level} ${until(answer)}.`,
  );
}

function override(event) {
  event.preventDefault();
  const form = event.target;
  const body = { rules: form.rules.value.trim() };
  if (form.for.value.trim()) body.for = form.for.value.trim();
  act(
    form.querySelector(".note"),
    () => call("PUT", overridePath(form.level.value.trim()), body),
    (answer) => `${answer.level} now ${answer.rules} ${until(answer)}.`,
  );
}

function lift(o) {
  const muted = panels.isMute(o);
  act(
    $("overrides-note"),
    () => call("DELETE", overridePath(o.level)),
    (answer) => (muted ? `Unmuted ${answer.level}: ${answer.rules} again.` : `Restored ${answer.level} to ${answer.rules}.`),
  );
}

const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/;
const UNIT = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 };

function openWindow(event) {
  event.preventDefault();
  const form = event.target;
  const note = form.querySelector(".note");
  const length = DURATION.exec(form.for.value);
  if (!length || !(Number(length[1]) > 0)) return say(note, "For: a duration such as 30m or 2h.", true);
  const names = (field) => field.value.split(",").map((v) => v.trim()).filter(Boolean);
  const body = {
    end: Math.round((serverNow() + Number(length[1]) * UNIT[length[2] || "s"]) * 1000) / 1000,
    categories: names(form.categories),
    channels: names(form.channels),
  };
  if (form.note.value.trim()) body.note = form.note.value.trim();
  const name = form.name.value.trim();
  act(note, () => call("PUT", `/v1/windows/${segment(name)}`, body), () => `Window ${name} open until ${clock(body.end)}.`);
}

function endWindow(w) {
  const note = $("window-form").querySelector(".note");
  act(note, () => call("DELETE", `/v1/windows/${segment(w.name)}`), () => `Window ${w.name} ended.`);
}

function toggleAck(alert) {
  const path = `/v1/alerts/${segment(alert.dedup_key)}/ack`;
  const acked = alert.acknowledged_by !== null && alert.acknowledged_by !== undefined;
  const by = $("ack-by").value.trim();
  act(
    $("alerts-note"),
    () => (acked ? call("DELETE", path) : call("POST", path, by ? { by, via: "console" } : { via: "console" })),
    (answer) =>
      answer.acknowledged_by ? `Acknowledged by ${answer.acknowledged_by}.` : `${alert.dedup_key} is no longer acknowledged.`,
  );
}

function requeue(entry) {
  act($("dead-note"), () => call("POST", "/v1/dead/requeue", { ids: [entry.id] }), (a) => `Requeued ${a.count}.`);
}

function requeueAll() {
  act($("dead-note"), () => call("POST", "/v1/dead/requeue"), (a) => `Requeued ${a.count}.`);
}

// --- start ---

function setUpPanels() {
  for (const panel of document.querySelectorAll("section[data-route]")) {
    const absent = !routes.has(panel.dataset.route);
    panel.classList.toggle("is-absent", absent);
    panel.querySelector(".unavailable").hidden = !absent;
  }
  $("mute-form").addEventListener("submit", mute);
  $("override-form").addEventListener("submit", override);
  $("window-form").addEventListener("submit", openWindow);
  $("ack-form").addEventListener("submit", (event) => event.preventDefault());
  $("requeue-all").addEventListener("click", requeueAll);
  chart.onLevelChange(() => tick()); // the level value chosen now, at once
}

setUpPanels();
setUpToken();
document.addEventListener("visibilitychange", () => document.hidden || tick()); // shown again: read at once
tick();
