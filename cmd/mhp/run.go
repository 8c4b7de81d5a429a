package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/script"
)

// runCmd runs `mhp run SCRIPT NAME=TARGET...`: a Starlark orchestration
// script (a package's scripts/*.star) against a lab of named targets, through
// the client SDK, so every call passes the devices' gates. It prints what the
// script printed; a script that fails exits 1 with the error (and the
// structured refusal when a device refused).
func (a *app) runCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{})
	if err != nil {
		return a.usageError("run: %v", err)
	}
	if len(p.args) < 2 {
		return a.usageError("run: usage: mhp run SCRIPT NAME=TARGET... (e.g. thermocycler-01=http://127.0.0.1:18921)")
	}
	src, err := os.ReadFile(p.args[0])
	if err != nil {
		return a.usageError("run: %v", err)
	}
	targets := map[string]string{}
	for _, kv := range p.args[1:] {
		name, target, ok := strings.Cut(kv, "=")
		if !ok || name == "" || !isTarget(target) {
			return a.usageError("run: %q: want NAME=http://HOST:PORT or NAME=stdio:COMMAND", kv)
		}
		targets[name] = target
	}
	timeout, err := timeoutOf(p, 5*time.Minute)
	if err != nil {
		return a.usageError("run: %v", err)
	}
	token, err := a.token(p)
	if err != nil {
		return a.usageError("run: %v", err)
	}
	ctls, err := a.clientTLS(p)
	if err != nil {
		return a.usageError("run: %v", err)
	}
	lab := client.NewLab(targets, client.Options{ClientName: "mhp-run", Token: token, TLS: ctls, Stderr: a.stderr, Logger: a.quietLogger(),
		AllowStdio: true}) // the operator gave the targets on the command line
	defer lab.Close()
	res, err := script.Run(ctx, string(src), scriptLab{lab}, script.Options{Filename: p.args[0], Timeout: timeout})
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp run: %v\n", err)
		return exitUsage
	}
	if p.has("json") {
		a.printJSON(res)
	} else {
		fmt.Fprint(a.stdout, res.Output)
		if res.Truncated {
			fmt.Fprintln(a.stderr, "mhp run: (output truncated)")
		}
		if res.Error != "" {
			fmt.Fprintf(a.stderr, "mhp run: the script failed:\n%s\n", res.Error)
			if res.MHP != nil {
				fmt.Fprint(a.stderr, refusalText(res.MHP))
			}
		}
	}
	if res.Error != "" {
		return exitRefused
	}
	return exitOK
}

// scriptLab gives the script runner the client lab's devices.
type scriptLab struct{ lab *client.Lab }

func (l scriptLab) Device(ctx context.Context, name string) (mhp.Device, error) {
	d, err := l.lab.Device(ctx, name)
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (l scriptLab) Names() []string { return l.lab.Names() }
