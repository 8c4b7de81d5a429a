package directory

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go"
)

// Manifest is the file a lab keeps of its devices: cards with targets, or
// bare targets whose cards are fetched from the devices (describe card).
//
//	devices:
//	  - {id: thermocycler-0411, class: thermocycler, location: bay 12, tags: [pcr], target: "http://bay12:18921"}
//	targets:
//	  - http://bench-3:18921
type Manifest struct {
	Devices []Card   `yaml:"devices"`
	Targets []string `yaml:"targets"`
}

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// LoadManifest reads and checks a manifest file: every card needs an id of
// lowercase letters, digits, '.', '_' or '-', a target, and ids are unique.
func LoadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseManifest(path, data)
}

// ParseManifest parses manifest bytes; name is used in errors.
func ParseManifest(name string, data []byte) (*Manifest, error) {
	var m Manifest
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	seen := map[string]bool{}
	for i, c := range m.Devices {
		switch {
		case !idPattern.MatchString(c.ID):
			return nil, fmt.Errorf("%s: devices[%d]: id %q must be lowercase letters, digits, '.', '_' or '-'", name, i, c.ID)
		case c.Target == "":
			return nil, fmt.Errorf("%s: devices[%d] (%s): no target", name, i, c.ID)
		case seen[c.ID]:
			return nil, fmt.Errorf("%s: devices[%d]: duplicate id %q", name, i, c.ID)
		}
		seen[c.ID] = true
	}
	return &m, nil
}

// Describer fetches a device's card from its target.
type Describer interface {
	DescribeCard(ctx context.Context, target string) (*mhp.Description, error)
}

// CrawlResult says what happened to one target while crawling.
type CrawlResult struct {
	Target string
	ID     string
	Err    error
}

// Crawl asks each target for its card in parallel (bounded by ctx) and adds
// the answers to the index; targets that do not answer are reported, not
// indexed. A stdio: target is never started: it is reported, not crawled.
func Crawl(ctx context.Context, x *Index, d Describer, targets []string) []CrawlResult {
	out := make([]CrawlResult, len(targets))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i, t := range targets {
		wg.Add(1)
		go func(i int, t string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if IsCommandTarget(t) {
				out[i] = CrawlResult{Target: t, Err: fmt.Errorf("not crawled: a stdio: target is a command, and a directory never starts one (list the device under devices: with its card instead)")}
				return
			}
			desc, err := d.DescribeCard(ctx, t)
			out[i] = CrawlResult{Target: t, Err: err}
			if err == nil {
				card := CardFrom(desc, t)
				out[i].ID = card.ID
				x.Add(card)
			}
		}(i, t)
	}
	wg.Wait()
	return out
}
