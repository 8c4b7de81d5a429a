package evidence

import (
	"encoding/json"
	"testing"

	"github.com/openmhp/mhp-go"
)

// BenchmarkEvidenceCanonical compares canonicalising a write's answer in
// one walk against the marshal-and-re-parse path it replaces (the oracle),
// in the same run: report walk/oracle.
func BenchmarkEvidenceCanonical(b *testing.B) {
	res := &mhp.WriteResult{OK: true, Name: "sp", Value: 42.0, Applied: true, Status: mhp.WriteApplied}
	b.Run("oracle", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			raw, _ := json.Marshal(res)
			if _, err := CanonicalJSON(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("walk", func(b *testing.B) {
		b.ReportAllocs()
		buf := getBuf()
		for i := 0; i < b.N; i++ {
			buf.Reset()
			if err := appendCanonical(buf, res); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkEvidenceAppend is one receipt appended under SyncNever, its
// answer given as a Go value (the guard's way) and as JSON text.
func BenchmarkEvidenceAppend(b *testing.B) {
	res := &mhp.WriteResult{OK: true, Name: "sp", Value: 42.0, Applied: true, Status: mhp.WriteApplied}
	raw, _ := json.Marshal(res)
	for _, tc := range []struct {
		name string
		r    Receipt
	}{
		{"value", Receipt{Session: "bench", Method: mhp.MethodSettingsWrite, Name: "sp", ParamsDigest: Digest(42.0), Outcome: OutcomeOK, Value: res}},
		{"json", Receipt{Session: "bench", Method: mhp.MethodSettingsWrite, Name: "sp", ParamsDigest: Digest(42.0), Outcome: OutcomeOK, Result: raw}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, err := Open(Config{Dir: b.TempDir(), Device: "bench-01", Sync: SyncNever, SegmentEntries: 1 << 30})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := l.Append(tc.r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
