package sila2_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// TestPlaintextAgainstTLSSaysSo: a plaintext client against a TLS server
// is told the server probably wants TLS. Before the fix the error said only
// "error reading server preface: EOF".
func TestPlaintextAgainstTLSSaysSo(t *testing.T) {
	l := startLab(t, silatest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sila2.Dial(ctx, sila2.ClientConfig{Endpoint: l.addr, TLS: sila2.TLSConfig{InsecurePlaintext: true}})
	if err == nil {
		defer c.Close()
		_, err = c.ServerInfo(ctx)
	}
	if err == nil || !strings.Contains(err.Error(), "probably wants TLS") {
		t.Fatalf("plaintext against TLS: %v, want a hint that the server wants TLS", err)
	}
}
