// Package testnet gives the test servers that a test stops and starts
// again on the same address a port no outgoing connection can hold: one
// below the kernel's ephemeral range. On a port inside that range, a
// client reconnecting to the stopped server can be given that very port as
// its own source port and connect to itself (TCP simultaneous open), or any
// other outgoing connection of the machine can take it, and the restart
// then fails "address already in use".
package testnet

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the bottom of the range ports are picked from.
const lowest = 20000

// Listen listens on host at a free port below the ephemeral range (picked
// at random, a taken one skipped), or on port 0 when the range leaves no
// room below it.
func Listen(host string) (net.Listener, error) {
	top := ephemeralLow()
	if top-lowest >= 1000 {
		for range 64 {
			port := lowest + rand.IntN(top-lowest)
			if l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
				return l, nil
			}
		}
	}
	return net.Listen("tcp", net.JoinHostPort(host, "0"))
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// ip_local_port_range; the IANA range's 49152 elsewhere).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 49152
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 49152
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= 0 || n > 65535 {
		return 49152
	}
	return n
}
