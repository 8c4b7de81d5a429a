package fleet

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/mqtt"
)

// DeviceView is what the watcher knows of one device.
type DeviceView struct {
	ID     string
	Class  string
	Host   string
	Online string // "online", "offline" or "" (not reported)
	State  string
	// Jobs are the running jobs by id: action and progress.
	Jobs map[string]JobView
	// Safety is the last safety event ("estop", "fault", "reset"), its reason and time.
	Safety       string
	SafetyReason string
	SafetyTS     float64
	Updated      time.Time
}

// JobView is one running job.
type JobView struct {
	Action   string
	State    string
	Progress float64
}

// View is the live fleet: devices by id.
type View struct {
	mu      sync.Mutex
	devices map[string]*DeviceView
	seen    map[string]bool // event ids, to drop QoS 1 duplicates
	order   []string
}

// NewView returns an empty view.
func NewView() *View { return &View{devices: map[string]*DeviceView{}, seen: map[string]bool{}} }

// Devices returns a copy of every device, sorted by id.
func (v *View) Devices() []DeviceView {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]DeviceView, 0, len(v.devices))
	for _, d := range v.devices {
		c := *d
		c.Jobs = make(map[string]JobView, len(d.Jobs))
		for k, j := range d.Jobs {
			c.Jobs[k] = j
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// dup reports whether an event id was seen, remembering the last 4096.
func (v *View) dupLocked(id string) bool {
	if id == "" {
		return false
	}
	if v.seen[id] {
		return true
	}
	v.seen[id] = true
	v.order = append(v.order, id)
	if len(v.order) > 4096 {
		delete(v.seen, v.order[0])
		v.order = v.order[1:]
	}
	return false
}

// Apply folds one fleet message into the view; it reports whether the
// view changed. prefix is the fleet topic prefix.
func (v *View) Apply(prefix, topic string, payload []byte) bool {
	rest, ok := strings.CutPrefix(topic, prefix+"/")
	if !ok {
		return false
	}
	devKey, sub, ok := strings.Cut(rest, "/")
	if !ok {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	d := v.devices[devKey]
	if d == nil {
		if len(payload) == 0 {
			return false
		}
		d = &DeviceView{ID: devKey, Jobs: map[string]JobView{}}
		v.devices[devKey] = d
	}
	var doc map[string]any
	if sub != "status" && len(payload) > 0 {
		if json.Unmarshal(payload, &doc) != nil {
			return false
		}
		if id, _ := doc["id"].(string); v.dupLocked(id) {
			return false
		}
	}
	d.Updated = time.Now()
	switch {
	case sub == "status":
		d.Online = string(payload)
	case sub == "card":
		if card, ok := doc["card"].(map[string]any); ok {
			if id, ok := card["id"].(string); ok {
				d.ID = id
			}
			d.Class, _ = card["class"].(string)
			if s, ok := card["state"].(string); ok && d.State == "" {
				d.State = s
			}
		}
		d.Host, _ = doc["host"].(string)
	case sub == "state":
		d.State, _ = doc["state"].(string)
		jobs := map[string]JobView{}
		if list, ok := doc["jobs"].([]any); ok {
			for _, x := range list {
				if j, ok := x.(map[string]any); ok {
					id, _ := j["id"].(string)
					jv := JobView{}
					jv.Action, _ = j["action"].(string)
					jv.State, _ = j["state"].(string)
					jv.Progress, _ = j["progress"].(float64)
					jobs[id] = jv
				}
			}
		}
		d.Jobs = jobs
	case strings.HasPrefix(sub, "jobs/"):
		params, _ := doc["params"].(map[string]any)
		if s, ok := params["state"].(string); ok {
			d.State = s
		}
		job, _ := params["job"].(map[string]any)
		id, _ := job["id"].(string)
		if id == "" {
			return true
		}
		state, _ := job["state"].(string)
		if state == "done" || state == "failed" || state == "cancelled" {
			delete(d.Jobs, id)
			return true
		}
		jv := d.Jobs[id]
		if a, ok := job["action"].(string); ok {
			jv.Action = a
		}
		jv.State = state
		if p, ok := job["progress"].(float64); ok {
			jv.Progress = p
		}
		d.Jobs[id] = jv
	case sub == "safety":
		method, _ := doc["method"].(string)
		d.Safety = strings.TrimPrefix(method, "notifications/safety/")
		params, _ := doc["params"].(map[string]any)
		d.SafetyReason, _ = params["reason"].(string)
		d.SafetyTS, _ = doc["ts"].(float64)
		if s, ok := params["state"].(string); ok {
			d.State = s
		}
	default:
		params, _ := doc["params"].(map[string]any)
		if s, ok := params["state"].(string); ok {
			d.State = s
		}
	}
	return true
}

// Render writes the fleet as a table: device, online, state, running jobs,
// last safety event.
func (v *View) Render(w io.Writer) error {
	devs := v.Devices()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "DEVICE\tHOST\tLINK\tSTATE\tJOBS\tLAST SAFETY\n")
	for _, d := range devs {
		var jobs []string
		ids := make([]string, 0, len(d.Jobs))
		for id := range d.Jobs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			j := d.Jobs[id]
			jobs = append(jobs, fmt.Sprintf("%s %s %.0f%%", id, j.Action, j.Progress*100))
		}
		js := strings.Join(jobs, ", ")
		if js == "" {
			js = "-"
		}
		safety := "-"
		if d.Safety != "" {
			safety = d.Safety
			if d.SafetyReason != "" {
				safety += fmt.Sprintf(" %q", d.SafetyReason)
			}
			if d.SafetyTS > 0 {
				safety += " " + time.Unix(int64(d.SafetyTS), 0).UTC().Format("15:04:05")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", d.ID, dash(d.Host), dash(d.Online), dash(d.State), js, safety)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WatchConfig configures WatchWith.
type WatchConfig struct {
	URL      string
	ClientID string // default "mhp-watch-<random>"
	// Every is the least time between two renders; default 500ms.
	Every  time.Duration
	Logger *slog.Logger
	Dial   func(mqtt.DialOptions) (mqtt.Client, error)
	// TLS is how an mqtts:// broker is checked (see Config.TLS).
	TLS auth.ClientTLS
	// View, when set, receives the messages (to inspect it from elsewhere).
	View *View
}

// Watch prints a live fleet view of the broker at url
// (mqtt://broker:1883/prefix) to w until ctx ends: a table of devices,
// their link, state, running jobs and last safety event, redrawn when it
// changes.
func Watch(ctx context.Context, url string, w io.Writer) error {
	return WatchWith(ctx, WatchConfig{URL: url}, w)
}

// WatchWith is Watch with options.
func WatchWith(ctx context.Context, cfg WatchConfig, w io.Writer) error {
	t, err := ParseURL(cfg.URL)
	if err != nil {
		return err
	}
	if cfg.Every <= 0 {
		cfg.Every = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = func(o mqtt.DialOptions) (mqtt.Client, error) { return mqtt.DialPaho(o) }
	}
	if cfg.ClientID == "" {
		cfg.ClientID = "mhp-watch-" + randID()
	}
	view := cfg.View
	if view == nil {
		view = NewView()
	}
	changed := make(chan struct{}, 1)
	tc, err := brokerTLS(cfg.TLS)
	if err != nil {
		return err
	}
	c, err := cfg.Dial(mqtt.DialOptions{Broker: t.Broker, ClientID: cfg.ClientID, TLS: tc, Username: t.Username,
		Password: t.Password, Logger: cfg.Logger})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	defer c.Close()
	on := func(m mqtt.Message) {
		if view.Apply(t.Prefix, m.Topic, m.Payload) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	for _, f := range []string{"status", "card", "state", "safety", "jobs/+", "events/+"} {
		if err := c.Subscribe(ctx, t.Prefix+"/+/"+f, 1, on); err != nil {
			return fmt.Errorf("fleet: subscribe: %w", err)
		}
	}
	fmt.Fprintf(w, "watching %s (prefix %s)\n", t.Broker, t.Prefix)
	last := time.Time{}
	var pending <-chan time.Time
	linkUp := false
	for {
		st := c.State()
		if st.Up != linkUp {
			linkUp = st.Up
			if linkUp {
				fmt.Fprintf(w, "-- connected to %s\n", t.Broker)
			} else {
				fmt.Fprintf(w, "-- broker %s unreachable, retrying\n", t.Broker)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-st.Changed:
		case <-changed:
			if wait := cfg.Every - time.Since(last); wait > 0 {
				if pending == nil {
					pending = time.After(wait)
				}
				continue
			}
			last = time.Now()
			render(w, view)
		case <-pending:
			pending = nil
			last = time.Now()
			render(w, view)
		}
	}
}

func render(w io.Writer, v *View) {
	fmt.Fprintf(w, "== fleet %s ==\n", time.Now().UTC().Format("15:04:05"))
	_ = v.Render(w)
}

func randID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%x", b[:])
}
