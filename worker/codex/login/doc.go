// Package login keeps a Codex login valid for as long as a worker runs: the login file (the
// Codex CLI's auth.json, or the environment's token: [ResolveCredentials]), its refresh before
// expiry and after a 401, sharing the refreshed tokens with the pool's other workers through a
// [Coordinator] (a JetStream key-value bucket), sealed under a pool key ([LoadKeyFile]; without
// a key nothing is shared), and the account's fall out of service when its refresh token is
// refused for good.
//
// [OpenAuth] returns an [Auth], a [TokenSource]: it goes in the socket client's Config
// (package worker/codex), which asks it for [Credentials] before every new connection and calls
// Unauthorized after a 401. An Auth's state under its one mutex is named by what it is about:
// the login in use, the file (fileState), the outage, the refresh schedule and the sharing
// (shareState). Call [Auth.Close] after the clients that use it.
//
// No secret leaves this package in an error, a log line or a stat: text from the token endpoint
// is redacted (internal/origintext), and the sealed value in the bucket is opaque without the key.
package login
