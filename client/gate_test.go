package client_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

type gateKey struct{}

// A connection's Gate sees every method before it leaves, in process and
// over the wire: a refused method is the call's answer and the device never
// acts; an allowed one goes on with the context the gate gave (in process,
// the device sees its values); an in-process connection with an Owner is
// labelled owner/client#hex.
func TestGateChecksEveryMethodBeforeItLeaves(t *testing.T) {
	in := conformance.NewInstrument()
	drv, err := conformance.MemoryDriver(in, conformance.Options{}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := drv.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	srv := transport.NewServer(drv, transport.Options{Logger: quiet()})
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)

	var mu sync.Mutex
	var asked []string
	refusal := mhp.Errorf(mhp.CodeServerError, "refused by the gate")
	gate := func(ctx context.Context, method string) (context.Context, error) {
		mu.Lock()
		asked = append(asked, method)
		mu.Unlock()
		if method == mhp.MethodSettingsWrite || method == mhp.MethodSessionAcquire || method == mhp.MethodEvidenceHead {
			return ctx, refusal
		}
		return context.WithValue(ctx, gateKey{}, "through the gate"), nil
	}
	opts := client.Options{Gate: gate, Owner: "ada", ClientName: "bridge", Logger: quiet(), Plain: true}
	wired, err := client.Dial(ctx, hs.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wired.Close() })
	inproc := client.Connect(drv, opts)
	t.Cleanup(func() { inproc.Close() })
	if l := inproc.Session(); !strings.HasPrefix(l, "ada/bridge#") {
		t.Errorf("in-process session label %q, want ada/bridge#…", l)
	}
	for name, d := range map[string]*client.Device{"wire": wired, "in process": inproc} {
		mu.Lock()
		asked = nil
		mu.Unlock()
		if _, err := d.Read(ctx, nil); err != nil {
			t.Fatalf("%s: read: %v", name, err)
		}
		_, werr := d.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: 40.0})
		_, aerr := d.Acquire(ctx, 0)
		cerr := d.Call(ctx, mhp.MethodEvidenceHead, nil, nil)
		for what, err := range map[string]error{"write": werr, "acquire": aerr, "evidence/head": cerr} {
			if err != refusal {
				t.Errorf("%s: %s: %v, want the gate's refusal", name, what, err)
			}
		}
		if v, _ := in.Written(conformance.SettingSetpoint); v != 20.0 {
			t.Errorf("%s: the device applied a write the gate refused", name)
		}
		mu.Lock()
		got := strings.Join(asked, " ")
		mu.Unlock()
		want := mhp.MethodSignalsRead + " " + mhp.MethodSettingsWrite + " " + mhp.MethodSessionAcquire + " " + mhp.MethodEvidenceHead
		if got != want {
			t.Errorf("%s: the gate was asked %q, want %q", name, got, want)
		}
	}
}
