// Package skills holds the three Agent Skills MHP ships, embedded so that
// `mhp skills install DIR` copies them where a harness reads skills:
// mhp-operate-lab (operating instruments safely), mhp-onboard-instrument
// (the onboarding interview) and mhp-bring-ecosystem (adapter configs, mhp
// init, conformance). Each is a folder with SKILL.md (front matter name,
// description, license, metadata) and references/ loaded only when needed.
package skills

import (
	"embed"
	"io/fs"
)

//go:embed mhp-operate-lab mhp-onboard-instrument mhp-bring-ecosystem
var files embed.FS

// Names lists the skills.
func Names() []string {
	return []string{"mhp-operate-lab", "mhp-onboard-instrument", "mhp-bring-ecosystem"}
}

// FS is the skills' files: one folder per skill.
func FS() fs.FS { return files }
