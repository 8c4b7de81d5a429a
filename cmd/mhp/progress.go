package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/openmhp/mhp-go"
)

// progressSteps is the bar's resolution (a job's progress is 0..1).
const progressSteps = 1000

// progress draws a job's progress: on a terminal a progress bar
// (schollz/progressbar) with the job's message and an ETA (the device's
// eta_s when it gives one, else the bar's own estimate); otherwise one plain
// line per 10 % step; nothing with --json.
type progress struct {
	w      io.Writer
	prefix string
	tty    bool
	silent bool

	mu     sync.Mutex
	last   int // last decile printed (plain mode)
	bar    *progressbar.ProgressBar
	closed bool
}

func newProgress(w io.Writer, prefix string, tty, silent bool) *progress {
	return &progress{w: w, prefix: prefix, tty: tty, silent: silent, last: -1}
}

func (p *progress) update(j *mhp.Job) {
	if p.silent {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	frac := min(max(j.Progress, 0), 1)
	detail := progressDetail(j.Extra)
	if p.tty {
		if p.bar == nil {
			p.bar = progressbar.NewOptions(progressSteps,
				progressbar.OptionSetWriter(p.w),
				progressbar.OptionSetWidth(30),
				progressbar.OptionSetPredictTime(true),
				progressbar.OptionShowDescriptionAtLineEnd(),
				progressbar.OptionThrottle(100*time.Millisecond),
				progressbar.OptionClearOnFinish(),
				progressbar.OptionSetRenderBlankState(true))
		}
		desc := p.prefix + detail
		if eta, ok := j.Extra["eta_s"].(float64); ok && eta >= 0 {
			desc += fmt.Sprintf(" (device ETA %s)", (time.Duration(eta) * time.Second).String())
		}
		p.bar.Describe(desc)
		_ = p.bar.Set(int(frac * progressSteps))
		return
	}
	decile := int(frac * 10)
	if decile <= p.last {
		return
	}
	p.last = decile
	fmt.Fprintf(p.w, "%sprogress %3.0f%% %s\n", p.prefix, frac*100, detail)
}

func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.bar != nil {
		_ = p.bar.Clear()
		_ = p.bar.Exit()
	}
}
