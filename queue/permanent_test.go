package queue

import (
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestPermanent pins which first-connection errors fail fast. The TLS 1.3 case matters: a server
// that refuses the client certificate sends an alert that surfaces on the first read as a
// net.OpError "remote error", not wrapped in nats.ErrTLS (seen as a flaky TestSecurityTLS).
func TestPermanent(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"authorization", fmt.Errorf("x: %w", nats.ErrAuthorization), true},
		{"tls alert on first read", &net.OpError{Op: "remote error", Err: errors.New("tls: certificate required")}, true},
		{"nats tls", fmt.Errorf("%w: handshake", nats.ErrTLS), true},
		{"refused tcp", &net.OpError{Op: "dial", Err: errors.New("connect: connection refused")}, false},
		{"no servers", nats.ErrNoServers, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := permanent(tt.err); got != tt.want {
				t.Fatalf("permanent(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}
