package console_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
)

// troubled is a device whose backend link, freshness and fault a test
// controls, to see the page's states; everything else is the real device.
type troubled struct {
	mhp.Device
	mu        sync.Mutex
	down      string // backend link error; "" = up
	stale     bool   // values carry a source time two minutes old
	fault     string // fault reason; "" = none
	listeners mhp.Listeners
}

func (d *troubled) Unwrap() mhp.Device { return d.Device }

func (d *troubled) Ping(ctx context.Context) (*mhp.PingResult, error) {
	r, err := d.Device.Ping(ctx)
	if err != nil {
		return r, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := *r
	if d.down != "" {
		out.Backend = &mhp.BackendLink{Connected: false, Error: d.down}
	}
	if d.fault != "" {
		out.State = mhp.StateFault
	}
	return &out, nil
}

func (d *troubled) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	r, err := d.Device.Read(ctx, names)
	if err != nil {
		return r, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stale {
		r.Times = map[string]float64{}
		for n := range r.Values {
			r.Times[n] = r.TS - 120
		}
	}
	return r, nil
}

func (d *troubled) Listen(fn func(mhp.Notification)) func() { return d.listeners.Listen(d.Device, fn) }

func (d *troubled) set(f func(*troubled)) {
	d.mu.Lock()
	f(d)
	d.mu.Unlock()
}

func (d *troubled) publish(n mhp.Notification) { d.listeners.Publish(n) }

func TestDevicePageStates(t *testing.T) {
	ctx := browser(t)
	tr := &troubled{}
	hs, _ := simDevice(t, "sim:thermocycler", "tc-states", "", func(d mhp.Device) mhp.Device { tr.Device = d; return tr })
	dir := artifacts(t)
	if err := chromedpNavigate(ctx, hs.URL+"/"); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the page connects", `document.body.dataset.ready === 'true'`)
	poll(t, ctx, "signals fresh", `document.querySelector('[data-signal="block_temperature"]').dataset.stale === 'false'`)

	// Another client holds the lease: the page says so, and never shows a session id.
	other, err := client.Dial(context.Background(), hs.URL, client.Options{ClientName: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Acquire(context.Background(), time.Minute); err != nil {
		t.Fatal(err)
	}
	// The holder is named by its public label (clientInfo.name + a suffix), never its session secret.
	poll(t, ctx, "lease held by another client", `document.getElementById('lease').textContent.startsWith('Lease: held by other#')`)
	poll(t, ctx, "no session id on the page", `!/s_[0-9a-f]{16,}/i.test(document.body.innerText)`)
	if err := other.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	other.Close()

	// Stale: the values' own timestamps are old although reads succeed.
	tr.set(func(d *troubled) { d.stale = true })
	poll(t, ctx, "stale signals marked", `document.querySelector('[data-signal="block_temperature"]').dataset.stale === 'true' && document.querySelector('[data-signal="block_temperature"] .age').textContent.startsWith('stale')`)
	tr.set(func(d *troubled) { d.stale = false })
	poll(t, ctx, "fresh again", `document.querySelector('[data-signal="block_temperature"]').dataset.stale === 'false'`)

	// Backend unreachable: ping carries backend {connected:false}.
	tr.set(func(d *troubled) { d.down = "PLC at 10.0.0.7 does not answer" })
	poll(t, ctx, "backend banner", `document.getElementById('banner').textContent.includes('Backend unreachable: PLC at 10.0.0.7 does not answer')`)
	screenshot(t, ctx, dir, "state-backend-down.png")
	tr.set(func(d *troubled) { d.down = "" })
	poll(t, ctx, "banner clears", `document.getElementById('banner').hidden`)

	// Fault with its reason.
	tr.set(func(d *troubled) { d.fault = "block over-temperature" })
	tr.publish(mhp.Notification{Method: mhp.NotifySafetyFault, Params: map[string]any{"reason": "block over-temperature", "state": "fault"}})
	poll(t, ctx, "fault with the reason", `document.getElementById('state').dataset.state === 'fault' && document.getElementById('banner').textContent.includes('FAULT: block over-temperature') && !document.getElementById('reset').hidden`)
	screenshot(t, ctx, dir, "state-fault.png")
	tr.set(func(d *troubled) { d.fault = "" })
	poll(t, ctx, "fault clears", `document.getElementById('state').dataset.state === 'idle'`)

	// An approval dialog makes the page behind it inert: its own E-STOP stops.
	if err := chromedp.Do(ctx, chromedp.Click(`[data-action="open_lid"] .run`), chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-estop`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "estop from the dialog", `document.getElementById('state').dataset.state === 'estop' && !document.getElementById('confirm').open`)
	if p, err := tr.Device.Ping(context.Background()); err != nil || p.State != mhp.StateEStop {
		t.Fatalf("server after the dialog's estop: %v %v", p, err)
	}
	if j, _ := tr.Device.Jobs(context.Background(), mhp.JobsRequest{}); len(j) != 0 {
		t.Errorf("the dialog's estop also ran the action: %+v", j)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#reset`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "idle after reset", `document.getElementById('state').dataset.state === 'idle'`)

	// The page's session is lost (expiry, server restart): the estop reopens one and still stops.
	sid, err := chromedp.Run(ctx, chromedp.Evaluate[string](`MHP.session()`))
	if err != nil || sid == "" {
		t.Fatalf("page session: %q %v", sid, err)
	}
	del, _ := http.NewRequest(http.MethodDelete, hs.URL+"/session", nil)
	del.Header.Set(mhp.HeaderSession, sid)
	if resp, err := http.DefaultClient.Do(del); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE /session: %v %v", resp, err)
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#estop`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "estop after the session was lost", `document.getElementById('state').dataset.state === 'estop'`)
	if p, err := tr.Device.Ping(context.Background()); err != nil || p.State != mhp.StateEStop {
		t.Fatalf("server after estop: %v %v", p, err)
	}
	// The estop was served without a session (any caller may stop); the page
	// opens a new session at its next ordinary request.
	poll(t, ctx, "a new session after the lost one", fmt.Sprintf(`MHP.session() !== '' && MHP.session() !== %q`, sid))

	// The server itself goes away.
	hs.CloseClientConnections()
	hs.Close()
	poll(t, ctx, "server unreachable shown", `document.getElementById('banner').textContent.includes('The server does not answer')`)
	screenshot(t, ctx, dir, "state-server-gone.png")
}
