package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/proxy"
)

// Error is a failure of the proxy itself, before the tunnel to the origin was open: the proxy
// could not be reached, refused the credentials (407), would not open the tunnel, or did not
// answer in time. Its text names the proxy by its redacted URL and never carries the password.
type Error struct {
	Proxy  string // the proxy URL, redacted
	Status int    // the CONNECT answer's HTTP status; 0 when there was none
	msg    string // what failed, already free of the password
	err    error  // the cause; nil for a refused CONNECT
}

func (e *Error) Error() string { return "egress: proxy " + e.Proxy + ": " + e.msg }

// Unwrap returns the cause (a net.Error, context.DeadlineExceeded, ...), nil for a refused CONNECT.
func (e *Error) Unwrap() error { return e.err }

// Timeout reports whether the proxy did not answer in time.
func (e *Error) Timeout() bool {
	var ne net.Error
	return errors.Is(e.err, context.DeadlineExceeded) || (errors.As(e.err, &ne) && ne.Timeout())
}

// AsError returns the proxy failure in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// DialFunc dials addr through a proxy; the returned connection is the open tunnel.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Dialer returns the dial function that opens every connection through the proxy u (validated
// with Parse): an HTTP CONNECT tunnel for http and https (TLS to the proxy), a SOCKS5 one
// (golang.org/x/net/proxy) for socks5 (names resolved here) and socks5h (resolved by the
// proxy). Every failure before the tunnel is open is an *Error. The caller does TLS to the
// origin over the tunnel, so a transport using it needs no Proxy function of its own.
func Dialer(u *url.URL) DialFunc {
	p := &dialer{u: u, redacted: u.Redacted(), forward: &net.Dialer{KeepAlive: 30 * time.Second}}
	if pw, ok := u.User.Password(); ok {
		p.password = pw
	}
	return p.dial
}

type dialer struct {
	u        *url.URL
	redacted string
	password string
	forward  *net.Dialer
}

// Timeout bounds a dial through the proxy, from the TCP connect to the open tunnel, when the
// caller's context allows longer (the upgrade's own per-attempt timeout is shorter): a proxy
// that does not answer fails as an *Error, not as the caller's deadline.
const Timeout = 30 * time.Second

func (p *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel() // the open tunnel no longer watches ctx
	if p.u.Scheme == "socks5" || p.u.Scheme == "socks5h" {
		return p.socks(ctx, network, addr)
	}
	return p.connect(ctx, addr)
}

// fail is the *Error of a failed step, with the password scrubbed from the cause's text (a
// library's message might quote what it was given).
func (p *dialer) fail(status int, what string, err error) *Error {
	msg := what
	if err != nil {
		msg += ": " + err.Error()
	}
	if p.password != "" {
		msg = strings.ReplaceAll(msg, p.password, "xxxxx")
	}
	return &Error{Proxy: p.redacted, Status: status, msg: msg, err: err}
}

func (p *dialer) socks(ctx context.Context, network, addr string) (net.Conn, error) {
	var auth *proxy.Auth
	if p.u.User != nil {
		auth = &proxy.Auth{User: p.u.User.Username(), Password: p.password}
	}
	d, err := proxy.SOCKS5("tcp", p.u.Host, auth, p.forward)
	if err != nil {
		return nil, p.fail(0, "socks5", err)
	}
	if p.u.Scheme == "socks5" {
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, err // the origin's name, not the proxy, failed
		}
		addr = net.JoinHostPort(ips[0].IP.String(), port)
	}
	c, err := d.(proxy.ContextDialer).DialContext(ctx, network, addr)
	if err != nil {
		return nil, p.fail(0, "socks5 connect to "+addr, err)
	}
	return c, nil
}

// connect opens a CONNECT tunnel to addr, bounded by ctx.
func (p *dialer) connect(ctx context.Context, addr string) (net.Conn, error) {
	c, err := p.forward.DialContext(ctx, "tcp", p.u.Host)
	if err != nil {
		return nil, p.fail(0, "connect", err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	tc, status, err := p.handshake(c, addr)
	if !stop() && err == nil {
		err = ctx.Err() // the deadline was set under the open tunnel
	}
	if err != nil {
		c.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, p.fail(status, fmt.Sprintf("CONNECT %s", addr), err)
	}
	return tc, nil
}

// errRefused is the cause of a CONNECT answered with another status than 200.
var errRefused = errors.New("refused")

// handshake speaks TLS to an https proxy, sends the CONNECT and reads its answer.
func (p *dialer) handshake(c net.Conn, addr string) (net.Conn, int, error) {
	if p.u.Scheme == "https" {
		t := tls.Client(c, &tls.Config{ServerName: p.u.Hostname()})
		if err := t.Handshake(); err != nil {
			return nil, 0, err
		}
		c = t
	}
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if p.u.User != nil {
		cred := p.u.User.Username() + ":" + p.password
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(cred)))
	}
	if err := req.Write(c); err != nil {
		return nil, 0, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, 0, err
	}
	// Not resp.Body.Close: after a 200 the "body" is the tunnel, and Close would drain it.
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, fmt.Errorf("%w (HTTP %s)", errRefused, resp.Status)
	}
	if br.Buffered() > 0 {
		return &bufferedConn{Conn: c, r: br}, 0, nil
	}
	return c, 0, nil
}

// bufferedConn is a tunnel whose first bytes were read with the CONNECT answer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(b []byte) (int, error) { return c.r.Read(b) }
