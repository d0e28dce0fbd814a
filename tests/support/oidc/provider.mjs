// A real OpenID Connect provider for karpweb's sign-in tests: panva's oidc-provider (certified by
// the OpenID Foundation), in its own process, with a minimal sign-in page of ours instead of the
// library's development pages (those load web fonts, which this machine cannot reach).
//
//   ISSUER_PORT=9010 CLIENT_ID=karpweb CLIENT_SECRET=... REDIRECT_URI=http://127.0.0.1:8000/oidc/callback/ \
//   ACCOUNTS_FILE=accounts.json node provider.mjs
//
// ACCOUNTS_FILE is read at every sign-in, so a test can change a person's groups between sign-ins:
//   {"alice": {"password": "...", "email": "alice@example.com", "name": "Alice", "groups": ["karpweb-operators"]}}
import { readFileSync } from 'node:fs';
import http from 'node:http';
import Provider from 'oidc-provider';

const port = Number(process.env.ISSUER_PORT);
const issuer = `http://127.0.0.1:${port}`;

function accounts() {
  return JSON.parse(readFileSync(process.env.ACCOUNTS_FILE, 'utf8'));
}

async function findAccount(ctx, id) {
  const person = accounts()[id];
  if (!person) return undefined;
  return {
    accountId: id,
    async claims() {
      return {
        sub: id, email: person.email, email_verified: true, name: person.name, preferred_username: id,
        groups: person.groups || [],
      };
    },
  };
}

const provider = new Provider(issuer, {
  clients: [{
    client_id: process.env.CLIENT_ID,
    client_secret: process.env.CLIENT_SECRET,
    redirect_uris: [process.env.REDIRECT_URI],
    response_types: ['code'],
    grant_types: ['authorization_code'],
    token_endpoint_auth_method: 'client_secret_post',
  }],
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'preferred_username'],
    groups: ['groups'],
  },
  findAccount,
  features: { devInteractions: { enabled: false } },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  cookies: { keys: ['karpweb-tests-only-not-a-secret'] },
  pkce: { required: () => false },
});

const escape = (text) => String(text).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));

function page(res, uid, message = '') {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(`<!doctype html><html><head><title>Test IdP sign-in</title></head><body>
<h1>Test IdP</h1>${message ? `<p class="error">${escape(message)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}">
<label>Username <input name="login" autofocus></label>
<label>Password <input name="password" type="password"></label>
<button type="submit">Sign in</button></form></body></html>`);
}

async function form(req) {
  let body = '';
  for await (const chunk of req) body += chunk;
  return new URLSearchParams(body);
}

async function interaction(req, res, uid) {
  const details = await provider.interactionDetails(req, res);
  if (req.method === 'GET') return page(res, uid);
  const fields = await form(req);
  const login = fields.get('login') || '';
  const person = accounts()[login];
  if (!person || person.password !== fields.get('password')) return page(res, uid, 'Wrong username or password.');
  // Sign-in and consent in one step: the test IdP grants every scope karpweb asked for.
  const grant = new provider.Grant({ accountId: login, clientId: details.params.client_id });
  grant.addOIDCScope(details.params.scope);
  const grantId = await grant.save();
  return provider.interactionFinished(req, res, { login: { accountId: login }, consent: { grantId } },
    { mergeWithLastSubmission: false });
}

const handle = provider.callback();
http.createServer(async (req, res) => {
  const match = new URL(req.url, issuer).pathname.match(/^\/interaction\/([^/]+)$/);
  if (!match) return handle(req, res);
  try {
    await interaction(req, res, match[1]);
  } catch (error) {
    res.writeHead(400, { 'content-type': 'text/plain' });
    res.end(`interaction failed: ${error.message}`);
  }
}).listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
