package transport

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
)

func TestMayBeEStop(t *testing.T) {
	for _, c := range []struct {
		frame string
		want  bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"safety/estop"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method" : "safety/estop","params":{}}`, true},
		{`{"params":{"reason":"x"},"method":"safety/estop","id":1,"jsonrpc":"2.0"}`, true},
		{`{"jsonrpc":"2.0","id":1,"method":"safety\/estop"}`, true},                                     // an escape: maybe
		{`{"jsonrpc":"2.0","id":1,"m\u0065thod":"safety/estop"}`, true},                                 // an escaped member name: maybe
		{`{"jsonrpc":"2.0","id":1,"params":{"method":"safety/estop"},"method":"actions/invoke"}`, true}, // nested: maybe
		{`{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["safety/estop"]}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"settings/write","params":{"name":"x","value":"method: safety/estop"}}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"safety/estopx"}`, false},
		{`{"jsonrpc":"2.0","id":1,"method":`, false},
		{`{"jsonrpc":"2.0","id":1,"method":"safety/est`, false},
	} {
		if got := mayBeEStop([]byte(c.frame)); got != c.want {
			t.Errorf("mayBeEStop(%s) = %v, want %v", c.frame, got, c.want)
		}
	}
}

// While an estop is being served no ordinary request is admitted, even with
// slots free: it waits, and past the queue wait it is refused busy.
func TestAdmissionEStopGoesFirst(t *testing.T) {
	a := newAdmission(Admission{MaxInFlight: 4, QueueWait: 50 * time.Millisecond})
	ctx := context.Background()
	es, e := a.admitFrame(ctx, []byte(`{"jsonrpc":"2.0","id":1,"method":"safety/estop"}`))
	if e != nil || !es.estop {
		t.Fatalf("estop not admitted on the estop path: %+v %v", es, e)
	}
	if _, e := a.admitFrame(ctx, []byte(`{"jsonrpc":"2.0","id":2,"method":"signals/read"}`)); e == nil || e.Data[mhp.DataReason] != ReasonServerBusy {
		t.Fatalf("an ordinary request was admitted while an estop was served: %v", e)
	}
	// A second estop is admitted at once, whatever is in flight.
	es2, e := a.admitFrame(ctx, []byte(`{"jsonrpc":"2.0","id":3,"method":"safety/estop"}`))
	if e != nil || !es2.estop {
		t.Fatalf("second estop: %v", e)
	}
	es.release()
	es2.release()
	ord, e := a.admitFrame(ctx, []byte(`{"jsonrpc":"2.0","id":4,"method":"signals/read"}`))
	if e != nil || !ord.slot {
		t.Fatalf("after the estops, an ordinary request: %v", e)
	}
	ord.release()
	// A frame that only looked like an estop takes a slot once decoded.
	look, _ := a.admitFrame(ctx, []byte(`{"jsonrpc":"2.0","id":5,"params":{"method":"safety/estop"},"method":"actions/invoke"}`))
	if e := look.confirm(ctx, mhp.MethodActionsInvoke); e != nil || !look.slot || look.estop || a.estops.Load() != 0 || len(a.slots) != 1 {
		t.Fatalf("confirm: %v %+v estops %d slots %d", e, look, a.estops.Load(), len(a.slots))
	}
	look.release()
	if len(a.slots) != 0 {
		t.Fatalf("%d slots held after every release", len(a.slots))
	}
}

// Over HTTP: with MaxInFlight ordinary requests stuck in the device, one
// more is refused busy (nothing done, Retry-After), while an estop is
// served at once; once they return, requests are admitted again.
func TestAdmissionOverHTTP(t *testing.T) {
	in := conformance.NewInstrument()
	drv, err := conformance.MemoryDriver(in, conformance.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.ReleaseAll(); drv.Close() })
	srv := NewServer(drv, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Admission: Admission{MaxInFlight: 2, QueueWait: 100 * time.Millisecond}})
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	call := func(sid, body string) (*http.Response, map[string]json.RawMessage) {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/rpc", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if sid != "" {
			req.Header.Set(mhp.HeaderSession, sid)
		}
		resp, err := hs.Client().Do(req)
		if err != nil {
			t.Error(err)
			return nil, nil
		}
		defer resp.Body.Close()
		var m map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Error(err)
		}
		return resp, m
	}
	resp, _ := call("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+mhp.ProtocolVersion+`"}}`)
	sid := resp.Header.Get(mhp.HeaderSession)
	in.Script(conformance.SettingSetpoint, conformance.Block)
	write := `{"jsonrpc":"2.0","id":2,"method":"settings/write","params":{"name":"` + conformance.SettingSetpoint + `","value":30}}`
	answered := make(chan map[string]json.RawMessage, 2)
	for range 2 {
		go func() { _, m := call(sid, write); answered <- m }()
	}
	conformance.Eventually(t, "both writes to hold a slot", func() bool { return len(srv.admission().slots) == 2 })
	resp, m := call(sid, `{"jsonrpc":"2.0","id":7,"method":"signals/read","params":{"names":["`+conformance.SignalTemperature+`"]}}`)
	var busy mhp.Error
	if err := json.Unmarshal(m["error"], &busy); err != nil || busy.Code != mhp.CodeServerError || busy.Data[mhp.DataReason] != ReasonServerBusy ||
		string(m["id"]) != "7" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a request beyond MaxInFlight: %s %v (Retry-After %q)", m["error"], err, resp.Header.Get("Retry-After"))
	}
	_, m = call("", `{"jsonrpc":"2.0","id":8,"method":"safety/estop","params":{"reason":"admission test"}}`)
	if m["result"] == nil {
		t.Fatalf("estop with every slot taken: %s", m["error"])
	}
	for range 2 { // the estop cut the blocked write off; the queued one meets the estop
		if m := <-answered; m["error"] == nil {
			t.Fatalf("a write answered ok after the estop: %s", m["result"])
		}
	}
	if len(srv.admission().slots) != 0 || srv.admission().estops.Load() != 0 {
		t.Fatalf("slots %d, estops %d after every answer", len(srv.admission().slots), srv.admission().estops.Load())
	}
	if _, m := call(sid, `{"jsonrpc":"2.0","id":9,"method":"ping"}`); m["result"] == nil {
		t.Fatalf("ping after the overload: %s", m["error"])
	}
}
