package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestBeyondLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		":18900": false, "18900": false, "127.0.0.1:0": false, "127.0.0.2:1": false, "localhost:0": false, "[::1]:0": false,
		"0.0.0.0:18900": true, "[::]:18900": true, "192.168.1.5:1": true, "lab-pc.local:18900": true, "bad:addr:x": true,
	} {
		if got := beyondLoopback(addr); got != want {
			t.Errorf("beyondLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// A non-loopback bind without a token refuses to start, saying why; nothing
// is bound.
func TestServeRefusesOpenBindWithoutToken(t *testing.T) {
	a, _, errb := testApp()
	a.getenv = func(string) string { return "" }
	a.ready = func([]string) { t.Error("serve started") }
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := a.run(ctx, []string{"serve", "sim:thermocycler", "--http", "0.0.0.0:0"})
	if code == exitOK {
		t.Fatalf("serve on 0.0.0.0 without a token exited 0")
	}
	if msg := errb.String(); !strings.Contains(msg, "without a token") || !strings.Contains(msg, "--insecure") {
		t.Fatalf("refusal does not say why: %q", msg)
	}
}
