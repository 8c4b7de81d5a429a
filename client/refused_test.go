package client_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// TestRefusedConnectionWasNotSent: a server that refuses the connection got
// nothing: the error says sent false (and no outcome unknown). Before the
// fix it said sent true.
func TestRefusedConnectionWasNotSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now: the dial is refused
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = client.Dial(ctx, "http://"+addr, client.Options{Timeout: 2 * time.Second})
	e, ok := mhp.AsError(err)
	if !ok {
		t.Fatalf("refused connection: %v, want an *mhp.Error", err)
	}
	if e.Data["sent"] != false || e.Data[mhp.DataOutcome] != nil {
		t.Fatalf("refused connection: %v (data %v), want sent false and no outcome", err, e.Data)
	}
}
