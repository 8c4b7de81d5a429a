package auth

import (
	"fmt"
	"net"
	"strings"
)

// BeyondLoopback reports whether a listen address may be reached from
// another machine: any host but a loopback IP or localhost. An address
// without a host (":18921", "18921") binds 127.0.0.1 (transport.Listen) and
// is loopback; a name other than localhost is assumed to reach beyond.
func BeyondLoopback(addr string) bool {
	if !strings.Contains(addr, ":") {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "" || strings.EqualFold(host, "localhost") {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// CheckExposure is the rule all four servers (serve, serve-directory, demo,
// mhp-mcp --http) apply before they listen: an address beyond loopback
// needs TLS and credentials (a credentials file, a token or client
// certificates), unless insecure says the operator accepts the risk. The
// refusal says why and how, naming the command.
func CheckExposure(command, addr string, tls, credentials, insecure bool) error {
	if insecure || !BeyondLoopback(addr) || (tls && credentials) {
		return nil
	}
	var missing []string
	if !tls {
		missing = append(missing, "without TLS (the token and every command would cross the network in clear)")
	}
	if !credentials {
		missing = append(missing, "without a token or credentials (anyone who can reach it could drive the devices)")
	}
	return fmt.Errorf("%s: %s listens beyond this machine %s. "+
		"Make a lab CA and a certificate (mhp certs init DIR; mhp certs issue DIR NAME --host HOST) and give --tls-cert and --tls-key, "+
		"give --credentials FILE or --token-file FILE (or --client-ca FILE for mutual TLS), bind 127.0.0.1, "+
		"or pass --insecure on a network you trust", command, addr, strings.Join(missing, " and "))
}
