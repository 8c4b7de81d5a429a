package transport

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
)

// A server nobody talked to holds no per-session state (10,000 served
// devices each pay for it): no session maps, no armed sweep, no admission
// state. The first session makes them; the sweep runs while HTTP sessions
// live and stops once the last is gone.
func TestIdleServerHoldsNoSessionState(t *testing.T) {
	in := conformance.NewInstrument()
	drv, err := conformance.MemoryDriver(in, conformance.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.ReleaseAll(); drv.Close() })
	clk := clock.NewManual(time.Unix(1_800_000_000, 0))
	srv := NewServer(drv, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Clock: clk, SessionTTL: time.Minute})
	t.Cleanup(func() { srv.Close() })
	state := func() (maps, sweep, adm bool) {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.sessions != nil || srv.labels != nil || srv.byHeader != nil || srv.greeted != nil || srv.done != nil,
			srv.sweep != nil, srv.adm.Load() != nil
	}
	if maps, sweep, adm := state(); maps || sweep || adm || clk.Pending() != 0 {
		t.Fatalf("a fresh server holds session maps %v, an armed sweep %v (%d timers), admission state %v", maps, sweep, clk.Pending(), adm)
	}
	ss, e := srv.openSession(kindIssued, "alice", "")
	if e != nil {
		t.Fatal(e)
	}
	if maps, sweep, _ := state(); !maps || !sweep || clk.Pending() != 1 {
		t.Fatalf("with a session: maps %v, sweep %v (%d timers)", maps, sweep, clk.Pending())
	}
	if got, ok := srv.lookup("", ss.secret); !ok || got != ss {
		t.Fatal("the session is not found by its secret")
	}
	conformance.Eventually(t, "the idle session to be swept", func() bool {
		clk.Advance(15 * time.Second)
		return srv.Sessions() == 0
	})
	if _, sweep, _ := state(); sweep || clk.Pending() != 0 {
		t.Fatalf("no session left, and the sweep is still armed (%d timers)", clk.Pending())
	}
	if _, e := srv.openSession(kindIssued, "bob", ""); e != nil || clk.Pending() != 1 {
		t.Fatalf("a new session re-arms the sweep: %v, %d timers", e, clk.Pending())
	}
}
