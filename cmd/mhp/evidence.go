package main

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"

	"github.com/openmhp/mhp-go/evidence"
)

const evidenceUsage = `usage:
  mhp evidence verify DIR|BUNDLE [--pub FILE] [--allow-unsigned-tail N] [--head FILE]
                                                  recompute the chain (exit 0 intact, 1 naming the first bad entry);
                                                  with --pub the last entry must be covered by a signed head (or at
                                                  most N entries unsigned); --head checks against a head obtained
                                                  earlier (evidence/head's answer or an export bundle)
  mhp evidence list DIR [--device ID] [--session LABEL] [--command-id ID] [--after SEQ] [--limit N] [--latest]
                                                  one page of receipts in chain order (a shared log: --device keeps
                                                  to one device); --latest: the newest N
  mhp evidence export DIR [--session LABEL] [--device ID] [--key FILE] [--out FILE]
                                                  one run's range as a bundle, signed with the key (a device's range
                                                  of a shared log holds the other devices' receipts in between: the
                                                  links need them)
  mhp evidence keygen PRIVATE.pem PUBLIC.pem      a new ed25519 key pair for --evidence-key`

// evidenceCmd runs `mhp evidence verify|export|keygen`.
func (a *app) evidenceCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return a.usageError("evidence: give a subcommand\n%s", evidenceUsage)
	}
	p, err := parseArgs(args[1:], flagSpec{"pub": true, "key": true, "session": true, "out": true, "allow-unsigned-tail": true, "head": true,
		"device": true, "command-id": true, "after": true, "limit": true, "latest": false})
	if err != nil {
		return a.usageError("evidence: %v", err)
	}
	switch args[0] {
	case "verify":
		if len(p.args) != 1 {
			return a.usageError("evidence verify: give one directory or bundle file\n%s", evidenceUsage)
		}
		var opt evidence.VerifyOptions
		if f, ok := p.flags["pub"]; ok {
			if opt.Pub, err = evidence.LoadPublicKey(f); err != nil {
				fmt.Fprintf(a.stderr, "mhp: %v\n", err)
				return exitUsage
			}
		}
		if v, ok := p.flags["allow-unsigned-tail"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return a.usageError("evidence verify: --allow-unsigned-tail is a count of entries (0 or more), not %q", v)
			}
			if opt.Pub == nil {
				return a.usageError("evidence verify: --allow-unsigned-tail needs --pub (without the key no head is checked)")
			}
			opt.AllowUnsignedTail = n
		}
		if f, ok := p.flags["head"]; ok {
			h, err := evidence.LoadHead(f)
			if err != nil {
				fmt.Fprintf(a.stderr, "mhp: %v\n", err)
				return exitUsage
			}
			opt.Head = &h
		}
		return a.evidenceVerify(p.args[0], opt, p.has("json"))
	case "export":
		if len(p.args) != 1 {
			return a.usageError("evidence export: give the evidence directory\n%s", evidenceUsage)
		}
		var key ed25519.PrivateKey
		if f, ok := p.flags["key"]; ok {
			if key, err = evidence.LoadPrivateKey(f); err != nil {
				fmt.Fprintf(a.stderr, "mhp: %v\n", err)
				return exitUsage
			}
		}
		var w io.Writer = a.stdout
		if out, ok := p.flags["out"]; ok {
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
			if err != nil {
				fmt.Fprintf(a.stderr, "mhp: %v\n", err)
				return exitRefused
			}
			defer f.Close()
			w = f
		}
		if err := evidence.ExportWith(p.args[0], evidence.ExportOptions{Session: p.flags["session"], Device: p.flags["device"], Key: key}, w); err != nil {
			fmt.Fprintf(a.stderr, "mhp: %v\n", err)
			return exitRefused
		}
		return exitOK
	case "list":
		if len(p.args) != 1 {
			return a.usageError("evidence list: give the evidence directory\n%s", evidenceUsage)
		}
		q := evidence.Query{Device: p.flags["device"], Session: p.flags["session"], CommandID: p.flags["command-id"], Latest: p.has("latest")}
		for _, c := range []struct {
			flag string
			max  uint64
			set  func(uint64)
		}{{"after", 1 << 53, func(v uint64) { q.After = v }}, {"limit", evidence.MaxPage, func(v uint64) { q.Limit = int(v) }}} {
			if v, ok := p.flags[c.flag]; ok {
				n, err := strconv.ParseUint(v, 10, 64)
				if err != nil || n > c.max || (c.flag == "limit" && n == 0) {
					return a.usageError("evidence list: --%s is a count (up to %d), not %q", c.flag, c.max, v)
				}
				c.set(n)
			}
		}
		if q.Latest && p.has("after") {
			return a.usageError("evidence list: --latest and --after exclude each other")
		}
		return a.evidenceList(p.args[0], q, p.has("json"))
	case "keygen":
		if len(p.args) != 2 {
			return a.usageError("evidence keygen: give the private and public key files\n%s", evidenceUsage)
		}
		if err := evidence.GenerateKey(p.args[0], p.args[1]); err != nil {
			fmt.Fprintf(a.stderr, "mhp: %v\n", err)
			return exitRefused
		}
		fmt.Fprintf(a.stdout, "wrote %s (keep it secret; serve --evidence-key) and %s (give it to verifiers)\n", p.args[0], p.args[1])
		return exitOK
	}
	return a.usageError("evidence: unknown subcommand %q\n%s", args[0], evidenceUsage)
}

func (a *app) evidenceList(dir string, q evidence.Query, asJSON bool) int {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		fmt.Fprintf(a.stderr, "mhp: %s is not an evidence directory\n", dir)
		return exitUsage
	}
	page, err := evidence.ListDir(dir, q)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %v\n", err)
		return exitRefused
	}
	if asJSON {
		a.printJSON(page)
		return exitOK
	}
	for _, e := range page.Entries {
		what := e.Method
		if e.Name != "" {
			what += " " + e.Name
		}
		fmt.Fprintf(a.stdout, "%d\t%s\t%s\t%s\t%s", e.Seq, evidence.FormatNumber(e.TS), orDash(e.Device), what, e.Outcome)
		if e.Session != "" {
			fmt.Fprintf(a.stdout, "\tsession=%s", e.Session)
		}
		if e.CommandID != "" {
			fmt.Fprintf(a.stdout, "\tcommand_id=%s", e.CommandID)
		}
		fmt.Fprintln(a.stdout)
	}
	if page.Next != 0 {
		fmt.Fprintf(a.stdout, "more: --after %d\n", page.Next)
	}
	return exitOK
}

// sortedKeys are m's keys in order.
func sortedKeys(m map[string]int) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (a *app) evidenceVerify(target string, opt evidence.VerifyOptions, asJSON bool) int {
	var rep evidence.Report
	fi, err := os.Stat(target)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %v\n", err)
		return exitUsage
	}
	if fi.IsDir() {
		rep, err = evidence.VerifyWith(target, opt)
	} else {
		var f *os.File
		if !fi.Mode().IsRegular() {
			fmt.Fprintf(a.stderr, "mhp: %s is not a regular file\n", target)
			return exitUsage
		}
		if f, err = os.Open(target); err == nil {
			rep, err = evidence.VerifyBundleWith(f, opt)
			f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %v\n", err)
		return exitRefused
	}
	if asJSON {
		a.printJSON(rep)
	} else if rep.OK {
		fmt.Fprintf(a.stdout, "intact: %d entries (seq %d..%d), head %s, %d signed heads checked\n", rep.Entries, rep.First, rep.Last, rep.Hash, rep.Heads)
		if rep.Log != "" {
			fmt.Fprintf(a.stdout, "shared log %q of %d devices:", rep.Log, len(rep.Devices)+min(rep.OtherDevices, 1))
			for _, d := range sortedKeys(rep.Devices) {
				fmt.Fprintf(a.stdout, " %s %d", d, rep.Devices[d])
			}
			if rep.OtherDevices > 0 {
				fmt.Fprintf(a.stdout, " (and %d entries of more devices)", rep.OtherDevices)
			}
			fmt.Fprintln(a.stdout)
		}
		if opt.Head != nil {
			fmt.Fprintf(a.stdout, "matches the earlier head at seq %d\n", opt.Head.Seq)
		}
		for _, w := range rep.Warnings {
			fmt.Fprintf(a.stdout, "note: %s\n", w)
		}
	} else {
		where := rep.Bad.File
		if rep.Bad.Line > 0 {
			where = fmt.Sprintf("%s line %d", where, rep.Bad.Line)
		}
		if rep.Bad.Seq > 0 {
			where = fmt.Sprintf("%s (seq %d)", where, rep.Bad.Seq)
		}
		fmt.Fprintf(a.stdout, "BROKEN at %s: %s (%d entries before it are intact)\n", where, rep.Bad.Reason, rep.Entries)
	}
	if !rep.OK {
		return exitRefused
	}
	return exitOK
}
