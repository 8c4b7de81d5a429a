package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/cmd/internal/linked"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/host"
)

var labFlags = flagSpec{"home": true, "twin": false, "id": true, "location": true, "yes": false, "force": false, "no-browse": false}

const labUsage = `usage: mhp lab list | scan [HOST...] [--no-browse] | add TARGET [--twin] [--id ID] [--location L] [--yes]
             | remove ID [--force] | locate ID WHERE...   (--home DIR: default $MHP_HOME or ~/.mhp)
  TARGET is http(s)://HOST:PORT, a package folder, an adapter config file, sim:thermocycler, or a package id under HOME/devices.
  Adding anything that is not simulated asks you first (--yes for scripts).`

// labCmd runs `mhp lab VERB`: the host's fleet, the same one mhp-mcp serves.
func (a *app) labCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, labFlags)
	if err != nil {
		return a.usageError("lab: %v", err)
	}
	if len(p.args) == 0 || p.has("help") {
		fmt.Fprintln(a.stderr, labUsage)
		return exitUsage
	}
	f, err := a.openFleet(p)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp lab: %v\n", err)
		return exitRefused
	}
	defer f.Close()
	timeout, err := timeoutOf(p, 30*time.Second)
	if err != nil {
		return a.usageError("lab: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	verb, rest := p.args[0], p.args[1:]
	switch verb {
	case "list":
		list, err := f.List()
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		if p.has("json") {
			return a.printJSON(map[string]any{"home": f.Home(), "devices": list})
		}
		if len(list) == 0 {
			fmt.Fprintf(a.stdout, "the fleet in %s is empty: mhp lab scan, mhp lab add TARGET, or mhp onboard\n", f.Home())
			return exitOK
		}
		tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tSIMULATED\tLOCATION\tTARGET")
		for _, e := range list {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\n", e.ID, e.Kind, e.Simulated, e.Location, e.Target)
		}
		tw.Flush()
		return exitOK
	case "scan":
		found, err := f.Scan(ctx, host.ScanOptions{Hosts: rest, Browse: !p.has("no-browse"), Logger: a.quietLogger()})
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		if p.has("json") {
			return a.printJSON(map[string]any{"found": found})
		}
		if len(found) == 0 {
			fmt.Fprintln(a.stdout, "no MHP servers found that are not in the fleet")
		}
		for _, c := range found {
			fmt.Fprintf(a.stdout, "%s\t%s\t%s %s\t(mhp lab add %s)\n", c.ID, c.Class, c.Make, c.Model, c.Target)
		}
		return exitOK
	case "add":
		if len(rest) != 1 {
			return a.usageError("lab add: give one TARGET\n%s", labUsage)
		}
		e, err := f.Prepare(ctx, rest[0], host.AddOptions{Twin: p.has("twin"), ID: p.flags["id"], Location: p.flags["location"]})
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		if !e.Simulated && !p.has("yes") && !a.term().yes(e.Reach()+" Add it?") {
			fmt.Fprintln(a.stderr, "mhp lab: not added")
			return exitRefused
		}
		added, err := f.Commit(e)
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		if p.has("json") {
			return a.printJSON(added)
		}
		fmt.Fprintf(a.stdout, "added %s (%s, simulated: %v) at %s\n", added.ID, added.Kind, added.Simulated, added.Target)
		return exitOK
	case "remove":
		if len(rest) != 1 {
			return a.usageError("lab remove: give one ID")
		}
		e, err := f.Remove(ctx, rest[0], p.has("force"))
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		fmt.Fprintf(a.stdout, "removed %s (%s)\n", e.ID, e.Target)
		return exitOK
	case "locate":
		if len(rest) < 2 {
			return a.usageError("lab locate: give ID and where it stands")
		}
		e, err := f.Locate(rest[0], strings.Join(rest[1:], " "))
		if err != nil {
			return a.fail(err, p.has("json"))
		}
		fmt.Fprintf(a.stdout, "%s stands at %s\n", e.ID, e.Location)
		return exitOK
	}
	return a.usageError("lab: unknown verb %q\n%s", verb, labUsage)
}

// openFleet opens the fleet of --home (default $MHP_HOME or ~/.mhp).
func (a *app) openFleet(p parsed) (*host.Fleet, error) {
	home := p.flags["home"]
	if home == "" && a.getenv != nil {
		home = a.getenv("MHP_HOME")
	}
	if home == "" {
		h, err := host.Home()
		if err != nil {
			return nil, err
		}
		home = h
	}
	return linked.Fleet(home, client.Options{ClientName: "mhp-cli", ClientID: a.clientID()}, sim.Options{}, host.GuardOptions{}, a.quietLogger())
}
