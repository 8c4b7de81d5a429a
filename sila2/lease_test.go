package sila2_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/conformance"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// openLeaseAdapter fronts the lab like openAdapter, on clk and with a
// watchdog of watchdogS seconds (0: none).
func openLeaseAdapter(t *testing.T, l *lab, extra string, clk clock.Clock, watchdogS float64) *binding.Driver {
	t.Helper()
	text := labConfig + extra + fmt.Sprintf("endpoint: %s\ntls: {pin_sha256: %q}\n", l.addr, l.cert.PinSHA256)
	cfg, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Safety.WatchdogS = watchdogS
	d, err := sila2.New(ctxT(t), cfg, sila2.Options{Options: adapters.Options{Clock: clk}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func TestLeaseLocksServer(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	d := openAdapter(t, l, "") // no lock block: lease mode, since the server has LockController
	if got := l.srv.Locked(); got != "" {
		t.Fatalf("server locked (%q) without any MHP lease", got)
	}
	a := mhp.AsSession(d, "a")
	if _, err := a.Acquire(ctxT(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	lockID := l.srv.Locked()
	if len(lockID) != 36 {
		t.Fatalf("lease acquire left the server lock %q, want a fresh UUID", lockID)
	}

	// A second, plain SiLA client is refused by the server while locked.
	other := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	_, err := other.Call(ctxT(t), "GreetingProvider", "SayHello", map[string]any{"name": "intruder"})
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindFramework || se.FrameworkType != sila2.FrameworkInvalidMetadata {
		t.Fatalf("plain client during the lease: %v", err)
	}
	err = other.Lock(ctxT(t), "theirs", 0)
	if se, ok := sila2.AsSiLAError(err); !ok || se.ShortIdentifier() != "ServerAlreadyLocked" {
		t.Fatalf("plain client LockServer during the lease: %v", err)
	}

	// Commands and setting writes of the holder carry the lock identifier.
	j := invoke(t, a, "say_hello", map[string]any{"name": "holder"})
	if got := waitJob(t, a, j.ID, terminal); got.State != mhp.JobDone {
		t.Fatalf("holder's command during the lease: %+v %+v", got, got.Error)
	}
	if got := l.srv.LockIdentifierSeen("GreetingProvider/SayHello"); got != lockID {
		t.Fatalf("SayHello carried lock identifier %q, want %q", got, lockID)
	}
	if _, err := a.Write(ctxT(t), mhp.WriteRequest{Name: "mode", Value: "Cool"}); err != nil {
		t.Fatalf("holder's write during the lease: %v", err)
	}
	if got := l.srv.LockIdentifierSeen("TemperatureController/SetMode"); got != lockID {
		t.Fatalf("SetMode carried lock identifier %q, want %q", got, lockID)
	}
	// Another MHP session is refused by the driver's own lease gate.
	if _, err := mhp.AsSession(d, "b").Acquire(ctxT(t), time.Minute); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("second session took the lease: %v", err)
	}

	// Release unlocks; the plain client gets through again.
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	conformance.EventuallyWithin(t, "the server unlocked after release", testTimeout, func() bool { return l.srv.Locked() == "" })
	if n := l.srv.Calls("LockController/UnlockServer"); n != 1 {
		t.Fatalf("UnlockServer called %d times for one release", n)
	}
	if _, err := other.Call(ctxT(t), "GreetingProvider", "SayHello", map[string]any{"name": "after"}); err != nil {
		t.Fatalf("plain client after the release: %v", err)
	}
	// Calls without a lease carry no lock identifier, once the release (on
	// its own goroutine) has returned: the server unlocks a moment before
	// the client hears so and stops sending the identifier.
	conformance.EventuallyWithin(t, "a call after the release to carry no lock identifier", testTimeout, func() bool {
		j := invoke(t, a, "say_hello", map[string]any{"name": "unleased"})
		waitJob(t, a, j.ID, terminal)
		return l.srv.LockIdentifierSeen("GreetingProvider/SayHello") == ""
	})
	// The next lease takes a fresh identifier.
	if _, err := a.Acquire(ctxT(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := l.srv.Locked(); got == "" || got == lockID {
		t.Fatalf("second lease locked with %q (first %q)", got, lockID)
	}
	// Close with the lease held unlocks too.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if got := l.srv.Locked(); got != "" {
		t.Fatalf("lock %q left after Close", got)
	}
}

func TestLeaseEndUnlocks(t *testing.T) {
	cases := []struct {
		name      string
		watchdogS float64
		ttl       time.Duration
		advance   time.Duration
	}{
		{"watchdog", 5, time.Minute, 6 * time.Second},
		{"expiry", 0, 10 * time.Second, 11 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, silatest.Options{LockController: true})
			clk := clock.NewManual(time.Now())
			d := openLeaseAdapter(t, l, "", clk, tc.watchdogS)
			a := mhp.AsSession(d, "a")
			if _, err := a.Acquire(ctxT(t), tc.ttl); err != nil {
				t.Fatal(err)
			}
			if l.srv.Locked() == "" {
				t.Fatal("lease acquire did not lock the server")
			}
			clk.Advance(tc.advance)
			conformance.EventuallyWithin(t, "the server unlocked after the lease ended", testTimeout, func() bool { return l.srv.Locked() == "" })
			if _, err := mhp.AsSession(d, "b").Acquire(ctxT(t), time.Minute); tc.watchdogS == 0 && err != nil {
				t.Fatalf("next lease after expiry: %v", err)
			}
		})
	}
}

func TestLeaseRefusedWhileServerLockedByAnother(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	d := openAdapter(t, l, "")
	other := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	if err := other.Lock(ctxT(t), "theirs", 0); err != nil {
		t.Fatal(err)
	}
	a := mhp.AsSession(d, "a")
	_, err := a.Acquire(ctxT(t), time.Minute)
	me, ok := mhp.AsError(err)
	if !ok || me.Code != mhp.CodeNotLeased || !strings.Contains(me.Message, "ServerAlreadyLocked") || me.Data["reason"] != "server_locked" {
		t.Fatalf("lease on a server locked by another client: %v", err)
	}
	if got := l.srv.Locked(); got != "theirs" {
		t.Fatalf("the refused lease changed the server lock to %q", got)
	}
	if _, err := a.Renew(ctxT(t)); mhp.CodeOf(err) != mhp.CodeNotLeased {
		t.Fatalf("a refused lease is held all the same: %v", err)
	}
	// The holder's commands are refused by the server as NotLeased.
	j := invoke(t, a, "say_hello", map[string]any{"name": "x"})
	if got := waitJob(t, a, j.ID, terminal); got.State == mhp.JobDone || got.Error == nil || got.Error.Code != mhp.CodeNotLeased {
		t.Fatalf("command on a server locked by another client: %+v %+v", got, got.Error)
	}
	if err := other.Unlock(ctxT(t), "theirs"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Acquire(ctxT(t), time.Minute); err != nil {
		t.Fatalf("lease once the other client unlocked: %v", err)
	}
	if got := l.srv.Locked(); got == "" || got == "theirs" {
		t.Fatalf("server lock %q after the lease", got)
	}
}

func TestLeaseLockLapse(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	d := openAdapter(t, l, "lock: {mode: lease, timeout_s: 1}\n")
	a := mhp.AsSession(d, "a")
	if _, err := a.Acquire(ctxT(t), time.Minute); err != nil {
		t.Fatal(err)
	}
	id := l.srv.Locked()
	// The lock lapses at the server: the keepalive locks again, same identifier.
	l.srv.ForceUnlock()
	conformance.EventuallyWithin(t, "the lease lock taken again", testTimeout, func() bool { return l.srv.Locked() == id })
	if deviceState(t, d) == mhp.StateFault {
		t.Fatal("a lock taken again latched a fault")
	}
	// It lapses and another client takes the server: the device latches in fault.
	other := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	conformance.EventuallyWithin(t, "the other client's lock", testTimeout, func() bool {
		l.srv.ForceUnlock()
		return other.Lock(ctxT(t), "intruder", 0) == nil
	})
	conformance.EventuallyWithin(t, "the fault", testTimeout, func() bool { return deviceState(t, d) == mhp.StateFault })
	if err := a.Release(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Neither the release nor the next lease unlocks what is no longer
	// ours (the hooks are serialised: b's acquire runs after, or itself
	// gives back, a's lost lock); b's lease is refused by the intruder's lock.
	_, err := mhp.AsSession(d, "b").Acquire(ctxT(t), time.Minute)
	if me, ok := mhp.AsError(err); !ok || me.Data["reason"] != "server_locked" {
		t.Fatalf("lease while the intruder holds the server: %v", err)
	}
	if n := l.srv.Calls("LockController/UnlockServer"); n != 0 {
		t.Fatalf("UnlockServer called %d times on a lock that is not ours", n)
	}
	if got := l.srv.Locked(); got != "intruder" {
		t.Fatalf("server lock %q, want the intruder's", got)
	}
}

func TestLockModes(t *testing.T) {
	cases := []struct {
		name        string
		extra       string
		lockedStart bool
		lockedLease bool
	}{
		{"default is lease", "", false, true},
		{"lease", "lock: lease\n", false, true},
		{"lifetime", "lock: lifetime\n", true, true},
		{"legacy block is lifetime", "lock: {timeout_s: 0}\n", true, true},
		{"none", "lock: none\n", false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := startLab(t, silatest.Options{LockController: true})
			d := openAdapter(t, l, tc.extra)
			if got := l.srv.Locked() != ""; got != tc.lockedStart {
				t.Fatalf("locked after Start: %v, want %v", got, tc.lockedStart)
			}
			a := mhp.AsSession(d, "a")
			if _, err := a.Acquire(ctxT(t), time.Minute); err != nil {
				t.Fatal(err)
			}
			if got := l.srv.Locked() != ""; got != tc.lockedLease {
				t.Fatalf("locked during a lease: %v, want %v", got, tc.lockedLease)
			}
			j := invoke(t, a, "say_hello", map[string]any{"name": "x"})
			if got := waitJob(t, a, j.ID, terminal); got.State != mhp.JobDone {
				t.Fatalf("command: %+v %+v", got, got.Error)
			}
		})
	}
}

func TestLockConfigErrors(t *testing.T) {
	cases := map[string]string{
		"unknown mode":            "lock: always\n",
		"unknown field":           "lock: {colour: red}\n",
		"identifier in lease":     "lock: {mode: lease, identifier: x}\n",
		"negative timeout":        "lock: {mode: lease, timeout_s: -1}\n",
		"none with a timeout":     "lock: {mode: none, timeout_s: 5}\n",
		"lock a sequence instead": "lock: [lease]\n",
	}
	for name, extra := range cases {
		t.Run(name, func(t *testing.T) {
			text := labConfig + extra + "endpoint: 127.0.0.1:1\ntls: {insecure_plaintext: true}\n"
			if _, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)}); err == nil || !strings.Contains(err.Error(), "lock") {
				t.Fatalf("config accepted or error not about the lock: %v", err)
			}
		})
	}
	// An explicit lock on a server without LockController is refused by New.
	l := startLab(t, silatest.Options{})
	text := labConfig + "lock: lease\n" + fmt.Sprintf("endpoint: %s\ntls: {pin_sha256: %q}\n", l.addr, l.cert.PinSHA256)
	cfg, err := sila2.Load(adapters.Source{Path: "lab.yaml", Data: []byte(text)})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := sila2.New(ctxT(t), cfg, sila2.Options{}); err == nil || !strings.Contains(err.Error(), "LockController") {
		if d != nil {
			_ = d.Close()
		}
		t.Fatalf("lease lock on a server without LockController: %v", err)
	}
	// Without a lock block such a server simply runs unlocked.
	l2 := startLab(t, silatest.Options{})
	d := openAdapter(t, l2, "")
	if _, err := mhp.AsSession(d, "a").Acquire(ctxT(t), time.Minute); err != nil {
		t.Fatalf("lease on a server without LockController: %v", err)
	}
}

// A release runs on its own goroutine and may arrive after the same
// session's next acquire: it must not unlock the live lease.
func TestLeaseLateRelease(t *testing.T) {
	l := startLab(t, silatest.Options{LockController: true})
	c := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	hook := sila2.LeaseHookForTest(&sila2.Config{Endpoint: l.addr}, c, 0)
	ctx := ctxT(t)
	steps := []struct {
		holder  string
		acquire bool
		locked  bool
	}{
		{"a", true, true},
		{"a", true, true},   // a's second lease, its first release still pending
		{"a", false, true},  // the late release of the first lease
		{"b", true, true},   // (refused by the driver's gate in real life; here: b takes over)
		{"a", false, true},  // a's last release: b's lock stays
		{"b", false, false}, // b's release unlocks
	}
	prev := ""
	for i, s := range steps {
		err := hook(ctx, s.holder, s.acquire)
		if err != nil {
			t.Fatalf("step %d %+v: %v", i, s, err)
		}
		got := l.srv.Locked()
		if (got != "") != s.locked {
			t.Fatalf("step %d %+v: server lock %q", i, s, got)
		}
		if i == 1 && got != prev {
			t.Fatalf("the second lease of the same holder relocked (%q -> %q)", prev, got)
		}
		prev = got
	}
	if n := l.srv.Calls("LockController/UnlockServer"); n != 2 {
		t.Fatalf("UnlockServer called %d times, want 2 (a's lock given to b, b's release)", n)
	}
}
