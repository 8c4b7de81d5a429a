package conformance

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
)

// Deadlines of the suite. Nothing waits on the device under test without one.
const (
	// WaitTimeout bounds every "eventually" in the suite: a job reaching a
	// state, a notification arriving, the watchdog firing.
	WaitTimeout = 5 * time.Second
	// CallTimeout bounds every single call on the device under test.
	CallTimeout = 10 * time.Second
	// EStopDeadline is how soon safety/estop must answer while another
	// request is blocked in a vendor call. A driver that queues the estop
	// behind the blocked call never answers in time (the call is released
	// only after the deadline); one that does not answers in well under
	// 50 ms, and the bound keeps 10x headroom over that for loaded, shared
	// test machines.
	EStopDeadline = 500 * time.Millisecond
	// pollEvery is the interval of the suite's polling loops.
	pollEvery = 2 * time.Millisecond
)

// WatchdogS is the safety.watchdog_s the suite asks for in its watchdog checks.
const WatchdogS = 0.4

// check is one named behaviour.
type check struct {
	name string
	opt  Options
	run  func(c *C)
}

// registry collects the checks of every suite file, in file order.
func registry() []check {
	var all []check
	for _, group := range [][]check{
		describeChecks(), readChecks(), gateChecks(), writeGateOrderChecks(), valueChecks(), exclusiveChecks(),
		paramChecks(), dryRunChecks(), approvalChecks(), interlockChecks(), leaseChecks(), watchdogChecks(),
		watchdogEdgeChecks(), busyChecks(), jobChecks(), backendWriteChecks(), estopChecks(), estopBoundChecks(), cutOffChecks(),
		resetChecks(), resetIdleChecks(), resetFaultChecks(), notifyChecks(), quietRefusalChecks(), errorChecks(), limitsChecks(),
	} {
		all = append(all, group...)
	}
	return all
}

// Checks lists the names of every check Run runs, in order: the keys a
// harness may put in [Fixture.Skip].
func Checks() []string {
	var names []string
	for _, c := range registry() {
		names = append(names, c.name)
	}
	return names
}

// Run runs every check of the suite as a named subtest of t
// ("gates/order/interlocks_before_limits", ...), each on a fresh fixture from
// h. It uses only the [mhp.Device] interface of the fixture, so it runs the
// same against an in-process driver and against a client over the wire.
//
// A check whose name is a key of the fixture's Skip map, or starts with a key
// that ends in "/", is skipped with the map's reason.
func Run(t *testing.T, h Harness) {
	t.Helper()
	seen := map[string]bool{}
	for _, ck := range registry() {
		if seen[ck.name] {
			t.Fatalf("conformance: duplicate check name %q", ck.name)
		}
		seen[ck.name] = true
		t.Run(ck.name, func(t *testing.T) {
			opt := ck.opt
			opt.Extras = true
			f := h(t, opt)
			if f == nil || f.Device == nil || f.Other == nil || f.Backend == nil {
				t.Fatalf("harness returned an incomplete fixture: %+v", f)
			}
			if reason, ok := skipReason(f.Skip, ck.name); ok {
				t.Skip(reason)
			}
			runCheck(t, ck, opt, f)
		})
	}
}

// runCheck runs one check on the fixture f, reporting to t: the check's
// subtest in Run, or in the suite's own tests a recorder that notes a
// failure without failing the test that runs it (so a check can be shown
// to fail against a device that commits its fault on purpose).
func runCheck(t testing.TB, ck check, opt Options, f *Fixture) {
	ctx, cancel := context.WithTimeout(context.Background(), CallTimeout+WaitTimeout)
	defer cancel()
	ck.run(&C{TB: t, F: f, Ctx: ctx, Dev: f.Device, Other: f.Other, B: f.Backend, opt: opt})
}

// WireSkips is the Skip map for a harness whose Device is a client over a
// JSON transport: NaN and ±Inf cannot be encoded in JSON, so the checks that
// send them in process cannot be expressed on the wire (the server's decoder
// never sees such a value).
func WireSkips() map[string]string {
	const why = "JSON cannot carry NaN or Inf; the in-process run covers this check"
	return map[string]string{"values/nan": why, "values/inf": why, "values/negative_inf": why}
}

func skipReason(skip map[string]string, name string) (string, bool) {
	if r, ok := skip[name]; ok {
		return r, true
	}
	keys := make([]string, 0, len(skip))
	for k := range skip {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.HasSuffix(k, "/") && strings.HasPrefix(name, k) {
			return skip[k], true
		}
	}
	return "", false
}

// C is the context of one check: the test, the fixture and helpers.
type C struct {
	testing.TB
	F   *Fixture
	Ctx context.Context
	// Dev is the first session, Other the second; B is the fake backend.
	Dev, Other mhp.Device
	B          Backend
	opt        Options
}
