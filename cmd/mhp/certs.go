package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/openmhp/mhp-go/auth"
)

// The files of a lab CA folder (mhp certs init DIR).
const (
	caCertFile = "ca.pem"
	caKeyFile  = "ca-key.pem"
)

// certsCmd runs `mhp certs init DIR` (a lab CA) and `mhp certs issue DIR
// NAME --host H[,H] [--client]` (a server or client certificate signed by
// it): ECDSA P-256, the CA for ~10 years, certificates for ~13 months, keys
// written 0600, nothing overwritten.
func (a *app) certsCmd(_ context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{"host": true, "client": false})
	if err != nil {
		return a.usageError("certs: %v", err)
	}
	const use = "certs: usage: mhp certs init DIR | mhp certs issue DIR NAME --host H[,H] [--client]"
	if len(p.args) < 2 {
		return a.usageError(use)
	}
	dir := p.args[1]
	switch p.args[0] {
	case "init":
		if len(p.args) != 2 || p.has("host") || p.has("client") {
			return a.usageError(use)
		}
		return a.certsInit(dir)
	case "issue":
		if len(p.args) != 3 {
			return a.usageError(use)
		}
		return a.certsIssue(dir, p.args[2], splitList(p.flags["host"]), p.has("client"))
	}
	return a.usageError(use)
}

func (a *app) certsInit(dir string) int {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		fmt.Fprintf(a.stderr, "mhp certs: %v\n", err)
		return exitRefused
	}
	ca, err := auth.NewCA("mhp lab CA", auth.CALifetime)
	if err == nil {
		err = writeNew(filepath.Join(dir, caKeyFile), ca.KeyPEM, 0o600)
	}
	if err == nil {
		err = writeNew(filepath.Join(dir, caCertFile), ca.CertPEM, 0o644)
	}
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp certs init: %v\n", err)
		return exitRefused
	}
	fmt.Fprintf(a.stdout, "lab CA in %s: %s (give it to clients: --ca, MHP_CA; to servers for mutual TLS: --client-ca) and %s (keep it secret)\n"+
		"  valid until %s, fingerprint %s\n", dir, caCertFile, caKeyFile, ca.Cert.NotAfter.Format("2006-01-02"), auth.Fingerprint(ca.Cert))
	return exitOK
}

func (a *app) certsIssue(dir, name string, hosts []string, client bool) int {
	if strings.ContainsAny(name, `/\`) || name == "" || name == "ca" || strings.HasPrefix(name, ".") {
		return a.usageError("certs issue: NAME %q: a plain name (it names the files NAME.pem and NAME-key.pem)", name)
	}
	if !client && len(hosts) == 0 {
		return a.usageError("certs issue: a server certificate needs --host H[,H]: every DNS name and IP address clients dial it by")
	}
	certPEM, err := os.ReadFile(filepath.Join(dir, caCertFile))
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %v (make the lab CA first: mhp certs init %s)\n", err, dir)
		return exitRefused
	}
	keyPEM, err := os.ReadFile(filepath.Join(dir, caKeyFile))
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %v\n", err)
		return exitRefused
	}
	ca, err := auth.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %s: %v\n", dir, err)
		return exitRefused
	}
	kp, err := ca.Issue(name, hosts, client, auth.CertLifetime)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %v\n", err)
		return exitRefused
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writeNew(keyFile, kp.KeyPEM, 0o600); err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %v\n", err)
		return exitRefused
	}
	if err := writeNew(certFile, kp.CertPEM, 0o644); err != nil {
		fmt.Fprintf(a.stderr, "mhp certs issue: %v\n", err)
		return exitRefused
	}
	kind, use := "server", fmt.Sprintf("--tls-cert %s --tls-key %s", certFile, keyFile)
	if client {
		kind, use = "client", fmt.Sprintf("--client-cert %s --client-key %s (or MHP_CLIENT_CERT, MHP_CLIENT_KEY); credentials: {name: %s, role: agent, client_cert: {cn: %s}}", certFile, keyFile, name, name)
	}
	fmt.Fprintf(a.stdout, "%s certificate %s for %s, valid until %s, fingerprint %s\n  use: %s\n", kind, name,
		strings.Join(append([]string{name}, hosts...), ", "), kp.Cert.NotAfter.Format("2006-01-02"), auth.Fingerprint(kp.Cert), use)
	return exitOK
}

// writeNew writes a file that must not exist yet (a CA or key is never
// overwritten by accident).
func writeNew(path string, b []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: not overwritten (remove it first to replace it)", path)
		}
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
