package serialtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance"
)

// Fixture speaks a small line protocol over a [conformance.Instrument], so
// that the conformance suite can run through the serial adapter:
//
//	GET <signal>              -> VAL <signal> <value> | UNAVAIL <signal>
//	SET <setting> <value>     -> OK <setting> | ERR <setting> <why> | (nothing: dropped)
//	RUN <action> <job> k=v..  -> OK <job> | ERR <job> refused | (nothing: dropped)
//	STATUS <job>              -> JOB <job> running|done|failed|cancelled <progress> <result JSON>
//	CANCEL <job>              -> OK <job>
//	STOP                      -> STOPPED | ERR stop
//
// A boolean value reads b:1 or b:0, a string s:<text>, so that only a
// real boolean reads as one; a boolean written is 1 or 0. Serve it with Options{Concurrent: true}: a held write
// must not stop the line.
type Fixture struct {
	In *conformance.Instrument

	mu   sync.Mutex
	work map[string]*conformance.Work
	ctx  context.Context
	stop context.CancelFunc
}

// NewFixture returns the protocol over in.
func NewFixture(in *conformance.Instrument) *Fixture {
	ctx, cancel := context.WithCancel(context.Background())
	return &Fixture{In: in, work: map[string]*conformance.Work{}, ctx: ctx, stop: cancel}
}

// Close ends held writes.
func (f *Fixture) Close() { f.stop() }

func fixtureType(name string) string {
	d := conformance.WithExtras(conformance.FixtureDescriptor())
	for _, s := range d.Settings {
		if s.Name == name {
			return s.Type
		}
	}
	return mhp.TypeNumber
}

func wire(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "b:1"
		}
		return "b:0"
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return "s:" + x
	}
	return fmt.Sprint(v)
}

// Handle implements Protocol.
func (f *Fixture) Handle(cmd string) ([]byte, bool) {
	reply := func(format string, args ...any) ([]byte, bool) {
		return []byte(fmt.Sprintf(format, args...) + "\r\n"), true
	}
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return nil, false
	}
	switch {
	case fields[0] == "GET" && len(fields) == 2:
		v, err := f.In.ReadSignal(fields[1])
		if err != nil {
			return reply("UNAVAIL %s", fields[1])
		}
		return reply("VAL %s %s", fields[1], wire(v))
	case fields[0] == "SET" && len(fields) >= 3:
		name, text := fields[1], strings.Join(fields[2:], " ")
		var v any = text
		switch fixtureType(name) {
		case mhp.TypeNumber:
			n, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return reply("ERR %s bad_value", name)
			}
			v = n
		case mhp.TypeBoolean:
			v = text == "1"
		}
		err := f.In.WriteSetting(f.ctx, name, v)
		switch {
		case err == nil:
			return reply("OK %s", name)
		case errors.Is(err, conformance.ErrDropped):
			return nil, false
		case errors.Is(err, conformance.ErrRefused), errors.Is(err, conformance.ErrReported):
			return reply("ERR %s refused", name)
		}
		return nil, false
	case fields[0] == "RUN" && len(fields) >= 3:
		name, job := fields[1], fields[2]
		params := map[string]any{}
		for _, kv := range fields[3:] {
			k, val, _ := strings.Cut(kv, "=")
			var x any
			if json.Unmarshal([]byte(val), &x) != nil {
				x = val
			}
			params[k] = x
		}
		w, err := f.In.Start(name, params)
		if err != nil {
			return reply("ERR %s refused", job)
		}
		if st, _, _ := w.State(); st == conformance.WorkDropped {
			return nil, false
		}
		f.mu.Lock()
		f.work[job] = w
		if len(f.work) > 1024 {
			for k, old := range f.work {
				if st, _, _ := old.State(); st != conformance.WorkRunning {
					delete(f.work, k)
				}
			}
		}
		f.mu.Unlock()
		return reply("OK %s", job)
	case fields[0] == "STATUS" && len(fields) == 2:
		f.mu.Lock()
		w := f.work[fields[1]]
		f.mu.Unlock()
		if w == nil {
			return reply("ERR %s unknown", fields[1])
		}
		st, result, _ := w.State()
		if st == conformance.WorkDropped {
			return nil, false
		}
		word := map[conformance.WorkState]string{conformance.WorkRunning: "running", conformance.WorkSucceeded: "done",
			conformance.WorkFailed: "failed", conformance.WorkCancelled: "cancelled"}[st]
		res, _ := json.Marshal(result)
		return reply("JOB %s %s %s %s", fields[1], word, wire(w.Progress()), res)
	case fields[0] == "CANCEL" && len(fields) == 2:
		f.mu.Lock()
		w := f.work[fields[1]]
		f.mu.Unlock()
		if w != nil {
			w.Cancel()
		}
		return reply("OK %s", fields[1])
	case cmd == "STOP":
		if err := f.In.Stop(); err != nil {
			return reply("ERR stop")
		}
		return reply("STOPPED")
	}
	return nil, false
}
