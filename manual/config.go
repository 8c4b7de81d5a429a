package manual

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"regexp"
	"sort"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/openmhp/mhp-go/devicepkg"
)

// Driver is the DEVICE.md driver name of an operator-run instrument.
const Driver = "manual"

// File is the optional manual.yaml of a package.
const File = "manual.yaml"

// IsDriver reports whether a card's driver is `manual`.
func IsDriver(name string) bool { return name == Driver }

// Config is manual.yaml: how long recorded readings and waiting jobs last,
// and the instructions given to the person. Every key is optional.
type Config struct {
	// ReadingMaxAgeS: a recorded reading older than this reads unavailable;
	// default 900.
	ReadingMaxAgeS float64 `yaml:"reading_max_age_s,omitempty"`
	// AnswerTimeoutS: an action waiting for the person fails after this;
	// default 28800 (8 h).
	AnswerTimeoutS float64 `yaml:"answer_timeout_s,omitempty"`
	// Signals override the max age per signal.
	Signals map[string]SignalConfig `yaml:"signals,omitempty"`
	// Settings give a setting's instruction ({value} is the value asked for).
	Settings map[string]Instruction `yaml:"settings,omitempty"`
	// Actions give an action's instruction ({param} placeholders).
	Actions map[string]Instruction `yaml:"actions,omitempty"`
	// EStop is what the person is asked to do at an estop.
	EStop string `yaml:"estop,omitempty"`
}

// SignalConfig is one signal's override.
type SignalConfig struct {
	MaxAgeS float64 `yaml:"max_age_s,omitempty"`
}

// Instruction is the text given to the person.
type Instruction struct {
	Instruction string `yaml:"instruction,omitempty"`
}

// Defaults returns c with zero fields at their defaults.
func (c Config) Defaults() Config {
	if c.ReadingMaxAgeS <= 0 {
		c.ReadingMaxAgeS = 900
	}
	if c.AnswerTimeoutS <= 0 {
		c.AnswerTimeoutS = 8 * 3600
	}
	return c
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

var placeholder = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// Validate checks c against the package's descriptor: every name must be
// an item of descriptor.yaml (a misspelt name never silently drops an
// instruction), durations finite and not negative, placeholders naming
// params ({value} for settings).
func (c Config) Validate(d devicepkg.Descriptor) error {
	for _, v := range []float64{c.ReadingMaxAgeS, c.AnswerTimeoutS} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: reading_max_age_s and answer_timeout_s must be finite and not negative", File)
		}
	}
	signals, settings, actions := map[string]bool{}, map[string]bool{}, map[string]map[string]bool{}
	for _, s := range d.Signals {
		signals[s.Name] = true
	}
	for _, s := range d.Settings {
		settings[s.Name] = true
	}
	for _, a := range d.Actions {
		ps := map[string]bool{}
		for _, p := range a.Params {
			ps[p.Name] = true
		}
		actions[a.Name] = ps
	}
	for _, name := range sorted(c.Signals) {
		if !signals[name] {
			return fmt.Errorf("%s: signals.%s: descriptor.yaml has no such signal", File, name)
		}
		if v := c.Signals[name].MaxAgeS; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: signals.%s.max_age_s must be finite and not negative", File, name)
		}
	}
	for _, name := range sorted(c.Settings) {
		if !settings[name] {
			return fmt.Errorf("%s: settings.%s: descriptor.yaml has no such setting", File, name)
		}
		if err := checkPlaceholders("settings."+name, c.Settings[name].Instruction, map[string]bool{"value": true}); err != nil {
			return err
		}
	}
	for _, name := range sorted(c.Actions) {
		ps, ok := actions[name]
		if !ok {
			return fmt.Errorf("%s: actions.%s: descriptor.yaml has no such action", File, name)
		}
		if err := checkPlaceholders("actions."+name, c.Actions[name].Instruction, ps); err != nil {
			return err
		}
	}
	return nil
}

func checkPlaceholders(field, text string, allowed map[string]bool) error {
	for _, m := range placeholder.FindAllStringSubmatch(text, -1) {
		if !allowed[m[1]] {
			return fmt.Errorf("%s: %s.instruction: {%s} names no param", File, field, m[1])
		}
	}
	return nil
}

func sorted[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LoadConfig reads the package's manual.yaml strictly (an unknown key is
// an error naming it); a package without one gets the defaults.
func LoadConfig(pkg *devicepkg.Package) (Config, error) {
	data, err := fs.ReadFile(pkg.FS(), File)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", File, err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, fmt.Errorf("%s: %w", File, err)
	}
	if err := c.Validate(pkg.Descriptor); err != nil {
		return Config{}, err
	}
	return c, nil
}
