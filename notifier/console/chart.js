// The last hour, minute by minute: events admitted and dropped, fleet-wide, for the whole tree or
// one level value (`GET /v1/stats/history`), drawn by uPlot (uPlot.iife.min.js, served by the
// gateway like every file of the console; it sets styles through the CSSOM, which the page's
// Content-Security-Policy allows, and draws on a canvas). The numbers are also given as text.

import { clock, el, setText, sync } from "./dom.js";

const $ = (id) => document.getElementById(id);
const HEIGHT = 220; // pixels of the plot
const SEP = "\u0000"; // between a level's name and its value in the selector's option values

let plot = null;
let latest = [null, null, null]; // the current minute's values: the legend's when no minute is pointed at

/** The route to read for the level value chosen (the whole tree when none). */
export function historyPath() {
  const chosen = $("history-level").value;
  if (!chosen) return "/v1/stats/history";
  const [level, value] = chosen.split(SEP);
  return `/v1/stats/history?level=${encodeURIComponent(level)}&value=${encodeURIComponent(value)}`;
}

/** Offer every value of every level below the root that `GET /v1/stats` names in `by_level`. */
export function showLevels(byLevel) {
  const items = [{ id: "", label: "The whole tree" }];
  for (const [level, values] of Object.entries(byLevel || {})) {
    for (const value of Object.keys(values).sort()) items.push({ id: `${level}${SEP}${value}`, label: `${level} ${value}` });
  }
  const chosen = $("history-level").value;
  if (!items.some((item) => item.id === chosen)) items.push({ id: chosen, label: chosen.split(SEP).join(" ") });
  const make = (item) => {
    const node = el("option", { value: item.id });
    return { node, update: (current) => setText(node, current.label) };
  };
  sync($("history-level"), items, (item) => item.id, make);
  $("history-level").value = chosen; // sync may have moved it: the choice stays
}

/** Call `changed` when the operator picks another level value. */
export function onLevelChange(changed) {
  $("history-level").addEventListener("change", changed);
  $("history-form").addEventListener("submit", (event) => event.preventDefault());
}

/** Draw an answer of `GET /v1/stats/history` (one for the level value chosen now; an older one is skipped). */
export function showHistory(answer) {
  if (`/v1/stats/history${query(answer)}` !== historyPath()) return;
  const minutes = answer.minutes || [];
  const data = [minutes.map((m) => m.at), minutes.map((m) => m.admitted), minutes.map((m) => m.dropped)];
  latest = [answer.now, data[1].at(-1) ?? null, data[2].at(-1) ?? null];
  summarize(answer, minutes);
  const box = $("history-chart");
  if (!plot) {
    plot = new globalThis.uPlot(options(width(box)), data, box);
    new ResizeObserver(() => plot.setSize({ width: width(box), height: HEIGHT })).observe(box);
  } else plot.setData(data);
  plot.setLegend();
}

function query(answer) {
  if (answer.level === null || answer.level === undefined) return "";
  return `?level=${encodeURIComponent(answer.level)}&value=${encodeURIComponent(answer.value)}`;
}

function summarize(answer, minutes) {
  const sum = (key) => minutes.reduce((total, m) => total + (m[key] || 0), 0);
  const unknown = minutes.filter((m) => m.admitted === null).length;
  const what = answer.level ? `${answer.level} ${answer.value}` : "the whole tree";
  const gaps = unknown ? ` (${unknown} minute${unknown === 1 ? "" : "s"} not recorded)` : "";
  setText($("history-summary"), `Last hour, ${what}: ${sum("admitted")} admitted, ${sum("dropped")} dropped${gaps}.`);
}

function width(box) {
  return Math.max(200, box.clientWidth);
}

function colour(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

// A series' legend value: the minute pointed at, else the current minute's; "unknown" for a gap.
const shown = (u, value, series, index) => {
  const v = index === null || index === undefined ? latest[series] : value;
  return v === null || v === undefined ? "unknown" : String(v);
};

/** `HH:MM` in UTC, from unix seconds: the time axis's labels. */
const minuteOf = (seconds) => new Date(seconds * 1000).toISOString().slice(11, 16);

function options(plotWidth) {
  const muted = colour("--muted", "#57606a");
  const line = colour("--line", "#d0d7de");
  const axis = { stroke: muted, grid: { stroke: line, width: 1 }, ticks: { stroke: line, width: 1 } };
  return {
    width: plotWidth,
    height: HEIGHT,
    tzDate: (seconds) => globalThis.uPlot.tzDate(new Date(seconds * 1000), "Etc/UTC"), // the console's times are UTC
    scales: { y: { range: (u, min, max) => [0, Math.max(4, max * 1.1)] } },
    series: [
      { label: "minute", value: (u, at, s, index) => (index === null || index === undefined ? `now, ${clock(latest[0])}` : clock(at)) },
      { label: "admitted", stroke: colour("--ok", "#1a7f37"), width: 2, fill: "rgba(26, 127, 55, 0.08)", value: shown },
      { label: "dropped", stroke: colour("--bad", "#b42318"), width: 2, fill: "rgba(180, 35, 24, 0.08)", value: shown },
    ],
    axes: [{ ...axis, values: (u, splits) => splits.map(minuteOf) }, { ...axis, size: 48 }],
    cursor: { drag: { x: false, y: false } },
  };
}
