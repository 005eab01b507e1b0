// Package codex runs LLM generations over the Codex Responses-API WebSocket.
//
// The credentials come from package login: [login.ResolveCredentials] (token and account id from
// the environment, else the Codex CLI's auth.json) and, for a login file, [login.OpenAuth], which
// keeps it valid for as long as the process runs and goes in [Config].Credentials. Then [New]
// with a [Config], then [Client.Generate] once per generation, from as many goroutines as you
// like. [Client.Close] ends the pool when you are done, then the login's Close.
//
// A Client keeps a pool of sockets: after response.completed a socket goes back to an idle pool and
// the next generation takes it without a new upgrade, so without a gate wait and without the risk
// of an origin 403. New sockets are opened through the connect gate (package gate). A pooled socket
// that fails before any event of the request arrived is retried once on a fresh socket.
//
// An origin that refuses WebSockets (426) is spoken to over HTTP streaming (server-sent events)
// for Config.WSRetryAfter; callers see no difference.
//
// Every failure is returned as (or wraps) a *schemas.Error carrying the contract's status and code,
// except a done context, which returns ctx.Err() unwrapped. Text carried over from the origin is
// cut to 1 KiB and has the credentials the connection was opened with redacted.
package codex
