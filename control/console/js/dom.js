// Small DOM helpers shared by every page: element builders, formatting, the error banner.

const SVG_NS = 'http://www.w3.org/2000/svg';

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && !(el instanceof SVGElement) && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

/** An HTML element: h('a', {href: '#/x', class: 'btn'}, 'text', child, [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** An SVG element, same calling convention as h(). */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** A timestamp as local date and time, '' for none. */
export function when(ts) {
  if (!ts) return '';
  const d = new Date(ts);
  return isNaN(d.getTime()) ? String(ts) : d.toLocaleString();
}

/** Milliseconds as seconds with one decimal ('' for null). */
export function ms(v) {
  return v === null || v === undefined ? '' : `${(v / 1000).toFixed(1)} s`;
}

/** Any JSON value as short text for a table cell. */
export function text(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/**
 * Shows an error in the page's banner: an API error with its envelope's message and
 * code, anything else with its message. Every failure of the console ends here.
 */
export function showError(err, where) {
  const banner = document.getElementById('banner');
  if (!banner) return;
  const msg = err && err.message ? err.message : String(err);
  const code = err && err.error ? ` (${err.error}${err.status ? `, ${err.status}` : ''})` : '';
  clear(banner);
  banner.className = 'banner error';
  append(banner, [h('span', {class: 'banner-text'}, (where ? `${where}: ` : '') + msg + code),
    h('button', {class: 'link', type: 'button', onclick: hideBanner, 'aria-label': 'dismiss'}, '×')]);
  banner.hidden = false;
}

/** A short confirmation in the banner. */
export function showNote(msg) {
  const banner = document.getElementById('banner');
  if (!banner) return;
  clear(banner);
  banner.className = 'banner note';
  append(banner, [h('span', {class: 'banner-text'}, msg)]);
  banner.hidden = false;
}

export function hideBanner() {
  const banner = document.getElementById('banner');
  if (banner) banner.hidden = true;
}

/** Runs an async action from a button, showing its failure; the button is disabled meanwhile. */
export function action(button, label, fn) {
  return async (ev) => {
    if (ev) ev.preventDefault();
    if (button) button.disabled = true;
    try {
      await fn();
    } catch (e) {
      showError(e, label);
    } finally {
      if (button) button.disabled = false;
    }
  };
}
