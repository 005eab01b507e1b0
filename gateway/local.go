package gateway

import (
	"mime"
	"net"
	"net/http"
	"net/url"

	"github.com/codexpool/codexpool/schemas"
)

// Codes of the refusals of a gateway without keys (see localOnly).
const (
	CodeMisdirected     schemas.Code = "misdirected_request"    // 421: Host is not a loopback name
	CodeForeignOrigin   schemas.Code = "forbidden_origin"       // 403: Origin is not loopback
	CodeUnsupportedType schemas.Code = "unsupported_media_type" // 415: a POST body not application/json
)

// localOnly vets a request to a gateway without keys, which trusts whoever reaches it and so
// must be reached only from this machine, on purpose. Listening on loopback (CheckAddr) is not
// enough: a web page the user opens can make their browser send requests to 127.0.0.1. Those
// come with a foreign Host (DNS rebinding: a name of the attacker's that resolves to 127.0.0.1)
// or a foreign Origin (a cross-site fetch or form post), and a cross-site request that needs no
// CORS preflight cannot have Content-Type: application/json; each is refused. A gateway with
// keys skips these checks: a browser cannot add the Authorization header across sites.
func localOnly(r *http.Request) *apiError {
	if !loopbackHost(r.Host) {
		return newAPIError(http.StatusMisdirectedRequest, CodeMisdirected, "",
			"gateway: without client keys this gateway answers only requests to a loopback name (localhost, 127.0.0.1, [::1]), not "+quoteShort(r.Host))
	}
	for _, origin := range r.Header.Values("Origin") {
		if !loopbackOrigin(origin) {
			return newAPIError(http.StatusForbidden, CodeForeignOrigin, "",
				"gateway: without client keys this gateway refuses requests from the web origin "+quoteShort(origin))
		}
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			return newAPIError(http.StatusUnsupportedMediaType, CodeUnsupportedType, "",
				"gateway: without client keys a POST body must be sent as Content-Type: application/json, not "+quoteShort(r.Header.Get("Content-Type")))
		}
	}
	return nil
}

// loopbackHost reports whether the Host header hostport names a loopback host, with or without a
// port.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport // no port
	}
	return host != "" && Loopback(host)
}

// loopbackOrigin reports whether the Origin header o is an http(s) origin on a loopback host.
func loopbackOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return false // also "null": a sandboxed page or a file
	}
	return u.Hostname() != "" && Loopback(u.Hostname())
}
