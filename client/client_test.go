package client_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/transport"
)

const testTimeout = 10 * time.Second

// serveStdioArg makes the test binary an MHP stdio server (see TestMain), so
// that Dial("stdio:…") starts a real process.
const serveStdioArg = "-mhp.serve-stdio"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == serveStdioArg {
		os.Exit(serveStdio())
	}
	os.Exit(m.Run())
}

func serveStdio() int {
	in := conformance.NewInstrument()
	d, err := conformance.MemoryDriver(in, conformance.Options{}, clock.Real{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := transport.NewServer(d, transport.Options{Logger: quiet()})
	if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

type memory struct {
	drv *binding.Driver
	in  *conformance.Instrument
}

func newMemory(t testing.TB) *memory {
	t.Helper()
	in := conformance.NewInstrument()
	d, err := conformance.MemoryDriver(in, conformance.Options{}, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.ReleaseAll()
		_ = d.Close()
	})
	return &memory{drv: d, in: in}
}

// serveHTTP serves dev on 127.0.0.1:0 and returns its URL.
func serveHTTP(t testing.TB, dev mhp.Device) string {
	t.Helper()
	srv := transport.NewServer(dev, transport.Options{Logger: quiet()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		_ = srv.Close()
	})
	return hs.URL
}

// dialPipe connects over in-process pipes to a stream server.
func dialPipe(t testing.TB, dev mhp.Device, opts client.Options) *client.Device {
	t.Helper()
	srv := transport.NewServer(dev, transport.Options{Logger: quiet()})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan struct{})
	go func() {
		_ = srv.ServeStdio(context.Background(), inR, outW)
		outW.Close()
		close(done)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	d, err := client.DialStream(ctx, outR, inW, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		<-done
		srv.Close()
	})
	return d
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

func TestSplitCommand(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{"mhp serve sim:arm --stdio", []string{"mhp", "serve", "sim:arm", "--stdio"}, false},
		{`  a  "b c"  'd "e"' f\ g `, []string{"a", "b c", `d "e"`, "f g"}, false},
		{`a ""`, []string{"a", ""}, false},
		{`a "b`, nil, true},
		{`a\`, nil, true},
		{"", nil, false},
	}
	for _, c := range cases {
		got, err := client.SplitCommand(c.in)
		if (err != nil) != c.err || !reflect.DeepEqual(got, c.want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

func TestDialTargets(t *testing.T) {
	ctx := ctxT(t)
	if _, err := client.Dial(ctx, "ftp://x", client.Options{}); err == nil {
		t.Fatal("an ftp target dialled")
	}
	if _, err := client.Dial(ctx, "stdio:", client.Options{}); err == nil {
		t.Fatal("an empty stdio command dialled")
	}
	if _, err := client.Dial(ctx, "stdio:/no/such/binary", client.Options{AllowStdio: true}); err == nil {
		t.Fatal("a missing binary dialled")
	}
	_, err := client.Dial(ctx, "http://127.0.0.1:1", client.Options{Timeout: time.Second})
	if !client.IsTransportError(err) {
		t.Fatalf("dial of a closed port: %v, want a transport error", err)
	}
}

func TestDialStdioProcess(t *testing.T) {
	ctx := ctxT(t)
	d, err := client.Dial(ctx, "stdio:"+os.Args[0]+" "+serveStdioArg, client.Options{ClientName: "proc", AllowStdio: true})
	if err != nil {
		t.Fatal(err)
	}
	info := d.Info()
	if info.Device.ID != "conformance-01" || !strings.HasPrefix(d.Session(), "s_") || !info.Capabilities.EStop {
		t.Fatalf("initialize over a process: %+v", info)
	}
	v, err := d.Get(ctx, conformance.SignalTemperature)
	if err != nil || v != 21.5 {
		t.Fatalf("Get: %v %v", v, err)
	}
	job, err := d.Run(ctx, conformance.ActionQuick, nil)
	if err != nil {
		t.Fatal(err)
	}
	if job, err = d.Wait(ctx, job.ID); err != nil || job.State != mhp.JobDone {
		t.Fatalf("Wait: %+v %v", job, err)
	}
	start := time.Now()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v", took)
	}
	if _, err := d.Ping(ctx); !client.IsTransportError(err) {
		t.Fatalf("ping after Close: %v, want a transport error", err)
	}
}

func TestGetSetRunWait(t *testing.T) {
	for _, tr := range []string{"http", "stdio", "inproc"} {
		t.Run(tr, func(t *testing.T) {
			m := newMemory(t)
			var d *client.Device
			switch tr {
			case "http":
				var err error
				d, err = client.Dial(ctxT(t), serveHTTP(t, m.drv), client.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { d.Close() })
			case "stdio":
				d = dialPipe(t, m.drv, client.Options{})
			default:
				d = client.Connect(m.drv, client.Options{})
				t.Cleanup(func() { d.Close() })
			}
			ctx := ctxT(t)
			if res, err := d.Set(ctx, conformance.SettingSetpoint, 55); err != nil || !res.OK {
				t.Fatalf("Set: %+v %v", res, err)
			}
			if v, ok := m.in.Written(conformance.SettingSetpoint); !ok || v != 55.0 {
				t.Fatalf("backend has %v", v)
			}
			_, err := d.Set(ctx, conformance.SettingSetpoint, 500)
			if e, ok := mhp.AsError(err); !ok || e.Code != mhp.CodeLimitViolation || e.TS == 0 {
				t.Fatalf("Set 500: %v, want LimitViolation with ts", err)
			}
			if _, err := d.Get(ctx, "nope"); mhp.CodeOf(err) != mhp.CodeUnknownName {
				t.Fatalf("Get nope: %v", err)
			}
			m.in.SetUnavailable(conformance.SignalTemperature, true)
			if _, err := d.Get(ctx, conformance.SignalTemperature); err == nil {
				t.Fatal("Get of an unavailable signal succeeded")
			}
			m.in.Script(conformance.ActionRun, conformance.Block)
			job, err := d.Run(ctx, conformance.ActionRun, map[string]any{"duration_s": 5})
			if err != nil {
				t.Fatal(err)
			}
			waitCh := make(chan *mhp.Job, 1)
			go func() {
				j, _ := d.Wait(ctx, job.ID)
				waitCh <- j
			}()
			if _, err := d.CancelJob(ctx, job.ID); err != nil {
				t.Fatal(err)
			}
			select {
			case j := <-waitCh:
				if j == nil || j.State != mhp.JobCancelled {
					t.Fatalf("Wait after cancel: %+v", j)
				}
			case <-ctx.Done():
				t.Fatal("Wait did not return")
			}
		})
	}
}

// silent is a device whose notifications never arrive.
type silent struct{ mhp.Device }

func (silent) Listen(func(mhp.Notification)) func() { return func() {} }

func TestWaitPollsWithoutNotifications(t *testing.T) {
	m := newMemory(t)
	d := client.Connect(silent{m.drv}, client.Options{PollEvery: 10 * time.Millisecond})
	defer d.Close()
	ctx := ctxT(t)
	m.in.Script(conformance.ActionRun, conformance.Block)
	job, err := d.Run(ctx, conformance.ActionRun, map[string]any{"duration_s": 5})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *mhp.Job, 1)
	go func() {
		j, _ := d.Wait(ctx, job.ID)
		done <- j
	}()
	for m.in.Calls(conformance.ActionRun) == 0 { // the work must have started to be released
		select {
		case <-ctx.Done():
			t.Fatal("the job never reached the backend")
		case <-time.After(time.Millisecond):
		}
	}
	m.in.Release(conformance.ActionRun)
	select {
	case j := <-done:
		if j == nil || j.State != mhp.JobDone {
			t.Fatalf("Wait by polling: %+v", j)
		}
	case <-ctx.Done():
		t.Fatal("Wait without notifications never returned")
	}
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	m.in.Script(conformance.ActionRun, conformance.Block)
	job, err = d.Run(ctx, conformance.ActionRun, map[string]any{"duration_s": 5})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(short, job.ID); !client.IsTransportError(err) {
		t.Fatalf("Wait past its deadline: %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	m := newMemory(t)
	d := dialPipe(t, m.drv, client.Options{})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if _, err := d.Read(ctx, nil); err != nil {
					errs <- err
					return
				}
				if _, err := d.Set(ctx, conformance.SettingSetpoint, float64(g)); err != nil {
					errs <- err
					return
				}
				if _, err := d.Ping(ctx); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := m.in.Calls(conformance.SettingSetpoint); n != 16*20 {
		t.Fatalf("backend got %d writes, want %d", n, 16*20)
	}
}

func TestConnectOwnSession(t *testing.T) {
	m := newMemory(t)
	ctx := ctxT(t)
	a := client.Connect(m.drv, client.Options{})
	b := client.Connect(m.drv, client.Options{})
	defer b.Close()
	if a.Session() == b.Session() || a.Info().Device.ID != "conformance-01" {
		t.Fatalf("sessions %q %q, info %+v", a.Session(), b.Session(), a.Info())
	}
	if _, err := a.Acquire(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Set(ctx, conformance.SettingSetpoint, 1); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("b under a's lease: %v", err)
	}
	a.Close()
	if _, err := b.Set(ctx, conformance.SettingSetpoint, 1); err != nil {
		t.Fatalf("b after a closed: %v", err)
	}
}

func TestLab(t *testing.T) {
	ok := newMemory(t)
	failing := newMemory(t)
	failing.in.FailStop(true)
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var hung []net.Conn
	var hmu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			hmu.Lock()
			hung = append(hung, c)
			hmu.Unlock()
		}
	}()
	defer func() {
		hmu.Lock()
		for _, c := range hung {
			c.Close()
		}
		hmu.Unlock()
	}()
	dead, _ := net.Listen("tcp", "127.0.0.1:0")
	deadURL := "http://" + dead.Addr().String()
	dead.Close()

	lab := client.NewLab(map[string]string{
		"ok":      serveHTTP(t, ok.drv),
		"failing": serveHTTP(t, failing.drv),
		"dead":    deadURL,
		"hung":    "http://" + ln.Addr().String(),
	}, client.Options{EStopTimeout: 500 * time.Millisecond})
	defer lab.Close()
	ctx := ctxT(t)

	if got := lab.Names(); !reflect.DeepEqual(got, []string{"dead", "failing", "hung", "ok"}) {
		t.Fatalf("Names %v", got)
	}
	if _, err := lab.Device(ctx, "nope"); mhp.CodeOf(err) != mhp.CodeUnknownName {
		t.Fatalf("unknown lab device: %v", err)
	}
	d, err := lab.Device(ctx, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if d2, _ := lab.Device(ctx, "ok"); d2 != d {
		t.Fatal("the lab dialled twice")
	}
	inproc := newMemory(t)
	if err := lab.Add("inproc", client.Connect(inproc.drv, client.Options{})); err != nil {
		t.Fatal(err)
	}
	if err := lab.Add("ok", d); err == nil {
		t.Fatal("a duplicate name was added")
	}

	start := time.Now()
	out := lab.EStopAll(ctx, "fleet test")
	took := time.Since(start)
	want := map[string]string{"ok": client.EStopStopped, "inproc": client.EStopStopped,
		"failing": client.EStopUnconfirmed, "dead": client.EStopError, "hung": client.EStopError}
	for name, status := range want {
		o, found := out[name]
		if !found || o.Status != status {
			t.Errorf("%s: %+v, want %s", name, o, status)
		}
		if status != client.EStopError && (!o.OK || o.Result == nil || o.Result.State != mhp.StateEStop) {
			t.Errorf("%s answered %+v", name, o)
		}
		if status == client.EStopError && o.Err == nil {
			t.Errorf("%s: error outcome without an error", name)
		}
	}
	if took > 2*time.Second {
		t.Fatalf("EStopAll took %v with a 500ms per-device deadline", took)
	}
	if ok.drv.State() != mhp.StateEStop || inproc.drv.State() != mhp.StateEStop || failing.drv.State() != mhp.StateEStop {
		t.Fatal("a reachable device is not in estop")
	}
}
