package client

import (
	"encoding/json"
	"testing"

	"github.com/openmhp/mhp-go"
)

// BenchmarkDecode compares decoding one answer three ways: plain
// json.Unmarshal (the baseline), the lenient decoder on an answer in our own
// shape (the fast path: one strict decode), and the lenient decoder on the
// reference's shape that needs rewriting (safety/limits with a separate
// approval map). Compare ns/op of the sub-benchmarks as ratios.
func BenchmarkDecode(b *testing.B) {
	read := json.RawMessage(`{"values":{"block_temperature":22.5,"lid_closed":true,"cycle":3},"ts":1788991266.5}`)
	limits := json.RawMessage(`{"settings":{"t":{"min":4,"max":105},"m":{"enum":["a","b"]}},"actions":{"run":{"cycles":[1,99]}},
		"interlocks":["lid"],"approval":{"t":"auto","m":"confirm","run":"auto"},"watchdog_s":null}`)
	b.Run("baseline_json", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var out mhp.ReadResult
			if err := json.Unmarshal(read, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lenient_own_shape", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var out mhp.ReadResult
			if err := decodeResult("signals/read", read, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("lenient_reference_limits", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var out mhp.LimitsReport
			if err := decodeResult("safety/limits", limits, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
