//go:build unix

package gateway_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codexpool/codexpool/gateway"
	"github.com/codexpool/codexpool/internal/testutil"
	"github.com/codexpool/codexpool/schemas"
)

// A client that stops reading a stream while the origin keeps writing is cut off once one write
// has waited Config.WriteTimeout, and its pool request is cancelled (the worker counts a cancel),
// so a stalled reader does not hold a worker's slot for the whole generation.
func TestStalledReader(t *testing.T) {
	// More than the gateway's socket can buffer (the kernel's send buffer is at most 4 MB here;
	// the client's receive buffer is pinned small), in events well under NATS's max payload.
	const eventBytes, events = 32 << 10, 512
	cancelled := make(chan struct{})
	p := newPool(t, poolOptions{gw: gateway.Config{WriteTimeout: 200 * time.Millisecond},
		gen: genFunc(func(ctx context.Context, _ *schemas.Request, emit func([]byte) error) ([]byte, error) {
			delta := strings.Repeat("x", eventBytes)
			for i := range events {
				if err := emit(fmt.Appendf(nil, `{"type":"response.output_text.delta","sequence_number":%d,"delta":"%s"}`, i, delta)); err != nil {
					return nil, err
				}
			}
			<-ctx.Done() // an origin still generating; only a cancel ends it
			close(cancelled)
			return nil, ctx.Err()
		})})

	// The client itself never gives up first: its own deadline would end the request as well.
	req, err := http.NewRequestWithContext(ctxT(t, 3*waitTimeout), http.MethodPost, p.srv.URL+"/v1/responses", strings.NewReader(`{"input":"hi","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp := do(t, req, smallReceiveBuffer)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d, want 200", resp.StatusCode)
	}
	// Read nothing until the worker has seen the cancel.
	testutil.WaitFor(t, waitTimeout, "the worker to count a cancel", func() bool { return p.svc.Stats().Cancelled == 1 })
	<-cancelled
	n, err := io.Copy(io.Discard, bufio.NewReader(resp.Body))
	if err == nil {
		t.Errorf("read %d bytes to a clean end, want the stream cut", n)
	}
	if n >= eventBytes*events {
		t.Errorf("read %d bytes, want fewer than the %d sent: the stream was cut", n, eventBytes*events)
	}
	testutil.WaitFor(t, waitTimeout, "the gateway to log client_closed", func() bool {
		return strings.Contains(p.logs.String(), `"code":"client_closed"`)
	})
}

// smallReceiveBuffer pins the client socket's receive buffer to a few KB (no autotuning), so a
// client that does not read stalls the server quickly.
func smallReceiveBuffer(tr *http.Transport) {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 8<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	tr.DialContext = d.DialContext
}
