package script_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/script"
	"github.com/openmhp/mhp-go/transport"
)

// TestBudgetEndingDuringADeviceCallSaysSo: a run whose time budget ends
// while a write over HTTP waits for its answer reports the budget, not
// reason "transport", and keeps that the write may have acted.
func TestBudgetEndingDuringADeviceCallSaysSo(t *testing.T) {
	release := make(chan struct{})
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "slow-01"},
		Logger: slog.New(slog.DiscardHandler),
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "sp", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { <-release; return binding.Applied, nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	srv := transport.NewServer(drv, transport.Options{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(func() { srv.Close() })
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	d, err := client.Dial(context.Background(), hs.URL, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	t.Cleanup(func() { close(release) }) // first: the server's handler waits on it
	res, err := script.Run(context.Background(), `lab["slow"].write("sp", 5)`, script.Devices{"slow": d}, script.Options{Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.MHP == nil || res.MHP.Data[mhp.DataReason] != script.ReasonTimeBudget || !strings.Contains(res.Error, "time budget") {
		t.Fatalf("result %+v (mhp %v), want reason %q", res, res.MHP, script.ReasonTimeBudget)
	}
	if res.MHP.Data["sent"] != true || res.MHP.Data[mhp.DataOutcome] != mhp.OutcomeUnknown {
		t.Fatalf("the write may have acted, yet the result says %v", res.MHP.Data)
	}
}
