package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// stepClock records when a short command's backend call started and ended
// (set by a wrapped backend handler), in the process that also runs the
// client, so every step is on one clock.
type stepClock struct {
	mu         sync.Mutex
	start, end time.Time
}

// wrap returns h recording its call's start and end.
func (c *stepClock) wrap(h func(context.Context, map[string]any) (map[string]any, error)) func(context.Context, map[string]any) (map[string]any, error) {
	return func(ctx context.Context, p map[string]any) (map[string]any, error) {
		t := time.Now()
		r, err := h(ctx, p)
		e := time.Now()
		c.mu.Lock()
		c.start, c.end = t, e
		c.mu.Unlock()
		return r, err
	}
}

func (c *stepClock) last() (time.Time, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start, c.end
}

// stepNames are the steps of a short command through MHP, in the order
// they happen, each timed from the moment the client sends actions/invoke.
var stepNames = []string{"invoke answered", "backend call starts", "backend call ends", "jobs/started at the client", "jobs/finished at the client", "jobs/status says done"}

// steps times n short commands through d (an MHP client over HTTP+SSE)
// step by step and returns the median of each step after the invoke was
// sent, in ms, as one line: where a short command's time goes.
func steps(ctx context.Context, d mhp.Device, clk *stepClock, n int, name string, params map[string]any) (string, error) {
	type seen struct {
		started, finished time.Time
	}
	var mu sync.Mutex
	cur := map[string]*seen{} // by job id: a late notification of an earlier job is not this one's
	arrived := make(chan struct{}, 1)
	stop := d.Listen(func(nt mhp.Notification) {
		now := time.Now()
		if nt.Method != mhp.NotifyJobsStarted && nt.Method != mhp.NotifyJobsFinished {
			return
		}
		id := jobID(nt)
		mu.Lock()
		x := cur[id]
		if x == nil {
			if len(cur) > 64 { // bounded: ids of jobs no longer waited for
				clear(cur)
			}
			x = &seen{}
			cur[id] = x
		}
		if nt.Method == mhp.NotifyJobsStarted {
			x.started = now
		} else {
			x.finished = now
		}
		mu.Unlock()
		if nt.Method == mhp.NotifyJobsFinished {
			select {
			case arrived <- struct{}{}:
			default:
			}
		}
	})
	defer stop()
	at := make([][]float64, len(stepNames))
	for i := 0; i < n; i++ {
		t0 := time.Now()
		r, err := d.Invoke(ctx, mhp.InvokeRequest{Name: name, Params: params})
		if err != nil {
			return "", err
		}
		t1 := time.Now()
		wait, cancel := context.WithTimeout(ctx, 10*time.Second)
		for {
			mu.Lock()
			done := cur[r.Job.ID] != nil && !cur[r.Job.ID].finished.IsZero()
			mu.Unlock()
			if done {
				break
			}
			select {
			case <-arrived:
			case <-wait.Done():
				cancel()
				return "", fmt.Errorf("job %s: no jobs/finished within 10s", r.Job.ID)
			}
		}
		cancel()
		j, err := d.Job(ctx, r.Job.ID)
		if err != nil {
			return "", err
		}
		if j.State != mhp.JobDone {
			return "", fmt.Errorf("job %s ended %s", j.ID, j.State)
		}
		t5 := time.Now()
		bs, be := clk.last()
		mu.Lock()
		s := *cur[r.Job.ID]
		delete(cur, r.Job.ID)
		mu.Unlock()
		ms := func(t time.Time) float64 { return float64(t.Sub(t0).Microseconds()) / 1e3 }
		for k, t := range []time.Time{t1, bs, be, s.started, s.finished, t5} {
			if !t.IsZero() && !t.Before(t0) { // a step that happened in this round
				at[k] = append(at[k], ms(t))
			}
		}
	}
	parts := make([]string, len(stepNames))
	for k, name := range stepNames {
		switch len(at[k]) {
		case 0:
			parts[k] = name + " never"
		case n:
			parts[k] = fmt.Sprintf("%s %.2f", name, median(at[k]))
		default:
			parts[k] = fmt.Sprintf("%s %.2f (in %d of %d)", name, median(at[k]), len(at[k]), n)
		}
	}
	return "steps (ms after the invoke is sent, median): " + strings.Join(parts, ", "), nil
}

// jobID is the id of the job a jobs/* notification is about.
func jobID(n mhp.Notification) string {
	switch j := n.Params["job"].(type) {
	case map[string]any:
		id, _ := j["id"].(string)
		return id
	case mhp.Job:
		return j.ID
	case *mhp.Job:
		if j != nil {
			return j.ID
		}
	}
	return ""
}
