package mcpbridge_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/manual"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/transport"
)

// TestOperatorTool: with the operator tools and the operator's token the
// host answers for the person at a manual device (mhp_operator); without
// them the tool is not even listed.
func TestOperatorTool(t *testing.T) {
	dev, closeDev, err := manual.Open(context.Background(), filepath.Join("..", "manual", "testdata", "centrifuge-01"), manual.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeDev() })
	srv := transport.NewServer(dev, transport.Options{OperatorToken: operatorToken})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	bridge := func(p mcpbridge.Policy, tok string) *mcp.ClientSession {
		dir, err := directory.New(directory.Config{Index: directory.NewIndex([]directory.Card{{
			DeviceInfo: mhp.DeviceInfo{ID: "centrifuge-01", Class: "centrifuge"}, Target: hs.URL}}),
			Pinger: directory.PingerFunc(func(context.Context, string) (mhp.DeviceState, error) { return mhp.StateIdle, nil })})
		if err != nil {
			t.Fatal(err)
		}
		b, err := mcpbridge.New(mcpbridge.Config{Finder: dir, Policy: &p, OperatorToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		return session(t, b, nil)
	}
	agent := bridge(mcpbridge.Policy{Enabled: true, AllowHardware: true}, "")
	list, err := agent.ListTools(context.Background(), &mcp.ListToolsParams{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range list.Tools {
		if tl.Name == "mhp_operator" {
			t.Fatal("mhp_operator listed without the operator tools")
		}
	}
	op := bridge(mcpbridge.Policy{Enabled: true, AllowHardware: true, OperatorTools: true}, operatorToken)
	if res, body := mustCall(t, op, "mhp_operator", map[string]any{"device": "centrifuge-01", "op": "record", "signal": "balanced", "value": true}); res.IsError {
		t.Fatalf("record: %v", body)
	}
	inv, err := mhp.AsSession(dev, "agent").Invoke(context.Background(),
		mhp.InvokeRequest{Name: "spin", Approved: true, Params: map[string]any{"duration_s": 5.0}})
	if err != nil {
		t.Fatal(err)
	}
	id := inv.Job.ID
	// The job reaches waiting_operator on its own goroutine after the
	// invoke answers: wait for it to be pending, do not read it once.
	var res *mcp.CallToolResult
	var body map[string]any
	conformance.Eventually(t, "the spin pending for the operator", func() bool {
		res, body = mustCall(t, op, "mhp_operator", map[string]any{"device": "centrifuge-01", "op": "pending"})
		jobs, _ := body["jobs"].([]any)
		return !res.IsError && len(jobs) == 1
	})
	res, body = mustCall(t, op, "mhp_operator", map[string]any{"device": "centrifuge-01", "op": "answer", "job": id,
		"outcome": "done", "note": "from the host"})
	if res.IsError {
		t.Fatalf("answer: %v", body)
	}
	// The answer waits a bounded while for the job to settle; the job ends
	// on its own goroutine, so wait for the terminal state.
	var j *mhp.Job
	conformance.Eventually(t, "the answered job to end", func() bool {
		var err error
		j, err = dev.Job(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return j.State.Terminal()
	})
	if r, _ := j.Result.(map[string]any); j.State != mhp.JobDone || r["note"] != "from the host" {
		t.Fatalf("job after mhp_operator: %+v", j)
	}
	// A bad outcome is refused by the schema before the device is asked.
	if res, _ := mustCall(t, op, "mhp_operator", map[string]any{"device": "centrifuge-01", "op": "answer", "job": id, "outcome": "maybe"}); !res.IsError {
		t.Fatal("outcome maybe accepted")
	}
}
