package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// The estop row's floor: a TCP echo served by the server process itself,
// beside the MHP server, timed under the same load as the estops. It is
// what any request on a kept-alive connection to that process costs at
// best (the client's send, the kernel, the process and its runtime being
// scheduled, the answer back) before any HTTP or MHP work: an estop's
// latency over it is what the server's own code adds.

// echoMsg is the echo row's message, about an estop frame's size.
var echoMsg = []byte(strings.Repeat("e", 96))

// serveEcho echoes what each connection accepted on ln sends, until ctx
// ends.
func serveEcho(ctx context.Context, ln net.Listener) {
	context.AfterFunc(ctx, func() { ln.Close() })
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// echoClient is one kept-alive connection to a serve child's echo.
type echoClient struct {
	c   net.Conn
	buf []byte
}

// dialEcho connects to the echo at addr.
func dialEcho(addr string) (*echoClient, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("echo: %w", err)
	}
	return &echoClient{c: c, buf: make([]byte, len(echoMsg))}, nil
}

// roundTrip times one message there and back.
func (e *echoClient) roundTrip() (time.Duration, error) {
	_ = e.c.SetDeadline(time.Now().Add(30 * time.Second))
	t0 := time.Now()
	if _, err := e.c.Write(echoMsg); err != nil {
		return 0, fmt.Errorf("echo: %w", err)
	}
	if _, err := io.ReadFull(e.c, e.buf); err != nil {
		return 0, fmt.Errorf("echo: %w", err)
	}
	return time.Since(t0), nil
}

func (e *echoClient) close() { _ = e.c.Close() }

// dialRoundTrip times a new connection to the echo at addr and one round
// trip on it (the floor of an estop on a new connection).
func dialRoundTrip(addr string) (time.Duration, error) {
	t0 := time.Now()
	e, err := dialEcho(addr)
	if err != nil {
		return 0, err
	}
	defer e.close()
	if _, err := e.roundTrip(); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// parseServeAddrs reads a serve child's first line, "addr <http> [echo <tcp>]".
func parseServeAddrs(first string) (httpAddr, echoAddr string) {
	f := strings.Fields(first)
	if len(f) >= 2 && f[0] == "addr" {
		httpAddr = f[1]
	}
	if len(f) >= 4 && f[2] == "echo" {
		echoAddr = f[3]
	}
	return httpAddr, echoAddr
}
