package main

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/transport"
)

// serveCounter serves a device whose "count" signal reads 2^53+1 (a wire
// int64 no double holds) and whose "probe" signal is always unavailable;
// broken makes count unavailable too.
func serveCounter(t *testing.T, broken bool) string {
	t.Helper()
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "counter-01", Class: "test"},
		Signals: []binding.Signal{
			{Spec: mhp.Signal{Name: "count", Type: mhp.TypeInteger}, Read: func(context.Context) (binding.Sample, error) {
				if broken {
					return binding.Sample{}, binding.Unavailable("encoder not answering")
				}
				return binding.Sample{Value: int64(9007199254740993)}, nil
			}},
			{Spec: mhp.Signal{Name: "probe", Type: mhp.TypeNumber}, Read: func(context.Context) (binding.Sample, error) {
				return binding.Sample{}, binding.Unavailable("probe unplugged")
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := transport.NewServer(drv, transport.Options{Logger: (&app{stderr: io.Discard}).quietLogger()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); _ = srv.Close(); _ = drv.Close() })
	return hs.URL
}

// TestReadAndRPCKeepInt64Exact: `mhp read --json`, `mhp read` and
// `mhp rpc` print 9007199254740993 as it came on the wire. Before the fix
// every number went through a float64 and printed ...992.
func TestReadAndRPCKeepInt64Exact(t *testing.T) {
	url := serveCounter(t, false)
	for _, args := range [][]string{
		{url, "read", "count", "--json"},
		{url, "read", "count"},
		{url, "rpc", "signals/read", `{"names":["count"]}`},
	} {
		r := runCLI(t, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "9007199254740993") {
			t.Errorf("%v: exit %d, stdout %q, want 9007199254740993 exactly", args[1:], r.code, r.stdout)
		}
	}
}

// TestReadExitsNonZeroWhenEverySignalIsUnavailable: a read that got no value
// at all is not a success; one value among unavailable ones is.
func TestReadExitsNonZeroWhenEverySignalIsUnavailable(t *testing.T) {
	if r := runCLI(t, serveCounter(t, false), "read"); r.code != exitOK {
		t.Fatalf("read with one signal readable: exit %d, want 0; %s", r.code, r.stderr)
	}
	url := serveCounter(t, true)
	for _, args := range [][]string{{url, "read"}, {url, "read", "--json"}, {url, "read", "probe"}} {
		r := runCLI(t, args...)
		if r.code != exitRefused || !strings.Contains(r.stdout, "probe unplugged") {
			t.Errorf("%v with every signal unavailable: exit %d stdout %q, want exit 1 and the reasons", args[1:], r.code, r.stdout)
		}
	}
}
