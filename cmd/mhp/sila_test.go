package main

import (
	"strings"
	"testing"
)

// TestSilaDiscoverInterface: --interface names the interface to multicast
// on; a name that is no interface is a usage error listing the real ones,
// before anything is sent.
func TestSilaDiscoverInterface(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"sila", "discover", "--interface", "nosuch0"}, `no network interface "nosuch0"`},
		{[]string{"sila", "discover", "--interface", ""}, "--interface needs a name"},
		{[]string{"sila", "browse"}, "--interface NAME"},
	} {
		r := runCLI(t, c.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%v: exit %d stderr %q, want usage error with %q", c.args, r.code, r.stderr, c.msg)
		}
	}
	r := runCLI(t, "sila", "discover", "--interface", "nosuch0")
	if !strings.Contains(r.stderr, "lo") {
		t.Errorf("the refusal does not list the interfaces there are: %q", r.stderr)
	}
}
