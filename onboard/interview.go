// Package onboard is the onboarding interview on the host: for an
// instrument with no MHP server, it asks the owner a short set of
// questions (one or two at a time, each with the words to ask and the
// shape of the answer), checks every answer, keeps them on disk in the
// package folder ($MHP_HOME/devices/<id>/.onboarding.json, written
// atomically: a crash loses nothing, a later call resumes), and when every
// required answer is in writes DEVICE.md, descriptor.yaml and the driver
// file (manual.yaml for an operator-run instrument, serial.yaml for a serial
// one, the adapter's config for an ecosystem), staged and validated first
// (nothing final is written when validation fails), and answers with what
// it wrote and a safety card: dry-run probes past each limit, to read back
// to the person before the package is added to the fleet.
//
// Defaults are conservative: a setting or action whose approval the person
// did not give is confirm; a number needs its range; an interlock must name
// a yes/no signal; a second unit gets the next id (-02), never the first
// unit's folder. The agent can also write a package file by file (New,
// WriteFile, Package); a change to the limits, approvals, interlocks,
// safety or driver of a live package is refused without a person's yes.
//
// The interview never imports the adapters: discovery of an ecosystem
// device is a hook (Config.Discover) the binaries fill from the adapter
// registry.
package onboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/host"
)

// Config configures an Interview.
type Config struct {
	// Fleet is the host's fleet: its home holds the packages, its drivers
	// build them for validation and the safety card. Required.
	Fleet *host.Fleet
	// Discover proposes the adapter config of a live ecosystem device
	// (kind: opcua, sila2, …; target: its address) and a summary for the
	// person. Nil: discovery is not available, and the interview asks for
	// an adapter config file instead.
	Discover func(ctx context.Context, kind, target string) (configYAML []byte, summary string, err error)
}

// Interview runs onboarding interviews over a fleet's home.
type Interview struct {
	cfg Config
	mu  sync.Mutex // one answer at a time in this process
}

// NewInterview returns an interview service.
func NewInterview(cfg Config) (*Interview, error) {
	if cfg.Fleet == nil {
		return nil, errors.New("onboard: Config.Fleet is required")
	}
	return &Interview{cfg: cfg}, nil
}

// Reply is the interview's answer to each step.
type Reply struct {
	// ID is the instrument's id (its package folder), once the name is in.
	ID string `json:"id,omitempty"`
	// Progress is "n/m required answered".
	Progress string `json:"progress"`
	// Ask are the next one or two questions.
	Ask []Question `json:"ask,omitempty"`
	// How says how to relay them.
	How string `json:"how,omitempty"`
	// Refused are answers that were not taken, with why, by question.
	Refused map[string][]string `json:"refused,omitempty"`
	// Note is anything else to tell the person (a discovery summary).
	Note string `json:"note,omitempty"`
	// Unfinished lists interviews that can be resumed (given id).
	Unfinished []string `json:"unfinished,omitempty"`
	// Result is the written package, when every answer is in.
	Result *Result `json:"result,omitempty"`
}

// Result is a package written (or staged and refused).
type Result struct {
	ID      string         `json:"id"`
	Package string         `json:"package"`
	Files   map[string]int `json:"files,omitempty"`
	Valid   bool           `json:"valid"`
	// Problems are why the package does not validate (staged, nothing
	// final written).
	Problems []devicepkg.Problem `json:"problems,omitempty"`
	// Wrote says, item by item, what the package lets the agent do and
	// under which limits and approvals: read it back to the person.
	Wrote []string `json:"wrote,omitempty"`
	// Card is the safety card: dry-run probes past each limit.
	Card []Probe `json:"safety_card,omitempty"`
	Next string  `json:"next,omitempty"`
}

const how = "Ask the person in plain words; send what they said as answers={key: {…}} in the shape shown (several keys at once " +
	"are fine; an answer may be given again to correct it). Optional questions: answers={skip: true}."

// Step takes answers for the interview id ("" to start one: send the name
// answer) and returns the next questions, or the written package when all
// are in. confirmed is a person's yes to changing a live package.
func (iv *Interview) Step(ctx context.Context, id string, raw map[string]json.RawMessage, confirmed bool) (*Reply, error) {
	iv.mu.Lock()
	defer iv.mu.Unlock()
	qs := questions()
	var s *state
	refused := map[string][]string{}
	if id == "" {
		name, ok := raw["name"]
		if !ok {
			return &Reply{Progress: fmt.Sprintf("0/%d required answered", required()), Ask: []Question{qs[0].Question}, How: how,
				Unfinished: iv.unfinished()}, nil
		}
		if p := checkName(name, nil); len(p) > 0 {
			return &Reply{Progress: fmt.Sprintf("0/%d required answered", required()), Ask: []Question{qs[0].Question}, How: how,
				Refused: map[string][]string{"name": p}}, nil
		}
		var n Name
		_ = json.Unmarshal(name, &n)
		nid, err := newID(iv.cfg.Fleet, slug(n))
		if err != nil {
			return nil, err
		}
		dir, _ := iv.cfg.Fleet.DeviceDir(nid)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		s = &state{ID: nid, Started: time.Now().UTC().Truncate(time.Second), Answers: map[string]json.RawMessage{}, dir: dir}
	} else {
		dir, err := iv.cfg.Fleet.DeviceDir(id)
		if err != nil {
			return nil, err
		}
		if s, err = loadState(dir); err != nil {
			return nil, mhp.Errorf(mhp.CodeUnknownName, "no interview %q to resume (%v); start one without an id", id, err).With(mhp.DataName, id)
		}
		s.dir = dir
	}
	offered := iv.next(s) // what the last reply asked: a skip skips its optional questions
	if len(offered) > 2 {
		offered = offered[:2]
	}
	note := ""
	for _, q := range qs { // in question order: kind before signals, signals before interlocks
		a, ok := raw[q.Key]
		if !ok {
			continue
		}
		if p := q.check(a, s); len(p) > 0 {
			refused[q.Key] = p
			continue
		}
		if q.Key == "kind" {
			n, err := iv.adapterConfig(ctx, a, s)
			if err != nil {
				refused[q.Key] = []string{err.Error()}
				continue
			}
			note = n
		}
		s.Answers[q.Key] = a
	}
	for k, v := range raw {
		if k == "skip" {
			if string(v) == "true" {
				for _, q := range offered {
					if !q.Required && !s.answered(q.Key) {
						s.Skipped = append(s.Skipped, q.Key)
					}
				}
			}
			continue
		}
		if !hasKey(qs, k) {
			refused[k] = []string{fmt.Sprintf("no question %q (the keys: %s)", k, keys(qs))}
		}
	}
	if err := s.save(); err != nil { // before the reply: what it acknowledges is on disk
		return nil, err
	}
	rep := &Reply{ID: s.ID, Progress: progress(s), How: how, Note: note}
	if len(refused) > 0 {
		rep.Refused = refused
	}
	if s.kind() == KindMHP {
		var k Kind
		s.decode("kind", &k)
		rep.Note = "It already speaks MHP: no package is needed. Add it with mhp_lab op=add target=" + k.URL
		return rep, nil
	}
	for _, q := range iv.next(s) {
		rep.Ask = append(rep.Ask, q.Question)
		if len(rep.Ask) == 2 {
			break
		}
	}
	if len(rep.Ask) > 0 || len(refused) > 0 {
		return rep, nil
	}
	res, err := iv.finish(ctx, s, confirmed)
	if err != nil {
		return nil, err
	}
	rep.Result, rep.How = res, ""
	return rep, nil
}

// next are the questions not yet answered (nor skipped), in order.
func (iv *Interview) next(s *state) []question {
	var out []question
	for _, q := range questions() {
		if !s.answered(q.Key) && !s.skipped(q.Key) {
			out = append(out, q)
		}
	}
	return out
}

func progress(s *state) string {
	n := 0
	for _, q := range questions() {
		if q.Required && s.answered(q.Key) {
			n++
		}
	}
	return fmt.Sprintf("%d/%d required answered", n, required())
}

func hasKey(qs []question, k string) bool {
	for _, q := range qs {
		if q.Key == k {
			return true
		}
	}
	return false
}

func keys(qs []question) string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = q.Key
	}
	return strings.Join(out, ", ")
}

// adapterConfig gets an adapter kind's config: from the Discover hook, or
// from the config file the person named. It returns a note for the person.
func (iv *Interview) adapterConfig(ctx context.Context, raw json.RawMessage, s *state) (string, error) {
	var k Kind
	_ = json.Unmarshal(raw, &k)
	if k.Kind != KindAdapter {
		return "", nil
	}
	if k.Config != "" {
		f, err := os.Open(k.Config)
		if err != nil {
			return "", fmt.Errorf("config %s: %v", k.Config, err)
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
		if err != nil {
			return "", fmt.Errorf("config %s: %v", k.Config, err)
		}
		if len(b) > MaxFileBytes {
			return "", fmt.Errorf("config %s is larger than %d bytes", k.Config, MaxFileBytes)
		}
		s.Discovered, s.Summary = string(b), "from "+k.Config
		return "The adapter config was read from " + k.Config + ".", nil
	}
	if iv.cfg.Discover == nil {
		return "", errors.New("adapter discovery isn't available here: give config, the path of an adapter config file (mhp init writes one)")
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cfg, summary, err := iv.cfg.Discover(dctx, k.Layer, k.Target)
	if err != nil {
		return "", fmt.Errorf("discovering %s at %s: %v", k.Layer, k.Target, err)
	}
	if len(cfg) > MaxFileBytes {
		return "", fmt.Errorf("the discovered config is larger than %d bytes", MaxFileBytes)
	}
	s.Discovered, s.Summary = string(cfg), summary
	return "Discovered: " + mhp.Truncate(summary, 1024) + " Read this to the person: the items found become the device's.", nil
}

// finish writes the package (staged and validated first) and the safety card.
func (iv *Interview) finish(ctx context.Context, s *state, confirmed bool) (*Result, error) {
	files, err := s.files()
	if err != nil {
		return nil, err
	}
	for name := range files {
		if _, err := cleanPath(name); err != nil {
			return nil, err
		}
	}
	res := &Result{ID: s.ID, Package: s.dir, Files: sizes(files)}
	probs, err := iv.commit(ctx, s.ID, s.dir, files, confirmed)
	if err != nil {
		return nil, err
	}
	if len(probs) > 0 {
		res.Problems = probs
		res.Next = "The package did not validate, so nothing final was written (it is staged in " + filepath.Join(s.dir, stagedDir) +
			"). Correct the answers named and send them again."
		return res, nil
	}
	res.Valid = true
	s.Written = true
	if err := s.save(); err != nil {
		return nil, err
	}
	res.Wrote = s.summary()
	res.Card = iv.safetyCard(ctx, s.dir)
	res.Next = "Read the safety card back to the person. Then mhp_lab op=add target=" + s.ID + " adds it to the fleet (the person confirms)."
	return res, nil
}

// unfinished lists interviews with answers but no written package.
func (iv *Interview) unfinished() []string {
	root := filepath.Join(iv.cfg.Fleet.Home(), host.DevicesDir)
	entries, _ := os.ReadDir(root)
	var out []string
	for _, e := range entries {
		if s, err := loadState(filepath.Join(root, e.Name())); err == nil && !s.Written {
			out = append(out, s.ID)
		}
		if len(out) == 20 {
			break
		}
	}
	sort.Strings(out)
	return out
}
