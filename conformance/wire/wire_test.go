package wire_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/conformance/wire"
	"github.com/openmhp/mhp-go/conformance/wire/wiretest"
	"github.com/openmhp/mhp-go/transport"
)

func run(t *testing.T, url string, opts wire.Options) *wire.Report {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 20 * time.Second
	}
	rep, err := wire.Run(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("wire.Run: %v", err)
	}
	return rep
}

func dump(rep *wire.Report) string {
	var b strings.Builder
	for _, r := range rep.Results {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

func reference(t *testing.T, opts wiretest.Options) string {
	t.Helper()
	hs := httptest.NewServer(wiretest.New(opts).Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestReferenceShapesPass: a server answering in the Python reference's
// shapes (id under device, no detail echoed, unknown tiers served, unknown
// select names dropped, bare limits with a separate approval map, ts in the
// error object) fails no MUST; what the spec leaves open at most warns.
func TestReferenceShapesPass(t *testing.T) {
	rep := run(t, reference(t, wiretest.Options{}), wire.Options{})
	if !rep.OK() {
		t.Fatalf("the reference shapes fail MUSTs:\n%s", dump(rep))
	}
	if len(rep.Results) != len(wire.Checks()) {
		t.Fatalf("%d results for %d checks", len(rep.Results), len(wire.Checks()))
	}
	// The seven misreadings of issue 12, item 4, each read as the spec allows.
	want := map[string]wire.Status{
		"initialize/device":       wire.Pass, // id under device
		"describe/tiers":          wire.Pass, // no detail echoed
		"describe/unknown_detail": wire.Warn, // no -32602 required
		"describe/select_unknown": wire.Warn, // no -32040 required
		"limits/consistent":       wire.Pass, // approval shape not compared
		"gates/undeclared_param":  wire.Pass, // (SHOULD) refused here
		"errors/ts":               wire.Pass, // ts in the error object
		"http/mhp.json":           wire.Pass, // id under device
		"http/events":             wire.Pass, // no first event for 15 s
		"gates/confirm":           wire.Pass, // notes at the top level
		"initialize/capabilities": wire.Warn, // watchdog_s among capabilities
	}
	for id, st := range want {
		r, ok := rep.Result(id)
		if !ok || r.Status != st {
			t.Errorf("%s: %+v, want %s", id, r, st)
		}
	}
	if r, _ := rep.Result("errors/ts"); !strings.Contains(r.Detail, "error.ts") {
		t.Errorf("errors/ts read ts from the wrong place: %s", r.Detail)
	}
}

// pendingOwn are the SHOULD checks our transport does not meet yet, with the
// work that meets them (issue 12); a warning from them is logged, not failed.
var pendingOwn = map[string]string{}

// TestOwnServerPasses runs the checks against our transport over the
// in-memory conformance driver: every check passes or is skipped.
func TestOwnServerPasses(t *testing.T) {
	drv, err := conformance.MemoryDriver(conformance.NewInstrument(), conformance.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(drv, transport.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	defer srv.Close()
	rep := wire.Test(t, hs.URL, wire.Options{Timeout: 20 * time.Second, Actuate: true})
	for _, r := range rep.Results {
		if why, ok := pendingOwn[r.ID]; ok && r.Status == wire.Warn {
			t.Logf("pending (%s): %s", why, r)
			continue
		}
		if r.Status == wire.Fail || r.Status == wire.Warn {
			t.Errorf("%s", r)
		}
	}
	if st, _ := drv.Ping(context.Background()); st.State != "idle" {
		t.Errorf("the estop checks left the device in %s", st.State)
	}
	if rep.Passed < 20 {
		t.Errorf("only %d checks passed:\n%s", rep.Passed, dump(rep))
	}
}

// TestPlantedDeviationsFail: each planted violation fails the MUST check
// that enforces the sentence it breaks, and only that one.
func TestPlantedDeviationsFail(t *testing.T) {
	cases := []struct {
		name  string
		dev   wiretest.Deviations
		check string
	}{
		{"serves before initialize", wiretest.Deviations{ServeBeforeInitialize: true}, "initialize/required_first"},
		{"ignores the client's version", wiretest.Deviations{IgnoreVersion: true}, "initialize/version_negotiation"},
		{"lets forbid items through", wiretest.Deviations{AcceptForbidden: true}, "gates/forbid"},
		{"shares a held lease", wiretest.Deviations{SharedLease: true}, "lease/exclusive"},
		{"no limits in LimitViolation data", wiretest.Deviations{NoLimitsInData: true}, "gates/limits"},
		{"answers malformed JSON with another code", wiretest.Deviations{WrongParseError: true}, "jsonrpc/parse_error"},
	}
	for _, k := range cases {
		t.Run(k.name, func(t *testing.T) {
			rep := run(t, reference(t, wiretest.Options{Deviations: k.dev}), wire.Options{})
			r, ok := rep.Result(k.check)
			if !ok || r.Status != wire.Fail || r.Level != wire.Must {
				t.Fatalf("%s: %+v\n%s", k.check, r, dump(rep))
			}
			if r.Section == "" || r.Sentence == "" || !strings.Contains(r.String(), r.Sentence) {
				t.Errorf("the failure does not cite its sentence: %s", r)
			}
			for _, o := range rep.Results {
				if o.Status == wire.Fail && o.ID != k.check {
					t.Errorf("another check failed too: %s", o)
				}
			}
			if rep.OK() {
				t.Error("a report with a failed MUST is OK")
			}
		})
	}
}

// TestActuatingChecks: the estop checks run only with Actuate, stop the
// device from a client without the lease and from one that never
// initialized, and leave it reset.
func TestActuatingChecks(t *testing.T) {
	ref := wiretest.New(wiretest.Options{})
	hs := httptest.NewServer(ref.Handler())
	defer hs.Close()
	rep := run(t, hs.URL, wire.Options{Only: []string{"estop/"}})
	for _, r := range rep.Results {
		if r.Status != wire.Skip || !strings.Contains(r.Detail, "Actuate") {
			t.Errorf("without Actuate: %s", r)
		}
	}
	if ref.EStops() != 0 {
		t.Fatal("an estop check ran without Actuate")
	}
	rep = run(t, hs.URL, wire.Options{Only: []string{"estop/"}, Actuate: true})
	if len(rep.Results) != 2 || rep.Passed != 2 {
		t.Fatalf("with Actuate:\n%s", dump(rep))
	}
	if ref.EStops() != 2 || ref.State() != "idle" {
		t.Fatalf("estops %d, state %s: want 2 and reset to idle", ref.EStops(), ref.State())
	}
	for _, r := range rep.Results {
		if strings.Contains(r.Detail, "could not be reset") {
			t.Errorf("%s", r)
		}
	}
}

// TestShouldNeverFails: every SHOULD check that finds a violation warns.
func TestShouldNeverFails(t *testing.T) {
	rep := run(t, reference(t, wiretest.Options{}), wire.Options{})
	warned := 0
	for _, r := range rep.Results {
		if r.Level == wire.Should && r.Status == wire.Fail {
			t.Errorf("a SHOULD failed: %s", r)
		}
		if r.Status == wire.Warn {
			warned++
			if !strings.Contains(r.String(), r.Section) {
				t.Errorf("a warning without its citation: %s", r)
			}
		}
	}
	if warned == 0 {
		t.Fatal("no warning against the reference shapes; the test proves nothing")
	}
}

// TestEveryCheckCites: every check has a level, a section and a sentence,
// and MUST sentences of the spec are MUST checks.
func TestEveryCheckCites(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range wire.Checks() {
		if seen[c.ID] {
			t.Errorf("duplicate check %s", c.ID)
		}
		seen[c.ID] = true
		if (c.Level != wire.Must && c.Level != wire.Should) || !strings.HasPrefix(c.Section, "§") || len(c.Sentence) < 10 {
			t.Errorf("%s: level %q section %q sentence %q", c.ID, c.Level, c.Section, c.Sentence)
		}
		if strings.Contains(c.Sentence, "SHOULD") && c.Level == wire.Must {
			t.Errorf("%s cites a SHOULD sentence as a MUST", c.ID)
		}
	}
}

func TestOnlyAndUnreachable(t *testing.T) {
	rep := run(t, reference(t, wiretest.Options{}), wire.Options{Only: []string{"gates/"}})
	if len(rep.Results) == 0 {
		t.Fatal("no gates checks ran")
	}
	for _, r := range rep.Results {
		if !strings.HasPrefix(r.ID, "gates/") {
			t.Errorf("Only let %s through", r.ID)
		}
	}
	hs := httptest.NewServer(nil)
	url := hs.URL
	hs.Close()
	if _, err := wire.Run(context.Background(), url, wire.Options{Timeout: 2 * time.Second}); err == nil {
		t.Fatal("an unreachable target gave a report")
	}
	if _, err := wire.Run(context.Background(), "ftp://x", wire.Options{}); err == nil {
		t.Fatal("a bad target gave a report")
	}
	if _, err := wire.Run(context.Background(), url, wire.Options{Timeout: -1}); err == nil {
		t.Fatal("a negative timeout was accepted")
	}
}

// TestStateGateSkips: a device in estop skips the dry-run gate checks
// (the state gate answers first) instead of failing them.
func TestStateGateSkips(t *testing.T) {
	ref := wiretest.New(wiretest.Options{})
	ref.SetState("estop")
	hs := httptest.NewServer(ref.Handler())
	defer hs.Close()
	rep := run(t, hs.URL, wire.Options{Only: []string{"gates/"}})
	for _, r := range rep.Results {
		if r.Status != wire.Skip || !strings.Contains(r.Detail, "estop") {
			t.Errorf("%s", r)
		}
	}
	if len(ref.Written()) != 0 || ref.EStops() != 0 {
		t.Fatalf("the checks actuated: written %v, estops %d", ref.Written(), ref.EStops())
	}
}

// TestNothingActuates: a whole run writes nothing and stops nothing.
func TestNothingActuates(t *testing.T) {
	ref := wiretest.New(wiretest.Options{})
	hs := httptest.NewServer(ref.Handler())
	defer hs.Close()
	run(t, hs.URL, wire.Options{})
	if len(ref.Written()) != 0 || ref.EStops() != 0 || ref.State() != "idle" {
		t.Fatalf("the checks actuated: written %v, estops %d, state %s", ref.Written(), ref.EStops(), ref.State())
	}
}
