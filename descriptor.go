package mhp

// Approval is an item's approval level: who must agree before it actuates.
type Approval string

// Approval levels.
const (
	ApprovalAuto    Approval = "auto"    // the agent may do it alone
	ApprovalConfirm Approval = "confirm" // a person must confirm each request (approved:true from the host)
	ApprovalForbid  Approval = "forbid"  // never through MHP
)

// Value types of signals, settings and parameter shapes.
const (
	TypeNumber  = "number"
	TypeInteger = "integer"
	TypeBoolean = "boolean"
	TypeString  = "string"
	TypeArray   = "array"
	TypeObject  = "object"
	TypeAny     = "any"
)

// Action durations.
const (
	DurationShort = "short"
	DurationLong  = "long"
)

// DeviceInfo is a device's identity: the card fields of DEVICE.md's front matter.
type DeviceInfo struct {
	ID          string   `json:"id" yaml:"id"`
	Class       string   `json:"class,omitempty" yaml:"class,omitempty"`
	Make        string   `json:"make,omitempty" yaml:"make,omitempty"`
	Model       string   `json:"model,omitempty" yaml:"model,omitempty"`
	Serial      string   `json:"serial,omitempty" yaml:"serial,omitempty"`
	Location    string   `json:"location,omitempty" yaml:"location,omitempty"`
	Tags        []string `json:"tags,omitempty" yaml:"tags,omitempty"`
	Description string   `json:"description,omitempty" yaml:"description,omitempty"`
}

// Physical is what an agent cannot infer from code: mass, footprint, power.
type Physical struct {
	MassKg      float64   `json:"mass_kg,omitempty" yaml:"mass_kg,omitempty"`
	FootprintMm []float64 `json:"footprint_mm,omitempty" yaml:"footprint_mm,omitempty"`
	PowerW      float64   `json:"power_w,omitempty" yaml:"power_w,omitempty"`
	Notes       string    `json:"notes,omitempty" yaml:"notes,omitempty"`
}

// Limits bound a value: a numeric range, an enum, a pattern or lengths.
type Limits struct {
	Min          *float64 `json:"min,omitempty" yaml:"min,omitempty"`
	Max          *float64 `json:"max,omitempty" yaml:"max,omitempty"`
	ExclusiveMin *float64 `json:"exclusiveMin,omitempty" yaml:"exclusiveMin,omitempty"`
	ExclusiveMax *float64 `json:"exclusiveMax,omitempty" yaml:"exclusiveMax,omitempty"`
	Enum         []any    `json:"enum,omitempty" yaml:"enum,omitempty"`
	Pattern      string   `json:"pattern,omitempty" yaml:"pattern,omitempty"`
	MinLength    *int     `json:"minLength,omitempty" yaml:"minLength,omitempty"`
	MaxLength    *int     `json:"maxLength,omitempty" yaml:"maxLength,omitempty"`
}

// Range returns limits {min, max}.
func Range(min, max float64) *Limits { return &Limits{Min: &min, Max: &max} }

// Enum returns limits {enum: values}.
func Enum(values ...any) *Limits { return &Limits{Enum: values} }

// Empty reports whether the limits bound nothing.
func (l *Limits) Empty() bool {
	return l == nil || (l.Min == nil && l.Max == nil && l.ExclusiveMin == nil && l.ExclusiveMax == nil &&
		len(l.Enum) == 0 && l.Pattern == "" && l.MinLength == nil && l.MaxLength == nil)
}

// Signal describes a readable value.
type Signal struct {
	Name  string `json:"name" yaml:"name"`
	Type  string `json:"type,omitempty" yaml:"type,omitempty"`
	Unit  string `json:"unit,omitempty" yaml:"unit,omitempty"`
	Notes string `json:"notes,omitempty" yaml:"notes,omitempty"`
	// RequiredForRecovery: safety/reset refuses while this signal is
	// unreadable (interlock signals always are). Other signals that read
	// unavailable are named in the reset answer without blocking it.
	RequiredForRecovery bool `json:"required_for_recovery,omitempty" yaml:"required_for_recovery,omitempty"`
}

// Setting describes a writable value and the envelope the driver enforces on it.
type Setting struct {
	Name     string   `json:"name" yaml:"name"`
	Type     string   `json:"type,omitempty" yaml:"type,omitempty"`
	Unit     string   `json:"unit,omitempty" yaml:"unit,omitempty"`
	Limits   *Limits  `json:"limits,omitempty" yaml:"limits,omitempty"`
	Approval Approval `json:"approval,omitempty" yaml:"approval,omitempty"`
	// Interlocks are signals that must read exactly true for a write.
	Interlocks []string `json:"interlocks,omitempty" yaml:"interlocks,omitempty"`
	// DuringJob allows writing while a job runs.
	DuringJob bool   `json:"during_job,omitempty" yaml:"during_job,omitempty"`
	Notes     string `json:"notes,omitempty" yaml:"notes,omitempty"`
}

// Shape returns the value shape of the setting (type, unit, limits).
func (s Setting) Shape() *Shape { return &Shape{Type: s.Type, Unit: s.Unit, Limits: s.Limits} }

// Action describes invokable work that runs as a job.
type Action struct {
	Name     string   `json:"name" yaml:"name"`
	Duration string   `json:"duration,omitempty" yaml:"duration,omitempty"`
	Approval Approval `json:"approval,omitempty" yaml:"approval,omitempty"`
	// Interlocks are signals that must read exactly true for an invoke.
	Interlocks []string `json:"interlocks,omitempty" yaml:"interlocks,omitempty"`
	Params     Params   `json:"params,omitempty" yaml:"params,omitempty"`
	// Required names required parameters when a device lists them beside
	// its params or instead of them (the reference's summary tier sends
	// required: [steps, cycles] and no params). Read from the wire only; a
	// package says it in params' shapes.
	Required []string `json:"required,omitempty" yaml:"-"`
	// Returns describes the job result, for the agent; it is not checked.
	Returns  *Shape           `json:"returns,omitempty" yaml:"returns,omitempty"`
	Examples []map[string]any `json:"examples,omitempty" yaml:"examples,omitempty"`
	// Concurrent actions may run while other jobs are active.
	Concurrent  bool   `json:"concurrent,omitempty" yaml:"concurrent,omitempty"`
	Pausable    bool   `json:"pausable,omitempty" yaml:"pausable,omitempty"`
	Cancellable bool   `json:"cancellable,omitempty" yaml:"cancellable,omitempty"`
	Notes       string `json:"notes,omitempty" yaml:"notes,omitempty"`
}

// Safety is the device-wide safety block.
type Safety struct {
	EStop      bool     `json:"estop" yaml:"estop"`
	Interlocks []string `json:"interlocks,omitempty" yaml:"interlocks,omitempty"`
	// WatchdogS is the watchdog window in seconds; zero means no watchdog.
	WatchdogS float64 `json:"watchdog_s,omitempty" yaml:"watchdog_s,omitempty"`
	Notes     string  `json:"notes,omitempty" yaml:"notes,omitempty"`
}

// Descriptor is a device's whole machine-readable description (§4).
type Descriptor struct {
	MHP        string `json:"mhp,omitempty" yaml:"mhp,omitempty"`
	DeviceInfo `yaml:",inline"`
	// Notes is free text for the agent (descriptor.yaml device.notes).
	Notes string `json:"notes,omitempty" yaml:"notes,omitempty"`
	// Instructions is the DEVICE.md body: the operating procedure.
	Instructions string    `json:"instructions,omitempty" yaml:"instructions,omitempty"`
	Physical     *Physical `json:"physical,omitempty" yaml:"physical,omitempty"`
	Signals      []Signal  `json:"signals,omitempty" yaml:"signals,omitempty"`
	Settings     []Setting `json:"settings,omitempty" yaml:"settings,omitempty"`
	Actions      []Action  `json:"actions,omitempty" yaml:"actions,omitempty"`
	Safety       Safety    `json:"safety" yaml:"safety"`
	// Resources lists package-relative file paths served by resources/read.
	Resources []string `json:"resources,omitempty" yaml:"resources,omitempty"`
}

// Signal returns the named signal.
func (d *Descriptor) Signal(name string) (*Signal, bool) {
	for i := range d.Signals {
		if d.Signals[i].Name == name {
			return &d.Signals[i], true
		}
	}
	return nil, false
}

// Setting returns the named setting.
func (d *Descriptor) Setting(name string) (*Setting, bool) {
	for i := range d.Settings {
		if d.Settings[i].Name == name {
			return &d.Settings[i], true
		}
	}
	return nil, false
}

// Action returns the named action.
func (d *Descriptor) Action(name string) (*Action, bool) {
	for i := range d.Actions {
		if d.Actions[i].Name == name {
			return &d.Actions[i], true
		}
	}
	return nil, false
}
