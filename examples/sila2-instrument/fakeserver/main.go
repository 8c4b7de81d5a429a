// Command fakeserver runs the silatest fake SiLA 2 server (GreetingProvider,
// TemperatureController, CancelController, LockController) on
// 127.0.0.1:50052 with a fresh self-signed certificate, written to
// server-ca.pem, so that `mhp serve instrument.yaml` has something to talk to.
//
//	go run ./examples/sila2-instrument/fakeserver -ca examples/sila2-instrument/server-ca.pem
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"time"

	"github.com/openmhp/mhp-go/sila2/silatest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:50052", "listen address")
	caPath := flag.String("ca", "server-ca.pem", "where to write the server certificate (the client's CA)")
	flag.Parse()

	srv, err := silatest.New(silatest.Options{Name: "Fake incubator", Type: "Incubator", Description: "silatest fake SiLA 2 server",
		CancelController: true, LockController: true, Lifetime: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	thermo := silatest.NewThermostat(293.15)
	if err := srv.AddFeature(silatest.GreetingProviderFDL, silatest.Greeter(int64(time.Now().Year()))); err != nil {
		log.Fatal(err)
	}
	if err := srv.AddFeature(silatest.TemperatureControllerFDL, thermo.Handlers()); err != nil {
		log.Fatal(err)
	}
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(*caPath, cert.PEM, 0o644); err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("SiLA 2 fake server %s on %s\n  CA written to %s\n  pin_sha256: %s\n", srv.UUID(), srv.Serve(lis, &cert.TLS), *caPath, cert.PinSHA256)
	fmt.Println("Running commands wait for an outcome: type r (reach), i (interrupt) or d (drop) + Enter.")
	go func() {
		var s string
		for {
			if _, err := fmt.Scanln(&s); err != nil {
				return
			}
			o := map[string]silatest.Outcome{"r": silatest.Reach, "i": silatest.Interrupt, "d": silatest.Drop}[s]
			if err := thermo.End(o, time.Second); err != nil {
				fmt.Println(err)
			}
		}
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt)
	<-stop
	srv.Stop()
}
