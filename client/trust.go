package client

import (
	"strings"

	"github.com/openmhp/mhp-go"
)

// IsCommandTarget reports whether dialling target starts a process on this
// host ("stdio:<command line>").
func IsCommandTarget(target string) bool { return strings.HasPrefix(target, "stdio:") }

// ErrCommandTarget is the refusal of a stdio: target that was not allowed:
// a command line is run only when the operator gave it ([Options.AllowStdio]),
// never when it came from a directory, a manifest or the network.
func ErrCommandTarget(target string) error {
	return mhp.Errorf(mhp.CodeForbidden,
		"target %q would start a process on this host: stdio: targets are run only when the operator gives them "+
			"on the command line or in config (client.Options.AllowStdio), never from a directory, a manifest or the network",
		mhp.Truncate(target, 120)).With(mhp.DataField, "target")
}
