package sila2

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
)

// heldLock is a LockController lock the adapter holds at the server.
type heldLock struct {
	id      string
	holder  string // the MHP session of a lease lock; "" for the lifetime lock
	timeout time.Duration
	stop    context.CancelFunc // ends the keepalive; nil without a timeout
	done    chan struct{}      // closed when the keepalive returned
	lost    atomic.Bool        // the keepalive found the lock gone for good
}

// resolveLockMode picks the lock mode: the config's, or lease when the
// server implements LockController and the backend is the SiLA client.
func resolveLockMode(cfg *Config, hasLockController bool, client *Client) (mode string, timeout time.Duration, err error) {
	mode = cfg.lockMode()
	switch mode {
	case "":
		if !hasLockController || client == nil {
			return LockNone, 0, nil
		}
		mode = LockLease
	case LockNone:
		return LockNone, 0, nil
	default:
		if client == nil {
			return "", 0, fmt.Errorf("sila2: lock: %s needs the SiLA client as backend", mode)
		}
		if !hasLockController {
			return "", 0, fmt.Errorf("sila2: lock: %s: the server does not implement LockController (%s)", mode, LockControllerID)
		}
	}
	var secs int64
	if cfg.Lock != nil {
		secs = cfg.Lock.TimeoutS
	}
	if mode == LockLease && secs == 0 {
		secs = DefaultLeaseLockTimeoutS
	}
	return mode, time.Duration(secs) * time.Second, nil
}

// leaseHook is binding.Config.Lease in lease mode: an MHP lease acquire
// locks the server under a fresh lock identifier; the lease's end unlocks.
//
// Releases run on their own goroutines, so a release may arrive after the
// same session's next acquire. Every granted acquire is answered by exactly
// one release, so the hook counts them per holder (a.leases) and unlocks
// only when the holder of the lock has no lease left: a late release never
// unlocks a lease that is live again.
func (a *adapter) leaseHook(ctx context.Context, holder string, acquire bool) error {
	a.lockMu.Lock()
	defer a.lockMu.Unlock()
	if !acquire {
		if a.leases[holder] > 1 {
			a.leases[holder]--
			return nil
		}
		delete(a.leases, holder)
		if a.lockClosed || a.held == nil || a.held.holder != holder {
			// Not ours to give back: another holder's lock, or Close has
			// already unlocked.
			return nil
		}
		return a.giveLockLocked(ctx)
	}
	if a.lockClosed {
		return mhp.Errorf(mhp.CodeNotLeased, "the SiLA driver is closing: no new lease").With("reason", "closing")
	}
	if h := a.held; h != nil {
		if h.holder == holder && !h.lost.Load() {
			// The holder's previous lease still has its release pending:
			// the lock carries over to this lease.
			a.leases[holder]++
			return nil
		}
		// The previous holder's release has not run yet (it runs on its own
		// goroutine): give that lock back before taking a fresh one.
		if err := a.giveLockLocked(ctx); err != nil {
			a.log.Warn("sila2: unlocking the previous lease's lock", "endpoint", a.cfg.Endpoint, "holder", h.holder, "error", err)
		}
	}
	id := randomID()
	err := a.takeLockLocked(ctx, holder, id, a.lockTimeout)
	if err == nil {
		a.leases[holder]++
		return nil
	}
	return a.lockRefusal(ctx, id, err)
}

// lockRefusal turns a failed LockServer into the NotLeased refusal of the
// MHP lease, naming the SiLA error.
func (a *adapter) lockRefusal(ctx context.Context, id string, err error) error {
	if se, ok := AsSiLAError(err); ok {
		if se.Kind == KindDefined && strings.EqualFold(se.ShortIdentifier(), "ServerAlreadyLocked") {
			return mhp.Errorf(mhp.CodeNotLeased, "the SiLA server is locked by another client: LockServer refused with ServerAlreadyLocked (%s)", se.Message).
				With("reason", "server_locked").With("sila_error", silaErrorData(se))
		}
		return mhp.Errorf(mhp.CodeNotLeased, "the SiLA server refused the lock: LockServer: %s", se.Error()).
			With(mhp.DataReason, mhp.ReasonBackendLock).With("sila_error", silaErrorData(se))
	}
	// The server did not answer: it may have locked all the same. Give such
	// a lock back, best effort (ServerNotLocked is the expected answer).
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = a.client.Unlock(uctx, id)
	cancel()
	return mhp.Errorf(mhp.CodeNotLeased, "could not lock the SiLA server: %v", err).With(mhp.DataReason, mhp.ReasonBackendLock)
}

// takeLockLocked locks the server under id (lockMu held) and, for a timed
// lock, starts its keepalive.
func (a *adapter) takeLockLocked(ctx context.Context, holder, id string, timeout time.Duration) error {
	if err := a.client.Lock(ctx, id, timeout); err != nil {
		return err
	}
	h := &heldLock{id: id, holder: holder, timeout: timeout}
	a.held = h
	a.mu.Lock()
	a.lockID = id
	a.mu.Unlock()
	if timeout > 0 {
		kctx, cancel := context.WithCancel(context.Background())
		h.stop, h.done = cancel, make(chan struct{})
		go a.keepLock(kctx, h)
	}
	return nil
}

// giveLockLocked stops the keepalive and unlocks the server (lockMu held).
// A lock the keepalive found lost is not unlocked: it is someone else's.
func (a *adapter) giveLockLocked(ctx context.Context) error {
	h := a.held
	if h == nil {
		return nil
	}
	a.held = nil
	a.mu.Lock()
	if a.lockID == h.id {
		a.lockID = ""
	}
	a.mu.Unlock()
	if h.stop != nil {
		h.stop()
		<-h.done
	}
	if h.lost.Load() {
		return nil
	}
	return a.client.Unlock(ctx, h.id)
}

// keepLock watches a lock that times out. Every third of the timeout it
// reads a lock-protected property (Client.LockProbe: the call carries the
// lock identifier, which keeps the lock active, and is refused when another
// client holds the lock) and IsLocked. A lock the server let lapse is
// taken again under the same identifier (logged). When that is impossible
// — the server refuses to lock again, or another client holds the lock —
// the lock is lost while the MHP lease (or the driver) still counts on it:
// the device latches in fault (Driver.Fault), since calls may have run or
// may run without the exclusive access the lease promised. Connection
// errors only log; the next check tries again.
func (a *adapter) keepLock(ctx context.Context, h *heldLock) {
	defer close(h.done)
	every := h.timeout / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		reason := a.checkLock(cctx, h)
		cancel()
		if ctx.Err() != nil || reason == "" {
			continue
		}
		h.lost.Store(true)
		a.mu.Lock()
		if a.lockID == h.id {
			a.lockID = ""
		}
		d := a.driver
		a.mu.Unlock()
		sctx, scancel := context.WithTimeout(ctx, every)
		_ = a.client.SetMetadata(sctx, LockControllerID+"/Metadata/LockIdentifier", nil)
		scancel()
		a.log.Error("sila2: lost the server lock", "endpoint", a.cfg.Endpoint, "holder", h.holder, "reason", reason)
		if d != nil {
			d.Fault(reason)
		}
		return
	}
}

// checkLock checks (and keeps) h once; it returns why the lock is lost for
// good, or "" while it holds (or the check could not tell).
func (a *adapter) checkLock(ctx context.Context, h *heldLock) string {
	who := "the driver"
	if h.holder != "" {
		who = "the lease of " + h.holder
	}
	foreign := ""
	if f, p, ok := a.client.LockProbe(); ok {
		if _, err := a.client.Property(ctx, f, p); isLockRefusal(err) {
			foreign = err.Error()
		}
	}
	v, err := a.client.Property(ctx, LockControllerID, "IsLocked")
	if err != nil {
		if ctx.Err() == nil {
			a.log.Warn("sila2: checking the server lock", "endpoint", a.cfg.Endpoint, "error", err)
		}
		return ""
	}
	if v == true {
		if foreign == "" {
			return ""
		}
		return fmt.Sprintf("sila2: the server lock held for %s lapsed and another client holds the server now (%s)", who, foreign)
	}
	a.log.Warn("sila2: the server lock lapsed; locking again", "endpoint", a.cfg.Endpoint, "holder", h.holder)
	err = a.client.Lock(ctx, h.id, h.timeout)
	if err == nil {
		return ""
	}
	if _, ok := AsSiLAError(err); ok {
		return fmt.Sprintf("sila2: the server lock held for %s lapsed and the server refused to lock again: %v", who, err)
	}
	if ctx.Err() == nil {
		a.log.Warn("sila2: locking the server again", "endpoint", a.cfg.Endpoint, "error", err)
	}
	return ""
}

// isLockRefusal reports whether err is the server refusing a call for the
// lock: InvalidLockIdentifier, or metadata refused on a locked server.
func isLockRefusal(err error) bool {
	se, ok := AsSiLAError(err)
	if !ok {
		return false
	}
	if se.Kind == KindDefined && strings.EqualFold(se.ShortIdentifier(), "InvalidLockIdentifier") &&
		strings.Contains(strings.ToLower(se.Identifier), "/lockcontroller/") {
		return true
	}
	return se.Kind == KindFramework && se.FrameworkType == FrameworkInvalidMetadata
}
