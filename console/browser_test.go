package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/metrics"
	"github.com/openmhp/mhp-go/transport"
)

// chromium finds MHP_PEER_CHROMIUM, else Debian's chromium on PATH; the
// test skips without either.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(conformance.PeerEnvPrefix + "CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return conformance.Peer(t, "CHROMIUM", "/path/to/chrome, or `apt-get install -y chromium` (Debian) to have it found on PATH")
}

// browser starts a headless chromium with a fresh profile; the returned
// context drives one tab.
func browser(t *testing.T, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	opts = append(opts, extra...)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	// The first call starts the browser; it lives as long as ctx (no timeout
	// on it: that would stop the browser), the test's calls get one.
	if err := chromedp.Do(ctx); err != nil {
		cancelC()
		cancelA()
		t.Fatalf("starting chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	return tctx
}

// artifacts is where screenshots go: MHP_ARTIFACTS or a test temp dir.
func artifacts(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("MHP_ARTIFACTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Errorf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// simDevice starts a simulated device served with the console.
func simDevice(t *testing.T, driver, id, token string, wrap ...func(mhp.Device) mhp.Device) (*httptest.Server, *binding.Driver) {
	t.Helper()
	drv := simDriver(t, driver, id)
	mx := metrics.New(metrics.Config{NoRuntime: true})
	var inner mhp.Device = drv
	for _, w := range wrap {
		inner = w(inner)
	}
	dev, stop := mx.Device(inner, "sim")
	t.Cleanup(stop)
	srv := transport.NewServer(dev, transport.Options{Token: token})
	t.Cleanup(func() { srv.Close() })
	h, err := console.Device(console.Config{Transport: mx.Middleware(srv.Handler(), srv.Methods()), Metrics: mx.Handler(token), Guard: srv.Guard(nil)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	// The browser's event stream stays open: cut it, or Close waits for it.
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	return hs, drv
}

// poll waits until the JavaScript expression holds in the page. It is not a
// copy of conformance.Eventually: the browser evaluates expr on its own
// timer (chromedp.Poll, one call), so no Go loop polls across the wire.
func poll(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	// 10x headroom over what a person would accept: the machine is shared.
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		notice, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById('notice').textContent + ' | ' + document.getElementById('banner').textContent`))
		t.Fatalf("%s: %v (page says: %s)", what, err, notice)
	}
}

func TestDevicePageInABrowser(t *testing.T) {
	ctx := browser(t)
	const token = "console-test-token"
	hs, drv := simDevice(t, "sim:thermocycler", "tc-browser", token)
	dir := artifacts(t)

	// With a token the page asks once, keeps it in sessionStorage, never in the URL.
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(`#token-dialog[open]`),
		chromedp.SendKeys(`#token-input`, token),
		chromedp.Click(`#token-ok`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the page connects", `document.body.dataset.ready === 'true'`)
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem('mhp-token')`))
	if err != nil {
		t.Fatal(err)
	}
	href, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	if stored != token || strings.Contains(href, token) {
		t.Fatalf("token: sessionStorage %q, URL %q", stored, href)
	}
	poll(t, ctx, "card shows the device", `document.getElementById('dev-id').textContent === 'tc-browser'`)
	poll(t, ctx, "state idle", `document.getElementById('state').dataset.state === 'idle'`)
	poll(t, ctx, "block temperature shows with its unit", `(document.querySelector('[data-signal="block_temperature"] .value')||{}).textContent.endsWith('degC')`)

	// A live signal change: take the lease, set the block to 60 degC from the page, watch it ramp.
	if err := chromedp.Do(ctx, chromedp.Click(`#acquire`), chromedp.WaitVisible(`#release`)); err != nil {
		t.Fatal(err)
	}
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(`[data-signal="block_temperature"]`, "data-value"))
	if err != nil {
		t.Fatal(err)
	}
	before := attr.Value
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`[data-setting="target_temperature"] .nv`, "60"),
		chromedp.Click(`[data-setting="target_temperature"] .set`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "block temperature changes live", `(() => { const v = Number(document.querySelector('[data-signal="block_temperature"]').dataset.value); return v > `+before+` + 1; })()`)
	poll(t, ctx, "a sparkline is drawn", `!!document.querySelector('[data-signal="block_temperature"] svg.spark polyline')`)
	screenshot(t, ctx, dir, "device-live.png")

	// A write over the limit is refused with the reason, and nothing changes.
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`[data-setting="target_temperature"] .nv`, "500"),
		chromedp.Click(`[data-setting="target_temperature"] .set`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "refusal shown", `document.getElementById('notice').textContent.includes('refused')`)

	// Estop: the page shows estop quickly and the server confirms it.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		window.__t0 = performance.now(); window.__took = -1;
		new MutationObserver((m, o) => { if (document.getElementById('state').dataset.state === 'estop') { window.__took = performance.now() - window.__t0; o.disconnect(); } })
			.observe(document.getElementById('state'), {attributes: true, childList: true, characterData: true, subtree: true});
		document.getElementById('estop').click(); return 0; })()`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "estop shown", `window.__took >= 0`)
	took, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`window.__took`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("estop: click to estop shown in %.0f ms", took)
	if took > 10000 { // the bound is 1 s; 10x headroom on a loaded machine
		t.Errorf("estop took %.0f ms to show", took)
	}
	if p, err := drv.Ping(context.Background()); err != nil || p.State != mhp.StateEStop {
		t.Fatalf("server after estop: %v %v, want estop", p, err)
	}
	poll(t, ctx, "estop banner", `document.getElementById('banner').textContent.includes('EMERGENCY STOP')`)
	screenshot(t, ctx, dir, "device-estop.png")

	// Reset through the page.
	if err := chromedp.Do(ctx, chromedp.Click(`#reset`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "idle after reset", `document.getElementById('state').dataset.state === 'idle'`)
	if p, _ := drv.Ping(context.Background()); p == nil || p.State != mhp.StateIdle {
		t.Fatalf("server after reset: %v, want idle", p)
	}

	// A confirm-level job: the page asks the person, then the job runs to done.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`document.getElementById('acquire').hidden || document.getElementById('acquire').click()`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "lease held", `!document.getElementById('release').hidden`)
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`[data-setting="target_temperature"] .nv`, "22"),
		chromedp.Click(`[data-setting="target_temperature"] .set`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "block cool enough for the lid", `Number(document.querySelector('[data-signal="block_temperature"]').dataset.value) < 55`)
	if err := chromedp.Do(ctx,
		chromedp.Click(`[data-action="open_lid"] .run`),
		chromedp.WaitVisible(`#confirm[open]`),
		chromedp.Click(`#confirm-yes`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "job row appears", `!!document.querySelector('#jobs [data-job]')`)
	poll(t, ctx, "job reaches done at 100%", `(() => { const r = document.querySelector('#jobs [data-job]'); return r.dataset.state === 'done' && r.dataset.progress === '100'; })()`)
	screenshot(t, ctx, dir, "device-job-done.png")
	if closed, _ := drv.Read(context.Background(), []string{sim.TCLidClosed}); closed == nil || closed.Values[sim.TCLidClosed] != false {
		t.Errorf("lid after open_lid: %v", closed)
	}
}

func TestLabPageInABrowser(t *testing.T) {
	ctx := browser(t)
	tc, tcDrv := simDevice(t, "sim:thermocycler", "tc-lab", "")
	arm, armDrv := simDevice(t, "sim:arm", "arm-lab", "")
	dir := artifacts(t)
	lab := labServer(t, map[string]mhp.Device{tc.URL: tcDrv, arm.URL: armDrv}, "lab-token")

	// The lab has a token: the page asks once and keeps it for estop-all too.
	if err := chromedp.Do(ctx, chromedp.Navigate(lab.URL+"/"),
		chromedp.WaitVisible(`#token-dialog[open]`),
		chromedp.SendKeys(`#token-input`, "lab-token"),
		chromedp.Click(`#token-ok`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "lab ready", `document.body.dataset.ready === 'true'`)
	poll(t, ctx, "both devices listed with live state", `document.querySelectorAll('#devices [data-device][data-state="idle"]').length === 2`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#search`, "arm")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "search finds the arm only", `(() => { const r = document.querySelectorAll('#devices [data-device]'); return r.length === 1 && r[0].dataset.device === 'arm-lab'; })()`)
	link, err := chromedp.Run(ctx, chromedp.AttributeValue(`#devices [data-device="arm-lab"] a`, "href"))
	if err != nil {
		t.Fatal(err)
	}
	if href := link.Value; href != arm.URL+"/" {
		t.Errorf("device link %q, want %q", href, arm.URL+"/")
	}
	screenshot(t, ctx, dir, "lab-search.png")

	if err := chromedp.Do(ctx, chromedp.Click(`#estop-all`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "each device's answer shown", `document.querySelectorAll('#estop-answers [data-stopped="true"]').length === 2`)
	for name, d := range map[string]*binding.Driver{"thermocycler": tcDrv, "arm": armDrv} {
		if p, err := d.Ping(context.Background()); err != nil || p.State != mhp.StateEStop {
			t.Errorf("%s after estop-all: %v %v", name, p, err)
		}
	}
	screenshot(t, ctx, dir, "lab-estop-all.png")
}

// TestForeignOriginStillRefused: the console lets its own page through, not a
// rebinding page (same port, another host name) nor another site.
func TestForeignOriginStillRefused(t *testing.T) {
	hs, _ := simDevice(t, "sim:thermocycler", "tc-origin", "")
	port := hs.URL[strings.LastIndex(hs.URL, ":")+1:]
	for _, c := range []struct {
		host, origin string
		want         int
	}{
		{"127.0.0.1:" + port, "http://127.0.0.1:" + port, http.StatusOK},
		{"localhost:" + port, "http://localhost:" + port, http.StatusOK},
		{"evil.example:" + port, "http://evil.example:" + port, http.StatusForbidden},
		{"127.0.0.1:" + port, "http://evil.example", http.StatusForbidden},
		{"127.0.0.1:" + port, "https://127.0.0.1:" + port, http.StatusForbidden},
	} {
		req, _ := http.NewRequest(http.MethodPost, hs.URL+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-09-12"}}`))
		req.Host = c.host
		req.Header.Set("Origin", c.origin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("Host %s Origin %s: HTTP %d, want %d", c.host, c.origin, resp.StatusCode, c.want)
		}
	}
}

func chromedpNavigate(ctx context.Context, url string) error {
	return chromedp.Do(ctx, chromedp.Navigate(url))
}

// simDriver starts a simulated driver (speed 10) for the test; it is closed
// at cleanup.
func simDriver(t *testing.T, driver, id string) *binding.Driver {
	t.Helper()
	cfg, err := sim.Config(driver, sim.Options{Speed: 10, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := binding.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := drv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { drv.Close() })
	return drv
}
