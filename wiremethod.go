package mhp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
)

// WireMethod is one extra JSON-RPC method a server answers beside the
// Device's own: ctx carries the caller's session label ([SessionFrom]); params
// is the raw params object (nil when absent).
type WireMethod func(ctx context.Context, params json.RawMessage) (any, error)

// Extension is implemented by values that add wire methods to a served
// device (evidence, permits, saved methods). The transport looks methods up
// here after its own table; a name it already serves is never overridden.
type Extension interface {
	WireMethods() map[string]WireMethod
}

// OperatorExtension is implemented by values that add wire methods only an
// operator may call (issuing permits): the transport serves them only to a
// request that carries the operator token, never to an agent's session.
type OperatorExtension interface {
	OperatorWireMethods() map[string]WireMethod
}

// Handle adapts a typed function to a [WireMethod]: params are decoded
// strictly into Req (unknown fields refused, naming the method) and the
// result is returned as is.
func Handle[Req, Res any](method string, fn func(ctx context.Context, req Req) (Res, error)) WireMethod {
	return func(ctx context.Context, params json.RawMessage) (any, error) {
		req, err := DecodeAs[Req](method, params)
		if err != nil {
			return nil, err
		}
		return fn(ctx, req)
	}
}

// DecodeAs decodes params into a new Req with DecodeParams: the typed form
// Handle and the transport's method table use.
func DecodeAs[Req any](method string, params json.RawMessage) (Req, error) {
	var req Req
	err := DecodeParams(method, params, &req)
	return req, err
}

// DecodeParams decodes a method's params object strictly into dst; it is
// the one params decoder of the module (the transport's method table and
// every Handle use it). Absent or null params leave dst zero. An unknown
// member, a member of the wrong type or trailing data is InvalidParams
// naming the method and the member in data.field ("params" when no member
// is to blame); a number too large for a double is InvalidValue. Values
// typed any decode as float64, bool, string, []any, map[string]any or nil
// (numbers are not json.Number).
func DecodeParams(method string, params json.RawMessage, dst any) error {
	if len(params) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return paramsError(method, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(CodeInvalidParams, "%s: trailing data after params", method).With(DataField, "params")
	}
	return nil
}

// paramsError turns a decode error into the InvalidParams (or, for an
// overflowing number, InvalidValue) error naming the member.
func paramsError(method string, err error) *Error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "params"
		}
		if NumberOverflows(te) {
			return Errorf(CodeInvalidValue, "%s: %s: %s is not a finite number (it overflows a double)",
				method, field, Truncate(strings.TrimPrefix(te.Value, "number "), 64)).With(DataField, field)
		}
		return Errorf(CodeInvalidParams, "%s: %s is %s, expected %s", method, field, te.Value, te.Type.String()).
			With(DataField, field)
	}
	if msg := err.Error(); strings.HasPrefix(msg, "json: unknown field ") {
		field := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
		return Errorf(CodeInvalidParams, "%s: unknown field %q", method, field).With(DataField, field)
	}
	return Errorf(CodeInvalidParams, "%s: params: %v", method, err).With(DataField, "params")
}

// NumberOverflows reports a JSON number too large for a float64 (1e400): a
// value error (InvalidValue, as NaN and Inf are), not a shape error.
func NumberOverflows(te *json.UnmarshalTypeError) bool {
	return strings.HasPrefix(te.Value, "number ") && te.Type != nil && te.Type.Kind() == reflect.Float64
}

// Unwrapper is implemented by devices that decorate another (guards,
// method stores): Unwrap returns the device they wrap.
type Unwrapper interface {
	Unwrap() Device
}

// Find returns the first device in dev's decorator chain (dev itself, then
// each Unwrap) that implements T, such as [ResourceProvider].
func Find[T any](dev Device) (T, bool) {
	for i := 0; dev != nil && i < 64; i++ {
		if t, ok := dev.(T); ok {
			return t, true
		}
		u, ok := dev.(Unwrapper)
		if !ok {
			break
		}
		dev = u.Unwrap()
	}
	var zero T
	return zero, false
}

// OperatorExtensions collects the operator-only wire methods of dev's chain.
func OperatorExtensions(dev Device) map[string]WireMethod {
	return collect(dev, func(d Device) map[string]WireMethod {
		if x, ok := d.(OperatorExtension); ok {
			return x.OperatorWireMethods()
		}
		return nil
	})
}

// WireExtensions collects the extra wire methods of every device in dev's
// decorator chain; the outermost decorator wins a name.
func WireExtensions(dev Device) map[string]WireMethod {
	return collect(dev, func(d Device) map[string]WireMethod {
		if x, ok := d.(Extension); ok {
			return x.WireMethods()
		}
		return nil
	})
}

// collect walks dev's decorator chain outermost first, merging each
// device's methods; a name already taken is kept.
func collect(dev Device, methodsOf func(Device) map[string]WireMethod) map[string]WireMethod {
	out := map[string]WireMethod{}
	for i := 0; dev != nil && i < 64; i++ {
		for name, m := range methodsOf(dev) {
			if _, taken := out[name]; !taken {
				out[name] = m
			}
		}
		u, ok := dev.(Unwrapper)
		if !ok {
			break
		}
		dev = u.Unwrap()
	}
	return out
}

// CommandIDer is implemented by devices (decorators such as guard) that
// honour commandId on settings/write and actions/invoke; the transport
// advertises capabilities.commandIds when one is in the chain.
type CommandIDer interface {
	HonoursCommandIDs() bool
}
