package mhp

import (
	"bytes"
	"context"
	"encoding/json"
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
		var req Req
		if err := DecodeParams(method, params, &req); err != nil {
			return nil, err
		}
		return fn(ctx, req)
	}
}

// DecodeParams decodes a params object strictly into dst: absent or null
// params leave dst zero; unknown fields and trailing data are InvalidParams
// naming the method and, where known, the field.
func DecodeParams(method string, params json.RawMessage, dst any) error {
	if len(params) == 0 || bytes.Equal(bytes.TrimSpace(params), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		e := Errorf(CodeInvalidParams, "%s: params: %s", method, Truncate(err.Error(), 256))
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok && te.Field != "" {
			e = e.With("field", te.Field)
		}
		return e
	}
	if dec.More() {
		return Errorf(CodeInvalidParams, "%s: params: trailing data after the object", method)
	}
	return nil
}

func asTypeError(err error, dst **json.UnmarshalTypeError) bool {
	te, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*dst = te
	}
	return ok
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
