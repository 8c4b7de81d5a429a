package madscitest

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// LaterAddr returns a 127.0.0.1 address nothing listens on, for a node a
// test starts later (Options.Addr) after pointing an adapter at it first.
// The port is drawn below the ephemeral range (32768+) that other tests'
// 127.0.0.1:0 listeners take theirs from, so none of them takes it
// meanwhile.
func LaterAddr() (string, error) {
	for i := 0; i < 100; i++ {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(10000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		return addr, nil
	}
	return "", fmt.Errorf("madscitest: no free port in 20000-29999 after 100 tries")
}
