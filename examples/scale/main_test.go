package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestScaleDemoStaysUnderOneThousandTokens(t *testing.T) {
	var out strings.Builder
	r, err := run(context.Background(), io.MultiWriter(&out), 2000)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	if r.PathTokens > 1000 {
		t.Fatalf("find -> summary -> select costs %d tokens, want <= 1000", r.PathTokens)
	}
	if !strings.HasPrefix(r.Found, "thermocycler-") {
		t.Fatalf("found %s for a PCR query", r.Found)
	}
	if r.NaiveTokens < 100*r.PathTokens {
		t.Fatalf("naive %d vs path %d: the demo does not show the saving", r.NaiveTokens, r.PathTokens)
	}
}
