package client

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"sync"

	"github.com/openmhp/mhp-go"
)

// conn is one wire connection: it calls methods and delivers notifications.
type conn interface {
	// call sends one request and decodes its result into out (may be nil).
	call(ctx context.Context, method string, params, out any) error
	// endSession ends the server-side session (lease released).
	endSession(ctx context.Context) error
	close() error
}

// rpcRequest is the frame a client sends.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      uint64 `json:"id"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// rpcIncoming is any frame a client receives: a response (ID set) or a
// notification (Method set).
type rpcIncoming struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *rpcError       `json:"error"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
}

// listeners fans notifications out to registered functions, in order.
type listeners struct {
	mu   sync.Mutex
	next int
	fns  map[int]func(mhp.Notification)
}

func (l *listeners) add(fn func(mhp.Notification)) func() {
	l.mu.Lock()
	if l.fns == nil {
		l.fns = map[int]func(mhp.Notification){}
	}
	id := l.next
	l.next++
	l.fns[id] = fn
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		delete(l.fns, id)
		l.mu.Unlock()
	}
}

func (l *listeners) publish(n mhp.Notification) {
	if j, ok := n.Params["job"].(map[string]any); ok {
		normalizeJob(j)
	}
	l.mu.Lock()
	ids := make([]int, 0, len(l.fns))
	for id := range l.fns {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	fns := make([]func(mhp.Notification), 0, len(ids))
	for _, id := range ids {
		fns = append(fns, l.fns[id])
	}
	l.mu.Unlock()
	for _, fn := range fns {
		fn(n)
	}
}

// transportError is the *mhp.Error of a call that failed on the way (no
// answer from the server). data.reason is "transport"; data.sent says
// whether the request may have reached the server, in which case its effect
// is unknown (data.outcome "unknown" for actuating methods).
func transportError(method string, sent bool, format string, args ...any) *mhp.Error {
	e := mhp.Errorf(mhp.CodeServerError, method+": "+format, args...).With(mhp.DataReason, ReasonTransport).With("sent", sent)
	if sent && actuating(method) {
		e = e.With(mhp.DataOutcome, mhp.OutcomeUnknown)
	}
	return e
}

// encodeError is the refusal of params that cannot be put on the wire:
// NaN and ±Inf are not JSON, so a value carrying one is InvalidValue (what
// the device would answer), refused before anything is sent.
func encodeError(method string, err error) *mhp.Error {
	var uv *json.UnsupportedValueError
	if errors.As(err, &uv) {
		return mhp.Errorf(mhp.CodeInvalidValue, "%s: %s is not a finite number and cannot be sent", method, uv.Str).
			With(mhp.DataValue, uv.Str)
	}
	return mhp.Errorf(mhp.CodeInvalidParams, "%s: params not serialisable: %v", method, err)
}

// ReasonTransport is data.reason of the errors of calls that got no answer.
const ReasonTransport = "transport"

// IsTransportError reports whether err is a call that got no answer from the
// server (unreachable, timed out, connection lost).
func IsTransportError(err error) bool {
	e, ok := mhp.AsError(err)
	return ok && e.Data != nil && e.Data[mhp.DataReason] == ReasonTransport
}

func actuating(method string) bool {
	switch method {
	case mhp.MethodSettingsWrite, mhp.MethodActionsInvoke, mhp.MethodSafetyReset, mhp.MethodJobsResume, mhp.MethodJobsCancel, mhp.MethodJobsPause:
		return true
	}
	return false
}

// rpcError is a JSON-RPC error object read leniently: ts in the error object
// (the reference's place) or in data, a numeric code sent as a float, and
// data that is not an object (kept under data.data).
type rpcError struct{ err *mhp.Error }

func (r *rpcError) UnmarshalJSON(b []byte) error {
	var w struct {
		Code    any    `json:"code"`
		Message string `json:"message"`
		Data    any    `json:"data"`
		TS      any    `json:"ts"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e := &mhp.Error{Message: w.Message}
	if f, ok := number(w.Code); ok {
		e.Code = mhp.Code(int(f))
	} else {
		e.Code = mhp.CodeServerError
	}
	switch d := w.Data.(type) {
	case nil:
	case map[string]any:
		e.Data = d
	default:
		e.Data = map[string]any{"data": d}
	}
	if ts, ok := number(w.TS); ok {
		e.TS = ts
	} else if ts, ok := number(e.Data["ts"]); ok {
		e.TS = ts
	}
	if e.Data != nil {
		delete(e.Data, "ts")
		if len(e.Data) == 0 {
			e.Data = nil
		}
	}
	r.err = e
	return nil
}
