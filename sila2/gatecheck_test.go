package sila2_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

const schedulerFDL = `<Feature FeatureVersion="1.0" Originator="org.example" Category="tests"><Identifier>Scheduler</Identifier>
<Command><Identifier>Plan</Identifier><Observable>No</Observable>
  <Parameter><Identifier>StartAt</Identifier><DataType><Basic>Timestamp</Basic></DataType></Parameter>
  <Parameter><Identifier>Blob</Identifier><DataType><Basic>Binary</Basic></DataType></Parameter>
</Command>
</Feature>`

// TestTimestampAndBinaryCheckedAtTheGate: start_at "yesterday" and a
// non-base64 blob are refused InvalidValue by a dry run and by the invoke,
// before anything reaches the server. Before the fix both passed every gate,
// the dry run said it would run and the invoke failed not_started.
func TestTimestampAndBinaryCheckedAtTheGate(t *testing.T) {
	srv, err := silatest.New(silatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int64
	err = srv.AddFeature(schedulerFDL, silatest.Handlers{Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
		"Plan": func(context.Context, map[string]any) (map[string]any, error) {
			calls.Add(1)
			return map[string]any{}, nil
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	d := openConfig(t, serveTLS(t, srv), "adapter: sila2\ndevice: {id: sched-01, class: scheduler}\nfeatures: [Scheduler]\ndefault_approval: auto\n")
	good := map[string]any{"start_at": "2026-12-01T10:00:00Z", "blob": "aGVsbG8="}
	for _, c := range []struct{ name, field string }{{"start_at", "yesterday"}, {"blob", "not base64!"}} {
		params := map[string]any{"start_at": good["start_at"], "blob": good["blob"]}
		params[c.name] = c.field
		for _, dry := range []bool{true, false} {
			_, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "plan", Params: params, DryRun: dry})
			if e, _ := mhp.AsError(err); e == nil || e.Code != mhp.CodeInvalidValue || !strings.Contains(e.Message, c.name) {
				t.Errorf("%s=%q (dry run %v): %v, want InvalidValue naming %s", c.name, c.field, dry, err, c.name)
			}
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the server got %d calls of a refused command", n)
	}
	if _, err := d.Invoke(ctxT(t), mhp.InvokeRequest{Name: "plan", Params: good, DryRun: true}); err != nil {
		t.Fatalf("good params refused: %v", err)
	}
}
