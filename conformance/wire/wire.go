// Package wire checks a running MHP server from the outside, over its wire
// (HTTP or stdio), against the spec's sentences. It needs neither a backend
// it controls nor the device's names, so it runs against any server: ours,
// the Python reference, another implementation.
//
//	rep, err := wire.Run(ctx, "http://127.0.0.1:18921", wire.Options{})
//	if err != nil { ... }          // the target could not be reached at all
//	for _, r := range rep.Results { fmt.Println(r) }
//	rep.OK()                        // no MUST violated
//
//	func TestMyServer(t *testing.T) {
//		wire.Test(t, srv.URL, wire.Options{}) // one subtest per check
//	}
//
// Every check cites the spec sentence it enforces (Check.Section and
// Check.Sentence, repeated in each Result) and has a Level: a MUST check that
// finds a violation fails; a SHOULD check that finds one warns and never
// fails. A MUST check may also warn about a recommended detail it saw on the
// way. Checks that do not apply (an HTTP-only check on stdio, a device with
// no settings with limits) are skipped with the reason.
//
// The checks read every shape the spec leaves open: the device id under
// initialize's device object, a describe answer without detail echoed, the
// effective limits as {limits, approval} per item or as bare limits with a
// separate approval map, ts in the result, in error.data or in the error
// object. Nothing actuates by default: every write and invoke is a dry run,
// and the lease check only acquires and releases, so the checks are safe
// against real hardware; Options.Actuate adds the estop checks, which stop
// the device and reset it.
package wire

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Level is how binding the sentence a check enforces is.
type Level string

// Levels.
const (
	// Must: a violation fails.
	Must Level = "MUST"
	// Should: a violation warns, never fails.
	Should Level = "SHOULD"
)

// Status is a check's outcome.
type Status string

// Statuses.
const (
	Pass Status = "pass"
	Fail Status = "fail"
	Warn Status = "warn"
	Skip Status = "skip"
)

// Check is one wire check and the spec sentence it enforces.
type Check struct {
	// ID names the check, "area/what" (initialize/required_first).
	ID string
	// Level is MUST or SHOULD.
	Level Level
	// Section is the spec section ("§5.1").
	Section string
	// Sentence is the spec sentence the check enforces, quoted.
	Sentence string

	run      func(ctx context.Context, c *checker) outcome
	actuates bool // stops the device; runs only with Options.Actuate
}

// Actuates reports whether the check stops the device (it runs only with
// Options.Actuate).
func (k Check) Actuates() bool { return k.actuates }

// Result is one check's outcome with its citation.
type Result struct {
	ID       string `json:"id"`
	Status   Status `json:"status"`
	Level    Level  `json:"level"`
	Section  string `json:"section"`
	Sentence string `json:"sentence"`
	Detail   string `json:"detail,omitempty"`
}

// Cite renders the citation: `§5.1 MUST: "Servers MUST ..."`.
func (r Result) Cite() string { return fmt.Sprintf("%s %s: %q", r.Section, r.Level, r.Sentence) }

// String renders "FAIL  id: detail" and, for fail and warn, the citation.
func (r Result) String() string {
	s := fmt.Sprintf("%-4s  %s", strings.ToUpper(string(r.Status)), r.ID)
	if r.Detail != "" {
		s += ": " + r.Detail
	}
	if r.Status == Fail || r.Status == Warn {
		s += "\n      " + r.Cite()
	}
	return s
}

// Report is the outcome of Run.
type Report struct {
	Target  string   `json:"target"`
	Results []Result `json:"results"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Warned  int      `json:"warned"`
	Skipped int      `json:"skipped"`
}

// OK reports whether no MUST was violated.
func (r *Report) OK() bool { return r.Failed == 0 }

// Result returns the result of the check id.
func (r *Report) Result(id string) (Result, bool) {
	for _, x := range r.Results {
		if x.ID == id {
			return x, true
		}
	}
	return Result{}, false
}

// Options configure Run. Zero values take the defaults.
type Options struct {
	// Token is the bearer token of an HTTP server.
	Token string
	// Timeout bounds each request; default 10s. A check gets 3x.
	Timeout time.Duration
	// Only runs the checks whose ID has one of these prefixes; empty runs all.
	Only []string
	// Stderr receives a stdio driver process's stderr; nil discards it.
	Stderr io.Writer
	// HTTPClient replaces the default HTTP client.
	HTTPClient *http.Client
	// Actuate also runs the checks that stop the device (safety/estop from
	// a client without the lease, and from one that never initialized),
	// each followed by safety/reset. Off by default: never against a device
	// whose stop costs something (a run in progress, a sample).
	Actuate bool
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	if o.Timeout < 0 {
		return fmt.Errorf("wire: Timeout %v is negative", o.Timeout)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.Timeout == 0 {
		o.Timeout = 10 * time.Second
	}
	return o
}

func (o Options) selected(id string) bool {
	if len(o.Only) == 0 {
		return true
	}
	for _, p := range o.Only {
		if strings.HasPrefix(id, p) {
			return true
		}
	}
	return false
}

// Checks lists every check with its level and citation, in run order.
func Checks() []Check {
	out := make([]Check, len(checks))
	copy(out, checks)
	return out
}

// Run connects to target ("http://host:port" or "stdio:<command>"),
// initializes, fetches the full descriptor and runs every selected check.
// The error is for a target that cannot be reached or initialized at all, or
// whose full descriptor cannot be read; a check's own problems are in the
// Report.
func Run(ctx context.Context, target string, opts Options) (*Report, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	c := &checker{target: target, opts: opts}
	sctx, cancel := context.WithTimeout(ctx, 2*opts.Timeout)
	s, err := c.open(sctx)
	if err == nil {
		var res any
		res, err = s.result(sctx, "device/describe", map[string]any{"detail": "full"})
		if err == nil {
			c.desc, err = parseDescriptor(res)
		}
		if err != nil {
			s.close()
			err = fmt.Errorf("wire: device/describe full: %w", err)
		}
	}
	cancel()
	if err != nil {
		return nil, err
	}
	c.main = s
	defer s.close()
	rep := &Report{Target: target}
	for _, k := range checks {
		if !opts.selected(k.ID) {
			continue
		}
		if k.actuates && !opts.Actuate {
			rep.Results = append(rep.Results, Result{ID: k.ID, Status: Skip, Level: k.Level, Section: k.Section,
				Sentence: k.Sentence, Detail: "stops the device: run with Options.Actuate (mhp conformance --actuate)"})
			rep.Skipped++
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*opts.Timeout)
		o := safeRun(cctx, c, k)
		cancel()
		if o.status == Fail && k.Level == Should {
			o.status = Warn
		}
		rep.Results = append(rep.Results, Result{ID: k.ID, Status: o.status, Level: k.Level, Section: k.Section,
			Sentence: k.Sentence, Detail: o.detail})
		switch o.status {
		case Pass:
			rep.Passed++
		case Fail:
			rep.Failed++
		case Warn:
			rep.Warned++
		case Skip:
			rep.Skipped++
		}
		if ctx.Err() != nil {
			break
		}
	}
	return rep, nil
}

func safeRun(ctx context.Context, c *checker, k Check) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			o = failf("check panicked: %v", p)
		}
	}()
	return k.run(ctx, c)
}

// Test runs the checks against target and maps each result onto a subtest
// of t named by the check's ID: a failure is t.Error with the citation, a
// warning is logged, a skip is t.Skip. A target that cannot be reached fails
// t at once.
func Test(t *testing.T, target string, opts Options) *Report {
	t.Helper()
	rep, err := Run(context.Background(), target, opts)
	if err != nil {
		t.Fatalf("wire checks against %s: %v", target, err)
		return nil
	}
	for _, r := range rep.Results {
		t.Run(r.ID, func(t *testing.T) {
			switch r.Status {
			case Fail:
				t.Errorf("%s\n%s", r.Detail, r.Cite())
			case Warn:
				t.Logf("warning: %s\n%s", r.Detail, r.Cite())
			case Skip:
				t.Skip(r.Detail)
			default:
				if r.Detail != "" {
					t.Log(r.Detail)
				}
			}
		})
	}
	return rep
}

// outcome is what a check's run returns.
type outcome struct {
	status Status
	detail string
}

func pass() outcome                    { return outcome{status: Pass} }
func passf(f string, a ...any) outcome { return outcome{Pass, fmt.Sprintf(f, a...)} }
func failf(f string, a ...any) outcome { return outcome{Fail, fmt.Sprintf(f, a...)} }
func warnf(f string, a ...any) outcome { return outcome{Warn, fmt.Sprintf(f, a...)} }
func skipf(f string, a ...any) outcome { return outcome{Skip, fmt.Sprintf(f, a...)} }
