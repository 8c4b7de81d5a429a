package transport_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

// These tests play the Python reference SDK's exact exchanges (openmhp
// client.py) against our server.

// TestReferenceHeartbeatRenewsWithTTL: the SDK acquires with {ttl} and its
// heartbeat sends session/renew {"ttl": ttl} every min(ttl, watchdog)/3,
// ignoring any error but NotLeased. The renew must be accepted and extend
// the lease, so another client's write is refused while the SDK is idle
// beyond the first ttl.
func TestReferenceHeartbeatRenewsWithTTL(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{Clock: m.clk})
	sdk, other := newRawStream(t, srv), newRawStream(t, srv)
	for _, rs := range []*rawStream{sdk, other} {
		rs.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"openmhp-client"}}}`)
		if r := rs.await("1"); r.Error != nil {
			t.Fatal(r.Error)
		}
	}
	sdk.send(`{"jsonrpc":"2.0","id":2,"method":"session/acquire","params":{"ttl":3}}`)
	if r := sdk.await("2"); r.Error != nil {
		t.Fatal(r.Error)
	}
	var last float64
	for i := 0; i < 7; i++ { // 7 s of heartbeats, every 1 s (ttl 3 / 3)
		m.clk.Advance(time.Second)
		sdk.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"hb-%d","method":"session/renew","params":{"ttl":3}}`, i))
		r := sdk.await(fmt.Sprintf(`"hb-%d"`, i))
		if r.Error != nil {
			t.Fatalf("heartbeat %d: session/renew {ttl} refused: %v", i, r.Error)
		}
		var l mhp.Lease
		json.Unmarshal(r.Result, &l)
		want := mhp.UnixSeconds(m.clk.Now().Add(3 * time.Second))
		if l.TTL != 3 || l.Expires != want || l.Expires <= last {
			t.Fatalf("heartbeat %d answered %+v, want ttl 3 and the new expiry %v", i, l, want)
		}
		last = l.Expires
	}
	other.send(`{"jsonrpc":"2.0","id":3,"method":"settings/write","params":{"name":"setpoint","value":5}}`)
	if r := other.await("3"); code(r) != mhp.CodeNotLeased {
		t.Fatalf("another client's write while the SDK holds the lease: %s %v, want NotLeased", r.Result, r.Error)
	}
	sdk.send(`{"jsonrpc":"2.0","id":4,"method":"session/renew","params":{"ttl":7200}}`)
	if r := sdk.await("4"); code(r) != mhp.CodeInvalidParams {
		t.Fatalf("renew with ttl 7200: %v, want InvalidParams (bounded like acquire)", r.Error)
	}
	// A shorter ttl takes effect: 2 s later the lease has lapsed.
	sdk.send(`{"jsonrpc":"2.0","id":5,"method":"session/renew","params":{"ttl":1}}`)
	if r := sdk.await("5"); r.Error != nil {
		t.Fatal(r.Error)
	}
	m.clk.Advance(2 * time.Second)
	other.send(`{"jsonrpc":"2.0","id":6,"method":"settings/write","params":{"name":"setpoint","value":6}}`)
	if r := other.await("6"); r.Error != nil {
		t.Fatalf("write after the renewed 1 s ttl lapsed: %v", r.Error)
	}
}

// TestReferenceDryRunInvokeHasJob: the SDK's invoke returns result["job"]
// for dry runs too; the answer carries the reference's job (state dryRun)
// beside our dryRun and wouldRun.
func TestReferenceDryRunInvokeHasJob(t *testing.T) {
	m := newMemory(t, conformance.Options{})
	srv := newServer(t, m.drv, transport.Options{Clock: m.clk})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"openmhp-client"}}}`)
	rs.await("1")
	rs.send(`{"jsonrpc":"2.0","id":2,"method":"actions/invoke","params":{"name":"quick","params":{},"approved":false,"dryRun":true}}`)
	r := rs.await("2")
	if r.Error != nil {
		t.Fatal(r.Error)
	}
	var res map[string]any
	json.Unmarshal(r.Result, &res)
	job, ok := res["job"].(map[string]any)
	if !ok || job["state"] != "dryRun" || job["action"] != "quick" || res["dryRun"] != true {
		t.Fatalf("dry-run invoke answered %s, want a job in state dryRun naming the action, and dryRun true", r.Result)
	}
	if _, hasID := job["id"]; !hasID {
		t.Fatalf("the job of a dry run has no id key (the SDK reads job[\"id\"]): %s", r.Result)
	}
	var ir mhp.InvokeResult
	if err := json.Unmarshal(r.Result, &ir); err != nil || ir.Job != nil || !ir.DryRun || ir.Action != "quick" {
		t.Fatalf("our decoding of the dry run = %+v, %v; want a dry run with no job", ir, err)
	}
}
