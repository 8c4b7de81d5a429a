package main

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/conformance/wire/wiretest"
)

func refServer(t *testing.T, opts wiretest.Options) (string, *wiretest.Reference) {
	t.Helper()
	ref := wiretest.New(opts)
	hs := httptest.NewServer(ref.Handler())
	t.Cleanup(hs.Close)
	return hs.URL, ref
}

// TestVerbsAgainstReferenceShapes runs every verb against a server answering
// in the Python reference's shapes: each succeeds where the device said yes,
// and no verb exits 0 after an error (a refusal, an unreadable answer, a
// missing method); every error is explained on stderr.
func TestVerbsAgainstReferenceShapes(t *testing.T) {
	u, ref := refServer(t, wiretest.Options{})
	cases := []struct {
		args   []string
		code   int
		stdout string // regexp the output must match
	}{
		{[]string{"describe", "full"}, 0, `"id": "thermocycler-ref"`},
		{[]string{"describe", "full", "--json"}, 0, `"block_temperature"`},
		{[]string{"describe"}, 0, `thermocycler-ref \(thermocycler\) SimBio TC-96: idle`},
		{[]string{"describe", "card"}, 0, `settings: target_temperature, lid_heater`},
		{[]string{"describe"}, 0, `run_protocol +\(steps, cycles\)`}, // the summary sends required, not params
		{[]string{"write", "target_temperature", "40"}, 0, `target_temperature = 40 \(applied\)`},
		{[]string{"write", "target_temperature", "41", "--json"}, 0, `"applied": true`},
		{[]string{"describe", "everything"}, 0, `thermocycler-ref`},
		{[]string{"read"}, 0, `block_temperature = 22`},
		{[]string{"read", "no_such"}, 1, ``},
		{[]string{"write", "target_temperature", "50", "--dry-run"}, 0, `would write target_temperature = 50`},
		{[]string{"write", "hold_mode", "hold", "--dry-run"}, 0, `would write hold_mode = hold; a real request: needs approval`},
		{[]string{"write", "target_temperature", "500"}, 1, ``},
		{[]string{"write", "lid_override", "true"}, 1, ``},
		{[]string{"write", "no_such", "1"}, 1, ``},
		{[]string{"write", "target_temperature", "50"}, 0, `target_temperature = 50`},
		{[]string{"invoke", "home", "--dry-run"}, 0, `dry run: would run home \{\}`},
		{[]string{"invoke", "home", "speed=2", "--dry-run", "--json"}, 0, `"dryRun": true`},
		{[]string{"invoke", "open_lid"}, 1, ``},
		{[]string{"invoke", "no_such"}, 1, ``},
		{[]string{"invoke", "home"}, 0, `job job_[0-9a-f]+ home queued`},
		{[]string{"invoke", "home", "--wait"}, 0, `home: done`},
		{[]string{"jobs"}, 0, `job_[0-9a-f]+ +home`},
		{[]string{"job", "job_nosuch"}, 1, ``},
		{[]string{"cancel", "job_nosuch"}, 1, ``},
		{[]string{"pause", "job_nosuch"}, 1, ``},
		{[]string{"limits"}, 0, `(?s)estop true.*hold_mode +confirm +one of "?off"?\|"?hold"?.*target_temperature +auto +4\.\.105`},
		{[]string{"ping"}, 0, `thermocycler-ref idle`},
		{[]string{"release"}, 0, `released`},
		{[]string{"resources"}, 1, ``}, // the fake has no resources/list
		{[]string{"rpc", "ping"}, 0, `"state": "idle"`},
		{[]string{"rpc", "no/such"}, 1, ``},
		{[]string{"estop", "test"}, 0, `estop: state estop, stopped true`},
		{[]string{"write", "target_temperature", "50"}, 1, ``}, // in estop
		{[]string{"reset"}, 0, `reset: state idle, verified true`},
	}
	for _, k := range cases {
		t.Run(strings.Join(k.args, " "), func(t *testing.T) {
			r := runCLI(t, append([]string{u}, k.args...)...)
			if r.code != k.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.code, k.code, r.stdout, r.stderr)
			}
			if k.code != 0 && strings.TrimSpace(r.stderr) == "" && !strings.Contains(r.stdout, `"error"`) {
				t.Errorf("an error exit without a word on stderr; stdout: %s", r.stdout)
			}
			if k.stdout != "" && !regexp.MustCompile(k.stdout).MatchString(r.stdout) {
				t.Errorf("stdout does not match %q:\n%s\nstderr: %s", k.stdout, r.stdout, r.stderr)
			}
		})
	}
	if got := ref.Written(); len(got) != 3 || got[2] != "target_temperature=50" {
		t.Errorf("writes reaching the device: %v (dry runs and refusals must not)", got)
	}
}

// TestResetVerified: "verified" as a boolean or a string; the reset is
// reported a success only when the device says so.
func TestResetVerified(t *testing.T) {
	cases := []struct {
		verified any
		state    string
		code     int
		out      string
	}{
		{true, "idle", 0, "verified true"},
		{"true", "idle", 0, "verified true"},
		{"all signals readable", "idle", 0, "verified true"},
		{"false", "idle", 0, "verified false"}, // idle: the device says it is back
		{false, "estop", 1, "verified false"},
		{"false", "fault", 1, "verified false"},
	}
	for _, k := range cases {
		u, _ := refServer(t, wiretest.Options{ResetVerified: k.verified, ResetState: k.state})
		r := runCLI(t, u, "reset")
		if r.code != k.code || !strings.Contains(r.stdout, k.out) {
			t.Errorf("verified %#v state %s: exit %d %q %q", k.verified, k.state, r.code, r.stdout, r.stderr)
		}
	}
	// --json keeps the reference's text, not a boolean made of it.
	u, _ := refServer(t, wiretest.Options{})
	if r := runCLI(t, u, "reset", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"verified": "all signals readable"`) {
		t.Errorf("reset --json: exit %d %q, want the textual verified kept", r.code, r.stdout)
	}
}

// TestClientIDUniquePerProcess: two CLI runs are two clients.
func TestClientIDUniquePerProcess(t *testing.T) {
	u, ref := refServer(t, wiretest.Options{})
	for i := 0; i < 2; i++ {
		if r := runCLI(t, u, "ping"); r.code != 0 {
			t.Fatalf("ping: %+v", r)
		}
	}
	ids := ref.Clients()
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("client ids %v: want two distinct", ids)
	}
	for _, id := range ids {
		if !regexp.MustCompile(`^mhp-cli/[A-Za-z0-9._-]+-\d+-[0-9a-f]{8}$`).MatchString(id) {
			t.Errorf("client id %q is not mhp-cli/<host>-<pid>-<random>", id)
		}
	}
	a, _, _ := testApp()
	if a.clientID() != a.clientID() {
		t.Error("one process, two ids")
	}
}

// TestConformanceAgainstReferenceShapes: `mhp conformance` passes the
// reference shapes, warns with the citation where the spec is open, and
// fails (exit 1) a planted violation, citing the sentence.
func TestConformanceAgainstReferenceShapes(t *testing.T) {
	u, _ := refServer(t, wiretest.Options{})
	r := runCLI(t, "conformance", u)
	if r.code != 0 || !strings.Contains(r.stdout, "0 failed") || !strings.Contains(r.stdout, "WARN  describe/unknown_detail") {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	u, ref := refServer(t, wiretest.Options{})
	if r := runCLI(t, "conformance", u, "--actuate"); r.code != 0 || !strings.Contains(r.stdout, "PASS  estop/any_caller") || ref.EStops() != 2 {
		t.Fatalf("--actuate: exit %d, %d estops\n%s", r.code, ref.EStops(), r.stdout)
	}
	u, _ = refServer(t, wiretest.Options{Deviations: wiretest.Deviations{ServeBeforeInitialize: true}})
	r = runCLI(t, "conformance", u)
	if r.code != exitRefused || !strings.Contains(r.stdout, "FAIL  initialize/required_first") ||
		!strings.Contains(r.stdout, `§5.1 MUST: "Servers MUST respond to initialize before any other method."`) {
		t.Fatalf("exit %d\n%s", r.code, r.stdout)
	}
	if r := runCLI(t, "conformance", "http://127.0.0.1:1"); r.code != exitNoPeer {
		t.Fatalf("unreachable: exit %d", r.code)
	}
}
