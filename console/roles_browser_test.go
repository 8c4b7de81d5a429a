package console_test

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/auth/authtest"
	"github.com/openmhp/mhp-go/console"
	"github.com/openmhp/mhp-go/transport"
)

// TestConsoleRolesOverHTTPS: the device console served over HTTPS with a
// certificate of the lab CA (the browser trusts that certificate's key)
// and a credentials file; signed in as a viewer the page shows who it is
// and hides the write controls, signed in as an operator it shows them.
func TestConsoleRolesOverHTTPS(t *testing.T) {
	lab := authtest.NewLab(t)
	cert, key := lab.Files(t, "bench-pc", []string{"127.0.0.1"}, false)
	b, _ := os.ReadFile(cert)
	blk, _ := pem.Decode(b)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	spki := sha256.Sum256(leaf.RawSubjectPublicKeyInfo)
	ctx := browser(t, chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(spki[:])))

	st, err := auth.NewServerTLS(auth.ServerTLSConfig{CertFile: cert, KeyFile: key})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{CredentialsFile: credentials(t)})
	if err != nil {
		t.Fatal(err)
	}
	drv := simDriver(t, "sim:thermocycler", "tc-roles")
	srv := transport.NewServer(drv, transport.Options{Auth: a, TLS: st.Config()})
	defer srv.Close()
	h, err := console.Device(console.Config{Server: srv})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = transport.ServeHandler(sctx, ln, srv, h) }()
	defer func() { stop(); <-done }()
	base := "https://" + ln.Addr().String()

	for _, c := range []struct{ token, who, visible string }{
		{"vera-token", "vera · viewer", "false"},
		{"olga-token", "olga · operator", "true"},
	} {
		// The token is what the page's dialog stores (sessionStorage, this origin).
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/whoami")); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('mhp-token', '`+c.token+`')`)); err != nil {
			t.Fatal(err)
		}
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/")); err != nil {
			t.Fatal(err)
		}
		poll(t, ctx, c.who+" signed in", `document.body.dataset.ready === 'true' && document.getElementById('who').textContent.startsWith('`+c.who+`')`)
		shown := `(() => { const v = (e) => !!e && e.offsetParent !== null;
			return [v(document.getElementById('acquire')), v(document.querySelector('#settings button.set')), v(document.querySelector('#actions button.run'))]
				.every((x) => x === ` + c.visible + `) && v(document.getElementById('estop')); })()`
		poll(t, ctx, c.who+": write controls visible = "+c.visible+", estop always", shown)
		screenshot(t, ctx, artifacts(t), "console-"+c.token+".png")
	}
}
