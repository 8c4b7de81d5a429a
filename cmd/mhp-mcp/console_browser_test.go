package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go/conformance"
)

// headless is one tab of a headless chromium (MHP_PEER_CHROMIUM, else
// /usr/bin/chromium or chromium on PATH; skipped without one).
func headless(t *testing.T) context.Context {
	t.Helper()
	bin := os.Getenv(conformance.PeerEnvPrefix + "CHROMIUM")
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if bin != "" {
			break
		}
		bin, _ = exec.LookPath(name)
	}
	if bin == "" {
		bin = conformance.Peer(t, "CHROMIUM", "/path/to/chromium, or `apt-get install -y chromium` (Debian)")
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()))
	ctx, cancelC := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, which lives as long as ctx
		cancelC()
		cancelA()
		t.Fatalf("starting chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	return tctx
}

// until polls a page expression until it is true (20 s: 10x what a person would wait).
func until(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(20*time.Second),
		chromedp.WithPollingInterval(25*time.Millisecond))); err != nil {
		said, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.getElementById('notice') || {}).textContent + ' | ' + (document.getElementById('banner') || {}).textContent`))
		t.Fatalf("%s: %v (page says: %s)", what, err, said)
	}
}

// signIn makes the tab's requests carry token (what the page's token dialog stores).
func signIn(t *testing.T, ctx context.Context, consoleURL, token string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL+"whoami")); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('mhp-token', '`+token+`')`)); err != nil {
		t.Fatal(err)
	}
}

// TestConsoleInABrowser: the person opens the lab page of the fleet mhp-mcp
// hosts, follows the link to the manual stirrer the agent is using, sees
// the agent's job wait for them and clicks Done with a note; the agent's
// call ends with that answer. Signed in as a viewer the next prompt shows
// no answer controls, and the viewer's E-STOP ends the agent's job.
func TestConsoleInABrowser(t *testing.T) {
	ctx := headless(t)
	mcpURL, consoleURL := serveConsole(t, append(labFlags(t), "--http", "127.0.0.1:0", "--console", "127.0.0.1:0", "--home", labHome(t, true))...)
	agent := agentSession(t, mcpURL)
	first := agentStir(agent)
	signIn(t, ctx, consoleURL, operTok)
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL)); err != nil {
		t.Fatal(err)
	}
	link := `document.querySelector('#devices [data-device="stirrer-01"] a')`
	until(t, ctx, "the lab page links the hosted stirrer", link+` && `+link+`.href === '`+consoleURL+`devices/stirrer-01/'`)
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL+"devices/stirrer-01/")); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the device page connects as the operator", `document.body.dataset.ready === 'true' && document.body.dataset.role === 'operator'`)
	row := `document.querySelector('#jobs tr[data-state="waiting_operator"]')`
	until(t, ctx, "the agent's stir waits for the operator", row+` && `+row+`.querySelector('.msg').textContent.includes('Stir the beaker for 30 s')`)
	sel := `#jobs tr[data-state="waiting_operator"] `
	if err := chromedp.Do(ctx, chromedp.SendKeys(sel+`.ack-note`, "stirred at the bench"), chromedp.Click(sel+`.ack-done`)); err != nil {
		t.Fatal(err)
	}
	if got := waitAnswer(t, first); !strings.Contains(got, `"done"`) || !strings.Contains(got, "stirred at the bench") {
		t.Fatalf("the agent's job after Done in the browser: %s", got)
	}

	second := agentStir(agent)
	signIn(t, ctx, consoleURL, viewerTok)
	if err := chromedp.Do(ctx, chromedp.Navigate(consoleURL+"devices/stirrer-01/")); err != nil {
		t.Fatal(err)
	}
	until(t, ctx, "the device page connects as the viewer", `document.body.dataset.ready === 'true' && document.body.dataset.role === 'viewer'`)
	until(t, ctx, "the viewer sees the prompt without answer controls", row+` && `+row+`.querySelector('.ack-done') && `+
		row+`.querySelector('.ack-done').offsetParent === null && document.getElementById('estop').offsetParent !== null`)
	if err := chromedp.Do(ctx, chromedp.Click(`#estop`)); err != nil {
		t.Fatal(err)
	}
	if got := waitAnswer(t, second); strings.Contains(got, `"state":"done"`) {
		t.Fatalf("the agent's job after the viewer's E-STOP: %s", got)
	}
	until(t, ctx, "the page shows the estop", `document.getElementById('state').dataset.state === 'estop'`)
}
