package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// withEvidence answers evidence/list the way the guard does (chain order
// from "after", with the head), in front of a transport that does not.
func withEvidence(next http.Handler, head int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/rpc" {
			next.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				After int `json:"after"`
				Limit int `json:"limit"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &req)
		if req.Method != "evidence/list" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		var entries []map[string]any
		for seq := req.Params.After + 1; seq <= head && len(entries) < req.Params.Limit; seq++ {
			entries = append(entries, map[string]any{"seq": seq, "ts": 1.8e9 + float64(seq), "method": "settings/write",
				"name": "target_temperature", "outcome": "applied", "session": fmt.Sprintf("op-%d", seq)})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": map[string]any{"entries": entries, "head": head}})
	})
}

func TestReceiptsPanel(t *testing.T) {
	ctx := browser(t)
	cfg, err := sim.Config("sim:thermocycler", sim.Options{ID: "tc-receipts"})
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
	defer drv.Close()
	srv := transport.NewServer(drv, transport.Options{})
	defer srv.Close()
	for _, c := range []struct {
		name     string
		evidence bool
	}{{"no evidence: no panel", false}, {"evidence: the last ten receipts", true}} {
		var h http.Handler = srv.Handler()
		if c.evidence {
			h = withEvidence(h, 25)
		}
		ch, err := console.Device(console.Config{Transport: h})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(ch)
		if err := chromedpNavigate(ctx, hs.URL+"/"); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, c.name+": page ready", `document.body.dataset.ready === 'true'`)
		if c.evidence {
			poll(t, ctx, c.name, `(() => { const r = document.querySelectorAll('#receipts [data-seq]'); return !document.getElementById('receipts-panel').hidden && r.length === 10 && r[0].dataset.seq === '25' && r[9].dataset.seq === '16' && r[0].textContent.includes('op-25'); })()`)
		} else {
			poll(t, ctx, c.name, `document.getElementById('receipts-panel').hidden && document.getElementById('receipts-panel').dataset.evidence === 'none'`)
		}
		hs.CloseClientConnections()
		hs.Close()
	}
}
