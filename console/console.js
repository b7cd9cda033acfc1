// The Hourglass web console: one page whose views (#/..., below) read the
// broker's JSON API under /api/v1/ (api/admin_http.h). Plain JavaScript,
// no build step; Chart.js (Debian's libjs-chart.js) draws the schedule.
//
// With tokens on, the API answers 401 until the page sends a token with
// the admin role: the page then shows the sign-in form and no data, keeps
// the token it is given in sessionStorage (this tab only) and sends it as
// "Authorization: Bearer <token>".
'use strict';

const TOKEN_KEY = 'hourglass.token';
const REFRESH_MS = 2000;
const STATES = ['SCHEDULED', 'READY', 'IN_FLIGHT', 'DEAD'];
// The largest payload preview the API gives: the whole payload by default.
const PREVIEW_BYTES = 1 << 20;

// ---- Small helpers.

// An element with attributes (on* are listeners) and children.
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else node.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function $(selector) { return document.querySelector(selector); }

// "12,345" for a count the API gives as a string (uint64) or number.
function count(value) { return Number(value || 0).toLocaleString('en-US'); }

function rate(value) { return Number(value || 0).toFixed(1); }

// "12 ms" for a JSON Duration ("0.012s").
function millis(duration) {
  const seconds = parseFloat(duration || '0s');
  return `${Math.round(seconds * 1000).toLocaleString('en-US')} ms`;
}

// "2026-11-26 19:20:00.123Z" for a JSON Timestamp.
function time(timestamp) {
  if (!timestamp) return '';
  return timestamp.replace('T', ' ');
}

function topicLink(topic) {
  return el('a', {href: `#/topic/${encodeURIComponent(topic)}`}, topic);
}

function messageLink(topic, id) {
  return el('a', {
    href: `#/message/${encodeURIComponent(topic)}/${encodeURIComponent(id)}`,
  }, id);
}

function cell(field, text, numeric = false) {
  return el('td', {dataset: {field}, class: numeric ? 'num' : undefined}, text);
}

function table(id, headings, rows, emptyText) {
  const head = el('tr', {}, headings.map(
      ([text, numeric]) => el('th', {class: numeric ? 'num' : undefined}, text)));
  const body = rows.length > 0 ? rows :
      [el('tr', {class: 'empty'}, el('td', {colspan: headings.length}, emptyText))];
  return el('table', {id}, el('thead', {}, head), el('tbody', {}, body));
}

// Puts `fresh` in the place of `old`; but when both show the same cells
// (by row key and field), only the text of the cells that changed, so that
// a live refresh keeps the elements that a reader (or a test) holds.
function refreshInPlace(old, fresh) {
  const cellsOf = (node) => Array.from(node.querySelectorAll('[data-field]'));
  const key = (c) => {
    const row = c.closest('[data-topic], [data-group], [data-id], [data-node], [data-shard]');
    return `${row ? JSON.stringify(row.dataset) : ''}/${c.dataset.field}`;
  };
  const before = cellsOf(old);
  const after = cellsOf(fresh);
  if (before.length !== after.length || before.length === 0 ||
      before.some((c, i) => key(c) !== key(after[i]))) {
    old.replaceWith(fresh);
    return;
  }
  before.forEach((c, i) => {
    if (c.textContent !== after[i].textContent) c.textContent = after[i].textContent;
  });
}

function notify(text, isError = false) {
  const notice = $('#notice');
  notice.textContent = text;
  notice.className = isError ? 'error' : '';
  notice.hidden = false;
}

// ---- The API.

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// Signals that the view must stop: the sign-in form is showing.
class SignInNeeded extends Error {}

// Calls the JSON API: the answer's JSON, or throws ApiError. A 401 or 403
// shows the sign-in form (and throws SignInNeeded).
async function api(method, path, body) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers['Authorization'] = `Bearer ${token}`;
  const init = {method, headers};
  // A request that changes something is JSON, body or not: the broker
  // refuses any other (no other page can send JSON here unasked).
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body === undefined ? {} : body);
  }
  const response = await fetch(`/api/v1/${path}`, init);
  const json = await response.json().catch(() => ({}));
  if (response.status === 401 || response.status === 403) {
    showSignIn(response.status === 401 && !token ? '' :
        `${response.status === 401 ? 'Refused' : 'Not an admin token'}: ${json.message}`);
    throw new SignInNeeded();
  }
  if (!response.ok) {
    throw new ApiError(response.status, json.code, json.message || response.statusText);
  }
  return json;
}

function topicPath(topic, ...rest) {
  return ['topics', encodeURIComponent(topic), ...rest].join('/');
}

// ---- Sign-in.

function showSignIn(error) {
  stopRefresh();
  $('#view').replaceChildren();
  $('#broker-info').textContent = '';
  $('#notice').hidden = true;
  $('#login').hidden = false;
  $('#login-error').textContent = error;
  $('#token-input').focus();
}

function setUpSignIn() {
  $('#login-form').addEventListener('submit', (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('#token-input').value.trim());
    $('#token-input').value = '';
    route();
  });
  $('#forget-token').addEventListener('click', () => {
    sessionStorage.removeItem(TOKEN_KEY);
    clusterMode = null;
    $('#nav-cluster').hidden = true;
    route();
  });
}

// ---- Confirmation.

// Resolves to whether the operator confirmed `text`.
function confirmAction(text) {
  const dialog = $('#confirm');
  $('#confirm-text').textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'yes'),
                            {once: true});
    dialog.showModal();
  });
}

// Asks to confirm `question`, runs `action` and reports `done(answer)` or
// the error; then shows the view `next` (a hash; default: this one again).
async function act(question, action, done, next) {
  $('#notice').hidden = true;
  if (!await confirmAction(question)) {
    notify('Nothing done.');
    return;
  }
  try {
    notify(done(await action()));
    // Without a hashchange event, which would clear the notice.
    if (next) history.replaceState(null, '', next);
  } catch (error) {
    if (error instanceof SignInNeeded) return;
    notify(`Failed: ${error.message}`, true);
  }
  await render();
}

// ---- Live refresh.

let refreshTimer = null;

function startRefresh(fn) {
  stopRefresh();
  refreshTimer = setInterval(() => fn().catch(() => {}), REFRESH_MS);
}

function stopRefresh() {
  if (refreshTimer !== null) clearInterval(refreshTimer);
  refreshTimer = null;
}

// ---- Views.

async function brokerInfo(stats) {
  const serving = stats.serving ? 'serving' : `NOT serving: ${stats.notServingReason}`;
  $('#broker-info').textContent =
      `hourglassd ${stats.version} · store ${stats.storeId} · ${serving}`;
  $('#forget-token').hidden = !sessionStorage.getItem(TOKEN_KEY);
}

function topicRow(t) {
  return el('tr', {dataset: {topic: t.topic}},
      el('td', {}, topicLink(t.topic)),
      cell('scheduled', count(t.scheduled), true),
      cell('ready', count(t.ready), true),
      cell('inFlight', count(t.inFlight), true),
      cell('deadLettered', count(t.deadLettered), true),
      cell('publishRate', rate(t.publishRate), true),
      cell('deliveryRate', rate(t.deliveryRate), true),
      cell('latenessP50', millis(t.lateness && t.lateness.p50), true),
      cell('latenessP99', millis(t.lateness && t.lateness.p99), true),
      cell('groups', count((t.groups || []).length), true));
}

async function overview() {
  const view = $('#view');
  const stats = await api('GET', 'stats');
  brokerInfo(stats);
  const topics = (s) => table(
      'topics', [['Topic'], ['Scheduled', 1], ['Ready', 1], ['In flight', 1], ['Dead', 1],
                 ['Published/s', 1], ['Delivered/s', 1], ['Lateness p50', 1], ['p99', 1],
                 ['Groups', 1]],
      s.topics.map(topicRow), 'No topics yet.');
  const updated = () => `Updated ${new Date().toISOString()}`;
  view.replaceChildren(
      el('h1', {}, 'Topics'),
      el('p', {class: 'muted'}, `Live: refreshed every ${REFRESH_MS / 1000} s. `,
         el('span', {id: 'updated'}, updated())),
      topics(stats));
  startRefresh(async () => {
    const s = await api('GET', 'stats');
    refreshInPlace($('#topics'), topics(s));
    $('#updated').textContent = updated();
  });
}

// Range choices of the schedule chart, from now.
const RANGES = {'1h': 3600, '6h': 6 * 3600, '24h': 86400, '7d': 7 * 86400,
                '30d': 30 * 86400, '365d': 365 * 86400};
const BUCKETS = {'1m': 60, '5m': 300, '1h': 3600, '1d': 86400, '7d': 7 * 86400};

let scheduleChart = null;

async function drawSchedule(topic) {
  const status = $('#schedule-status');
  const range = RANGES[$('#schedule-range').value];
  const bucket = BUCKETS[$('#schedule-bucket').value];
  if (range / bucket > 2000) {
    status.textContent = 'Too many buckets: choose a larger bucket or a shorter range.';
    return;
  }
  const from = new Date(Math.floor(Date.now() / 1000 / bucket) * bucket * 1000);
  const to = new Date(from.getTime() + range * 1000);
  const query = new URLSearchParams({from: from.toISOString(), to: to.toISOString(),
                                     bucket: `${bucket}s`});
  let answer;
  try {
    answer = await api('GET', `${topicPath(topic, 'schedule')}?${query}`);
  } catch (error) {
    if (error instanceof SignInNeeded) throw error;
    status.textContent = `No schedule: ${error.message}`;
    status.className = 'error';
    return;
  }
  const buckets = answer.buckets || [];
  // What the chart shows, for readers of the page (and its tests).
  Object.assign(status.dataset, {from: from.toISOString(), to: to.toISOString(),
                                 bucket: `${bucket}s`, total: answer.total});
  // "2026-11-27" for day buckets, "11-27 14:00" for shorter ones (UTC).
  const labels = buckets.map((b) => bucket >= 86400 ? b.start.slice(0, 10) :
      `${b.start.slice(5, 10)} ${b.start.slice(11, 16)}`);
  const counts = buckets.map((b) => Number(b.count || 0));
  status.className = 'muted';
  status.textContent = `${count(answer.total)} messages due from ${time(from.toISOString())} ` +
      `to ${time(to.toISOString())}, in ${buckets.length} buckets of ` +
      `${$('#schedule-bucket').value}.`;
  $('#schedule-table').replaceChildren(
      table('schedule-buckets', [['Bucket start'], ['Due', 1]],
            buckets.filter((b) => Number(b.count || 0) > 0).map((b) =>
                el('tr', {dataset: {start: b.start}}, cell('start', time(b.start)),
                   cell('count', count(b.count), true))),
            'Nothing due in this range.'));
  if (scheduleChart) scheduleChart.destroy();
  scheduleChart = new Chart($('#schedule-chart'), {
    type: 'bar',
    data: {labels, datasets: [{label: 'messages due', data: counts,
                               backgroundColor: '#2f5bd3'}]},
    options: {animation: false, maintainAspectRatio: false,
              plugins: {legend: {display: false}},
              scales: {y: {beginAtZero: true, ticks: {precision: 0}}}},
  });
}

function countCards(t) {
  const card = (field, label, value) => el('div', {class: 'card'},
      el('div', {class: 'label'}, label), el('div', {class: 'value', dataset: {field}}, value));
  return el('div', {class: 'cards', id: 'topic-counts'},
      card('scheduled', 'Scheduled', count(t.scheduled)),
      card('ready', 'Ready', count(t.ready)),
      card('inFlight', 'In flight', count(t.inFlight)),
      card('deadLettered', 'Dead letters', count(t.deadLettered)),
      card('publishRate', 'Published/s', rate(t.publishRate)),
      card('deliveryRate', 'Delivered/s', rate(t.deliveryRate)),
      card('latenessP99', 'Lateness p99', millis(t.lateness && t.lateness.p99)));
}

function groupsTable(t) {
  return table('groups', [['Group'], ['Consumers', 1], ['Ready', 1], ['In flight', 1],
                          ['Acks/s', 1]],
      (t.groups || []).map((g) => el('tr', {dataset: {group: g.group}},
          cell('group', g.group), cell('consumers', count(g.consumers), true),
          cell('ready', count(g.ready), true), cell('inFlight', count(g.inFlight), true),
          cell('ackRate', rate(g.ackRate), true))),
      'No consumer groups.');
}

function redrive(topic, ids, next) {
  const what = ids.length === 0 ? `every dead letter of ${topic}` :
      `dead letter ${ids[0]} of ${topic}`;
  return act(`Redrive ${what} back to ${topic}, due now?`,
      () => api('POST', topicPath(topic, 'redrive'), {ids}),
      (answer) => `Redrove ${count(answer.redriven)} dead letters to ${topic}.`, next);
}

async function topicView(topic) {
  const view = $('#view');
  const stats = await api('GET', `stats?${new URLSearchParams({topic})}`);
  brokerInfo(stats);
  const t = stats.topics[0];
  const dead = await api('GET', `${topicPath(topic, 'messages')}?state=MESSAGE_STATE_DEAD&pageSize=20`);
  const deadRows = dead.messages.map((m) => el('tr', {dataset: {id: m.id}},
      el('td', {}, messageLink(m.topic, m.id)), cell('attempt', m.attempt, true),
      cell('publishedAt', time(m.publishedAt)),
      el('td', {}, el('button', {type: 'button', class: 'redrive-one',
                                 onclick: () => redrive(topic, [m.id])}, 'Redrive'))));
  const select = (id, options, chosen) => el('select', {id},
      Object.keys(options).map((key) => el('option', {value: key, selected: key === chosen}, key)));
  view.replaceChildren(
      el('h1', {}, `Topic ${topic}`),
      el('p', {}, el('a', {id: 'browse', href: `#/messages/${encodeURIComponent(topic)}`},
                     'Browse its messages')),
      countCards(t),
      el('h2', {}, 'Schedule: messages due'),
      el('div', {class: 'toolbar'},
         el('label', {}, 'Next', select('schedule-range', RANGES, '24h')),
         el('label', {}, 'Bucket', select('schedule-bucket', BUCKETS, '1h')),
         el('button', {id: 'schedule-show', type: 'button', class: 'primary',
                       onclick: () => drawSchedule(topic).catch(() => {})}, 'Show')),
      el('p', {id: 'schedule-status', class: 'muted'}, 'Loading…'),
      el('div', {class: 'chart-box'}, el('canvas', {id: 'schedule-chart'})),
      el('details', {}, el('summary', {}, 'As a table'), el('div', {id: 'schedule-table'})),
      el('h2', {}, 'Consumer groups'),
      groupsTable(t),
      el('h2', {}, `Dead letters (${count(t.deadLettered)})`),
      el('div', {class: 'toolbar'},
         el('button', {id: 'redrive-all', type: 'button', disabled: dead.messages.length === 0,
                       onclick: () => redrive(topic, [])}, 'Redrive all')),
      table('dead', [['Id'], ['Attempts', 1], ['Published'], ['']], deadRows,
            'No dead letters.'),
      el('h2', {}, 'Publish a test message'),
      publishForm(topic),
      el('h2', {}, 'Purge'),
      el('div', {class: 'toolbar'},
         el('button', {id: 'purge-scheduled', type: 'button', class: 'danger',
                       onclick: () => purge(topic, true, false)}, 'Purge scheduled'),
         el('button', {id: 'purge-ready', type: 'button', class: 'danger',
                       onclick: () => purge(topic, false, true)}, 'Purge ready')));
  await drawSchedule(topic);
  startRefresh(async () => {
    const s = await api('GET', `stats?${new URLSearchParams({topic})}`);
    refreshInPlace($('#topic-counts'), countCards(s.topics[0]));
    refreshInPlace($('#groups'), groupsTable(s.topics[0]));
  });
}

// The topic page's form that publishes one message (POST .../publish):
// payload as text, a delay ("10s", "1h30m", or milliseconds), an optional
// id and headers, one key=value a line.
function publishForm(topic) {
  const submit = (event) => {
    event.preventDefault();
    const body = {payload: $('#publish-payload').value};
    const delay = $('#publish-delay').value.trim();
    if (delay) body.delay = /^\d+$/.test(delay) ? Number(delay) : delay;
    const id = $('#publish-id').value.trim();
    if (id) body.id = id;
    const lines = $('#publish-headers').value.split('\n');
    const headers = {};
    for (let i = 0; i < lines.length; i++) {
      if (lines[i].trim() === '') continue;
      const at = lines[i].indexOf('=');
      if (at <= 0) {
        notify(`Header line ${i + 1} is not key=value: ${lines[i]}`, true);
        return;
      }
      headers[lines[i].slice(0, at).trim()] = lines[i].slice(at + 1);
    }
    if (Object.keys(headers).length > 0) body.headers = headers;
    act(`Publish ${id ? `message ${id}` : 'a message'} to ${topic}, due ` +
        `${delay ? `in ${delay}${/^\d+$/.test(delay) ? ' ms' : ''}` : 'now'}?`,
        () => api('POST', topicPath(topic, 'publish'), body),
        (receipt) => receipt.duplicate ?
            `Message ${receipt.id} was already pending in ${topic}: nothing new ` +
            `stored; it is due at ${time(receipt.deliverAt)}.` :
            `Published message ${receipt.id} to ${topic}: due at ${time(receipt.deliverAt)}.`);
  };
  return el('form', {class: 'toolbar', id: 'publish', onsubmit: submit},
      el('label', {}, 'Payload (text)',
         el('textarea', {id: 'publish-payload', rows: 2, cols: 36})),
      el('label', {}, 'Delay (10s, 1h30m, ms)',
         el('input', {id: 'publish-delay', placeholder: 'now', size: 10})),
      el('label', {}, 'Id (optional)', el('input', {id: 'publish-id', size: 14})),
      el('label', {}, 'Headers (key=value a line)',
         el('textarea', {id: 'publish-headers', rows: 2, cols: 24})),
      el('button', {id: 'publish-submit', type: 'submit', class: 'primary'}, 'Publish'));
}

function purge(topic, scheduled, ready) {
  const what = scheduled ? 'scheduled' : 'ready';
  return act(`Delete every ${what} message of ${topic}? This cannot be undone.`,
      () => api('POST', topicPath(topic, 'purge'), {scheduled, ready}),
      (answer) => `Purged ${count(answer.purged)} ${what} messages of ${topic}.`);
}

// Page tokens of the pages before the one shown, to go back.
let pageTokens = [];

async function messagesView(topic, params) {
  const view = $('#view');
  const state = params.get('state') || 'SCHEDULED';
  const query = new URLSearchParams({state: `MESSAGE_STATE_${state}`,
                                     pageSize: params.get('size') || '20'});
  for (const [name, key] of [['group', 'group'], ['dueFrom', 'from'], ['dueTo', 'to'],
                             ['pageToken', 'page']]) {
    if (params.get(key)) query.set(name, params.get(key));
  }
  const page = await api('GET', `${topicPath(topic, 'messages')}?${query}`);
  const stats = await api('GET', `stats?${new URLSearchParams({topic})}`).catch(
      (error) => { if (error instanceof SignInNeeded) throw error; return null; });
  if (stats) brokerInfo(stats);
  const go = (changes) => {
    const next = new URLSearchParams(params);
    for (const [key, value] of Object.entries(changes)) {
      if (value) next.set(key, value); else next.delete(key);
    }
    location.hash = `#/messages/${encodeURIComponent(topic)}?${next}`;
  };
  const toIso = (value) => value ? new Date(`${value}Z`).toISOString() : '';
  const fromIso = (value) => value ? value.replace(/(\.\d+)?Z$/, '') : '';
  const rows = page.messages.map((m) => el('tr', {dataset: {id: m.id}},
      el('td', {}, messageLink(m.topic, m.id)), cell('state', m.state.replace('MESSAGE_STATE_', '')),
      cell('deliverAt', time(m.deliverAt)), cell('publishedAt', time(m.publishedAt)),
      cell('attempt', m.attempt, true), cell('payloadSize', count(m.payloadSize), true)));
  const pageNumber = pageTokens.length + 1;
  view.replaceChildren(
      el('h1', {}, 'Messages of ', topicLink(topic)),
      // One message by its id, whatever its state: the message page.
      el('form', {class: 'toolbar', id: 'find', onsubmit: (event) => {
        event.preventDefault();
        const id = $('#find-id').value.trim();
        if (id) location.hash = `#/message/${encodeURIComponent(topic)}/${encodeURIComponent(id)}`;
      }},
         el('label', {}, 'Id', el('input', {id: 'find-id', placeholder: 'order-42'})),
         el('button', {id: 'find-open', type: 'submit'}, 'Find')),
      el('form', {class: 'toolbar', id: 'filter', onsubmit: (event) => {
        event.preventDefault();
        pageTokens = [];
        go({state: $('#filter-state').value, group: $('#filter-group').value,
            from: toIso($('#filter-from').value), to: toIso($('#filter-to').value),
            size: $('#filter-size').value, page: ''});
      }},
         el('label', {}, 'State', el('select', {id: 'filter-state'}, STATES.map(
             (s) => el('option', {value: s, selected: s === state}, s)))),
         el('label', {}, 'Group (ready, in flight)',
            el('input', {id: 'filter-group', value: params.get('group') || ''})),
         el('label', {}, 'Due from (UTC)', el('input', {id: 'filter-from', type: 'datetime-local',
             step: 1, value: fromIso(params.get('from'))})),
         el('label', {}, 'Due before (UTC)', el('input', {id: 'filter-to', type: 'datetime-local',
             step: 1, value: fromIso(params.get('to'))})),
         el('label', {}, 'Per page', el('select', {id: 'filter-size'}, ['10', '20', '50', '100'].map(
             (n) => el('option', {value: n, selected: n === (params.get('size') || '20')}, n)))),
         el('button', {id: 'filter-apply', type: 'submit', class: 'primary'}, 'List')),
      table('messages', [['Id'], ['State'], ['Due'], ['Published'], ['Attempt', 1],
                         ['Bytes', 1]], rows, 'No messages.'),
      el('div', {class: 'toolbar'},
         el('button', {id: 'prev-page', type: 'button', disabled: pageTokens.length === 0,
                       onclick: () => go({page: pageTokens.pop()})}, '← Previous'),
         el('span', {id: 'page-number'}, `Page ${pageNumber}`),
         el('button', {id: 'next-page', type: 'button', disabled: !page.nextPageToken,
                       onclick: () => {
                         pageTokens.push(params.get('page') || '');
                         go({page: page.nextPageToken});
                       }}, 'Next →')));
}

// Bytes of a base64 string.
function bytesOf(base64) {
  const text = atob(base64 || '');
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

// Offset, hex and printable ASCII of `bytes`, 16 a line.
function hexDump(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.subarray(i, i + 16);
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, '0')).join(' ');
    const ascii = Array.from(row, (b) => b >= 32 && b < 127 ? String.fromCharCode(b) : '.')
        .join('');
    lines.push(`${i.toString(16).padStart(8, '0')}  ${hex.padEnd(47)}  ${ascii}`);
  }
  return lines.join('\n');
}

async function messageView(topic, id) {
  const view = $('#view');
  const m = await api('GET', `${topicPath(topic, 'messages', encodeURIComponent(id))}?` +
                             `previewBytes=${PREVIEW_BYTES}`);
  const state = m.state.replace('MESSAGE_STATE_', '');
  const bytes = bytesOf(m.payloadPreview);
  const payload = el('pre', {id: 'payload', dataset: {format: 'text'}});
  const show = (format) => {
    payload.dataset.format = format;
    payload.textContent = format === 'hex' ? hexDump(bytes) :
        new TextDecoder('utf-8').decode(bytes);
  };
  show('text');
  const field = (name, label, value) => [el('dt', {}, label), el('dd', {dataset: {field: name}}, value)];
  const actions = [];
  if (state === 'SCHEDULED') {
    actions.push(
        el('button', {id: 'cancel', type: 'button', class: 'danger', onclick: () => act(
            `Cancel message ${id} of ${topic}? It will never be delivered.`,
            () => api('POST', topicPath(topic, 'messages', encodeURIComponent(id), 'cancel'), {}),
            () => `Cancelled message ${id}.`,
            `#/messages/${encodeURIComponent(topic)}`)}, 'Cancel message'),
        el('label', {}, 'New delay (e.g. 90s, 2h)',
           el('input', {id: 'reschedule-delay', placeholder: '30s'})),
        el('button', {id: 'reschedule', type: 'button', onclick: () => {
          const delay = parseDelay($('#reschedule-delay').value);
          if (delay === null) {
            notify('Give the new delay as a number and a unit: 90s, 15m, 2h, 1d.', true);
            return;
          }
          act(`Reschedule message ${id} of ${topic} to be due in ${$('#reschedule-delay').value}?`,
              () => api('POST', topicPath(topic, 'messages', encodeURIComponent(id), 'reschedule'),
                        {delay: `${delay}s`}),
              (receipt) => `Rescheduled message ${id}: now due at ${time(receipt.deliverAt)}.`);
        }}, 'Reschedule'));
  }
  if (state === 'DEAD' && topic.endsWith('.dlq')) {
    const origin = topic.slice(0, -'.dlq'.length);
    actions.push(el('button', {id: 'redrive', type: 'button',
                               onclick: () => redrive(origin, [id], `#/topic/${encodeURIComponent(origin)}`)},
                          `Redrive to ${origin}`));
  }
  view.replaceChildren(
      el('h1', {}, 'Message ', el('code', {}, id), ' of ', topicLink(topic)),
      el('dl', {class: 'fields', id: 'message-fields'},
         field('state', 'State', state), field('deliverAt', 'Due', time(m.deliverAt)),
         field('publishedAt', 'Published', time(m.publishedAt)),
         m.deadline ? field('deadline', 'Deadline', `${time(m.deadline.expireAt)}, then ${
             m.deadline.onExpire === 'ON_EXPIRE_DEAD_LETTER' ? 'dead-lettered' : 'dropped'}`) : [],
         field('attempt', 'Attempt', m.attempt), field('payloadSize', 'Payload bytes', count(m.payloadSize))),
      el('div', {class: 'toolbar'}, actions),
      el('h2', {}, 'Payload'),
      el('div', {class: 'toolbar'},
         el('button', {id: 'show-text', type: 'button', onclick: () => show('text')}, 'Text'),
         el('button', {id: 'show-hex', type: 'button', onclick: () => show('hex')}, 'Hex'),
         bytes.length < Number(m.payloadSize) ?
             el('span', {class: 'muted'}, `first ${count(bytes.length)} bytes`) : null),
      payload,
      el('h2', {}, 'Headers'),
      table('headers', [['Key'], ['Value']], Object.entries(m.headers || {}).sort().map(
          ([key, value]) => el('tr', {dataset: {key}}, cell('key', key), cell('value', value))),
          'No headers.'),
      el('h2', {}, 'Groups'),
      table('message-groups', [['Group'], ['State'], ['Attempt', 1], ['Redelivery at']],
            (m.groups || []).map((g) => el('tr', {dataset: {group: g.group}},
                cell('group', g.group), cell('state', g.state.replace('MESSAGE_STATE_', '')),
                cell('attempt', g.attempt, true), cell('redeliverAt', time(g.redeliverAt)))),
            state === 'SCHEDULED' ? 'Not due yet: no group has it.' : 'No group holds it.'));
}

// Seconds of "90s", "15m", "2h", "1d" or a plain number of seconds; null
// for anything else.
function parseDelay(text) {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!match) return null;
  const unit = {ms: 0.001, s: 1, m: 60, h: 3600, d: 86400}[match[2] || 's'];
  return Number(match[1]) * unit;
}

// ---- Routing: #/, #/topic/T, #/messages/T?state=..., #/message/T/ID,
// #/cluster (cluster.js).

// Whether the broker runs as a cluster: null until GET /api/v1/cluster
// said (once a page showed, so with a token that the API takes); the
// Cluster link shows in cluster mode only.
let clusterMode = null;

async function probeCluster() {
  if (clusterMode !== null) return;
  try {
    clusterMode = (await api('GET', 'cluster')).mode === 'cluster';
  } catch (error) {
    if (error instanceof SignInNeeded) return;
    clusterMode = false;
  }
  $('#nav-cluster').hidden = !clusterMode;
}

async function render() {
  stopRefresh();
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const parts = path.split('/').filter((p) => p !== '').map(decodeURIComponent);
  const params = new URLSearchParams(query || '');
  if (parts[0] !== 'messages') pageTokens = [];
  try {
    if (parts.length === 0) await overview();
    else if (parts[0] === 'topic' && parts.length === 2) await topicView(parts[1]);
    else if (parts[0] === 'messages' && parts.length === 2) await messagesView(parts[1], params);
    else if (parts[0] === 'message' && parts.length === 3) await messageView(parts[1], parts[2]);
    else if (parts[0] === 'cluster' && parts.length === 1) await clusterView();
    else throw new ApiError(404, 'NOT_FOUND', `no page ${hash}`);
    $('#login').hidden = true;
    await probeCluster();
    document.body.dataset.view = parts[0] || 'overview';
  } catch (error) {
    if (error instanceof SignInNeeded) return;
    $('#view').replaceChildren(el('h1', {}, 'Cannot show this page'),
                               el('p', {class: 'error', id: 'view-error'}, error.message));
    document.body.dataset.view = 'error';
  }
}

function route() {
  $('#notice').hidden = true;
  return render();
}

setUpSignIn();
window.addEventListener('hashchange', route);
route();
