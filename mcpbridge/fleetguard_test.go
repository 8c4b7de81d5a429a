package mcpbridge_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/host"
)

// A fleet-hosted device is wrapped as `mhp serve` wraps its device: the
// bridge's writes carry command ids, each leaves a receipt in the fleet's
// shared evidence log (HOME/evidence), a resend of a command id is answered
// from the guard without reaching the device again, and the package's
// saved methods are served.
func TestFleetHostedDeviceIsGuarded(t *testing.T) {
	b, f := fleetBridge(t)
	ctx := context.Background()
	pkg, _ := filepath.Abs("../examples/devices/thermocycler-01")
	e, err := f.Prepare(ctx, pkg, host.AddOptions{Twin: true})
	if err == nil {
		_, err = f.Commit(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := e.ID
	cs := session(t, b, nil)
	if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": id, "name": "target_temperature", "value": 60}); res.IsError {
		t.Fatalf("write: %v", body)
	}
	res, body := mustCall(t, cs, "mhp_evidence", map[string]any{"device": id})
	if res.IsError {
		t.Fatalf("a fleet-hosted device keeps no evidence: %v", body)
	}
	var first map[string]any
	for _, en := range entries(body) {
		if en["method"] == mhp.MethodSettingsWrite && en["name"] == "target_temperature" {
			first = en
		}
	}
	cmd, _ := first["command_id"].(string)
	label, _ := first["session"].(string)
	if first == nil || cmd == "" || label == "" || first["outcome"] == "replayed" {
		t.Fatalf("no receipt with a command id for the write: %v", body)
	}
	if shared, err := evidence.IsShared(filepath.Join(f.Home(), "evidence")); err != nil || !shared {
		t.Fatalf("the home's evidence folder holds no shared log for %s: %v", id, err)
	}

	// The first command resent on the same session is the guard's replay:
	// the device does not act again. The device announces every write it
	// acts on, in order, so the announcement of a later write (its own
	// command id) with none for the resend between shows it acted once.
	dev, err := f.Hosted(ctx, e.Target)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan any, 64)
	stop := dev.Listen(func(n mhp.Notification) {
		if n.Method == mhp.NotifySettingsChanged && n.Params["name"] == "target_temperature" {
			select {
			case seen <- n.Params["value"]:
			default:
			}
		}
	})
	defer stop()
	again, err := dev.Write(mhp.WithSession(ctx, label), mhp.WriteRequest{Name: "target_temperature", Value: 60, CommandID: cmd})
	if err != nil || !again.OK {
		t.Fatalf("resent command %s: %+v %v", cmd, again, err)
	}
	if res, body := mustCall(t, cs, "mhp_write", map[string]any{"device": id, "name": "target_temperature", "value": 70}); res.IsError {
		t.Fatalf("later write: %v", body)
	}
	select {
	case v := <-seen:
		if v != 70.0 {
			t.Fatalf("the device acted on %v before the later write's 70: the resent command %s acted twice", v, cmd)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the later write was never announced")
	}
	_, byCmd := mustCall(t, cs, "mhp_evidence", map[string]any{"device": id, "command_id": cmd})
	got := entries(byCmd)
	if len(got) != 2 || got[0]["outcome"] == "replayed" || got[1]["outcome"] != "replayed" {
		t.Fatalf("receipts of command %s: %v; want the write and its replay", cmd, got)
	}

	// The package's saved methods are served on its twin.
	res, body = mustCall(t, cs, "mhp_describe", map[string]any{"device": id, "methods": ""})
	if res.IsError || !strings.Contains(jsonOf(res.StructuredContent), "pcr-standard-30") {
		t.Fatalf("saved methods of the package: %v", body)
	}
}
