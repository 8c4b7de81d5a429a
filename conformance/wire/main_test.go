package wire_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/conformance/wire"
	"github.com/openmhp/mhp-go/transport"
)

// TestMain lets the test binary serve the in-memory conformance driver over
// stdio (WIRE_TEST_SERVE_STDIO=1), so that the checks run over a real
// stdio target.
func TestMain(m *testing.M) {
	if os.Getenv("WIRE_TEST_SERVE_STDIO") == "1" {
		drv, err := conformance.MemoryDriver(conformance.NewInstrument(), conformance.Options{}, nil)
		if err != nil {
			os.Exit(3)
		}
		srv := transport.NewServer(drv, transport.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		_ = srv.ServeStdio(context.Background(), os.Stdin, os.Stdout)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestOwnServerOverStdio: the checks pass over stdio; the HTTP-only ones skip.
func TestOwnServerOverStdio(t *testing.T) {
	t.Setenv("WIRE_TEST_SERVE_STDIO", "1")
	rep := run(t, "stdio:"+os.Args[0], wire.Options{Timeout: 20 * time.Second})
	if !rep.OK() {
		t.Fatalf("over stdio:\n%s", dump(rep))
	}
	for _, id := range []string{"http/mhp.json", "http/events", "lease/exclusive"} {
		if r, _ := rep.Result(id); r.Status != wire.Skip {
			t.Errorf("%s over stdio: %s", id, r)
		}
	}
	for _, id := range []string{"initialize/required_first", "jsonrpc/parse_error", "gates/limits", "read/all"} {
		if r, _ := rep.Result(id); r.Status != wire.Pass {
			t.Errorf("%s over stdio: %s", id, r)
		}
	}
}
