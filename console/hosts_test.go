package console_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/transport"
)

// TestPageUnderAHostName opens the page by a name (as on a LAN, or as a DNS
// rebinding page would): refused, with a hint, unless the name is listed.
func TestPageUnderAHostName(t *testing.T) {
	ctx := browser(t, chromedp.Flag("host-resolver-rules", "MAP lab-pc.test 127.0.0.1"))
	cfg, err := sim.Config("sim:arm", sim.Options{ID: "arm-hosts"})
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
	for _, c := range []struct {
		hosts []string
		want  string
	}{
		// Unlisted, the front door refuses every route, the page too, and its
		// refusal names the flag that would list the name.
		{nil, `document.body && document.body.innerText.includes('--allow-host lab-pc.test')`},
		{[]string{"lab-pc.test"}, `document.body.dataset.ready === 'true' && document.getElementById('dev-id').textContent === 'arm-hosts'`},
	} {
		// mhp serve --allow-host gives both the page and the transport the names.
		srv := transport.NewServer(drv, transport.Options{AllowedHosts: c.hosts})
		defer srv.Close()
		h, err := console.Device(console.Config{Transport: srv.Handler(), Hosts: c.hosts})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(h)
		port := hs.URL[strings.LastIndex(hs.URL, ":")+1:]
		if err := chromedpNavigate(ctx, "http://lab-pc.test:"+port+"/"); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, "hosts "+strings.Join(c.hosts, ","), c.want)
		hs.CloseClientConnections()
		hs.Close()
	}
}
