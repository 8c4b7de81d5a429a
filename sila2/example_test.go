package sila2_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

// A SiLA 2 server as an MHP device, from its own Feature Definitions: Load
// a config, New a driver, Start it, read and invoke.
func Example() {
	// A fake server on loopback (TLS, self-signed) serving GreetingProvider.
	srv, _ := silatest.New(silatest.Options{})
	_ = srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(2026))
	cert, _ := silatest.SelfSigned(srv.UUID())
	addr, _ := srv.Start(&cert.TLS)
	defer srv.Stop()

	cfg, err := sila2.Load(adapters.Source{Path: "greeter.yaml", Data: []byte(`adapter: sila2
device: {id: greeter-01, class: demo}
endpoint: ` + addr + `
tls: {pin_sha256: ` + cert.PinSHA256 + `}
features: [GreetingProvider]
default_approval: auto
`)})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	drv, err := sila2.New(ctx, cfg, sila2.Options{})
	if err != nil {
		panic(err)
	}
	if err := drv.Start(ctx); err != nil {
		panic(err)
	}
	defer drv.Close()

	r, _ := drv.Read(ctx, []string{"start_year"})
	fmt.Println("start_year:", r.Values["start_year"])
	desc := drv.Descriptor()
	a, _ := desc.Action("say_hello")
	p, _ := a.Params.Get("name")
	fmt.Println("say_hello name: max length", *p.Limits.MaxLength)
	// The server's constraint is the driver's limit: refused before anything is sent.
	_, err = drv.Invoke(ctx, mhp.InvokeRequest{Name: "say_hello", Params: map[string]any{"name": strings.Repeat("x", 21)}})
	fmt.Println(mhp.CodeOf(err), "- calls at the server:", srv.Calls("GreetingProvider/SayHello"))
	// Output:
	// start_year: 2026
	// say_hello name: max length 20
	// LimitViolation - calls at the server: 0
}
