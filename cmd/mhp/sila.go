package main

import (
	"context"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go/sila2"
)

// silaCmd runs `mhp sila discover [--timeout D] [--interface NAME]`: SiLA 2
// servers announced by mDNS (_sila._tcp) on the local network (on one
// interface with --interface), ready for a config file.
func (a *app) silaCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{"interface": true})
	if err != nil {
		return a.usageError("sila: %v", err)
	}
	if len(p.args) != 1 || p.args[0] != "discover" {
		return a.usageError("sila: usage: mhp sila discover [--timeout D] [--interface NAME] [--json]")
	}
	timeout, err := timeoutOf(p, 3*time.Second)
	if err != nil {
		return a.usageError("sila: %v", err)
	}
	iface := p.flags["interface"]
	if p.has("interface") && iface == "" {
		return a.usageError("sila: --interface needs a name (e.g. eth0)")
	}
	if iface != "" {
		if _, err := sila2.Interface(iface); err != nil {
			return a.usageError("sila: --interface: %v", err)
		}
	}
	found, err := sila2.BrowseWith(ctx, sila2.BrowseOptions{Timeout: timeout, Interface: iface, Logger: a.quietLogger()})
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp sila discover: %v\n", err)
		return exitNoPeer
	}
	if p.has("json") {
		return a.printJSON(found)
	}
	if len(found) == 0 {
		fmt.Fprintf(a.stdout, "no SiLA 2 server answered within %s\n", timeout)
		return exitOK
	}
	for _, s := range found {
		tls := "announces no CA (pin its certificate or give a CA)"
		if s.CAPEM != "" {
			tls = "announces its CA"
		}
		fmt.Fprintf(a.stdout, "%s  %s  %s  %s\n    endpoint: %s   (%s)\n", s.UUID, s.Name, s.Version, s.Description, s.Endpoint, tls)
	}
	return exitOK
}
