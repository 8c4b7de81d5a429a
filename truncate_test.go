package mhp

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short kept", "estop: smoke", 64, "estop: smoke"},
		{"exact kept", strings.Repeat("a", 40), 40, strings.Repeat("a", 40)},
		{"long cut with marker", strings.Repeat("a", 100), 40, strings.Repeat("a", 25) + "…[+75 bytes]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("Truncate(%d bytes, %d) = %q, want %q", len(tc.in), tc.max, got, tc.want)
			}
			if len(got) > tc.max {
				t.Fatalf("result is %d bytes, over the cap %d", len(got), tc.max)
			}
		})
	}
	// A cut never splits a rune.
	s := strings.Repeat("é", 1000)
	got := Truncate(s, 101)
	if !utf8.ValidString(got) || len(got) > 101 {
		t.Fatalf("cut %q is not valid UTF-8 within 101 bytes", got)
	}
}
