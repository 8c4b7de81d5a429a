package console_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/manual"
	"github.com/openmhp/mhp-go/transport"
)

// TestOperatorAnswersFromTheConsole: a job of an operator-run device waits
// in waiting_operator with its instruction on the page; the person types a
// note and clicks Done, gives the operator token once, and the job ends
// done with the note.
func TestOperatorAnswersFromTheConsole(t *testing.T) {
	ctx := browser(t)
	dev, closeDev, err := manual.Open(context.Background(), filepath.Join("..", "manual", "testdata", "centrifuge-01"), manual.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeDev() })
	// The page is anonymous until the person gives the operator token; from
	// then on the tab's requests carry it (its session is opened again under
	// the operator's identity).
	const opTok = "operator-console-0123456789"
	srv := transport.NewServer(dev, transport.Options{OperatorToken: opTok})
	t.Cleanup(func() { srv.Close() })
	h, err := console.Device(console.Config{Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(h)
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })

	record := mhp.OperatorExtensions(dev)[mhp.MethodOperatorRecord]
	if _, err := record(context.Background(), json.RawMessage(`{"signal":"balanced","value":true}`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(hs.URL+"/")); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the page connects", `document.body.dataset.ready === 'true'`)
	res, err := mhp.AsSession(dev, "agent").Invoke(context.Background(),
		mhp.InvokeRequest{Name: "spin", Approved: true, Params: map[string]any{"duration_s": 10.0}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.Job.ID
	row := `document.querySelector('#jobs [data-job="` + id + `"]')`
	poll(t, ctx, "the job waits for the operator", row+` && `+row+`.dataset.state === 'waiting_operator'`)
	poll(t, ctx, "the instruction is shown", row+`.querySelector('.msg').textContent.includes('start a 10 s spin')`)
	screenshot(t, ctx, artifacts(t), "device-waiting-operator.png")
	sel := `#jobs [data-job="` + id + `"] `
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(sel+`.ack-note`, "spun, no noise"),
		chromedp.Click(sel+`.ack-done`),
		chromedp.WaitVisible(`#operator-dialog[open]`),
		chromedp.SendKeys(`#operator-input`, opTok),
		chromedp.Click(`#operator-ok`)); err != nil {
		t.Fatal(err)
	}
	poll(t, ctx, "the job is done on the page", `(() => { const r = `+row+`; return !!r && r.dataset.state === 'done'; })()`)
	j, err := dev.Job(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := j.Result.(map[string]any); j.State != mhp.JobDone || r["note"] != "spun, no noise" || r["answered_by"] == "" {
		t.Fatalf("job after the console's Done: %+v", j)
	}
}
