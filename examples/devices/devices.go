// Package devices embeds the example device packages (thermocycler-01 and
// arm-01, both on the simulated devices of examples/sim) so that `mhp demo`
// works from any directory.
package devices

import (
	"embed"
	"io/fs"
)

//go:embed thermocycler-01 arm-01
var packages embed.FS

// Names lists the embedded packages.
func Names() []string { return []string{"thermocycler-01", "arm-01"} }

// FS returns the named embedded package as a file system rooted at its folder.
func FS(name string) (fs.FS, error) { return fs.Sub(packages, name) }
