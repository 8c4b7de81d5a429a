package mdns

import (
	"net"
	"strings"
	"testing"
)

// TestInterfaceRefusalListsUsableOnes: `--interface lo` (no multicast flag)
// is refused naming the interfaces mDNS can use. Before the fix it said only
// that lo does not support multicast.
func TestInterfaceRefusalListsUsableOnes(t *testing.T) {
	all := []net.Interface{
		{Name: "lo", Flags: net.FlagUp | net.FlagLoopback},
		{Name: "eth0", Flags: net.FlagUp | net.FlagMulticast},
		{Name: "wlan0", Flags: net.FlagMulticast},
	}
	for _, c := range []struct{ name, want string }{
		{"lo", "does not support multicast, which mDNS needs (use one of: eth0)"},
		{"wlan0", "is down (use one of: eth0)"},
		{"eth9", "use one of: eth0"},
	} {
		if _, err := pickInterface(c.name, all); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--interface %s: %v, want %q", c.name, err, c.want)
		}
	}
	if got, err := pickInterface("eth0", all); err != nil || got.Name != "eth0" {
		t.Fatalf("eth0: %v %v", got, err)
	}
}
