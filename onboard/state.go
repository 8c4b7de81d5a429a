package onboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/host"
)

// StateFile is the interview's answers, kept in the package folder (a
// dot-file: never served as a resource).
const StateFile = ".onboarding.json"

// maxState bounds the state file.
const maxState = 2 << 20

// state is what an interview has so far: every accepted answer is on disk
// before the reply that acknowledges it, so a crash loses nothing.
type state struct {
	ID      string                     `json:"id"`
	Started time.Time                  `json:"started"`
	Answers map[string]json.RawMessage `json:"answers"`
	Skipped []string                   `json:"skipped,omitempty"`
	// Discovered is the adapter config (YAML) the Discover hook proposed,
	// or the config file the person named.
	Discovered string `json:"discovered,omitempty"`
	Summary    string `json:"summary,omitempty"`
	// Written says the package files are in place.
	Written bool `json:"written,omitempty"`

	dir string
}

func (s *state) path() string { return filepath.Join(s.dir, StateFile) }

func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	if len(b) > maxState {
		return mhp.Errorf(mhp.CodeInvalidParams, "the interview's answers come to %d bytes, above %d: shorten them", len(b), maxState)
	}
	return host.WriteFileAtomic(s.path(), b, 0o600)
}

func loadState(dir string) (*state, error) {
	name := filepath.Join(dir, StateFile)
	b, err := host.ReadFileLimited(name, maxState)
	if err != nil {
		return nil, err
	}
	s := &state{dir: dir}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if s.Answers == nil {
		s.Answers = map[string]json.RawMessage{}
	}
	return s, nil
}

func (s *state) answered(key string) bool { _, ok := s.Answers[key]; return ok }

func (s *state) skipped(key string) bool {
	for _, k := range s.Skipped {
		if k == key {
			return true
		}
	}
	return false
}

// decode reads an accepted answer (checked when it was taken).
func (s *state) decode(key string, v any) bool {
	raw, ok := s.Answers[key]
	return ok && json.Unmarshal(raw, v) == nil
}

func (s *state) kind() string {
	var k Kind
	s.decode("kind", &k)
	return k.Kind
}

func (s *state) signals() []Signal {
	var ss []Signal
	s.decode("signals", &ss)
	return ss
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// slug makes an id base from the name: the nickname, else the model, else
// the make.
func slug(n Name) string {
	for _, s := range []string{n.Nickname, n.Model, n.Make} {
		if s = strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(s), "-"), "-"); s != "" {
			if len(s) > 40 {
				s = strings.Trim(s[:40], "-")
			}
			return s
		}
	}
	return ""
}

// newID is the first free id base-01, base-02, …: free in the fleet and
// in HOME/devices (a second unit never merges into the first).
func newID(f *host.Fleet, base string) (string, error) {
	for n := 1; n <= 99; n++ {
		id := fmt.Sprintf("%s-%02d", base, n)
		if _, err := f.Entry(id); err == nil {
			continue
		}
		dir, err := f.DeviceDir(id)
		if err != nil {
			return "", err
		}
		if _, err := os.Stat(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
			continue
		}
		return id, nil
	}
	return "", mhp.Errorf(mhp.CodeInvalidParams, "%s-01 to %s-99 are all taken: give the instrument a nickname", base, base)
}
