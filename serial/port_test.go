package serial_test

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	bugst "go.bug.st/serial"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/serial"
)

// memPort is a Port in memory: what is written is recorded; a write can
// be made to hang (a port that never drains).
type memPort struct {
	mu      sync.Mutex
	written []string
	hang    chan struct{} // non-nil: Write blocks until closed
	closed  chan struct{}
	once    sync.Once
}

func newMemPort() *memPort { return &memPort{closed: make(chan struct{})} }

func (p *memPort) Read(b []byte) (int, error) {
	select {
	case <-p.closed:
		return 0, io.ErrClosedPipe
	case <-time.After(20 * time.Millisecond): // a read timeout: nothing came
		return 0, nil
	}
}

func (p *memPort) Write(b []byte) (int, error) {
	p.mu.Lock()
	p.written = append(p.written, string(b))
	h := p.hang
	p.mu.Unlock()
	if h != nil {
		<-h
		return 0, errors.New("released")
	}
	return len(b), nil
}

func (p *memPort) Close() error                       { p.once.Do(func() { close(p.closed) }); return nil }
func (p *memPort) ResetInputBuffer() error            { return nil }
func (p *memPort) ResetOutputBuffer() error           { return nil }
func (p *memPort) Drain() error                       { return nil }
func (p *memPort) SetReadTimeout(time.Duration) error { return nil }
func (p *memPort) count() int                         { p.mu.Lock(); defer p.mu.Unlock(); return len(p.written) }
func (p *memPort) sent() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.written...)
}

func memConfig() serial.Config {
	c := base()
	c.Timeouts = serial.Timeouts{ReplyS: 0.1, WriteS: 0.1, ReconnectMinS: 10, ReconnectMaxS: 10}
	c.Signals = nil
	c.Settings = []serial.SettingConfig{{Setting: mhp.Setting{Name: "sp", Type: mhp.TypeNumber, Approval: mhp.ApprovalAuto}, Command: "SP {value}"}}
	return c
}

func startMem(t *testing.T, cfg serial.Config, port *memPort, modes chan<- bugst.Mode) mhp.Device {
	t.Helper()
	open := func(_ context.Context, _ string, m *bugst.Mode) (serial.Port, error) {
		if modes != nil {
			modes <- *m
		}
		return port, nil
	}
	drv, err := serial.New(context.Background(), cfg, serial.Options{Options: adapters.Options{Clock: clock.NewManual(time.Now()), Logger: quiet()}, Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return mhp.AsSession(drv, "s")
}

// The adapter opens the port with the config's Mode (a pty cannot show it).
func TestOpenGetsTheMode(t *testing.T) {
	cfg := memConfig()
	cfg.DataBits, cfg.Parity = 7, "even"
	modes := make(chan bugst.Mode, 4)
	startMem(t, cfg, newMemPort(), modes)
	if m := <-modes; m.DataBits != 7 || m.Parity != bugst.EvenParity || m.BaudRate != 9600 {
		t.Fatalf("opened with %+v, want 9600 7E1", m)
	}
}

// A write that never finishes is a fault (outcome unknown), not a hang.
func TestStuckWriteIsAFault(t *testing.T) {
	port := newMemPort()
	d := startMem(t, memConfig(), port, nil)
	port.mu.Lock()
	port.hang = make(chan struct{})
	port.mu.Unlock()
	t.Cleanup(func() { close(port.hang) })
	began := time.Now()
	_, err := d.Write(context.Background(), mhp.WriteRequest{Name: "sp", Value: 5.0})
	if me, _ := mhp.AsError(err); me == nil || !me.OutcomeUnknown() {
		t.Fatalf("stuck write: %v, want outcome unknown", err)
	}
	if took := time.Since(began); took > 5*time.Second {
		t.Fatalf("the stuck write held the request %v (write_s 0.1)", took)
	}
	if p, _ := d.Ping(context.Background()); p.State != mhp.StateFault {
		t.Fatalf("state %s, want fault", p.State)
	}
}

// No ack configured: the write answers sent, never applied.
func TestWriteWithoutAckIsSent(t *testing.T) {
	port := newMemPort()
	d := startMem(t, memConfig(), port, nil)
	res, err := d.Write(context.Background(), mhp.WriteRequest{Name: "sp", Value: 0.00001})
	if err != nil || res.Applied || res.Status != "sent" {
		t.Fatalf("write %+v %v, want sent", res, err)
	}
	if got := port.sent(); len(got) != 1 || got[0] != "SP 0.00001\r\n" {
		t.Fatalf("on the wire %q, want SP 0.00001 CR LF (no exponent)", got)
	}
}

// The watchdog is resent every seconds/2 while connected.
func TestWatchdogResent(t *testing.T) {
	cfg := memConfig()
	cfg.Watchdog = &serial.Watchdog{Command: "WD {seconds}", Seconds: 0.1}
	port := newMemPort()
	startMem(t, cfg, port, nil)
	conformance.Eventually(t, "three watchdog commands", func() bool { return port.count() >= 3 })
	for _, c := range port.sent() {
		if c != "WD 0.1\r\n" {
			t.Fatalf("sent %q, want only WD 0.1", c)
		}
	}
}

// inter_command_delay_s holds commands apart (a lower bound: it cannot flake).
func TestInterCommandDelay(t *testing.T) {
	cfg := memConfig()
	cfg.InterCommandDelayS = 0.15
	port := newMemPort()
	d := startMem(t, cfg, port, nil)
	began := time.Now()
	for i := range 3 {
		if _, err := d.Write(context.Background(), mhp.WriteRequest{Name: "sp", Value: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(began); took < 300*time.Millisecond {
		t.Fatalf("three commands in %v, want at least 2 x 0.15 s apart", took)
	}
}
