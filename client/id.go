package client

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// NewClientID returns a client identity unique to this call:
// "<name>/<hostname>-<pid>-<random>". Dial sends it as X-MHP-Client unless
// [Options.ClientID] is set, so that two processes, or two handles in one
// process, are never one client to a server that names clients by that
// header (spec §9: "Clients SHOULD send an X-MHP-Client header so leases and
// audit logs can name them"). Characters outside [A-Za-z0-9._-] in the
// hostname become '_'.
func NewClientID(name string) string {
	if name == "" {
		name = "mhp-go"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return headerSafe(name) + "/" + headerSafe(host) + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// headerSafe keeps [A-Za-z0-9._-] and replaces anything else with '_'.
func headerSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, s)
}
