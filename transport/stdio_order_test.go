package transport_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/transport"
)

// TestStdioEStopOrdersTheStream sends [write, estop, write] in one chunk,
// 1,000 times (200 with -short): the write read after the estop is never
// answered ok, it is refused EStopActive; the estop itself always succeeds.
func TestStdioEStopOrdersTheStream(t *testing.T) {
	trials := 1_000
	if testing.Short() {
		trials = 200
	}
	drv, err := binding.New(binding.Config{
		Device: mhp.DeviceInfo{ID: "order-01", Class: "test"},
		Logger: slog.New(slog.DiscardHandler),
		EStop:  func(context.Context) error { return nil },
		Settings: []binding.Setting{{Spec: mhp.Setting{Name: "target", Type: mhp.TypeNumber},
			Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	srv := newServer(t, drv, transport.Options{})
	rs := newRawStream(t, srv)
	rs.send(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2026-09-12"}}`)
	if r := rs.await(`"init"`); r.Error != nil {
		t.Fatal(r.Error)
	}
	for i := 0; i < trials; i++ {
		chunk := fmt.Sprintf(`{"jsonrpc":"2.0","id":"w1-%d","method":"settings/write","params":{"name":"target","value":1}}
{"jsonrpc":"2.0","id":"s-%d","method":"safety/estop","params":{"reason":"order"}}
{"jsonrpc":"2.0","id":"w2-%d","method":"settings/write","params":{"name":"target","value":2}}
`, i, i, i)
		if _, err := io.WriteString(rs.pc.w, chunk); err != nil {
			t.Fatal(err)
		}
		rs.await(fmt.Sprintf(`"w1-%d"`, i)) // before or after the stop: either answer is honest
		if r := rs.await(fmt.Sprintf(`"s-%d"`, i)); r.Error != nil {
			t.Fatalf("trial %d: estop refused: %v", i, r.Error)
		}
		if r := rs.await(fmt.Sprintf(`"w2-%d"`, i)); code(r) != mhp.CodeEStopActive {
			t.Fatalf("trial %d: the write read after the estop was answered %s %v, want EStopActive", i, r.Result, r.Error)
		}
		rs.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":"r-%d","method":"safety/reset"}`, i))
		if r := rs.await(fmt.Sprintf(`"r-%d"`, i)); r.Error != nil {
			t.Fatalf("trial %d: reset: %v", i, r.Error)
		}
	}
}
