package transport_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// ctxSpy is a device that keeps the context of every Read and EStop.
type ctxSpy struct {
	mhp.Device
	mu   sync.Mutex
	ctxs []context.Context
}

func (d *ctxSpy) keep(ctx context.Context) {
	d.mu.Lock()
	d.ctxs = append(d.ctxs, ctx)
	d.mu.Unlock()
}

func (d *ctxSpy) last(t *testing.T) context.Context {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.ctxs) == 0 {
		t.Fatal("the device was not called")
	}
	return d.ctxs[len(d.ctxs)-1]
}

func (d *ctxSpy) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	d.keep(ctx)
	return d.Device.Read(ctx, names)
}

func (d *ctxSpy) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	d.keep(ctx)
	return d.Device.EStop(ctx, reason)
}

// TestDeviceCallContextOverHTTP: the context of a device call over HTTP
// carries the identity the guard let in, the session label, the values of
// the request's context, and no cancellation: it is not cancelled once the
// request is over (a hook cut off mid-write would make an unknown outcome).
func TestDeviceCallContextOverHTTP(t *testing.T) {
	file := authtest.Credentials(t, t.TempDir(), "alice=agent:alice-token", "olga=operator:olga-token")
	withCreds, err := auth.New(auth.Config{CredentialsFile: file, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	read := `{"jsonrpc":"2.0","id":2,"method":"signals/read","params":{"names":["` + conformance.SignalTemperature + `"]}}`
	estop := `{"jsonrpc":"2.0","id":3,"method":"safety/estop","params":{"reason":"ctx"}}`
	tests := []struct {
		name      string
		auth      *auth.Authenticator
		handlers  bool // extra routes: the ServeMux path
		token     string
		body      string
		session   bool
		wantName  string
		wantVia   string
		wantLabel string // prefix
	}{
		{"no credentials", nil, false, "", read, true, "", "none", "client#"},
		{"a token", withCreds, false, "alice-token", read, true, "alice", "token", "alice/client#"},
		{"a token, extra routes", withCreds, true, "olga-token", read, true, "olga", "token", "olga/client#"},
		{"estop without a session", withCreds, false, "alice-token", estop, false, "alice", "token", transport.AnonymousLabel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMemory(t, conformance.Options{})
			spy := &ctxSpy{Device: m.drv}
			opts := transport.Options{Auth: tt.auth}
			if tt.handlers {
				opts.Handlers = map[string]http.Handler{"GET /extra": http.NotFoundHandler()}
			}
			url := serveHTTP(t, newServer(t, spy, opts)).URL
			h := map[string]string{}
			if tt.token != "" {
				h = bearer(tt.token)
			}
			if tt.session {
				h[mhp.HeaderSession] = initHTTP(t, url, h)
			}
			if _, r := post(t, url, tt.body, h); r.Error != nil {
				t.Fatalf("call: %v", r.Error)
			}
			ctx := spy.last(t)
			id, ok := auth.FromContext(ctx)
			if !ok || id.Name != tt.wantName || id.Via != tt.wantVia {
				t.Errorf("identity in the device call: %+v %v; want name %q via %q", id, ok, tt.wantName, tt.wantVia)
			}
			if label := mhp.SessionFrom(ctx); !strings.HasPrefix(label, tt.wantLabel) {
				t.Errorf("session label %q; want it to start with %q", label, tt.wantLabel)
			}
			if ctx.Value(http.ServerContextKey) == nil {
				t.Error("the request context's values do not reach the device call")
			}
			// The request is answered: its own context is cancelled by now;
			// the device call's is not, and never will be.
			if ctx.Done() != nil || ctx.Err() != nil || context.Cause(ctx) != nil {
				t.Errorf("device call context: done %v, err %v, cause %v; want no cancellation", ctx.Done(), ctx.Err(), context.Cause(ctx))
			}
		})
	}
}
