// Command mhp serves MHP devices, talks to them, validates device packages,
// checks servers for conformance, and runs the demo lab:
//
//	mhp demo                                     # the simulated lab + a PCR workflow
//	mhp serve examples/devices/thermocycler-01   # a device package over HTTP
//	mhp http://127.0.0.1:18921 describe          # talk to a device
//	mhp validate examples/devices/arm-01         # check a package
//	mhp conformance http://127.0.0.1:18921       # wire-level checks
//
// Run `mhp help` for every verb.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp().run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
