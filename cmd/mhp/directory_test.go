package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/directory"
)

// serveAsync runs `mhp ARGS...` until the test ends and returns the URLs it listens on.
func serveAsync(t *testing.T, args ...string) []string {
	t.Helper()
	a, _, errb := testApp()
	urls := make(chan []string, 1)
	a.ready = func(u []string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, args) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case u := <-urls:
		return u
	case code := <-done:
		t.Fatalf("mhp %v exited %d: %s", args, code, errb.String())
	}
	return nil
}

func TestServeDirectoryFindsLiveDevices(t *testing.T) {
	thermo := serveAsync(t, "serve", "sim:thermocycler", "--http", "127.0.0.1:0")[0]
	arm := serveAsync(t, "serve", "sim:arm", "--http", "127.0.0.1:0")[0]
	manifest := filepath.Join(t.TempDir(), "lab.yaml")
	body := "devices:\n  - {id: dead-01, class: thermocycler, location: bay 3, tags: [pcr], target: 'http://127.0.0.1:1'}\n" +
		"targets:\n  - " + thermo + "\n  - " + arm + "\n"
	if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dirURL := serveAsync(t, "serve-directory", manifest, "--http", "127.0.0.1:0")[0]
	r := &directory.Remote{URL: dirURL}
	ctx := context.Background()
	// The manifest's targets are crawled in the background, each on its
	// own: wait until both are indexed, not only the one searched first.
	var res []directory.Result
	conformance.Eventually(t, "the manifest's targets indexed", func() bool {
		var err error
		res, err = r.Search(ctx, directory.Query{Query: "pcr thermocycler", Class: "thermocycler", Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		_, armErr := r.Get(ctx, "arm-01")
		return len(res) == 2 && armErr == nil
	})
	states := map[string]mhp.DeviceState{}
	for _, x := range res {
		states[x.ID] = x.State
	}
	if states["dead-01"] != mhp.StateUnreachable || states["thermocycler-01"] != mhp.StateIdle {
		t.Fatalf("live states: %v", states)
	}
	idle, err := r.Search(ctx, directory.Query{Query: "pcr", State: "idle"})
	if err != nil || len(idle) != 1 || idle[0].ID != "thermocycler-01" {
		t.Fatalf("idle pcr search: %+v %v", idle, err)
	}
	got, err := r.Get(ctx, "arm-01")
	if err != nil || got.Target != arm || got.State != mhp.StateIdle {
		t.Fatalf("get arm: %+v %v", got, err)
	}
}

// A manifest (or anything that reaches a directory) never makes it run a
// command: stdio: cards are answered unreachable without a ping, and stdio:
// targets are not crawled.
func TestServeDirectoryNeverRunsStdioTargets(t *testing.T) {
	tmp := t.TempDir()
	card, crawled := filepath.Join(tmp, "card-ran"), filepath.Join(tmp, "crawl-ran")
	manifest := filepath.Join(tmp, "lab.yaml")
	body := "devices:\n  - {id: evil-01, class: thermocycler, target: 'stdio:touch " + card + "'}\n" +
		"targets:\n  - 'stdio:touch " + crawled + "'\n"
	if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _, errb := testApp()
	urls := make(chan []string, 1)
	a.ready = func(u []string) { urls <- u }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, []string{"serve-directory", manifest, "--http", "127.0.0.1:0"}) }()
	defer func() { cancel(); <-done }()
	var dirURL string
	select {
	case u := <-urls:
		dirURL = u[0]
	case code := <-done:
		t.Fatalf("serve-directory exited %d: %s", code, errb.String())
	}
	r := &directory.Remote{URL: dirURL}
	for i := 0; i < 3; i++ {
		res, err := r.Search(ctx, directory.Query{Query: "thermocycler"})
		if err != nil || len(res) != 1 || res[0].State != mhp.StateUnreachable || res[0].Error != directory.NotPinged {
			t.Fatalf("search: %+v %v", res, err)
		}
		got, err := r.Get(ctx, "evil-01")
		if err != nil || got.State != mhp.StateUnreachable || got.Error != directory.NotPinged {
			t.Fatalf("get: %+v %v", got, err)
		}
	}
	conformance.Eventually(t, "the stdio target reported as not crawled", func() bool {
		return strings.Contains(errb.String(), "not crawled")
	})
	for _, f := range []string{card, crawled} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Fatalf("the directory ran a manifest's command (%s: %v)", f, err)
		}
	}
}

// A manifest target that never answers does not hold the directory back:
// it listens while the crawl still waits.
func TestServeDirectoryListensWhileCrawling(t *testing.T) {
	release := make(chan struct{})
	var hits atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(release)
	manifest := filepath.Join(t.TempDir(), "lab.yaml")
	body := "devices:\n  - {id: dead-01, class: thermocycler, target: 'http://127.0.0.1:1'}\ntargets:\n  - " + slow.URL + "\n"
	if err := os.WriteFile(manifest, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	dirURL := serveAsync(t, "serve-directory", manifest, "--http", "127.0.0.1:0")[0]
	res, err := (&directory.Remote{URL: dirURL}).Search(context.Background(), directory.Query{Query: "thermocycler", Live: new(bool)})
	if err != nil || len(res) != 1 || res[0].ID != "dead-01" {
		t.Fatalf("search while crawling: %+v %v", res, err)
	}
	conformance.Eventually(t, "the slow target asked for its card", func() bool { return hits.Load() > 0 })
}
