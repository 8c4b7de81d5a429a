package methods

import (
	"context"

	"github.com/openmhp/mhp-go"
)

// Notification methods of saved methods.
const (
	NotifySaved   = "notifications/methods/saved"
	NotifyRetired = "notifications/methods/retired"
)

// Device serves saved methods for a device: actions/invoke accepts
// {"method": NAME}, and WireMethods answers methods/list, find, get, diff,
// save and delete. Every other call goes to the wrapped device unchanged.
type Device struct {
	mhp.Device
	store     *Store
	listeners mhp.Listeners // for methods/saved and methods/retired
}

// Wrap serves store's methods in front of dev (a nil store: Empty()).
func Wrap(dev mhp.Device, store *Store) *Device {
	if store == nil {
		store = Empty()
	}
	return &Device{Device: dev, store: store}
}

// Unwrap returns the wrapped device ([mhp.Unwrapper]).
func (d *Device) Unwrap() mhp.Device { return d.Device }

// Store returns the methods store.
func (d *Device) Store() *Store { return d.store }

// Listen implements [mhp.Device]: the device's notifications and the store's.
func (d *Device) Listen(fn func(mhp.Notification)) func() { return d.listeners.Listen(d.Device, fn) }

func (d *Device) publish(method string, params map[string]any) {
	d.listeners.Publish(mhp.Notification{Method: method, Params: params})
}

// Invoke implements [mhp.Device]. With req.Method set, the method's action and
// params run, req.Params overriding the saved params key by key; a req.Name
// that names another action is refused. Project and compound travel on as
// given. The gates are the device's, as for any invoke.
func (d *Device) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	if req.Method == "" {
		return d.Device.Invoke(ctx, req)
	}
	m, err := d.store.Get(req.Method)
	if err != nil {
		return nil, err
	}
	if req.Name != "" && req.Name != m.Action {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "method %q runs action %q, not %q", m.Name, m.Action, req.Name).
			With(mhp.DataField, "name").With(mhp.DataMethod, m.Name)
	}
	params := m.Params
	for k, v := range req.Params {
		params[k] = v
	}
	out := req
	out.Name, out.Params, out.Method = m.Action, params, ""
	res, err := d.Device.Invoke(ctx, out)
	if e, ok := mhp.AsError(err); ok && e.Data != nil {
		err = e.With(mhp.DataMethod, m.Name).With("revision", m.Revision)
	}
	return res, err
}

// ListRequest is methods/list.
type ListRequest struct {
	Action string `json:"action,omitempty"`
}

// FindRequest is methods/find.
type FindRequest struct {
	Query  string `json:"query"`
	Action string `json:"action,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// ListResult answers methods/list and methods/find.
type ListResult struct {
	Methods []Summary `json:"methods"`
}

// GetRequest is methods/get and methods/delete.
type GetRequest struct {
	Name string `json:"name"`
}

// DiffRequest is methods/diff: method A against method B, or against Params.
type DiffRequest struct {
	A      string         `json:"a"`
	B      string         `json:"b,omitempty"`
	Params map[string]any `json:"params,omitempty"`
}

// DiffResult answers methods/diff.
type DiffResult struct {
	A       string   `json:"a"`
	B       string   `json:"b,omitempty"`
	Changes []Change `json:"changes"`
}

// SaveRequest is methods/save.
type SaveRequest struct {
	Name        string         `json:"name"`
	Action      string         `json:"action"`
	Params      map[string]any `json:"params"`
	Description string         `json:"description,omitempty"`
	Tags        []string       `json:"tags,omitempty"`
}

// DeleteResult answers methods/delete.
type DeleteResult struct {
	Deleted string `json:"deleted"`
}

// List answers methods/list (never blocked by a lease or a job).
func (d *Device) List(ctx context.Context, req ListRequest) (*ListResult, error) {
	return &ListResult{Methods: d.store.List(req.Action)}, nil
}

// Find answers methods/find.
func (d *Device) Find(ctx context.Context, req FindRequest) (*ListResult, error) {
	if len(req.Query) > 1024 {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "methods/find query is over 1024 bytes").With(mhp.DataField, "query")
	}
	return &ListResult{Methods: d.store.Find(req.Query, req.Action, req.Limit)}, nil
}

// Get answers methods/get.
func (d *Device) Get(ctx context.Context, req GetRequest) (*Method, error) {
	m, err := d.store.Get(req.Name)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Diff answers methods/diff.
func (d *Device) Diff(ctx context.Context, req DiffRequest) (*DiffResult, error) {
	a, err := d.store.Get(req.A)
	if err != nil {
		return nil, err
	}
	var other map[string]any
	switch {
	case req.B != "" && req.Params != nil:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "methods/diff takes b or params, not both").With(mhp.DataField, "params")
	case req.B != "":
		b, err := d.store.Get(req.B)
		if err != nil {
			return nil, err
		}
		other = b.Params
	case req.Params != nil:
		other = req.Params
	default:
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "methods/diff needs b (a method) or params").With(mhp.DataField, "b")
	}
	return &DiffResult{A: req.A, B: req.B, Changes: Diff(a.Params, other)}, nil
}

// Save answers methods/save: the params are checked against the action's
// declared params (types, limits, required) before anything is written, so
// a saved method is one the device would accept.
func (d *Device) Save(ctx context.Context, req SaveRequest) (*Summary, error) {
	if !d.store.Writable() {
		return nil, d.store.readOnly()
	}
	if err := validName(req.Name); err != nil {
		return nil, err
	}
	desc, err := d.Device.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Actions: []string{req.Action}}})
	if err != nil {
		return nil, err
	}
	var act *mhp.Action
	for i := range desc.Actions {
		if desc.Actions[i].Name == req.Action {
			act = &desc.Actions[i]
		}
	}
	if act == nil {
		return nil, mhp.Errorf(mhp.CodeUnknownName, "no action %q", req.Action).With(mhp.DataKind, "action").With(mhp.DataName, req.Action)
	}
	if req.Params == nil {
		req.Params = map[string]any{}
	}
	if _, err := act.Params.Check(req.Action, req.Params); err != nil {
		e, _ := mhp.AsError(err)
		return nil, e.With(mhp.DataMethod, req.Name)
	}
	s, err := d.store.Save(Method{Name: req.Name, Action: req.Action, Params: req.Params, Description: req.Description, Tags: req.Tags},
		mhp.SessionFrom(ctx))
	if err != nil {
		return nil, err
	}
	d.publish(NotifySaved, map[string]any{"method": s.Name, "revision": s.Revision, "action": s.Action, "by": mhp.SessionFrom(ctx)})
	return &s, nil
}

// Delete answers methods/delete.
func (d *Device) Delete(ctx context.Context, req GetRequest) (*DeleteResult, error) {
	if err := d.store.Delete(req.Name); err != nil {
		return nil, err
	}
	d.publish(NotifyRetired, map[string]any{"method": req.Name, "by": mhp.SessionFrom(ctx)})
	return &DeleteResult{Deleted: req.Name}, nil
}

// WireMethods implements [mhp.Extension]: the six methods/* calls.
func (d *Device) WireMethods() map[string]mhp.WireMethod {
	return map[string]mhp.WireMethod{
		mhp.MethodMethodsList:   mhp.Handle(mhp.MethodMethodsList, d.List),
		mhp.MethodMethodsFind:   mhp.Handle(mhp.MethodMethodsFind, d.Find),
		mhp.MethodMethodsGet:    mhp.Handle(mhp.MethodMethodsGet, d.Get),
		mhp.MethodMethodsDiff:   mhp.Handle(mhp.MethodMethodsDiff, d.Diff),
		mhp.MethodMethodsSave:   mhp.Handle(mhp.MethodMethodsSave, d.Save),
		mhp.MethodMethodsDelete: mhp.Handle(mhp.MethodMethodsDelete, d.Delete),
	}
}
