package manual

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/clock"
	"github.com/openmhp/mhp-go/devicepkg"
)

// Options are what a program gives Build.
type Options struct {
	// Clock is the driver's clock (reading ages); default the system clock.
	Clock clock.Clock
	// Logger receives the driver's logs; default slog.Default().
	Logger *slog.Logger
	// Refine edits the generated bindings before the driver is built (a
	// test shortens the answer timeout).
	Refine func(*binding.Config) error
}

// Build makes the device of an operator-run package (`driver: manual`):
// bindings generated from descriptor.yaml's own items and manual.yaml,
// the package merged over them, and the operator methods (operator/answer,
// operator/record, operator/pending) attached to the device, served only
// to callers holding the operator token.
func Build(pkg *devicepkg.Package, opt Options) (*devicepkg.Device, error) {
	if !IsDriver(pkg.Card.Driver) {
		return nil, fmt.Errorf("manual: package %s names driver %q, not %q", pkg.Card.ID, pkg.Card.Driver, Driver)
	}
	mc, err := LoadConfig(pkg)
	if err != nil {
		return nil, fmt.Errorf("device package %s: %w", pkg.Card.ID, err)
	}
	o, cfg, err := bindings(pkg, mc.Defaults(), opt)
	if err != nil {
		return nil, fmt.Errorf("device package %s: %w", pkg.Card.ID, err)
	}
	if opt.Refine != nil {
		if err := opt.Refine(&cfg); err != nil {
			return nil, err
		}
	}
	dev, err := devicepkg.Build(pkg, cfg)
	if err != nil {
		return nil, err
	}
	o.drv = dev.Driver
	return dev.WithOperator(o), nil
}

// bindings generates the binding config of the package's own items.
func bindings(pkg *devicepkg.Package, mc Config, opt Options) (*operator, binding.Config, error) {
	clk := opt.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	o := &operator{cfg: mc, clk: clk, types: map[string]string{}, readings: map[string]reading{},
		requests: map[string]request{}, jobs: map[string]*waiting{}}
	d := pkg.Descriptor
	cfg := binding.Config{Device: pkg.Card.DeviceInfo, Clock: opt.Clock, Logger: opt.Logger,
		Notes: "Operated by a person: actions wait for the operator's answer (waiting_operator), settings are requests " +
			"applied only when the person confirms them, readings are what a person recorded."}
	for _, s := range d.Signals {
		if s.Type == "" {
			return nil, cfg, fmt.Errorf("%s: signals.%s: a manual device's signal needs its type", devicepkg.DescriptorFile, s.Name)
		}
		name := s.Name
		o.types[name] = s.Type
		notes := strings.TrimSpace(s.Notes + fmt.Sprintf(" Recorded by a person (operator/record); unavailable after %s.", o.maxAge(name)))
		cfg.Signals = append(cfg.Signals, binding.Signal{Spec: mhp.Signal{Name: name, Type: s.Type, Unit: s.Unit, Notes: notes},
			Read: func(context.Context) (binding.Sample, error) { return o.read(name) }})
	}
	for _, s := range d.Settings {
		if s.Type == "" {
			return nil, cfg, fmt.Errorf("%s: settings.%s: a manual device's setting needs its type", devicepkg.DescriptorFile, s.Name)
		}
		spec := mhp.Setting{Name: s.Name, Type: s.Type, Unit: s.Unit, Limits: s.Limits, Approval: s.Approval,
			Interlocks: s.Interlocks, Notes: s.Notes}
		if s.DuringJob != nil {
			spec.DuringJob = *s.DuringJob
		}
		if spec.Approval == "" {
			spec.Approval = mhp.ApprovalAuto
		}
		tmpl := mc.Settings[s.Name].Instruction
		if tmpl == "" {
			tmpl = fmt.Sprintf("Set %s to {value}%s.", humanName(s.Name), unitSuffix(s.Unit))
			if s.Notes != "" {
				tmpl += " " + s.Notes
			}
		}
		name := s.Name
		cfg.Settings = append(cfg.Settings, binding.Setting{Spec: spec, Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
			return o.write(ctx, name, tmpl, v)
		}})
	}
	for _, a := range d.Actions {
		spec := mhp.Action{Name: a.Name, Duration: a.Duration, Approval: a.Approval, Interlocks: a.Interlocks, Params: a.Params,
			Returns: a.Returns, Examples: a.Examples, Notes: a.Notes}
		if spec.Duration == "" {
			spec.Duration = mhp.DurationLong
		}
		if a.Concurrent != nil {
			spec.Concurrent = *a.Concurrent
		}
		if a.Cancellable != nil {
			spec.Cancellable = *a.Cancellable
		}
		if a.Pausable != nil && *a.Pausable {
			return nil, cfg, fmt.Errorf("%s: actions.%s: a manual action cannot be paused (the person is not asked to pause)",
				devicepkg.DescriptorFile, a.Name)
		}
		tmpl := mc.Actions[a.Name].Instruction
		if tmpl == "" {
			tmpl = defaultInstruction(spec)
		}
		cfg.Actions = append(cfg.Actions, binding.Action{Spec: spec, Timeout: seconds(mc.AnswerTimeoutS),
			Run: func(ctx context.Context, job *binding.Job) (any, error) { return o.run(ctx, job, tmpl) }})
	}
	stop := mc.EStop
	if stop == "" {
		stop = fmt.Sprintf("Stop %s now: switch off its motion and heating, make it safe, then confirm (operator/answer estop).",
			pkg.Card.ID)
	}
	cfg.Safety.EStop = true
	cfg.EStop = func(ctx context.Context) error { return o.stop(ctx, stop) }
	cfg.Verify = o.verify
	return o, cfg, nil
}

func humanName(s string) string { return strings.ReplaceAll(s, "_", " ") }

func unitSuffix(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// defaultInstruction is "Do <action> with p = {p}, ...; then report".
func defaultInstruction(a mhp.Action) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Please %s", humanName(a.Name))
	if names := a.Params.Names(); len(names) > 0 {
		sort.Strings(names)
		var ps []string
		for _, n := range names {
			ps = append(ps, fmt.Sprintf("%s = {%s}", n, n))
		}
		fmt.Fprintf(&b, " with %s", strings.Join(ps, ", "))
	}
	b.WriteString(".")
	if a.Notes != "" {
		b.WriteString(" " + a.Notes)
	}
	b.WriteString(" Report done, failed or could not when you have finished.")
	return b.String()
}

// write is a setting's Write: the request goes to the person; the write
// answers `sent` (applied: false) until they confirm it.
func (o *operator) write(ctx context.Context, name, tmpl string, v any) (binding.WriteStatus, error) {
	by := PersonFrom(ctx)
	text := expand(tmpl, map[string]any{"value": v})
	o.mu.Lock()
	o.requests[name] = request{value: v, by: by, at: o.now(), instruction: text}
	o.mu.Unlock()
	o.notify(mhp.NotifyOperatorInstruct, map[string]any{"kind": "setting", "setting": name, "value": v, "text": text,
		"requested_by": by.Label(), "answer_with": "operator/answer {setting, outcome, values: {" + name + ": <value set>}}"})
	return binding.Sent, nil
}

// run is an action's Run: the job waits for the person's answer.
func (o *operator) run(ctx context.Context, job *binding.Job, tmpl string) (any, error) {
	text := expand(tmpl, job.Params())
	w := &waiting{action: job.Action(), instruction: text, since: o.now(), answer: make(chan answer, 1)}
	o.mu.Lock()
	o.jobs[job.ID()] = w
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.jobs, job.ID())
		o.mu.Unlock()
	}()
	job.WaitOperator(text, map[string]any{"answer_with": "operator/answer {job, outcome: done|failed|could_not, note, values}"})
	select {
	case a := <-w.answer:
		return o.finish(job, a)
	case <-ctx.Done():
	}
	if !job.CancelRequested() {
		return nil, fmt.Errorf("no answer from the operator within %s: what was done is unknown", seconds(o.cfg.AnswerTimeoutS))
	}
	// Cancelled or estopped: the person is asked to stop, and their word ends the job.
	o.notify(mhp.NotifyOperatorInstruct, map[string]any{"kind": "cancel", "job": job.ID(), "action": job.Action(),
		"text": fmt.Sprintf("Stop %q (job %s) now; answer cancelled when it is stopped, or done if it had already finished.",
			humanName(job.Action()), job.ID())})
	t := time.NewTimer(seconds(o.cfg.AnswerTimeoutS))
	defer t.Stop()
	select {
	case a := <-w.answer:
		return o.finish(job, a)
	case <-t.C:
		return nil, errors.New("no answer from the operator after the cancel: what was done is unknown")
	}
}

// finish turns the person's answer into the job's end.
func (o *operator) finish(job *binding.Job, a answer) (any, error) {
	by := map[string]any{"name": a.by.Name, "role": a.by.Role, "via": a.by.Via, "session": a.by.Session}
	data := map[string]any{"answered_by": a.by.Label(), "person": by, "note": a.note, "values": a.values,
		"answered_at": mhp.UnixSeconds(a.at)}
	switch a.outcome {
	case OutcomeDone:
		data["completed_by"] = "operator"
		return data, nil
	case OutcomeFailed:
		return nil, binding.Failed(fmt.Errorf("%s reports it failed: %s", a.by.Label(), orNone(a.note)), data)
	case OutcomeCancelled:
		if job.CancelRequested() {
			return data, binding.ErrCancelled
		}
	}
	e := mhp.Errorf(mhp.CodeServerError, "%s: %s could not do it: %s", job.Action(), a.by.Label(), orNone(a.note))
	for k, v := range data {
		e = e.With(k, v)
	}
	return nil, e
}

func orNone(s string) string {
	if s == "" {
		return "(no note)"
	}
	return s
}

// stop is the estop hook: the stop is asked of the person, so the answer
// is always stopped:false, saying what was asked.
func (o *operator) stop(ctx context.Context, text string) error {
	o.mu.Lock()
	o.estop = &request{by: PersonFrom(ctx), at: o.now(), instruction: text}
	o.stopOK = false
	o.mu.Unlock()
	o.notify(mhp.NotifyOperatorInstruct, map[string]any{"kind": "estop", "text": text,
		"answer_with": "operator/answer {estop: true, outcome: done}"})
	return fmt.Errorf("operator-run device: the stop is a request to the person (%q); nothing stops by itself: "+
		"confirm with operator/answer {estop: true, outcome: done} before a reset", text)
}

// verify is the reset check: after an estop, the person must have
// confirmed the stop.
func (o *operator) verify(context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.estop != nil && !o.stopOK {
		return fmt.Errorf("the operator has not confirmed the stop (%q): answer operator/answer {estop: true, outcome: done} first",
			o.estop.instruction)
	}
	return nil
}

// Open loads the package in dir, builds its device (see [Build]) and
// starts it. The returned release closes the device and the package.
func Open(ctx context.Context, dir string, opt Options) (dev *devicepkg.Device, release func() error, err error) {
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	if dev, err = Build(pkg, opt); err == nil {
		if err = dev.Start(ctx); err != nil {
			_ = dev.Close()
		}
	}
	if err != nil {
		_ = pkg.Close()
		return nil, nil, err
	}
	return dev, func() error { err := dev.Close(); _ = pkg.Close(); return err }, nil
}
