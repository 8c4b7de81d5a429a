package main

import (
	"context"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

const manualPkg = "../../manual/testdata/centrifuge-01"

// TestOperatorVerbs: a person answers an operator-run device from the CLI:
// record a reading, ack a waiting job, confirm a setting, confirm the stop.
func TestOperatorVerbs(t *testing.T) {
	pkg, err := devicepkg.Load(manualPkg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pkg.Close() })
	log := (&app{stderr: io.Discard}).quietLogger()
	dev, err := buildPackage(context.Background(), pkg, sim.Options{}, log)
	if err != nil {
		t.Fatal(err)
	}
	if err := dev.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	const opTok = "operator-secret-0123456789"
	srv := transport.NewServer(dev, transport.Options{Logger: log, OperatorToken: opTok})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Close(); _ = dev.Close() })
	tokFile := filepath.Join(t.TempDir(), "op")
	if err := os.WriteFile(tokFile, []byte(opTok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	op := []string{"--operator-token-file", tokFile}
	run := func(want int, args ...string) result {
		t.Helper()
		r := runCLI(t, append([]string{hs.URL}, args...)...)
		if r.code != want {
			t.Fatalf("mhp %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", args, r.code, want, r.stdout, r.stderr)
		}
		return r
	}
	// Without the operator token an agent cannot answer.
	if r := run(1, "record", "balanced", "true"); !strings.Contains(r.stderr, "operator") {
		t.Fatalf("record without the token: %s", r.stderr)
	}
	run(0, append([]string{"record", "balanced", "true"}, op...)...)
	r := run(0, "invoke", "spin", `{"duration_s": 20}`, "--approved")
	id := regexp.MustCompile(`job_[0-9a-f]{8}`).FindString(r.stdout)
	if id == "" {
		t.Fatalf("no job id in %q", r.stdout)
	}
	// The job reaches waiting_operator on its own goroutine after the
	// invoke answers: wait for the instruction to be pending.
	var pending result
	conformance.Eventually(t, "the spin's instruction pending", func() bool {
		pending = runCLI(t, append([]string{hs.URL, "pending"}, op...)...)
		return pending.code == 0 && strings.Contains(pending.stdout, "start a 20 s spin")
	})
	if r := run(0, append([]string{"ack", id, "done", "spun", "fine"}, op...)...); !strings.Contains(r.stdout, "job done") {
		t.Fatalf("ack: %s", r.stdout)
	}
	if r := run(0, "job", id); !strings.Contains(r.stdout, "done") || !strings.Contains(r.stdout, "spun fine") {
		t.Fatalf("job after ack: %s", r.stdout)
	}
	if r := run(0, "write", "speed_rpm", "3000"); strings.Contains(r.stdout, "(applied)") {
		t.Fatalf("a request to a person answered applied: %s", r.stdout)
	}
	if r := run(0, append([]string{"confirm", "speed_rpm", "2950"}, op...)...); !strings.Contains(r.stdout, "speed_rpm = 2950 applied") {
		t.Fatalf("confirm: %s", r.stdout)
	}
	if r := run(1, "estop"); !strings.Contains(r.stdout, "stopped false") {
		t.Fatalf("estop: %s", r.stdout)
	}
	run(1, "reset")
	run(0, append([]string{"ack", "estop", "done"}, op...)...)
	run(0, "reset")
	run(2, "ack", id) // usage
}
