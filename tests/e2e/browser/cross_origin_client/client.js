"use strict";
// A browser MCP client, as the MCP Inspector's UI is one: a page on its own origin whose every call
// to Gatehouse is a cross-origin fetch, so each one works only if Gatehouse's CORS answers let it.
// Each call is recorded (status, the headers the page could read, the body, or the error fetch
// rejected with) in sessionStorage, which outlives the navigation to Gatehouse's sign-in and back;
// window.report holds the record once the page is done.

const PROTOCOL = "2025-11-25";
const MCP_HEADERS = { Accept: "application/json, text/event-stream", "Content-Type": "application/json" };
const CALLBACK = `${location.origin}/callback.html`;

function saved(key, fallback) {
  return JSON.parse(sessionStorage.getItem(key) || JSON.stringify(fallback));
}

function save(key, value) {
  sessionStorage.setItem(key, JSON.stringify(value));
}

async function call(step, url, init = {}, readHeaders = []) {
  const entry = { step };
  try {
    const response = await fetch(url, init);
    entry.status = response.status;
    entry.headers = Object.fromEntries(readHeaders.map((name) => [name, response.headers.get(name)]));
    entry.body = await response.text();
  } catch (error) {
    entry.error = String(error);
  }
  save("report", [...saved("report", []), entry]);
  return entry;
}

// The JSON-RPC message of a plain JSON or an SSE answer.
function message(entry) {
  const body = entry.body || "";
  if (body.trimStart().startsWith("{")) return JSON.parse(body);
  const data = body.split("\n").filter((line) => line.startsWith("data:"));
  return JSON.parse(data[data.length - 1].slice(5));
}

// A step that throws (a body it could not read, a missing field) ends the run with its error on record.
async function recorded(run) {
  try {
    await run();
  } catch (error) {
    save("report", [...saved("report", []), { step: "failed", error: String(error) }]);
    window.report = saved("report", []);
  }
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...bytes)).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function pkce() {
  const verifier = base64url(crypto.getRandomValues(new Uint8Array(32)));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return { verifier, challenge: base64url(new Uint8Array(digest)) };
}

function initialize(id) {
  return JSON.stringify({
    jsonrpc: "2.0",
    id,
    method: "initialize",
    params: { protocolVersion: PROTOCOL, capabilities: {}, clientInfo: { name: "cross-origin-page", version: "1" } },
  });
}

// Discovery as the MCP SDKs do it (with MCP-Protocol-Version, so each GET is preflighted), the
// challenge of an unauthenticated call, registration; then off to sign in, unless only probing.
async function connect(server, { probe }) {
  sessionStorage.clear();
  const mcpUrl = `${server}/mcp`;
  const discoveryInit = { headers: { "MCP-Protocol-Version": PROTOCOL } };
  const resource = await call("resource-metadata", `${server}/.well-known/oauth-protected-resource/mcp`, discoveryInit);
  await call("openid-configuration", `${server}/.well-known/openid-configuration`, discoveryInit);
  const issuer = resource.body ? JSON.parse(resource.body).authorization_servers[0] : server;
  const metadataEntry = await call("server-metadata", `${issuer}/.well-known/oauth-authorization-server`, discoveryInit);
  const metadata = metadataEntry.body ? JSON.parse(metadataEntry.body) : {};
  await call("unauthenticated", mcpUrl, { method: "POST", headers: MCP_HEADERS, body: initialize(0) }, [
    "www-authenticate",
  ]);
  const registration = await call("registration", metadata.registration_endpoint || `${server}/oauth/register/`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      client_name: "Cross-origin page",
      redirect_uris: [CALLBACK],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }),
  });
  if (probe) {
    await call("token", metadata.token_endpoint || `${server}/oauth/token/`, {
      method: "POST",
      body: new URLSearchParams({ grant_type: "authorization_code", code: "none", client_id: "none" }),
    });
    window.report = saved("report", []);
    return;
  }
  const clientId = JSON.parse(registration.body).client_id;
  const { verifier, challenge } = await pkce();
  const state = base64url(crypto.getRandomValues(new Uint8Array(16)));
  const resourceId = JSON.parse(resource.body).resource;
  save("flow", { clientId, verifier, state, resourceId, tokenEndpoint: metadata.token_endpoint, mcpUrl });
  const query = new URLSearchParams({
    response_type: "code",
    client_id: clientId,
    redirect_uri: CALLBACK,
    scope: "mcp:read mcp:write",
    state,
    code_challenge: challenge,
    code_challenge_method: "S256",
    resource: resourceId,
  });
  location.assign(`${metadata.authorization_endpoint}?${query}`);
}

// Back from the consent page: the code for a token, then MCP with it.
async function finish() {
  const flow = saved("flow", {});
  const arrived = new URLSearchParams(location.search);
  if (arrived.get("state") !== flow.state) throw new Error("state mismatch");
  const tokenEntry = await call(
    "token",
    flow.tokenEndpoint,
    {
      method: "POST",
      body: new URLSearchParams({
        grant_type: "authorization_code",
        code: arrived.get("code"),
        redirect_uri: CALLBACK,
        client_id: flow.clientId,
        code_verifier: flow.verifier,
        resource: flow.resourceId,
      }),
    },
    ["cache-control"],
  );
  const bearer = { Authorization: `Bearer ${JSON.parse(tokenEntry.body).access_token}` };
  const initialized = await call(
    "initialize",
    flow.mcpUrl,
    { method: "POST", headers: { ...MCP_HEADERS, ...bearer }, body: initialize(1) },
    ["mcp-session-id", "content-type"],
  );
  const session = {
    ...MCP_HEADERS,
    ...bearer,
    "Mcp-Session-Id": initialized.headers["mcp-session-id"],
    "MCP-Protocol-Version": message(initialized).result.protocolVersion,
  };
  await call("initialized", flow.mcpUrl, {
    method: "POST",
    headers: session,
    body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }),
  });
  await call(
    "tools/list",
    flow.mcpUrl,
    { method: "POST", headers: session, body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }) },
    ["mcp-session-id"],
  );
  window.report = saved("report", []);
}
