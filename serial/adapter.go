package serial

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.bug.st/serial"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
)

// Options are what a program, not the config file, gives New: the shared
// [adapters.Options] and the port seam.
type Options struct {
	adapters.Options
	// Open opens the port; default [OpenPort] (go.bug.st/serial). A test
	// passes a pty opener or a fake Port.
	Open func(ctx context.Context, path string, mode *serial.Mode) (Port, error)
}

// New builds an unstarted driver for the instrument cfg describes. Start
// opens the port and checks the identity; with the port absent the driver
// serves with the link down and reconnects with backoff. Close stops the
// watchdog and the reconnects and closes the port.
func New(ctx context.Context, cfg Config, opt Options) (*binding.Driver, error) {
	bc, a, err := build(cfg, opt)
	if err != nil {
		return nil, err
	}
	d, err := opt.Options.NewDriver(bc)
	if err != nil {
		return nil, err
	}
	a.link.Attach(d.SetLink)
	return d, nil
}

type signalPlan struct {
	cfg         SignalConfig
	reply, none *regexp.Regexp
}

type stepPlan struct {
	send       string
	ack, error *regexp.Regexp
}

type adapter struct {
	cfg     Config
	line    *line
	link    *adapters.Link
	log     *slog.Logger
	signals map[string]*signalPlan
	ident   *regexp.Regexp
	wdAck   *regexp.Regexp

	mu     sync.Mutex
	closed bool
	stopWD chan struct{}
	wg     sync.WaitGroup
}

func build(cfg Config, opt Options) (binding.Config, *adapter, error) {
	if err := cfg.Validate(); err != nil {
		return binding.Config{}, nil, fmt.Errorf("serial: %w", err)
	}
	cfg = cfg.Defaults()
	mode, err := cfg.Mode()
	if err != nil {
		return binding.Config{}, nil, err
	}
	open := opt.Open
	if open == nil {
		open = OpenPort
	}
	a := &adapter{cfg: cfg, line: newLine(cfg, mode, open), log: opt.Log(), signals: map[string]*signalPlan{},
		stopWD: make(chan struct{})}
	if cfg.Identify != nil {
		a.ident = regexp.MustCompile(cfg.Identify.Reply)
	}
	if cfg.Watchdog != nil && cfg.Watchdog.Ack != "" {
		a.wdAck = regexp.MustCompile(cfg.Watchdog.Ack)
	}
	bc := binding.Config{Clock: opt.Clock, Logger: opt.Logger}
	cfg.Apply(&bc)
	if bc.Notes == "" {
		bc.Notes = fmt.Sprintf("serial instrument on %s (%d baud, %d%s%v)", cfg.Port, cfg.Baud, cfg.DataBits,
			strings.ToUpper(cfg.Parity[:1]), cfg.StopBits)
	}
	for _, s := range cfg.Signals {
		sp := &signalPlan{cfg: s, reply: regexp.MustCompile(s.Reply)}
		if s.Unavailable != "" {
			sp.none = regexp.MustCompile(s.Unavailable)
		}
		a.signals[s.Name] = sp
		bc.Signals = append(bc.Signals, binding.Signal{Spec: s.Signal, Read: func(ctx context.Context) (binding.Sample, error) {
			v, err := a.read(ctx, sp)
			if err != nil {
				return binding.Sample{}, binding.Unavailable("%s: %v", sp.cfg.Query, err)
			}
			return binding.Sample{Value: v}, nil
		}})
	}
	for _, s := range cfg.Settings {
		s := s
		bc.Settings = append(bc.Settings, binding.Setting{Spec: s.Setting, Write: func(ctx context.Context, v any) (binding.WriteStatus, error) {
			return a.write(ctx, s, v)
		}})
	}
	for _, ac := range cfg.Actions {
		bc.Actions = append(bc.Actions, a.action(ac))
	}
	if len(cfg.EStop) > 0 {
		bc.Safety.EStop = true
		bc.EStop = a.estop
	}
	if cfg.Watchdog != nil && bc.Safety.WatchdogS == 0 {
		bc.Safety.Notes = strings.TrimSpace(bc.Safety.Notes + fmt.Sprintf(" The instrument's own watchdog is armed with %q every %gs.",
			cfg.Watchdog.Command, cfg.Watchdog.Seconds/2))
	}
	a.line.onErr = func(err error) { a.link.Down(err) }
	a.link = adapters.NewLink(adapters.LinkOptions{Name: "serial " + cfg.Port,
		Config:       adapters.LinkConfig{RetryMin: seconds(cfg.Timeouts.ReconnectMinS), RetryMax: seconds(cfg.Timeouts.ReconnectMaxS)},
		Probe:        a.probe,
		ProbeTimeout: 4*seconds(cfg.Timeouts.ReplyS) + seconds(cfg.Timeouts.WriteS) + time.Second,
		Clock:        opt.LinkClock, Logger: opt.Log()})
	bc.Setup = func(ctx context.Context) error {
		if err := a.probe(ctx); err != nil {
			a.log.Warn("serial: instrument not reachable at start; reconnecting", "port", cfg.Port, "err", err)
			a.link.Down(err)
		} else {
			a.link.Up()
		}
		a.link.Start()
		a.wg.Add(1)
		go a.presence()
		if cfg.Watchdog != nil {
			a.wg.Add(1)
			go a.watchdog()
		}
		return nil
	}
	bc.Close = a.close
	return bc, a, nil
}

// probe opens the port, flushes it and checks the identity and arms the
// watchdog: every connect and reconnect.
func (a *adapter) probe(ctx context.Context) error {
	if err := a.line.acquire(ctx); err != nil {
		return err
	}
	defer a.line.release()
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return errors.New("adapter closed")
	}
	a.line.closePort()
	if _, err := a.line.connect(ctx); err != nil {
		return err
	}
	_, gen := a.line.current()
	fail := func(err error) error {
		a.line.mu.Lock()
		if a.line.gen == gen {
			p := a.line.port
			a.line.port = nil
			a.line.mu.Unlock()
			if p != nil {
				_ = p.Close()
			}
		} else {
			a.line.mu.Unlock()
		}
		return err
	}
	if id := a.cfg.Identify; id != nil {
		var reply string
		var err error
		for i := 0; i < max(1, id.Attempts); i++ {
			if reply, err = a.line.exchange(ctx, id.Command, anyOf(a.ident), seconds(a.cfg.Timeouts.ReplyS)); err == nil {
				break
			}
		}
		if err != nil {
			return fail(fmt.Errorf("identify: %s on %s: %v", id.Command, a.cfg.Port, err))
		}
		a.log.Info("serial: instrument identified", "port", a.cfg.Port, "reply", reply)
	}
	if err := a.armWatchdog(ctx); err != nil {
		return fail(err)
	}
	return nil
}

func (a *adapter) armWatchdog(ctx context.Context) error {
	w := a.cfg.Watchdog
	if w == nil {
		return nil
	}
	cmd := expand(w.Command, map[string]string{"seconds": strconv.FormatFloat(w.Seconds, 'f', -1, 64)})
	var m matcher
	if a.wdAck != nil {
		m = anyOf(a.wdAck)
	}
	if _, err := a.line.exchange(ctx, cmd, m, seconds(a.cfg.Timeouts.ReplyS)); err != nil {
		return fmt.Errorf("watchdog %s: %v", cmd, err)
	}
	return nil
}

// watchdog resends the watchdog command every Seconds/2 while the link is up.
func (a *adapter) watchdog() {
	defer a.wg.Done()
	every := seconds(a.cfg.Watchdog.Seconds / 2)
	for {
		t := time.NewTimer(every)
		select {
		case <-a.stopWD:
			t.Stop()
			return
		case <-t.C:
		}
		if !a.link.Connected() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := a.line.acquire(ctx); err == nil {
			if err := a.armWatchdog(ctx); err != nil {
				a.log.Warn("serial: watchdog not resent", "port", a.cfg.Port, "err", err)
			}
			a.line.release()
		}
		cancel()
	}
}

// presence checks the port's node between commands (see line.present).
func (a *adapter) presence() {
	defer a.wg.Done()
	every := seconds(a.cfg.Timeouts.PresenceS)
	for {
		t := time.NewTimer(every)
		select {
		case <-a.stopWD:
			t.Stop()
			return
		case <-t.C:
		}
		a.line.present()
	}
}

func (a *adapter) close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	close(a.stopWD)
	a.mu.Unlock()
	a.link.Close()
	a.wg.Wait()
	a.line.closePort()
	return nil
}

// ---- signals ----

// read takes the line for one query. A query yields to an estop that
// wants the line: it waits (bounded by ctx and yieldMax) until the stop is
// on the wire, then asks. A read actuates nothing, and a reset's recovery
// check must see the instrument after the stop, not fail because of it.
func (a *adapter) read(ctx context.Context, sp *signalPlan) (any, error) {
	for attempt := 1; ; attempt++ {
		if err := a.line.waitNoEStop(ctx, yieldMax); err != nil {
			return nil, err
		}
		if err := a.line.acquire(ctx); err != nil {
			return nil, err
		}
		v, err := a.readLocked(ctx, sp)
		a.line.release()
		// An estop that came for the line between the wait and the
		// query made it give way unsent (EStopActive): ask again after it.
		if me, ok := mhp.AsError(err); ok && me.Code == mhp.CodeEStopActive && attempt < 3 {
			continue
		}
		return v, err
	}
}

// yieldMax bounds how long a query waits for an estop to give the line back.
const yieldMax = 10 * time.Second

func (a *adapter) readLocked(ctx context.Context, sp *signalPlan) (any, error) {
	reply, err := a.line.exchange(ctx, sp.cfg.Query, anyOf(sp.reply, sp.none), seconds(a.cfg.Timeouts.ReplyS))
	if err != nil {
		return nil, err
	}
	if sp.none != nil && sp.none.MatchString(reply) {
		return nil, fmt.Errorf("the instrument has no value: %s", reply)
	}
	return parseValue(sp, sp.reply.FindStringSubmatch(reply)[sp.reply.SubexpIndex("value")])
}

var (
	trueTokens  = []string{"1", "true", "on", "yes"}
	falseTokens = []string{"0", "false", "off", "no"}
)

func parseValue(sp *signalPlan, text string) (any, error) {
	text = strings.TrimSpace(text)
	if sp.cfg.Values != nil {
		v, ok := sp.cfg.Values[text]
		if !ok {
			return nil, fmt.Errorf("reply value %q is not one of the mapped values", text)
		}
		return v, nil
	}
	switch sp.cfg.Type {
	case mhp.TypeNumber:
		f, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("reply value %q is not a number", text)
		}
		return f, nil
	case mhp.TypeInteger:
		n, err := strconv.ParseInt(text, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("reply value %q is not an integer", text)
		}
		return n, nil
	case mhp.TypeBoolean:
		l := strings.ToLower(text)
		for _, t := range trueTokens {
			if l == t {
				return true, nil
			}
		}
		for _, f := range falseTokens {
			if l == f {
				return false, nil
			}
		}
		return nil, fmt.Errorf("reply value %q is not a boolean token", text)
	}
	return text, nil
}

// ---- settings ----

func (a *adapter) write(ctx context.Context, s SettingConfig, v any) (binding.WriteStatus, error) {
	text, err := formatValue(v, s.Decimals, s.True, s.False)
	if err != nil {
		return binding.Applied, mhp.Errorf(mhp.CodeInvalidValue, "%s: %v", s.Name, err).With("field", s.Name)
	}
	cmd := expand(s.Command, map[string]string{"value": text})
	if err := a.line.acquire(ctx); err != nil {
		return binding.Applied, mhp.Errorf(mhp.CodeDeviceBusy, "settings/write %s: %q not sent: the serial line stayed busy: %v", s.Name, cmd, err)
	}
	defer a.line.release()
	if s.Below != "" {
		limit, err := a.readLocked(ctx, a.signals[s.Below])
		lim, ok := toFloat(limit)
		val, vok := toFloat(v)
		if err != nil || !ok || !vok {
			return binding.Applied, mhp.Errorf(mhp.CodeLimitViolation, "settings/write %s: %v not sent: its bound %s is unreadable (%v)",
				s.Name, v, s.Below, err).With("field", s.Name)
		}
		if val >= lim {
			return binding.Applied, mhp.Errorf(mhp.CodeLimitViolation, "settings/write %s: %v not sent: not below %s (%v)",
				s.Name, v, s.Below, lim).With("field", s.Name).With("max", lim)
		}
	}
	st := compileStep(Step{Send: cmd, Ack: s.Ack, Error: s.Error})
	reply, err := a.step(ctx, st, "settings/write "+s.Name)
	if err != nil {
		return binding.Sent, err
	}
	if s.Readback != "" {
		got, err := a.readLocked(ctx, a.signals[s.Readback])
		if err != nil {
			return binding.Sent, fmt.Errorf("settings/write %s: %q sent, read-back %s failed: %v: outcome unknown", s.Name, cmd, s.Readback, err)
		}
		if !sameValue(got, v, s.Decimals) {
			return binding.Sent, fmt.Errorf("settings/write %s: %q sent, but %s reads %v: outcome unknown", s.Name, cmd, s.Readback, got)
		}
		return binding.Applied, nil
	}
	if st.ack != nil && reply != "" {
		return binding.Applied, nil
	}
	return binding.Sent, nil
}

func sameValue(got, want any, decimals *int) bool {
	g, gok := toFloat(got)
	w, wok := toFloat(want)
	if gok && wok {
		tol := 1e-9 * math.Max(1, math.Abs(w))
		if decimals != nil {
			tol = math.Max(tol, 0.5*math.Pow(10, -float64(*decimals)))
		}
		return math.Abs(g-w) <= tol
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

func toFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

func compileStep(s Step) stepPlan {
	p := stepPlan{send: s.Send}
	if s.Ack != "" {
		p.ack = regexp.MustCompile(s.Ack)
	}
	if s.Error != "" {
		p.error = regexp.MustCompile(s.Error)
	}
	return p
}

// step runs one command (the line is held) and judges its reply: nil
// (accepted; reply is the ack when one is expected), an *mhp.Error when
// nothing took effect (not sent, or the instrument's error reply), or an
// error of unknown outcome.
func (a *adapter) step(ctx context.Context, st stepPlan, what string) (string, error) {
	var m matcher
	if st.ack != nil || st.error != nil {
		m = anyOf(st.ack, st.error)
	}
	reply, err := a.line.exchange(ctx, st.send, m, seconds(a.cfg.Timeouts.ReplyS))
	if err != nil {
		if me, ok := mhp.AsError(err); ok {
			return "", me.With("command", st.send)
		}
		if errors.Is(err, errNoReply) && st.ack == nil {
			return "", nil // only an error reply was feared, and none came
		}
		return "", fmt.Errorf("%s: %q sent, %w: outcome unknown", what, st.send, err)
	}
	if m == nil {
		return "", nil
	}
	if st.error != nil && st.error.MatchString(reply) {
		return "", mhp.Errorf(mhp.CodeServerError, "%s: the instrument refused %q: %s", what, st.send, reply).
			With("reason", "device_refused").With("reply", reply).With("command", st.send)
	}
	return reply, nil
}

// formatValue renders a value for a command: numbers without an exponent,
// booleans as their tokens, text and structures refused when they carry
// control characters.
func formatValue(v any, decimals *int, t, f string) (string, error) {
	var s string
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return "", fmt.Errorf("%v is not a finite number", x)
		}
		prec := -1
		if decimals != nil {
			prec = *decimals
		}
		s = strconv.FormatFloat(x, 'f', prec, 64)
	case int64:
		s = strconv.FormatInt(x, 10)
	case int:
		s = strconv.Itoa(x)
	case bool:
		s = map[bool]string{true: orDefault(t, "1"), false: orDefault(f, "0")}[x]
	case string:
		s = x
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return "", err
		}
		s = string(b)
	}
	if hasControl(s) {
		return "", fmt.Errorf("%q has control characters, which the line would read as the end of a command", s)
	}
	return s, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

// expand replaces {name} with vals[name].
func expand(tmpl string, vals map[string]string) string {
	return placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		if v, ok := vals[m[1:len(m)-1]]; ok {
			return v
		}
		return m
	})
}
