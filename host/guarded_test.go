package host_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/host"
)

// One process appends to a hosted device's evidence: a second fleet on
// the same home hosting the same device serves it without evidence (not a
// forked chain), and gets it once the first lets go.
func TestHostedEvidenceHasOneWriter(t *testing.T) {
	home := t.TempDir()
	ctx := context.Background()
	open := func() *host.Fleet {
		f, err := host.Open(host.Config{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	first := open()
	pkg, _ := filepath.Abs("../examples/devices/thermocycler-01")
	e, err := first.Prepare(ctx, pkg, host.AddOptions{Twin: true})
	if err == nil {
		_, err = first.Commit(e)
	}
	if err != nil {
		t.Fatal(err)
	}
	keeps := func(f *host.Fleet) bool {
		t.Helper()
		d, err := f.Dial(ctx, e.Target)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var head evidence.Head
		err = d.Call(ctx, mhp.MethodEvidenceHead, struct{}{}, &head)
		if me, ok := mhp.AsError(err); ok && (me.Code == mhp.CodeMethodNotFound || me.Code == mhp.CodeNotSupported) {
			return false
		}
		if err != nil {
			t.Fatal(err)
		}
		return head.Log != "" && head.Seq > 0 // the fleet's shared log
	}
	if !keeps(first) {
		t.Fatal("the first fleet's hosted device keeps no evidence")
	}
	second := open()
	if keeps(second) {
		t.Fatal("a second fleet on the same home appends to the same evidence chain")
	}
	second.Close()
	first.Close()
	third := open()
	defer third.Close()
	if !keeps(third) {
		t.Fatal("the evidence was not free again once the first fleet closed")
	}
}
