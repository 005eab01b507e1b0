package codextest

import (
	"fmt"
	"strconv"
	"strings"
)

// Fault names a way to misbehave. Response-level faults apply to one response (through
// [Faults.Next] AtResponse or a request's metadata "sim_fault"); upgrade-level faults apply to
// one upgrade (through [Faults.Next] AtUpgrade).
type Fault string

// The faults. Unless said otherwise a fault is response-level.
const (
	// FaultNone answers normally.
	FaultNone Fault = ""
	// FaultDrop closes the TCP connection (no Close frame) after response.created. As an
	// upgrade-level fault: closes the TCP connection before answering the upgrade.
	FaultDrop Fault = "drop"
	// FaultFailed sends response.created, response.in_progress, then response.failed whose
	// response.error is {code:"server_error", message}.
	FaultFailed Fault = "failed"
	// FaultIncomplete streams the answer, then ends with response.incomplete whose
	// response.incomplete_details.reason is "max_output_tokens".
	FaultIncomplete Fault = "incomplete"
	// FaultBadJSON sends a text frame that is not JSON after response.created, then nothing more.
	FaultBadJSON Fault = "bad_json"
	// FaultStall sends response.created, then nothing more until the socket closes.
	FaultStall Fault = "stall"
	// FaultBinary sends a binary frame after response.created, then nothing more.
	FaultBinary Fault = "binary"
	// FaultError sends an error event before any other event: status 500, type server_error.
	// "error:NNN" picks the status; "error:429" is
	// {"type":"error","status":429,"error":{"type":"usage_limit_reached","resets_at":...,...}}.
	FaultError Fault = "error"
	// FaultErrorNoStatus is FaultError without the status field.
	FaultErrorNoStatus Fault = "error_nostatus"
	// FaultConnLimit sends the websocket_connection_limit_reached error event before any other
	// event, then a Close frame, and closes the socket. Also usable as an upgrade-level fault
	// (101, then the event at once).
	FaultConnLimit Fault = "conn_limit"
	// FaultClose1008 sends Close 1008 (policy violation) instead of answering, and closes the
	// socket. As an upgrade-level fault: 101 followed at once by Close 1008.
	FaultClose1008 Fault = "close1008"
	// FaultOverloaded sends response.created, response.in_progress, then, inside the same 200
	// stream, the error event of an overloaded origin:
	// {"type":"error","error":{"type":"service_unavailable_error","code":"server_is_overloaded",...}}.
	FaultOverloaded Fault = "overloaded"
	// FaultOverloadedFailed is FaultOverloaded as a response.failed whose response.error.code is
	// server_is_overloaded.
	FaultOverloadedFailed Fault = "overloaded_failed"
	// FaultHangUpgrade is upgrade-level only: the TCP connection is accepted but the upgrade is
	// never answered (until the client gives up or the server closes).
	FaultHangUpgrade Fault = "hang_upgrade"
	// FaultContextLength and FaultContextLengthError (overflow.go) are the origin's answers to an
	// input over the context window.
)

// errorStatus returns a custom status from an "error:NNN" fault, else 0.
func (f Fault) errorStatus() int {
	_, s, ok := strings.Cut(string(f), ":")
	if !ok {
		return 0
	}
	n, _ := strconv.Atoi(s)
	return n
}

// kind returns f without an ":NNN" suffix.
func (f Fault) kind() Fault {
	k, _, _ := strings.Cut(string(f), ":")
	return Fault(k)
}

// Upgrade reports whether f is an upgrade-level fault (valid AtUpgrade).
func (f Fault) Upgrade() bool {
	switch f {
	case FaultHangUpgrade, FaultClose1008, FaultDrop, FaultConnLimit:
		return true
	}
	return false
}

// Valid reports whether f is a known fault, response- or upgrade-level.
func (f Fault) Valid() bool {
	switch f.kind() {
	case FaultNone, FaultDrop, FaultFailed, FaultIncomplete, FaultBadJSON, FaultStall, FaultBinary,
		FaultErrorNoStatus, FaultConnLimit, FaultClose1008, FaultHangUpgrade, FaultOverloaded,
		FaultOverloadedFailed, FaultContextLength, FaultContextLengthError:
		return !strings.Contains(string(f), ":")
	case FaultError:
		if !strings.Contains(string(f), ":") {
			return true
		}
		s := f.errorStatus()
		return s >= 100 && s <= 599
	}
	return false
}

// ParseFault checks s and returns it as a Fault.
func ParseFault(s string) (Fault, error) {
	f := Fault(s)
	if !f.Valid() {
		return "", fmt.Errorf("codextest: unknown fault %q", s)
	}
	return f, nil
}
