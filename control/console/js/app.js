// The console's shell: login, the account picker for principals without an account of
// their own, the navigation and a hash router over the pages.

import {session, saveSession, needsAccount, get, api, query, loginWithPassword, loginWithToken, logout} from './api.js';
import {h, clear, showError, hideBanner, action} from './dom.js';
import {renderList} from './lists.js';
import {renderScenarioList, renderScenario} from './scenario.js';
import {renderCommunication} from './communication.js';

const main = () => document.getElementById('main');
let leave = null;

function go(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

function renderLogin(root) {
  const email = h('input', {id: 'login-email', type: 'email', name: 'email', autocomplete: 'username', required: true});
  const password = h('input', {id: 'login-password', type: 'password', name: 'password', autocomplete: 'current-password', required: true});
  const submit = h('button', {type: 'submit', id: 'login-submit', class: 'primary'}, 'Log in');
  const form = h('form', {class: 'card login', id: 'login-form'}, h('h2', {}, 'Log in as a user'),
    h('label', {}, h('span', {}, 'email'), email), h('label', {}, h('span', {}, 'password'), password), submit);
  form.addEventListener('submit', action(submit, 'log in', async () => {
    await loginWithPassword(email.value, password.value);
    go('#/scenarios');
  }));
  const token = h('input', {id: 'login-token', type: 'password', name: 'token', placeholder: 'cs_su_… / cs_tk_… / cs_ak_…', autocomplete: 'off', required: true});
  const submitToken = h('button', {type: 'submit', id: 'token-submit'}, 'Use token');
  const tokenForm = h('form', {class: 'card login', id: 'token-form'}, h('h2', {}, 'Or paste a bearer token'),
    h('p', {class: 'hint'}, 'The superuser token printed at the first start (data/superuser.token), a tenant key or an account key.'),
    h('label', {}, h('span', {}, 'token'), token), submitToken);
  tokenForm.addEventListener('submit', action(submitToken, 'token', async () => {
    const s = await loginWithToken(token.value);
    go(needsAccount(s) ? '#/account' : '#/scenarios');
  }));
  root.append(h('h1', {}, 'callsmith console'), h('div', {class: 'login-grid'}, form, tokenForm));
}

/** The account picker: the superuser chooses a tenant, then an account; a tenant key an account. */
async function renderAccountPicker(root) {
  const s = session();
  root.append(h('h1', {}, 'Choose an account'));
  let tenant = s.kind === 'tenant_key' ? null : s.tenant || '';
  if (s.kind === 'superuser') {
    const tenants = await get(`/v1/internal/tenant${query({limit: 500})}`);
    const select = h('select', {id: 'pick-tenant'}, h('option', {value: ''}, '— tenant —'),
      tenants.items.map((t) => h('option', {value: t.sid}, `${t.name} (${t.sid})`)));
    if (tenant) select.value = tenant;
    select.addEventListener('change', () => {
      saveSession({...session(), tenant: select.value, account: null});
      route();
    });
    root.append(h('label', {class: 'picker'}, h('span', {}, 'tenant'), select));
    if (!tenants.items.length) root.append(h('p', {}, 'There is no tenant yet.'));
    // A fresh installation has none: the superuser makes the first one here.
    const name = h('input', {id: 'new-tenant-name', placeholder: 'tenant name', required: true});
    const create = h('button', {type: 'submit', id: 'create-tenant'}, 'Create tenant');
    const form = h('form', {class: 'inline-form', id: 'create-tenant-form'}, name, create);
    form.addEventListener('submit', action(create, 'create tenant', async () => {
      const t = await api('POST', '/v1/internal/tenant', {name: name.value});
      saveSession({...session(), tenant: t.sid, account: null});
      route();
    }));
    root.append(form);
    if (!tenant) return;
  }
  const headers = s.kind === 'superuser' ? {'X-Tenant-Sid': tenant} : {};
  const accounts = await get(`/v1/internal/account${query({limit: 500})}`, headers);
  const accountName = h('input', {id: 'new-account-name', placeholder: 'account name', required: true});
  const accountEmail = h('input', {id: 'new-account-email', type: 'email', placeholder: 'contact email', required: true});
  const timezone = h('input', {id: 'new-account-timezone', placeholder: 'timezone (IANA, default UTC)'});
  const createAccount = h('button', {type: 'submit', id: 'create-account'}, 'Create account');
  const accountForm = h('form', {class: 'inline-form', id: 'create-account-form'}, accountName, accountEmail, timezone, createAccount);
  accountForm.addEventListener('submit', action(createAccount, 'create account', async () => {
    const body = {name: accountName.value, email: accountEmail.value};
    if (timezone.value) body.timezone = timezone.value;
    const a = await api('POST', '/v1/internal/account', body, headers);
    saveSession({...session(), account: a.sid, accountName: a.name});
    go('#/scenarios');
  }));
  const list = h('ul', {class: 'accounts', id: 'pick-account'});
  for (const a of accounts.items) {
    list.append(h('li', {}, h('a', {href: '#', 'data-account': a.sid, onclick: (ev) => {
      ev.preventDefault();
      saveSession({...session(), account: a.sid, accountName: a.name});
      go('#/scenarios');
    }}, `${a.name} (${a.sid})`)));
  }
  if (!accounts.items.length) list.append(h('li', {}, 'no accounts in this tenant'));
  root.append(list, h('h2', {}, 'New account'), accountForm);
}

function renderNav() {
  const nav = document.getElementById('nav');
  const who = document.getElementById('who');
  clear(nav);
  clear(who);
  const s = session();
  if (!s) return;
  const links = [['#/scenarios', 'Scenarios'], ['#/agents', 'Agents'], ['#/numbers', 'Numbers'], ['#/audio', 'Audio'],
    ['#/communications', 'Communications'], ['#/results', 'Result deliveries']];
  for (const [href, label] of links) nav.append(h('a', {href, class: location.hash.startsWith(href) ? 'active' : ''}, label));
  const label = s.kind === 'user' ? s.email : s.kind.replace('_', ' ');
  who.append(h('span', {id: 'who-name'}, label));
  if (needsAccount(s)) {
    who.append(' · ', h('a', {href: '#/account', id: 'who-account'}, s.account ? s.accountName || s.account : 'choose an account'));
  }
  const out = h('button', {type: 'button', id: 'logout', class: 'link'}, 'Log out');
  out.addEventListener('click', action(out, 'log out', async () => {
    await logout();
    go('#/login');
  }));
  who.append(' · ', out);
}

async function route() {
  if (leave) {
    try {
      leave();
    } catch (e) {
      showError(e);
    }
    leave = null;
  }
  hideBanner();
  const root = clear(main());
  const s = session();
  const [, page, arg] = (location.hash || '#/').split('/').map(decodeURIComponent);
  renderNav();
  try {
    if (!s) {
      if (page !== 'login') history.replaceState(null, '', '#/login');
      return renderLogin(root);
    }
    if (page === 'login') return go('#/scenarios');
    if (page === 'account' || (needsAccount(s) && !s.account)) return await renderAccountPicker(root);
    switch (page) {
      case 'scenario':
        leave = await renderScenario(root, arg);
        return;
      case 'communication':
        leave = await renderCommunication(root, arg);
        return;
      case 'agents':
      case 'numbers':
      case 'audio':
      case 'communications':
      case 'results':
        return await renderList(root, page);
      default:
        return renderScenarioList(root, go);
    }
  } catch (e) {
    showError(e);
  }
}

window.addEventListener('hashchange', route);
window.addEventListener('callsmith:unauthenticated', () => {
  saveSession(null);
  go('#/login');
  showError(new Error('the session ended or the token is no longer accepted; log in again'));
});
// Nothing fails silently: an error no page caught still reaches the banner.
window.addEventListener('unhandledrejection', (ev) => showError(ev.reason));
window.addEventListener('error', (ev) => showError(ev.error || ev.message));
route();
