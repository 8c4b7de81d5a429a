package transport

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openmhp/mhp-go"
)

// Admission bounds the ordinary HTTP requests a server runs at once, so that
// under overload the work admitted ahead of a safety/estop stays bounded.
// An estop is recognised from the raw frame before it is decoded (a scan of
// its method fields), never waits for a slot and, while one is being
// served, no ordinary request is admitted. An ordinary request beyond the
// cap waits up to QueueWait for a slot, then is refused with -32000 and
// data.reason "server_busy" (and a Retry-After header): the client retries.
type Admission struct {
	// MaxInFlight caps the ordinary /rpc requests being served at once;
	// default 4 x GOMAXPROCS, at least 16.
	MaxInFlight int
	// QueueWait is how long an ordinary request waits for a slot before it
	// is refused busy; default 5s.
	QueueWait time.Duration
}

// ReasonServerBusy is the data.reason of a request refused because the
// server had [Admission.MaxInFlight] requests in flight for longer than
// [Admission.QueueWait]: nothing was done; retry.
const ReasonServerBusy = "server_busy"

// DefaultQueueWait is [Admission.QueueWait]'s default.
const DefaultQueueWait = 5 * time.Second

func (a Admission) validate() error {
	if a.MaxInFlight < 0 || a.QueueWait < 0 {
		return fmt.Errorf("transport: Admission.MaxInFlight and Admission.QueueWait must not be negative")
	}
	return nil
}

// admission is a server's admission state.
type admission struct {
	slots chan struct{}
	wait  time.Duration

	// estops counts the estops being served; clear is closed when it
	// falls back to zero (guarded by mu).
	estops atomic.Int32
	mu     sync.Mutex
	clear  chan struct{}
}

func newAdmission(o Admission) *admission {
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = max(16, 4*runtime.GOMAXPROCS(0))
	}
	if o.QueueWait <= 0 {
		o.QueueWait = DefaultQueueWait
	}
	return &admission{slots: make(chan struct{}, o.MaxInFlight), wait: o.QueueWait}
}

// ticket is one admitted request: release it when its answer is written.
type ticket struct {
	a     *admission
	estop bool // served on the estop path (no slot)
	slot  bool // holds a slot
}

// release ends the request's admission.
func (t *ticket) release() {
	switch {
	case t.slot:
		t.slot = false
		<-t.a.slots
	case t.estop:
		t.estop = false
		t.a.mu.Lock()
		if t.a.estops.Add(-1) == 0 {
			close(t.a.clear)
			t.a.clear = nil
		}
		t.a.mu.Unlock()
	}
}

// admitFrame admits the raw frame of one POST /rpc, before it is decoded:
// a frame that may be an estop is admitted at once on the estop path (and
// no ordinary request is admitted until it is answered); any other waits
// for a slot. After the frame is decoded, [ticket.confirm] corrects a frame
// that only looked like an estop.
func (a *admission) admitFrame(ctx context.Context, body []byte) (ticket, *mhp.Error) {
	t := ticket{a: a}
	if mayBeEStop(body) {
		a.mu.Lock()
		if a.estops.Add(1) == 1 {
			a.clear = make(chan struct{})
		}
		a.mu.Unlock()
		t.estop = true
		return t, nil
	}
	return t, a.acquire(ctx, &t)
}

// confirm is called with the decoded method: a frame admitted on the estop
// path that is no estop leaves it and waits for a slot like any other.
func (t *ticket) confirm(ctx context.Context, method string) *mhp.Error {
	if !t.estop || method == mhp.MethodSafetyEStop {
		return nil
	}
	t.release()
	return t.a.acquire(ctx, t)
}

// acquire takes a slot for an ordinary request: at once when one is free
// and no estop is being served, else waiting up to the queue wait.
func (a *admission) acquire(ctx context.Context, t *ticket) *mhp.Error {
	if a.estops.Load() == 0 {
		select {
		case a.slots <- struct{}{}:
			t.slot = true
			return nil
		default:
		}
	}
	timer := time.NewTimer(a.wait)
	defer timer.Stop()
	for {
		a.mu.Lock()
		clear := a.clear
		a.mu.Unlock()
		if clear != nil { // an estop is being served: it goes first
			select {
			case <-clear:
				continue
			case <-timer.C:
				return a.busy()
			case <-ctx.Done():
				return a.gone(ctx)
			}
		}
		select {
		case a.slots <- struct{}{}:
			t.slot = true
			return nil
		case <-timer.C:
			return a.busy()
		case <-ctx.Done():
			return a.gone(ctx)
		}
	}
}

func (a *admission) busy() *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "server busy: %d requests in flight for more than %s; nothing was done, retry",
		cap(a.slots), a.wait).With(mhp.DataReason, ReasonServerBusy).With(mhp.DataLimit, cap(a.slots))
}

func (a *admission) gone(ctx context.Context) *mhp.Error {
	return mhp.Errorf(mhp.CodeServerError, "the request was abandoned while it waited for admission: %v; nothing was done",
		ctx.Err()).With(mhp.DataReason, ReasonServerBusy)
}

// retryAfter is the Retry-After header of a busy refusal, in seconds.
func (a *admission) retryAfter() string { return strconv.Itoa(max(1, int(a.wait/time.Second))) }

var (
	methodKey = []byte(`"method"`)
	estopName = []byte(mhp.MethodSafetyEStop)
	uEscape   = []byte(`\u`)
)

// mayBeEStop scans a raw frame's "method" members (at any depth: it does
// not parse) and reports whether one of them may name safety/estop: one
// that does, or one written with an escape (whose decoded text a byte
// compare cannot know); a frame with a \u escape anywhere (a member name
// may be spelt with one) may be one too. A frame it says no to is
// certainly no estop.
func mayBeEStop(b []byte) bool {
	if bytes.Contains(b, uEscape) {
		return true
	}
	for {
		i := bytes.Index(b, methodKey)
		if i < 0 {
			return false
		}
		b = b[i+len(methodKey):]
		j := 0
		for j < len(b) && isJSONSpace(b[j]) {
			j++
		}
		if j >= len(b) || b[j] != ':' {
			continue
		}
		j++
		for j < len(b) && isJSONSpace(b[j]) {
			j++
		}
		if j >= len(b) || b[j] != '"' {
			continue
		}
		v := b[j+1:]
		end := bytes.IndexByte(v, '"')
		if end < 0 {
			return false
		}
		v = v[:end]
		if bytes.IndexByte(v, '\\') >= 0 || bytes.Equal(v, estopName) {
			return true
		}
		b = b[j+1+end:]
	}
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// refuseBusy writes the answer of a request admission refused. The frame
// is decoded (on this path only) for the id the answer must carry.
func (s *Server) refuseBusy(w http.ResponseWriter, body []byte, e *mhp.Error) {
	id := nullID
	if req, _ := decodeFrame(body); req != nil && req.ID != nil {
		if req.IsNotification() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		id = req.ID
	}
	w.Header().Set("Retry-After", s.admission().retryAfter())
	s.writeAnswer(w, http.StatusOK, &Response{JSONRPC: Version, ID: id, Error: e.At(s.clk.Now())})
}
