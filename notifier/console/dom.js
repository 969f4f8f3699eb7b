// Small DOM helpers. Every piece of text from the gateway goes in as textContent, never as
// markup; lists are updated in place, keyed, so a focused button survives a refresh.

/** An element with attributes (properties where the name is one) and children (strings become text). */
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name === "className") node.className = value;
    else if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children) node.append(child);
  return node;
}

/** Set an element's text only when it changed (no needless work for screen readers). */
export function setText(node, value) {
  const text = String(value ?? "");
  if (node.textContent !== text) node.textContent = text;
}

const updaters = new WeakMap();

/**
 * Make the children of `list` show `items`, in order: an existing child (same key) is
 * updated in place, a new one made with `make(item)`, which returns the node and an
 * `update(item)` function; children whose key is gone are removed. Focus that was in a
 * removed child goes to `fallback` (the panel's heading), so the keyboard user is not lost.
 */
export function sync(list, items, keyOf, make, fallback) {
  const existing = new Map();
  for (const child of list.children) existing.set(child.dataset.key, child);
  let previous = null;
  for (const item of items) {
    const key = String(keyOf(item));
    let node = existing.get(key);
    if (node) existing.delete(key);
    else {
      const made = make(item);
      node = made.node;
      node.dataset.key = key;
      updaters.set(node, made.update);
    }
    updaters.get(node)(item);
    const wanted = previous ? previous.nextSibling : list.firstChild;
    if (node !== wanted) list.insertBefore(node, wanted);
    previous = node;
  }
  for (const gone of existing.values()) {
    const hadFocus = gone.contains(document.activeElement);
    gone.remove();
    if (hadFocus && fallback) fallback.focus();
  }
}

/** A bar like `notifier status`: the share of `limit` in use (drawn only; the numbers are text). */
export function bar() {
  const fill = el("span", { className: "fill" });
  const node = el("span", { className: "bar", "aria-hidden": "true" }, fill);
  return {
    node,
    update(used, limit) {
      const share = limit > 0 ? Math.min(1, used / limit) : 1;
      // CSSOM, not a style attribute: allowed by the page's Content-Security-Policy.
      fill.style.width = `${(share * 100).toFixed(1)}%`;
      node.classList.toggle("full", used >= limit);
    },
  };
}

const LONG = 400; // characters of event text shown before "Show all"

/** Event text, as text; a long one folded to a few lines with a button that unfolds it. */
export function textBlock() {
  const text = el("p", { className: "text" });
  const more = el("button", { type: "button", className: "more", text: "Show all" });
  more.addEventListener("click", () => {
    const folded = text.classList.toggle("folded");
    more.textContent = folded ? "Show all" : "Show less";
  });
  const node = el("div", { className: "text-block" }, text, more);
  return {
    node,
    update(value) {
      const changed = text.textContent !== (value || "");
      setText(text, value || "");
      node.hidden = !value;
      more.hidden = text.textContent.length <= LONG;
      if (changed) {
        text.classList.toggle("folded", !more.hidden);
        more.textContent = "Show all";
      }
    },
  };
}

/** A short human duration: `now`, `12s`, `4m 10s`, `2h 5m`, `3d 4h`. */
export function duration(seconds) {
  if (!(seconds > 0)) return "now";
  const s = Math.ceil(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

/** A time of day in UTC, `HH:MM:SS UTC`, from unix seconds (or an ISO 8601 text). */
export function clock(when) {
  const ms = typeof when === "number" ? when * 1000 : Date.parse(when);
  if (Number.isNaN(ms)) return String(when);
  return new Date(ms).toISOString().slice(11, 19) + " UTC";
}

/** A date and time in UTC, `YYYY-MM-DD HH:MM UTC`. */
export function stamp(when) {
  const ms = typeof when === "number" ? when * 1000 : Date.parse(when);
  if (Number.isNaN(ms)) return String(when);
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

/** Unix seconds of a number or an ISO 8601 text; NaN when neither. */
export function seconds(when) {
  if (typeof when === "number") return when;
  return typeof when === "string" ? Date.parse(when) / 1000 : NaN;
}
