package mqtt

import (
	"context"

	"github.com/openmhp/mhp-go/binding"
)

// What the external tests (package mqtt_test, which may import mqtttest)
// see of the adapter's state.

// Adapter is the adapter behind a driver built by NewWithAdapter.
type Adapter = adapter

// NewWithAdapter is New, also returning the adapter.
func NewWithAdapter(ctx context.Context, cfg Config, opt Options) (*binding.Driver, *Adapter, error) {
	return build(ctx, cfg, opt)
}

// Client is the adapter's broker client.
func (a *adapter) Client() Client { return a.c }

// ClientID is the adapter's MQTT client id.
func (a *adapter) ClientID() string { return a.cfg.ClientID }

// LastRaw is the last payload taken for a signal and the connection it
// arrived on; ok is false when none came.
func (a *adapter) LastRaw(name string) (raw []byte, conn uint64, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.values[name]
	if !ok {
		return nil, 0, false
	}
	return s.raw, s.conn, true
}

// OnlineNow reports whether the device said online on the client's current
// connection.
func (a *adapter) OnlineNow() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.online != nil && *a.online && a.onlineConn == a.c.State().Conn
}
