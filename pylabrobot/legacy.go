package pylabrobot

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// SignalSetupFinished is the legacy server's one signal (GET /status).
const SignalSetupFinished = "setup_finished"

type legacyAdapter struct {
	cfg  Config
	lh   Legacy
	link *adapters.Link
	poll adapters.PollRetry
}

// legacyCommands maps the MHP action names onto the server's routes.
var legacyCommands = []struct {
	action, route, notes string
	params               mhp.Params
}{
	{"setup", "setup", "runs lh.setup() as a task", nil},
	{"stop", "stop", "runs lh.stop() as an ordinary task alongside others: not an e-stop", nil},
	{"pick_up_tips", "pick-up-tips", "pick up tips from tip spots", tipParams()},
	{"drop_tips", "drop-tips", "drop tips into tip spots or trash", tipParams()},
	{"aspirate", "aspirate", "aspirate from wells (volumes in uL)", liquidParams()},
	{"dispense", "dispense", "dispense into wells (volumes in uL)", liquidParams()},
}

func offsetShape() *mhp.Shape {
	return &mhp.Shape{Type: mhp.TypeObject, Optional: true, Unit: "mm", Notes: "offset from the resource's default position (mm); default 0,0,0",
		Properties: map[string]*mhp.Shape{"x": {Type: mhp.TypeNumber}, "y": {Type: mhp.TypeNumber}, "z": {Type: mhp.TypeNumber}}}
}

func channelsParam(item map[string]*mhp.Shape, required []string) mhp.Param {
	return mhp.Param{Name: "channels", Shape: &mhp.Shape{Type: mhp.TypeArray, Notes: "one entry per channel used",
		Items: &mhp.Shape{Type: mhp.TypeObject, Properties: item, Required: required}}}
}

func useChannelsParam() mhp.Param {
	zero := 0.0
	return mhp.Param{Name: "use_channels", Shape: &mhp.Shape{Type: mhp.TypeArray, Optional: true,
		Notes: "channel indices, one per entry of channels; default 0..n-1",
		Items: &mhp.Shape{Type: mhp.TypeInteger, Limits: &mhp.Limits{Min: &zero}}}}
}

func tipParams() mhp.Params {
	return mhp.Params{channelsParam(map[string]*mhp.Shape{
		"resource_name": {Type: mhp.TypeString, Notes: "tip spot, e.g. tip_rack_01_tipspot_A1"},
		"tip":           {Type: mhp.TypeObject, Notes: "serialized Tip (required by the server; the tip used comes from the tip spot)"},
		"offset":        offsetShape(),
	}, []string{"resource_name", "tip"}), useChannelsParam()}
}

func liquidParams() mhp.Params {
	zero := 0.0
	num := func(notes string) *mhp.Shape {
		return &mhp.Shape{Type: mhp.TypeNumber, Optional: true, Notes: notes}
	}
	return mhp.Params{channelsParam(map[string]*mhp.Shape{
		"resource_name":       {Type: mhp.TypeString, Notes: "well or container, e.g. plate_01_well_A1"},
		"tip":                 {Type: mhp.TypeObject, Notes: "serialized Tip on the channel"},
		"offset":              offsetShape(),
		"volume":              {Type: mhp.TypeNumber, Unit: "uL", Limits: &mhp.Limits{Min: &zero}},
		"flow_rate":           num("uL/s; default the backend's"),
		"liquid_height":       num("mm above the bottom; default the backend's"),
		"blow_out_air_volume": num("uL; default none"),
		"mix":                 {Type: mhp.TypeObject, Notes: "{volume, repetitions, flow_rate}"},
	}, []string{"resource_name", "tip", "volume"}), useChannelsParam()}
}

func (l *legacyAdapter) binding(bc binding.Config) (binding.Config, error) {
	if bc.Device.Model == "" {
		bc.Device.Model = "LiquidHandler (lh-server)"
	}
	if bc.Notes == "" {
		bc.Notes = fmt.Sprintf("PyLabRobot legacy liquid-handling server at %s: no cancel and no e-stop; tasks run to their end.", l.cfg.URL)
	}
	bc.Signals = []binding.Signal{{Spec: mhp.Signal{Name: SignalSetupFinished, Type: mhp.TypeBoolean, Notes: "GET /status: running once setup finished"},
		Read: func(ctx context.Context) (binding.Sample, error) {
			ok, err := l.lh.SetupFinished(ctx)
			if err != nil {
				if ctx.Err() == nil && linkDown(err) {
					l.link.Down(fmt.Errorf("lh-server %s: %w", l.cfg.URL, err))
				}
				return binding.Sample{}, binding.Unavailable("lh-server /status: %v", err)
			}
			return binding.Sample{Value: ok}, nil
		}}}
	have := map[string]bool{}
	for _, c := range legacyCommands {
		c := c
		have[c.action] = true
		o := l.cfg.Actions[c.action]
		if o.Hide {
			continue
		}
		spec := mhp.Action{Name: c.action, Duration: mhp.DurationLong,
			Notes: c.notes + " (legacy server: not cancellable)", Params: append(mhp.Params(nil), c.params...)}
		if err := l.applyOverride(&spec, o); err != nil {
			return binding.Config{}, err
		}
		timeout := o.Timeout
		if timeout == 0 {
			timeout = l.cfg.ActionTimeout
		}
		bc.Actions = append(bc.Actions, binding.Action{Spec: spec, Timeout: timeout,
			Run: func(ctx context.Context, job *binding.Job) (any, error) { return l.run(ctx, job, c.route) }})
	}
	have["labware"] = true
	if o := l.cfg.Actions["labware"]; !o.Hide {
		spec := mhp.Action{Name: "labware", Duration: mhp.DurationShort, Approval: o.Approval, Interlocks: o.Interlocks,
			Notes:  "replace the deck (POST /labware, synchronous)",
			Params: mhp.Params{{Name: "deck", Shape: &mhp.Shape{Type: mhp.TypeObject, Notes: "serialized Deck"}}}}
		if spec.Approval == "" {
			spec.Approval = mhp.ApprovalConfirm
		}
		if err := l.applyOverride(&spec, o); err != nil {
			return binding.Config{}, err
		}
		bc.Actions = append(bc.Actions, binding.Action{Spec: spec, Timeout: l.cfg.RequestTimeout,
			Run: func(ctx context.Context, job *binding.Job) (any, error) {
				deck, _ := job.Params()["deck"].(map[string]any)
				if err := l.lh.Labware(ctx, deck); err != nil {
					return nil, err
				}
				return map[string]any{"status": "ok"}, nil
			}})
	}
	for name := range l.cfg.Actions {
		if !have[name] {
			return binding.Config{}, fmt.Errorf("pylabrobot: config overrides action %q, which the legacy server does not have", name)
		}
	}
	for name := range l.cfg.Signals {
		if name != SignalSetupFinished {
			return binding.Config{}, fmt.Errorf("pylabrobot: config overrides signal %q, which the legacy server does not serve", name)
		}
	}
	bc.Setup = func(ctx context.Context) error {
		if _, err := l.lh.SetupFinished(ctx); err != nil {
			if l.cfg.Link.FailFast || !linkDown(err) {
				return fmt.Errorf("pylabrobot: legacy server %s unreachable: %w", l.cfg.URL, err)
			}
			l.link.Down(fmt.Errorf("lh-server %s: %w", l.cfg.URL, err))
		} else {
			l.link.Up()
		}
		l.link.Start()
		return nil
	}
	bc.Close = func() error { l.link.Close(); return nil }
	// No EStop: the legacy server has none (POST /stop is an ordinary task).
	return bc, nil
}

func (l *legacyAdapter) applyOverride(spec *mhp.Action, o ActionOverride) error {
	if o.Cancellable != nil && *o.Cancellable {
		return fmt.Errorf("pylabrobot: action %q: the legacy server has no cancel", spec.Name)
	}
	if o.Pausable != nil && *o.Pausable {
		return fmt.Errorf("pylabrobot: action %q: the legacy server cannot pause", spec.Name)
	}
	if err := o.ApplyTo(spec); err != nil {
		return fmt.Errorf("pylabrobot: %w", err)
	}
	return nil
}

// body turns checked params into the server's body: offsets become
// Coordinates, the optional numbers the server requires as keys become null,
// use_channels defaults to 0..n-1.
func legacyBody(params map[string]any) map[string]any {
	if len(params) == 0 {
		return nil
	}
	chans, _ := params["channels"].([]any)
	out := make([]any, 0, len(chans))
	for _, c := range chans {
		m, _ := c.(map[string]any)
		ch := map[string]any{}
		for k, v := range m {
			ch[k] = v
		}
		off := map[string]any{"type": "Coordinate", "x": 0.0, "y": 0.0, "z": 0.0}
		if o, ok := m["offset"].(map[string]any); ok {
			for _, k := range []string{"x", "y", "z"} {
				if v, ok := o[k]; ok {
					off[k] = v
				}
			}
		}
		ch["offset"] = off
		if _, isLiquid := m["volume"]; isLiquid {
			for _, k := range []string{"flow_rate", "liquid_height", "blow_out_air_volume"} {
				if _, ok := ch[k]; !ok {
					ch[k] = nil
				}
			}
		}
		out = append(out, ch)
	}
	use, ok := params["use_channels"].([]any)
	if !ok {
		use = make([]any, len(out))
		for i := range use {
			use[i] = int64(i)
		}
	}
	return map[string]any{"channels": out, "use_channels": use}
}

func (l *legacyAdapter) run(ctx context.Context, job *binding.Job, route string) (any, error) {
	if body := legacyBody(job.Params()); body != nil {
		if n, m := len(body["channels"].([]any)), len(body["use_channels"].([]any)); n != m {
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "%s: %d channels but %d use_channels", route, n, m).With("field", "use_channels")
		}
		t, err := l.lh.Post(ctx, route, body)
		if err != nil {
			return nil, err
		}
		return l.follow(ctx, job, route, t)
	}
	t, err := l.lh.Post(ctx, route, nil)
	if err != nil {
		return nil, err
	}
	return l.follow(ctx, job, route, t)
}

func (l *legacyAdapter) follow(ctx context.Context, job *binding.Job, route string, t *LegacyTask) (any, error) {
	id := t.ID
	pollCtx := ctx
	var stops []context.CancelFunc
	defer func() {
		for _, f := range stops {
			f()
		}
	}()
	waiting := false
	fails := l.poll.Follow(fmt.Sprintf("lh-server task %d (%s)", id, route), "the server")
	wait := l.cfg.PollInterval
	last := ""
	for {
		if t.Status != last {
			last = t.Status
			job.Progress(0, map[string]any{"task_id": id, "status": t.Status})
		}
		switch t.Status {
		case LegacySucceeded:
			return map[string]any{"task_id": id, "status": t.Status}, nil
		case LegacyError:
			return nil, binding.Failed(fmt.Errorf("%s: %s", route, t.Error), map[string]any{"task_id": id})
		case LegacyQueued, LegacyRunning:
		default:
			return nil, fmt.Errorf("lh-server task %d (%s): status %q is not a task status", id, route, t.Status)
		}
		if ctx.Err() != nil && !waiting {
			if !job.CancelRequested() {
				return nil, fmt.Errorf("lh-server task %d (%s): no terminal status before the deadline", id, route)
			}
			// The server has no cancel: the task runs on; report its real end.
			waiting = true
			deadline := time.Now().Add(l.cfg.CancelWait)
			if d, ok := ctx.Deadline(); ok {
				deadline = d
			}
			var stop context.CancelFunc
			pollCtx, stop = context.WithDeadline(context.WithoutCancel(ctx), deadline)
			stops = append(stops, stop)
		}
		if err := l.poll.Sleep(pollCtx, wait); err != nil {
			if !waiting {
				continue
			}
			return nil, fmt.Errorf("lh-server task %d (%s): no terminal status before the deadline", id, route)
		}
		next, err := l.lh.Task(pollCtx, id)
		if err != nil {
			if pollCtx.Err() != nil {
				continue // handled at the top, or by the sleep's check
			}
			status := 0
			var he *HTTPError
			if errors.As(err, &he) {
				if he.Status == http.StatusNotFound {
					return nil, fmt.Errorf("lh-server task %d (%s) is not found (the server restarted and reset its ids?): outcome unknown", id, route)
				}
				status = he.Status
			}
			var gerr error
			if wait, gerr = fails.Failed(status, err); gerr != nil {
				if status == 0 && linkDown(err) {
					l.link.Down(fmt.Errorf("lh-server %s: %w", l.cfg.URL, err))
				}
				return nil, gerr
			}
			continue
		}
		fails.OK()
		wait, t = l.cfg.PollInterval, next
	}
}
