// Package fleet publishes served MHP devices to a shared MQTT broker and
// watches them: the path past one machine. `mhp serve … --publish
// mqtt://broker:1883/lab` runs Publish for each served device; `mhp watch
// mqtt://broker/lab` runs Watch.
//
// Topics, under <prefix>/<device-id>/ (prefix default "mhp"):
//
//	status         "online" / "offline" (retained; "offline" is the last will)
//	card           the device card and publisher identity (retained, QoS 1)
//	state          {"state", "jobs": [active jobs], "ts", "id"} (retained, QoS 1)
//	safety         the last safety event: estop, fault, reset (retained, QoS 1)
//	jobs/<job-id>  job events: started, progress, paused, resumed, cancelling, finished (QoS 1)
//	events/<kind>  other notifications, e.g. settings_changed (QoS 1)
//	signals/<name> {"value", "ts"} or {"unavailable"} at most once per interval (retained, QoS 0)
//
// Every event message carries a unique "id" (publisher run id + sequence)
// and a per-publisher "seq", so consumers drop QoS 1 duplicates and order
// events of one device. Nothing in the device's safety path touches the
// broker: notifications are queued (bounded) by a callback that never
// blocks, and a broker outage is logged and visible in Publisher.Status.
package fleet

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/auth"
	"github.com/openmhp/mhp-go/mqtt"
)

// DefaultPrefix is the topic prefix when the broker URL has no path.
const DefaultPrefix = "mhp"

// Target is a parsed fleet broker URL: mqtt://[user:pass@]host[:port][/prefix].
type Target struct {
	Broker   string // for mqtt.DialOptions (tcp://host:port)
	Prefix   string
	Username string
	Password string
}

// ParseURL reads mqtt://[user:pass@]host[:port][/prefix] (also mqtts://,
// tcp://, ssl://); the path is the topic prefix, default "mhp".
func ParseURL(s string) (Target, error) {
	if !strings.Contains(s, "://") {
		s = "mqtt://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("fleet: broker URL %q: %w", s, err)
	}
	broker, err := mqtt.BrokerURL(u.Scheme + "://" + u.Host)
	if err != nil {
		return Target{}, fmt.Errorf("fleet: %w", err)
	}
	t := Target{Broker: broker, Prefix: strings.Trim(u.Path, "/")}
	if t.Prefix == "" {
		t.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(t.Prefix, "+#") {
		return Target{}, fmt.Errorf("fleet: prefix %q holds a wildcard", t.Prefix)
	}
	if u.User != nil {
		t.Username = u.User.Username()
		t.Password, _ = u.User.Password()
	}
	return t, nil
}

// TopicID makes a device id safe as one topic level (/ + # become _).
func TopicID(id string) string {
	r := strings.NewReplacer("/", "_", "+", "_", "#", "_", "\x00", "_")
	return r.Replace(id)
}

// Config configures a Publisher.
type Config struct {
	// URL is the broker and prefix: mqtt://broker:1883/lab.
	URL string
	// ClientID defaults to "mhp-fleet-<device id>-<random>".
	ClientID string
	// Host names the publishing machine (the bench PC) in the card; empty
	// leaves it out.
	Host string
	// SignalInterval is how often signal values are read and changed ones
	// published; default 1s; negative publishes no signals.
	SignalInterval time.Duration
	// Signals limits the published signals; empty means all.
	Signals []string
	// QueueSize bounds the events kept while the broker is away; default
	// 1000. The oldest are dropped first (counted in Status.Dropped).
	QueueSize int
	// PublishTimeout bounds each publish; default 5s.
	PublishTimeout time.Duration
	Logger         *slog.Logger
	// TLS is how an mqtts:// broker is checked and how this publisher
	// shows itself (the CAs, a pin, a client certificate: the same options
	// as every other client). Zero: the system's roots.
	TLS auth.ClientTLS
	// Dial makes the broker client; default mqtt.DialPaho.
	Dial func(mqtt.DialOptions) (mqtt.Client, error)
}

// brokerTLS builds the TLS configuration of a broker connection; nil for
// the zero options (paho's default, the system's roots).
func brokerTLS(c auth.ClientTLS) (*tls.Config, error) {
	if c.IsZero() {
		return nil, nil
	}
	tc, err := c.Config()
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	return tc, nil
}

// Validate reports the first problem with the config.
func (c *Config) Validate() error {
	if _, err := ParseURL(c.URL); err != nil {
		return err
	}
	if c.QueueSize < 0 {
		return fmt.Errorf("fleet: queue size %d is negative", c.QueueSize)
	}
	return nil
}

// Status is the publisher's view of its broker link.
type Status struct {
	Connected bool `json:"connected"`
	// Since is when the link last went up or down.
	Since time.Time `json:"since"`
	// Outages counts lost connections (and a first connect that failed).
	Outages   int    `json:"outages"`
	LastError string `json:"last_error,omitempty"`
	Published uint64 `json:"published"`
	Queued    int    `json:"queued"`
	Dropped   uint64 `json:"dropped"`
}

// Publisher publishes one device to the fleet broker.
type Publisher struct {
	dev    mhp.Device
	cfg    Config
	target Target
	log    *slog.Logger
	base   string // <prefix>/<device-id>
	runID  string
	devID  string

	mu      sync.Mutex
	client  mqtt.Client
	queue   []item
	wake    chan struct{}
	seq     uint64
	status  Status
	state   mhp.DeviceState
	active  map[string]mhp.Job // running jobs
	lastSig map[string]string  // signal -> last published payload
}

type item struct {
	topic  string
	qos    byte
	retain bool
	body   []byte
}

// New checks cfg and prepares a publisher for dev; Run starts it.
func New(dev mhp.Device, cfg Config) (*Publisher, error) {
	if dev == nil {
		return nil, errors.New("fleet: no device")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t, _ := ParseURL(cfg.URL)
	if cfg.SignalInterval == 0 {
		cfg.SignalInterval = time.Second
	}
	if cfg.QueueSize == 0 {
		cfg.QueueSize = 1000
	}
	if cfg.PublishTimeout <= 0 {
		cfg.PublishTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Dial == nil {
		cfg.Dial = func(o mqtt.DialOptions) (mqtt.Client, error) { return mqtt.DialPaho(o) }
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Publisher{dev: dev, cfg: cfg, target: t, log: cfg.Logger, runID: hex.EncodeToString(b[:]),
		wake: make(chan struct{}, 1), active: map[string]mhp.Job{}, lastSig: map[string]string{}}, nil
}

// Publish runs a publisher for dev until ctx ends.
func Publish(ctx context.Context, dev mhp.Device, cfg Config) error {
	p, err := New(dev, cfg)
	if err != nil {
		return err
	}
	return p.Run(ctx)
}

// Status reports the broker link, for `mhp serve` to show.
func (p *Publisher) Status() Status {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.status
	s.Queued = len(p.queue)
	return s
}

// Topic returns the topic of a sub-path under the device: Topic("card").
func (p *Publisher) Topic(sub string) string { return p.base + "/" + sub }

// Run publishes until ctx ends, then marks the device offline (retained)
// and disconnects cleanly. It returns an error only if it cannot start
// (the device does not describe itself, or the client cannot be made); a
// broker that is away is waited for, never an error.
func (p *Publisher) Run(ctx context.Context) error {
	dctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	card, err := p.dev.Describe(dctx, mhp.DescribeRequest{Detail: mhp.DetailCard})
	cancel()
	if err != nil {
		return fmt.Errorf("fleet: describe the device: %w", err)
	}
	p.devID = card.ID
	p.base = p.target.Prefix + "/" + TopicID(card.ID)
	p.state = card.State
	if p.cfg.ClientID == "" {
		p.cfg.ClientID = "mhp-fleet-" + TopicID(card.ID) + "-" + p.runID
	}
	jctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	if jobs, err := p.dev.Jobs(jctx, mhp.JobsRequest{Active: true}); err == nil {
		for _, j := range jobs {
			p.active[j.ID] = j
		}
	}
	cancel()

	// Notifications are queued by a callback that never blocks: the device
	// never waits for the broker.
	stop := p.dev.Listen(p.onNotify)
	defer stop()

	tc, err := brokerTLS(p.cfg.TLS)
	if err != nil {
		return err
	}
	client, err := p.cfg.Dial(mqtt.DialOptions{Broker: p.target.Broker, ClientID: p.cfg.ClientID, TLS: tc,
		Username: p.target.Username, Password: p.target.Password, Logger: p.log,
		Will:      &mqtt.Will{Topic: p.Topic("status"), Payload: []byte("offline"), QoS: 1, Retain: true},
		OnConnect: func(ctx context.Context, c mqtt.Client) { p.announce(ctx, c, card) }})
	if err != nil {
		return fmt.Errorf("fleet: %w", err)
	}
	p.mu.Lock()
	p.client = client
	p.mu.Unlock()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.watchLink(ctx, client) }()
	go func() { defer wg.Done(); p.drain(ctx, client) }()
	if p.cfg.SignalInterval > 0 {
		wg.Add(1)
		go func() { defer wg.Done(); p.signals(ctx, client) }()
	}
	<-ctx.Done()
	wg.Wait()
	// Shutting down: say offline if the broker takes it promptly (the will
	// covers the rest).
	fctx, cancel := context.WithTimeout(context.Background(), min(p.cfg.PublishTimeout, time.Second))
	defer cancel()
	if client.State().Up {
		_ = client.Publish(fctx, p.Topic("status"), 1, true, []byte("offline"))
	}
	return client.Close()
}

// announce (re)publishes the retained documents after every connect: a
// restarted broker without persistence gets them back.
func (p *Publisher) announce(ctx context.Context, c mqtt.Client, card *mhp.Description) {
	p.mu.Lock()
	p.lastSig = map[string]string{} // a restarted broker may have lost the retained values
	p.mu.Unlock()
	body, _ := json.Marshal(map[string]any{"card": card, "host": p.cfg.Host, "publisher": p.runID, "ts": now()})
	pubs := []item{
		{topic: p.Topic("status"), qos: 1, retain: true, body: []byte("online")},
		{topic: p.Topic("card"), qos: 1, retain: true, body: body},
		{topic: p.Topic("state"), qos: 1, retain: true, body: p.stateDoc()},
	}
	for _, it := range pubs {
		if err := c.Publish(ctx, it.topic, it.qos, it.retain, it.body); err != nil {
			p.noteErr(err)
			return
		}
		p.mu.Lock()
		p.status.Published++
		p.mu.Unlock()
	}
}

func now() float64 { return mhp.UnixSeconds(time.Now()) }

// stateDoc is the retained state: device state plus active jobs.
func (p *Publisher) stateDoc() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stateDocLocked()
}

func (p *Publisher) stateDocLocked() []byte {
	jobs := make([]map[string]any, 0, len(p.active))
	for _, j := range p.active {
		jobs = append(jobs, map[string]any{"id": j.ID, "action": j.Action, "state": j.State, "progress": j.Progress})
	}
	p.seq++
	b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%d", p.runID, p.seq), "seq": p.seq,
		"device": p.devID, "state": p.state, "jobs": jobs, "ts": now()})
	return b
}

// onNotify turns a device notification into queued messages. It never blocks.
func (p *Publisher) onNotify(n mhp.Notification) {
	if n.Method == mhp.NotifySignalsUpdate {
		return // signals go out at the configured rate, read by signals()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	stateChanged := false
	if s, ok := n.Params["state"].(mhp.DeviceState); ok && s != p.state {
		p.state, stateChanged = s, true
	} else if s, ok := n.Params["state"].(string); ok && mhp.DeviceState(s) != p.state {
		p.state, stateChanged = mhp.DeviceState(s), true
	}
	p.seq++
	ev := map[string]any{"id": fmt.Sprintf("%s-%d", p.runID, p.seq), "seq": p.seq, "device": p.devID,
		"method": n.Method, "params": n.Params, "ts": now()}
	body, err := json.Marshal(ev)
	if err != nil {
		p.log.Warn("fleet: notification not encodable", "method", n.Method, "err", err)
		return
	}
	kind := strings.TrimPrefix(n.Method, "notifications/")
	switch {
	case strings.HasPrefix(kind, "jobs/"):
		var job mhp.Job
		if j := n.Job(); j != nil {
			job = *j
		}
		if job.ID == "" {
			if id, ok := n.Params["id"].(string); ok {
				job.ID = id
			}
		}
		if job.ID != "" {
			before := len(p.active)
			if n.Method == mhp.NotifyJobsFinished || job.State.Terminal() {
				delete(p.active, job.ID)
			} else {
				prev := p.active[job.ID]
				if job.Action == "" {
					job.Action = prev.Action
				}
				if f, ok := n.Params["progress"].(float64); ok {
					job.Progress = f
				}
				p.active[job.ID] = job
			}
			stateChanged = stateChanged || len(p.active) != before
			p.enqueueLocked(item{topic: p.Topic("jobs/" + TopicID(job.ID)), qos: 1, body: body})
		} else {
			p.enqueueLocked(item{topic: p.Topic("events/" + strings.ReplaceAll(kind, "/", "_")), qos: 1, body: body})
		}
	case strings.HasPrefix(kind, "safety/"):
		p.enqueueLocked(item{topic: p.Topic("safety"), qos: 1, retain: true, body: body})
	default:
		p.enqueueLocked(item{topic: p.Topic("events/" + strings.ReplaceAll(kind, "/", "_")), qos: 1, body: body})
	}
	if stateChanged {
		p.enqueueLocked(item{topic: p.Topic("state"), qos: 1, retain: true, body: p.stateDocLocked()})
	}
}

func (p *Publisher) enqueueLocked(it item) {
	if len(p.queue) >= p.cfg.QueueSize {
		p.queue = p.queue[1:]
		p.status.Dropped++
	}
	p.queue = append(p.queue, it)
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *Publisher) noteErr(err error) {
	p.mu.Lock()
	p.status.LastError = err.Error()
	p.mu.Unlock()
}

// drain publishes queued events in order; while the broker is away it
// waits for the link, keeping the queue (bounded).
func (p *Publisher) drain(ctx context.Context, c mqtt.Client) {
	for {
		p.mu.Lock()
		var it item
		have := len(p.queue) > 0
		if have {
			it = p.queue[0]
		}
		p.mu.Unlock()
		if !have {
			select {
			case <-p.wake:
				continue
			case <-ctx.Done():
				return
			}
		}
		st := c.State()
		if !st.Up {
			select {
			case <-st.Changed:
				continue
			case <-ctx.Done():
				return
			}
		}
		pctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
		err := c.Publish(pctx, it.topic, it.qos, it.retain, it.body)
		cancel()
		if err != nil {
			// Not acknowledged: try again (the event id lets consumers drop a duplicate).
			p.noteErr(err)
			if ctx.Err() != nil {
				return
			}
			select {
			case <-c.State().Changed:
			case <-time.After(100 * time.Millisecond):
			case <-ctx.Done():
				return
			}
			continue
		}
		p.mu.Lock()
		if len(p.queue) > 0 && sameItem(p.queue[0], it) {
			p.queue = p.queue[1:]
		}
		p.status.Published++
		// The broker acknowledged: the link is up, whether or not watchLink
		// has woken to the change yet (under load it had not, and Status
		// said disconnected after the queue had gone out).
		up := p.recordLinkLocked(true)
		p.mu.Unlock()
		p.logLink(up, true)
	}
}

// recordLinkLocked records the broker link as up or down and reports
// whether that changed it. mu is held.
func (p *Publisher) recordLinkLocked(up bool) bool {
	if p.status.Connected == up {
		return false
	}
	p.status.Connected = up
	p.status.Since = time.Now()
	if !up {
		p.status.Outages++
	}
	return true
}

// logLink logs a change of the link that recordLinkLocked reported.
func (p *Publisher) logLink(changed, up bool) {
	switch {
	case !changed:
	case up:
		p.log.Info("fleet: broker connected", "broker", p.target.Broker, "device", p.devID)
	default:
		p.log.Warn("fleet: broker unreachable; device functions are unaffected, events are queued",
			"broker", p.target.Broker, "device", p.devID)
	}
}

func sameItem(a, b item) bool { return a.topic == b.topic && string(a.body) == string(b.body) }

// watchLink logs and records every change of the broker link.
func (p *Publisher) watchLink(ctx context.Context, c mqtt.Client) {
	first := time.NewTimer(p.cfg.PublishTimeout)
	defer first.Stop()
	for {
		p.mu.Lock()
		st := c.State() // read under mu: a drain's "up" cannot be overwritten by an older "down"
		changed := p.recordLinkLocked(st.Up)
		p.mu.Unlock()
		p.logLink(changed, st.Up)
		select {
		case <-st.Changed:
		case <-first.C:
			// The first connection has not come: that is an outage too.
			p.mu.Lock()
			if !p.status.Connected && p.status.Outages == 0 {
				p.status.Outages = 1
				p.status.Since = time.Now()
				p.status.LastError = "no connection to " + p.target.Broker
				p.log.Warn("fleet: broker unreachable; device functions are unaffected, events are queued",
					"broker", p.target.Broker, "device", p.devID)
			}
			p.mu.Unlock()
		case <-ctx.Done():
			return
		}
	}
}

// signals reads the device's signals every interval and publishes changed
// ones (retained, QoS 0: the latest value matters, not every value).
func (p *Publisher) signals(ctx context.Context, c mqtt.Client) {
	t := time.NewTicker(p.cfg.SignalInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		if !c.State().Up {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
		r, err := p.dev.Read(rctx, p.cfg.Signals)
		cancel()
		if err != nil {
			p.noteErr(fmt.Errorf("read signals: %w", err))
			continue
		}
		for name, v := range r.Values {
			doc := map[string]any{"value": v, "ts": r.TS}
			if why, ok := r.Unavailable[name]; ok {
				doc = map[string]any{"value": nil, "unavailable": why, "ts": r.TS}
			}
			if t, ok := r.Times[name]; ok {
				doc["source_ts"] = t
			}
			key, _ := json.Marshal(doc["value"])
			sig := string(key) + "|" + fmt.Sprint(doc["unavailable"])
			p.mu.Lock()
			same := p.lastSig[name] == sig
			p.mu.Unlock()
			if same {
				continue
			}
			body, _ := json.Marshal(doc)
			pctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
			err := c.Publish(pctx, p.Topic("signals/"+TopicID(name)), 0, true, body)
			cancel()
			p.mu.Lock()
			if err == nil {
				p.lastSig[name] = sig
				p.status.Published++
			} else {
				p.status.LastError = err.Error()
			}
			p.mu.Unlock()
		}
	}
}
