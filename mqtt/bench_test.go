package mqtt_test

import (
	"context"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
)

// BenchmarkAdapterVsMemory measures reads and acknowledged writes through
// the adapter (embedded broker, fake device) against the in-memory
// reference driver over the same Instrument model, in the same run: the
// memory figures are the baseline of the ratio.
func BenchmarkAdapterVsMemory(b *testing.B) {
	ctx := context.Background()
	mem, err := conformance.MemoryDriver(conformance.NewInstrument(), conformance.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := mem.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer mem.Close()
	f := startFixture(b, mochiEnv(b), conformance.Options{}, nil)
	read := func(d mhp.Device) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := d.Read(ctx, nil); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	write := func(d mhp.Device) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := d.Write(ctx, mhp.WriteRequest{Name: conformance.SettingSetpoint, Value: float64(i % 100)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("read/memory", read(mem))
	b.Run("read/mqtt", read(f.drv))
	b.Run("write/memory", write(mem))
	b.Run("write/mqtt-ack", write(f.drv))
}
