package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openmhp/mhp-go/adapters"
)

// initFlags are the shared discovery flags; adapterFlags pass through to
// the adapter's discovery (adapters.DiscoverOptions.Flags), which refuses
// the ones it does not take.
var (
	initFlags = flagSpec{"o": true, "output": true, "force": false, "depth": true, "include": true, "exclude": true,
		"listen": true, "id": true}
	adapterFlags = flagSpec{"root": true, "security-policy": true, "username": true, "password-env": true,
		"server-certificate": true, "ca": true, "pin": true, "plaintext": false, "baud": true, "profile": true}
)

const initUsage = `init: usage: mhp init KIND TARGET [-o FILE] [--force] [--id ID] [--depth N] [--include P,...] [--exclude P,...] [--listen D]
    KIND is one of %v. TARGET is the backend:
      opcua opc.tcp://HOST:PORT [--root Objects/...] [--security-policy Basic256Sha256] [--username U --password-env VAR]
      ros2 ws://HOST:9090            mqtt mqtt://BROKER[:PORT][/PREFIX] [--listen 10s]
      sila2 HOST:PORT [--ca FILE | --pin SHA256 | --plaintext]
      madsci http://HOST:2000        plr http://HOST:5050
      serial /dev/ttyUSB0 [--profile namur|mtsics|ne1000] [--baud 9600]
    Without -o the config goes to stdout (and the descriptor snapshot is not written).`

// initCmd runs `mhp init KIND TARGET`: the kind's discovery reads the live
// backend (adapters.Registry.Discover) and the config it proposes is
// written, with the descriptor snapshot beside it, then the summary of what
// was mapped and skipped. The verb only dispatches: discovery and the
// config writer live in the adapters.
func (a *app) initCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, mergeFlags(initFlags, adapterFlags))
	if err != nil {
		return a.usageError("init: %v", err)
	}
	reg, err := newRegistry()
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp init: %v\n", err)
		return exitUsage
	}
	if len(p.args) != 2 || p.has("help") {
		return a.usageError(initUsage, reg.Discoverable())
	}
	kind, target := p.args[0], p.args[1]
	if kind == "plr" {
		kind = "pylabrobot"
	}
	opt := adapters.DiscoverOptions{DeviceID: p.flags["id"], Logger: a.quietLogger(), Flags: map[string]string{}}
	if s, ok := p.flags["depth"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return a.usageError("init: --depth %q is not a positive number", s)
		}
		opt.Depth = n
	}
	if s, ok := p.flags["listen"]; ok {
		d, err := parseDuration(s)
		if err != nil || d <= 0 {
			return a.usageError("init: --listen %q is not a duration (10s)", s)
		}
		opt.Listen = d
	}
	opt.Include, opt.Exclude = splitList(p.flags["include"]), splitList(p.flags["exclude"])
	for name := range adapterFlags {
		if v, ok := p.flags[name]; ok {
			if v == "" {
				v = "true"
			}
			if name == "ca" || name == "server-certificate" && !strings.HasPrefix(v, "sha256:") {
				// The file names it; its path must hold from the file's folder.
				if abs, err := filepath.Abs(v); err == nil {
					v = abs
				}
			}
			opt.Flags[name] = v
		}
	}
	out := p.flags["o"]
	if out == "" {
		out = p.flags["output"]
	}
	if out != "" {
		opt.Snapshot = strings.TrimSuffix(filepath.Base(out), filepath.Ext(out)) + ".descriptor.json"
		if _, err := os.Stat(out); err == nil && !p.has("force") {
			fmt.Fprintf(a.stderr, "mhp init: %s exists; give --force to replace it\n", out)
			return exitUsage
		}
	}
	timeout, err := timeoutOf(p, 30*time.Second+opt.Listen)
	if err != nil {
		return a.usageError("init: %v", err)
	}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	g, err := reg.Discover(dctx, kind, target, opt)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp init: %v\n", err)
		return exitNoPeer
	}
	if p.has("json") {
		files := []string{}
		for name := range g.Report.Files {
			files = append(files, name)
		}
		return a.printJSON(map[string]any{"kind": g.Kind, "target": g.Target, "config": string(g.YAML), "file": out,
			"files": files, "report": g.Report})
	}
	if out == "" {
		if _, err := a.stdout.Write(g.YAML); err != nil {
			return exitRefused
		}
		fmt.Fprint(a.stderr, g.Report.Summary())
		for name := range g.Report.Files {
			fmt.Fprintf(a.stderr, "not written (give -o FILE): %s, the descriptor snapshot the config names\n", name)
		}
		return exitOK
	}
	if err := writeFile(out, g.YAML); err != nil {
		fmt.Fprintf(a.stderr, "mhp init: %v\n", err)
		return exitRefused
	}
	for name, data := range g.Report.Files {
		if err := writeFile(filepath.Join(filepath.Dir(out), name), data); err != nil {
			fmt.Fprintf(a.stderr, "mhp init: %v\n", err)
			return exitRefused
		}
	}
	fmt.Fprint(a.stdout, g.Report.Summary())
	fmt.Fprintf(a.stdout, "wrote %s", out)
	for name := range g.Report.Files {
		fmt.Fprintf(a.stdout, " and %s", filepath.Join(filepath.Dir(out), name))
	}
	fmt.Fprintf(a.stdout, "\nnext: review it (approvals, limits, interlocks, the TODOs), then `mhp validate %s` and `mhp serve %s`\n", out, out)
	return exitOK
}

// writeFile writes data to path atomically (temp file + rename).
func writeFile(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
