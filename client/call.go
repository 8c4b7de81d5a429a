package client

import (
	"context"
	"encoding/json"

	"github.com/openmhp/mhp-go"
)

// Call sends any method beyond [mhp.Device]'s own (evidence/head,
// evidence/list, methods/*, permits/issue) and decodes its result into out
// (may be nil). In process, the method is looked up among the device
// chain's extensions ([mhp.WireExtensions]; operator methods only with
// [Options.OperatorToken] set).
func (d *Device) Call(ctx context.Context, method string, params, out any) error {
	if d.opts.Gate != nil {
		var err error
		if ctx, err = d.opts.Gate(ctx, method); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, d.opts.Timeout)
	defer cancel()
	if d.conn != nil {
		return d.conn.call(ctx, method, params, out)
	}
	base := mhp.Device(d.base)
	if p, isInproc := d.base.(*inproc); isInproc {
		// The session view hides the device's extensions: look them up on
		// the device itself and call them as this connection's session.
		base, ctx = p.raw, mhp.WithSession(ctx, p.session)
	}
	fn, ok := mhp.WireExtensions(base)[method]
	if !ok && d.opts.OperatorToken != "" {
		fn, ok = mhp.OperatorExtensions(base)[method]
	}
	if !ok {
		return mhp.Errorf(mhp.CodeMethodNotFound, "method %q not found", method).With(mhp.DataMethod, method)
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return encodeError(method, err)
	}
	res, err := fn(ctx, raw)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return mhp.Errorf(mhp.CodeInternal, "%s: %v", method, err)
	}
	return json.Unmarshal(b, out)
}
