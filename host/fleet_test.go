package host

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

func openFleet(t *testing.T, home string) *Fleet {
	t.Helper()
	f, err := Open(Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func entry(id string) Entry {
	return Entry{ID: id, Target: "http://10.0.0.1:18921/" + id, Kind: KindRemote}
}

// A crash in the middle of writing the fleet file leaves the old file
// intact (and a temporary file behind, which the next writer removes).
func TestFleetFileSurvivesACrashMidWrite(t *testing.T) {
	home := t.TempDir()
	f := openFleet(t, home)
	if _, err := f.Commit(entry("first")); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(home, FleetFile))
	if err != nil {
		t.Fatal(err)
	}
	crash := errors.New("power cut")
	f.store.crash = func() error { return crash }
	if _, err := f.Commit(entry("second")); !errors.Is(err, crash) {
		t.Fatalf("commit during a crash: %v", err)
	}
	after, _ := os.ReadFile(filepath.Join(home, FleetFile))
	if string(after) != string(before) {
		t.Fatalf("the fleet file changed in a crashed write:\n%s", after)
	}
	temps, _ := filepath.Glob(filepath.Join(home, tempPrefix+"*"))
	if len(temps) != 1 {
		t.Fatalf("want the crashed write's temporary file left behind, found %v", temps)
	}
	// A fresh handle (the restarted process) reads the old fleet and writes on.
	g := openFleet(t, home)
	list, err := g.List()
	if err != nil || len(list) != 1 || list[0].ID != "first" {
		t.Fatalf("after the crash: %v %v", list, err)
	}
	if _, err := g.Commit(entry("second")); err != nil {
		t.Fatal(err)
	}
	if temps, _ := filepath.Glob(filepath.Join(home, tempPrefix+"*")); len(temps) != 0 {
		t.Fatalf("the next writer left the stale temporary file: %v", temps)
	}
	if list, _ := g.List(); len(list) != 2 {
		t.Fatalf("want 2 entries, got %v", list)
	}
}

// A fleet file that does not parse is never overwritten.
func TestMalformedFleetFileIsLeftAlone(t *testing.T) {
	home := t.TempDir()
	bad := []byte("devices: [ {id: x\n")
	if err := os.WriteFile(filepath.Join(home, FleetFile), bad, 0o600); err != nil {
		t.Fatal(err)
	}
	f := openFleet(t, home)
	if _, err := f.Commit(entry("a")); err == nil || !strings.Contains(err.Error(), "never overwritten") {
		t.Fatalf("commit over a malformed file: %v", err)
	}
	if got, _ := os.ReadFile(filepath.Join(home, FleetFile)); string(got) != string(bad) {
		t.Fatal("the malformed fleet file was changed")
	}
}

// helperEnv names the home a helper process adds entries to.
const helperEnv = "MHP_HOST_TEST_HELPER_HOME"

// TestHelperProcess is not a test: run by TestConcurrentAdds as a second
// process, it adds entries to the fleet named by the environment.
func TestHelperProcess(t *testing.T) {
	home := os.Getenv(helperEnv)
	if home == "" {
		t.Skip("helper process only")
	}
	f, err := Open(Config{Home: home})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prefix := os.Getenv(helperEnv + "_PREFIX")
	n, _ := strconv.Atoi(os.Getenv(helperEnv + "_N"))
	for i := range n {
		if _, err := f.Commit(entry(fmt.Sprintf("%s-%02d", prefix, i))); err != nil {
			t.Fatal(err)
		}
	}
}

// Adds from goroutines on separate handles and from two other processes at
// once all land: none is lost to a read-modify-write race.
func TestConcurrentAdds(t *testing.T) {
	home := t.TempDir()
	const perWriter = 8
	var procs []*exec.Cmd
	for _, p := range []string{"proc-a", "proc-b"} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), helperEnv+"="+home, helperEnv+"_PREFIX="+p, helperEnv+"_N="+strconv.Itoa(perWriter))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, cmd)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4*perWriter)
	for g := range 4 {
		f := openFleet(t, home) // a handle each: its own lock file descriptor
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				if _, err := f.Commit(entry(fmt.Sprintf("go%d-%02d", g, i))); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	for _, p := range procs {
		if err := p.Wait(); err != nil {
			t.Fatalf("helper process: %v", err)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	list, err := openFleet(t, home).List()
	if err != nil {
		t.Fatal(err)
	}
	if want := 6 * perWriter; len(list) != want {
		t.Fatalf("%d entries after %d concurrent adds: some were lost", len(list), want)
	}
}

func TestIDsAndConflicts(t *testing.T) {
	for _, bad := range []string{"", "Upper", "-dash", "a..b", "a/b", strings.Repeat("a", 65), "sp ace"} {
		if ValidID(bad) == nil {
			t.Errorf("id %q accepted", bad)
		}
	}
	for _, good := range []string{"tc-01", "hotplate.02", "a_b", "0"} {
		if err := ValidID(good); err != nil {
			t.Errorf("id %q refused: %v", good, err)
		}
	}
	f := openFleet(t, t.TempDir())
	e := Entry{ID: "tc-01", Target: "http://localhost:18921", Kind: KindRemote}
	if _, err := f.Commit(e); err != nil {
		t.Fatal(err)
	}
	// The same device by another spelling of its address is the same target.
	again := e
	again.Target = "http://127.0.0.1:18921/"
	if _, err := f.Commit(again); err != nil {
		t.Fatalf("re-adding the same target: %v", err)
	}
	other := e
	other.Target = "http://10.1.1.1:18921"
	_, err := f.Commit(other)
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeInvalidParams || !strings.Contains(me.Message, "already in the fleet") {
		t.Fatalf("same id at another target: %v", err)
	}
	if list, _ := f.List(); len(list) != 1 {
		t.Fatalf("want one entry, got %v", list)
	}
	if _, err := f.Locate("tc-01", "bench 2, left"); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.Entry("tc-01"); got.Location != "bench 2, left" {
		t.Fatalf("location %q", got.Location)
	}
	if _, err := f.Locate("nope", "x"); err == nil {
		t.Fatal("locate of an unknown id")
	}
	if _, err := f.Remove(context.Background(), "tc-01", false); err != nil {
		t.Fatal(err)
	}
	if list, _ := f.List(); len(list) != 0 {
		t.Fatalf("after remove: %v", list)
	}
}

func TestNormalizeTarget(t *testing.T) {
	same := [][2]string{
		{"http://localhost:18921", "http://127.0.0.1:18921/"},
		{"HTTP://Bench-PC:18921/mhp.json", "http://bench-pc:18921"},
		{"http://bench:80", "http://bench"},
		{"pkg:devices/a/", "pkg:devices/a"},
	}
	for _, p := range same {
		if NormalizeTarget(p[0]) != NormalizeTarget(p[1]) {
			t.Errorf("%s and %s differ: %s vs %s", p[0], p[1], NormalizeTarget(p[0]), NormalizeTarget(p[1]))
		}
	}
	if NormalizeTarget("http://bench:18921") == NormalizeTarget("http://bench:18922") {
		t.Error("two ports normalized to one")
	}
}

// serve runs dev over HTTP on 127.0.0.1 and returns its port.
func serve(t *testing.T, dev mhp.Device) int {
	t.Helper()
	srv := transport.NewServer(dev, transport.Options{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func simDevice(t *testing.T, id string) mhp.Device {
	t.Helper()
	drv, err := binding.New(sim.Thermocycler(sim.Options{ID: id}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}

// Scan finds the servers on the ports probed, minus the fleet's members
// (matched by normalized target, whatever spelling the fleet has).
func TestScanFindsServersNotInTheFleet(t *testing.T) {
	pa, pb := serve(t, simDevice(t, "tc-a")), serve(t, simDevice(t, "tc-b"))
	f := openFleet(t, t.TempDir())
	ctx := context.Background()
	found, err := f.Scan(ctx, ScanOptions{Ports: []int{pa, pb}})
	if err != nil || len(found) != 2 {
		t.Fatalf("scan: %v %v", found, err)
	}
	// Add tc-a by its localhost spelling: the probe's 127.0.0.1 is the same.
	e, err := f.Prepare(ctx, "localhost:"+strconv.Itoa(pa), AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "tc-a" || e.Simulated || e.Kind != KindRemote {
		t.Fatalf("prepared %+v: a URL is hardware whatever its tags", e)
	}
	if _, err := f.Commit(e); err != nil {
		t.Fatal(err)
	}
	found, err = f.Scan(ctx, ScanOptions{Ports: []int{pa, pb}})
	if err != nil || len(found) != 1 || found[0].ID != "tc-b" {
		t.Fatalf("scan after adding tc-a: %v %v", found, err)
	}
}

// A package folder is hosted in-process on its driver; its twin is a
// second, simulated device; the finder finds both and the dial reaches them.
func TestAddPackageAndTwinAreHosted(t *testing.T) {
	f := openFleet(t, t.TempDir())
	ctx := context.Background()
	pkg, _ := filepath.Abs("../examples/devices/thermocycler-01")
	e, err := f.Prepare(ctx, pkg, AddOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "thermocycler-01" || e.Kind != KindPackage || !e.Simulated || !strings.HasPrefix(e.Target, "pkg:/") {
		t.Fatalf("package entry %+v (a sim: driver is simulated)", e)
	}
	tw, err := f.Prepare(ctx, pkg, AddOptions{Twin: true})
	if err != nil {
		t.Fatal(err)
	}
	if tw.ID != "thermocycler-01-sim" || tw.Kind != KindTwin || !tw.Simulated || tw.Location != "simulated" {
		t.Fatalf("twin entry %+v", tw)
	}
	for _, x := range []Entry{e, tw} {
		if _, err := f.Commit(x); err != nil {
			t.Fatal(err)
		}
	}
	res, err := f.Finder().Search(ctx, directoryQuery("thermocycler"))
	if err != nil || len(res) != 2 {
		t.Fatalf("search: %v %v", res, err)
	}
	for _, r := range res {
		if r.State != mhp.StateIdle {
			t.Fatalf("%s state %q (%s)", r.ID, r.State, r.Error)
		}
	}
	d, err := f.Dial(ctx, tw.Target)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Read(ctx, []string{"block_temperature"}); err != nil {
		t.Fatal(err)
	}
	if !f.Simulated("thermocycler-01-sim") || f.Simulated("nope") {
		t.Fatal("simulated decided wrong")
	}
}

func directoryQuery(q string) directory.Query { return directory.Query{Query: q} }

// A serial package's twin keeps the limits and approvals its serial config
// gives (the descriptor there only refines): a rehearsal refuses what the
// instrument would.
func TestTwinKeepsTheDriverConfigsLimits(t *testing.T) {
	f := openFleet(t, t.TempDir())
	ctx := context.Background()
	pkg, _ := filepath.Abs("../examples/devices/ika-cmag-hs7")
	e, err := f.Prepare(ctx, pkg, AddOptions{Twin: true})
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != "hotplate-01-sim" || !e.Simulated {
		t.Fatalf("twin %+v", e)
	}
	if _, err := f.Commit(e); err != nil {
		t.Fatal(err)
	}
	d, err := f.Dial(ctx, e.Target)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Write(ctx, mhp.WriteRequest{Name: "target_speed", Value: 5000.0})
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeLimitViolation {
		t.Fatalf("5000 rpm on the twin of a 0-1500 rpm stirrer: %v", err)
	}
	_, err = d.Write(ctx, mhp.WriteRequest{Name: "target_temperature", Value: 60.0})
	if me, ok := mhp.AsError(err); !ok || me.Code != mhp.CodeApprovalRequired {
		t.Fatalf("a confirm setting on the twin: %v", err)
	}
}
