package mhp

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Code is a JSON-RPC error code from the MHP error table.
type Code int

// The MHP error table. Every error a driver returns carries one of these.
const (
	CodeParseError       Code = -32700 // malformed JSON
	CodeInvalidRequest   Code = -32600 // not a JSON-RPC 2.0 request
	CodeMethodNotFound   Code = -32601 // unknown method
	CodeInvalidParams    Code = -32602 // params missing or of the wrong shape
	CodeInternal         Code = -32603 // any other failure while dispatching
	CodeServerError      Code = -32000 // generic protocol error (also: not initialized, unauthorized)
	CodeLimitViolation   Code = -32010 // value outside limits; data carries {min,max} or {enum}
	CodeInterlockOpen    Code = -32011 // an interlock signal is not true; data.interlock
	CodeApprovalRequired Code = -32012 // confirm item sent without approved:true
	CodeForbidden        Code = -32013 // forbid item
	CodeInvalidValue     Code = -32014 // wrong type, NaN/Inf, null, control characters, undeclared or missing param
	CodeMethodRequired   Code = -32015 // method-driven action invoked without method or params
	CodeDeviceFault      Code = -32020 // device in fault, or a write whose outcome is unknown
	CodeDeviceBusy       Code = -32021 // a job is running, reset mid-job, pause on a finished job
	CodeEStopActive      Code = -32022 // device in estop
	CodeNotLeased        Code = -32030 // another session holds the lease, lease lost, or lease required
	CodeUnknownName      Code = -32040 // no such signal, setting, action, resource or method
	CodeJobNotFound      Code = -32041 // no such job
	CodeNotSupported     Code = -32050 // pause/cancel/feature not supported
)

var codeNames = map[Code]string{
	CodeParseError:       "ParseError",
	CodeInvalidRequest:   "InvalidRequest",
	CodeMethodNotFound:   "MethodNotFound",
	CodeInvalidParams:    "InvalidParams",
	CodeInternal:         "InternalError",
	CodeServerError:      "ServerError",
	CodeLimitViolation:   "LimitViolation",
	CodeInterlockOpen:    "InterlockOpen",
	CodeApprovalRequired: "ApprovalRequired",
	CodeForbidden:        "Forbidden",
	CodeInvalidValue:     "InvalidValue",
	CodeMethodRequired:   "MethodRequired",
	CodeDeviceFault:      "DeviceFault",
	CodeDeviceBusy:       "DeviceBusy",
	CodeEStopActive:      "EStopActive",
	CodeNotLeased:        "NotLeased",
	CodeUnknownName:      "UnknownName",
	CodeJobNotFound:      "JobNotFound",
	CodeNotSupported:     "NotSupported",
}

// Codes lists every code of the table, in table order.
func Codes() []Code {
	return []Code{CodeParseError, CodeInvalidRequest, CodeMethodNotFound, CodeInvalidParams, CodeInternal,
		CodeServerError, CodeLimitViolation, CodeInterlockOpen, CodeApprovalRequired, CodeForbidden,
		CodeInvalidValue, CodeMethodRequired, CodeDeviceFault, CodeDeviceBusy, CodeEStopActive,
		CodeNotLeased, CodeUnknownName, CodeJobNotFound, CodeNotSupported}
}

// String returns the code's name from the table, e.g. "LimitViolation".
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is the one error type of MHP: a JSON-RPC error object with a code from
// the table, a human message naming what was refused and why, optional data
// (limits, the gate, the interlock, the outcome) and the device-clock time of
// the refusal. On the wire TS travels as data.ts.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
	// TS is the device clock, in Unix seconds, when the error was made.
	TS float64 `json:"-"`
}

// Errorf makes an [*Error] with a formatted message, stamped with the current time.
// It never returns nil, so it returns the concrete type; a function that may
// succeed returns the error interface instead (see [Shape.Check]).
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), TS: UnixSeconds(time.Now())}
}

// Error implements error: "LimitViolation (-32010): target_temperature=200 above max 105".
func (e *Error) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Code, int(e.Code), e.Message)
}

// With returns a copy of e with a fresh Data map holding data[key] = value.
// e itself is not modified, so one [*Error] may be shared and refined by
// several callers; use the result (e = e.With(k, v)). It never returns nil.
func (e *Error) With(key string, value any) *Error {
	c := e.clone(1)
	c.Data[key] = value
	return c
}

// At returns a copy of e (with a fresh Data map) stamped with the
// device-clock time t. e itself is not modified. It never returns nil.
func (e *Error) At(t time.Time) *Error {
	c := e.clone(0)
	c.TS = UnixSeconds(t)
	return c
}

// clone copies e with a fresh Data map with room for extra more keys; a nil
// Data stays nil when no key is to be added.
func (e *Error) clone(extra int) *Error {
	c := *e
	if e.Data == nil && extra == 0 {
		return &c
	}
	c.Data = make(map[string]any, len(e.Data)+extra)
	for k, v := range e.Data {
		c.Data[k] = v
	}
	return &c
}

// Is reports whether target is an [*Error] with the same code, so
// errors.Is(err, &mhp.Error{Code: mhp.CodeDeviceBusy}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// OutcomeUnknown reports whether the error says the effect on the device is unknown
// (data.outcome == "unknown").
func (e *Error) OutcomeUnknown() bool {
	return e != nil && e.Data != nil && e.Data[DataOutcome] == OutcomeUnknown
}

type wireError struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// MarshalJSON writes the JSON-RPC error object, with ts inside data.
func (e *Error) MarshalJSON() ([]byte, error) {
	w := wireError{Code: e.Code, Message: e.Message}
	if len(e.Data) > 0 || e.TS != 0 {
		w.Data = make(map[string]any, len(e.Data)+1)
		for k, v := range e.Data {
			w.Data[k] = v
		}
		if e.TS != 0 {
			w.Data["ts"] = e.TS
		}
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads a JSON-RPC error object, lifting data.ts into TS.
func (e *Error) UnmarshalJSON(b []byte) error {
	var w wireError
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	e.Code, e.Message, e.Data = w.Code, w.Message, w.Data
	if ts, ok := w.Data["ts"].(float64); ok {
		e.TS = ts
		delete(e.Data, "ts")
		if len(e.Data) == 0 {
			e.Data = nil
		}
	}
	return nil
}

// AsError returns err as an [*Error] if it is or wraps one.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}

// CodeOf returns the MHP code of err, [CodeInternal] for a non-MHP error, 0 for nil.
func CodeOf(err error) Code {
	if err == nil {
		return 0
	}
	if e, ok := AsError(err); ok {
		return e.Code
	}
	return CodeInternal
}

// UnixSeconds converts t to fractional Unix seconds, the protocol's timestamp form.
func UnixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// FromUnixSeconds converts fractional Unix seconds back to a time.
func FromUnixSeconds(s float64) time.Time {
	sec := int64(s)
	return time.Unix(sec, int64((s-float64(sec))*1e9))
}
