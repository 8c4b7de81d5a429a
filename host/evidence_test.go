package host_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/evidence"
	"github.com/openmhp/mhp-go/host"
)

// actOn takes and gives back a lease on a hosted target (two receipts) and
// returns the device's id and its evidence/list page.
func actOn(t *testing.T, f *host.Fleet, target string) (string, evidence.Head, evidence.Page) {
	t.Helper()
	ctx := context.Background()
	d, err := f.Dial(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := d.Release(ctx); err != nil {
		t.Fatal(err)
	}
	var head evidence.Head
	var page evidence.Page
	if err := d.Call(ctx, mhp.MethodEvidenceHead, struct{}{}, &head); err != nil {
		t.Fatal(err)
	}
	if err := d.Call(ctx, mhp.MethodEvidenceList, evidence.Query{}, &page); err != nil {
		t.Fatal(err)
	}
	return desc.ID, head, page
}

// TestFleetDevicesShareOneLog: every device the fleet hosts records into
// one shared log in the evidence folder; each device's evidence/list holds
// only its own receipts; the folder verifies with both devices counted.
func TestFleetDevicesShareOneLog(t *testing.T) {
	home := t.TempDir()
	f, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	tc, tcHead, tcPage := actOn(t, f, "sim:thermocycler")
	arm, armHead, armPage := actOn(t, f, "sim:arm")
	if tcHead.Log == "" || armHead.Log != tcHead.Log || armHead.Seq <= tcHead.Seq {
		t.Fatalf("heads %+v and %+v, want one shared log's, growing", tcHead, armHead)
	}
	for _, c := range []struct {
		id   string
		page evidence.Page
	}{{tc, tcPage}, {arm, armPage}} {
		if len(c.page.Entries) != 2 {
			t.Fatalf("%s's evidence/list = %d entries, want its 2", c.id, len(c.page.Entries))
		}
		for _, e := range c.page.Entries {
			if e.Device != c.id {
				t.Fatalf("%s's evidence/list holds a receipt of %q", c.id, e.Device)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(home, "evidence")
	r, err := evidence.Verify(root, nil)
	if err != nil || !r.OK || r.Log == "" || r.Devices[tc] != 2 || r.Devices[arm] != 2 {
		t.Fatalf("verify %s = %+v, %v; want one shared log with 2 receipts of each device", root, r, err)
	}
	if _, err := os.Stat(filepath.Join(root, tc, "chain-000001.jsonl")); !os.IsNotExist(err) {
		t.Fatalf("a per-device chain was written too: %v", err)
	}
}

// TestFleetContinuesAnEarlierChain: a device whose receipts an earlier
// version kept in EvidenceDir/<id> (here with a torn last line) is handed
// over once: its chain is closed and still verifies, the shared log records
// where it ended, and hosting it again records nothing more.
func TestFleetContinuesAnEarlierChain(t *testing.T) {
	home := t.TempDir()
	root := filepath.Join(home, "evidence")
	id := "thermocycler-01" // sim:thermocycler's id
	old := filepath.Join(root, id)
	lg, err := evidence.Open(evidence.Config{Dir: old, Device: id})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := lg.Append(evidence.Receipt{Method: mhp.MethodSettingsWrite, Name: "sp", Outcome: evidence.OutcomeOK}); err != nil {
			t.Fatal(err)
		}
	}
	lg.Close()
	fh, _ := os.OpenFile(filepath.Join(old, "chain-000001.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"seq":4,"ts":1,"de`) // killed mid-append
	fh.Close()
	for round := 0; round < 2; round++ {
		f, err := host.Open(host.Config{Home: home})
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := actOn(t, f, "sim:thermocycler"); got != id {
			t.Fatalf("sim:thermocycler is %q, the test expects %q", got, id)
		}
		f.Close()
	}
	r, err := evidence.Verify(old, nil)
	if err != nil || !r.OK || r.Entries != 4 || len(r.Repairs) != 1 {
		t.Fatalf("the earlier chain = %+v, %v; want its 3 receipts and the repair of the torn line, intact", r, err)
	}
	p, err := evidence.ListDir(root, evidence.Query{Device: id, Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	var continued []evidence.Continued
	for _, e := range p.Entries {
		if e.Method == evidence.MethodContinued {
			var c evidence.Continued
			json.Unmarshal(e.Result, &c)
			continued = append(continued, c)
		}
	}
	if len(continued) != 1 || continued[0].Seq != 4 || continued[0].Hash != r.Hash || continued[0].Dir != old {
		t.Fatalf("continued receipts = %+v, want one naming %s at seq 4 (%s)", continued, old, r.Hash)
	}
	if len(p.Entries) != 5 { // continued + 2 leases per round
		t.Fatalf("the device's receipts in the shared log = %d, want 5", len(p.Entries))
	}
	if _, err := os.Stat(filepath.Join(old, evidence.ContinuedFile)); err != nil {
		t.Fatalf("no %s in the earlier folder: %v", evidence.ContinuedFile, err)
	}
}

// TestFleetWithoutTheSharedLog: while another fleet on the home holds the
// shared log, a device hosted by a second one keeps its receipts in its own
// folder, and is handed over to the shared log later.
func TestFleetWithoutTheSharedLog(t *testing.T) {
	home := t.TempDir()
	root := filepath.Join(home, "evidence")
	first, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	actOn(t, first, "sim:thermocycler")
	second, err := host.Open(host.Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	arm, head, _ := actOn(t, second, "sim:arm")
	if head.Log != "" && head.Log == filepath.Base(root) {
		t.Fatalf("the second fleet's device recorded into the shared log the first holds: %+v", head)
	}
	second.Close()
	if r, err := evidence.Verify(filepath.Join(root, arm), nil); err != nil || !r.OK || r.Devices[arm] != 2 {
		t.Fatalf("%s's own folder = %+v, %v; want its 2 receipts", arm, r, err)
	}
	actOn(t, first, "sim:arm")
	first.Close()
	r, err := evidence.Verify(root, nil)
	if err != nil || !r.OK || r.Devices[arm] != 3 { // continued + 2 leases
		t.Fatalf("shared log = %+v, %v; want arm's hand-over and its receipts", r, err)
	}
}

// TestWrapEvidenceDir: `mhp serve --evidence DIR` makes a new DIR a shared
// log; a DIR already holding the device's own chain (an earlier version's)
// is continued as that chain; one holding another device's chain is refused.
func TestWrapEvidenceDir(t *testing.T) {
	ctx := context.Background()
	dev := func(t *testing.T, id string) mhp.Device {
		d, err := binding.New(binding.Config{Device: mhp.DeviceInfo{ID: id, Class: "test"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	fresh, earlier := t.TempDir(), t.TempDir()
	lg, err := evidence.Open(evidence.Config{Dir: earlier, Device: "tc-01"})
	if err != nil {
		t.Fatal(err)
	}
	lg.Append(evidence.Receipt{Method: mhp.MethodSettingsWrite, Outcome: evidence.OutcomeOK})
	lg.Close()
	for _, c := range []struct {
		name, dir, id string
		shared        bool
		err           string
	}{
		{"new folder", fresh, "tc-01", true, ""},
		{"the device's earlier chain", earlier, "tc-01", false, ""},
		{"another device's chain", earlier, "arm-01", false, `holds the chain of device "tc-01", not of "arm-01"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, err := host.Wrap(ctx, dev(t, c.id), host.GuardOptions{EvidenceDir: c.dir}, nil)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Device.Acquire(mhp.WithSession(ctx, "a"), time.Minute); err != nil {
				t.Fatal(err)
			}
			w.Close()
			r, err := evidence.Verify(c.dir, nil)
			if err != nil || !r.OK || (r.Log != "") != c.shared || r.Devices[c.id] == 0 {
				t.Fatalf("verify = %+v, %v; want shared %v with %s's receipts", r, err, c.shared, c.id)
			}
		})
	}
}
