package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/openmhp/mhp-go/cmd/internal/linked"
	"github.com/openmhp/mhp-go/host"
	"github.com/openmhp/mhp-go/onboard"
)

// term asks the person at the terminal: one reader for the whole
// conversation (so no typed-ahead line is lost between questions).
type term struct {
	r *bufio.Reader
	w io.Writer
}

func (a *app) term() *term { return &term{r: bufio.NewReader(a.stdin), w: a.stderr} }

// line prints a prompt and reads one line; io.EOF at the end of input.
func (t *term) line(prompt string) (string, error) {
	fmt.Fprint(t.w, prompt)
	s, err := t.r.ReadString('\n')
	if err != nil && (s == "" || !errors.Is(err, io.EOF)) {
		return "", err
	}
	return strings.TrimSpace(s), nil
}

// yes asks a yes/no question; anything but y or yes (an empty line, end of
// input) is no.
func (t *term) yes(question string) bool {
	s, err := t.line(question + " [y/N] ")
	if err != nil {
		return false
	}
	s = strings.ToLower(s)
	return s == "y" || s == "yes"
}

// onboardCmd runs `mhp onboard [ID]`: the onboarding interview in the
// terminal, the same questions mhp_lab op=onboard asks through an agent.
func (a *app) onboardCmd(ctx context.Context, args []string) int {
	p, err := parseArgs(args, flagSpec{"home": true})
	if err != nil || len(p.args) > 1 || p.has("help") {
		return a.usageError("onboard: usage: mhp onboard [ID] [--home DIR]   (ID resumes an interview)")
	}
	f, err := a.openFleet(p)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp onboard: %v\n", err)
		return exitRefused
	}
	defer f.Close()
	iv, err := linked.Interview(f)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp onboard: %v\n", err)
		return exitRefused
	}
	t := a.term()
	id := ""
	if len(p.args) == 1 {
		id = p.args[0]
	}
	answers := map[string]json.RawMessage{}
	confirmed := false
	for {
		rep, err := iv.Step(ctx, id, answers, confirmed)
		var nc *onboard.NeedsConfirmation
		if errors.As(err, &nc) {
			if !t.yes(nc.Error() + ". Change it?") {
				fmt.Fprintln(a.stderr, "mhp onboard: not changed")
				return exitRefused
			}
			confirmed = true
			continue
		}
		if err != nil {
			return a.fail(err, false)
		}
		id, answers, confirmed = rep.ID, map[string]json.RawMessage{}, false
		if len(rep.Unfinished) > 0 {
			fmt.Fprintf(a.stderr, "(unfinished interviews, resumed with mhp onboard ID: %s)\n", strings.Join(rep.Unfinished, ", "))
		}
		for k, why := range rep.Refused {
			fmt.Fprintf(a.stderr, "not taken, %s: %s\n", k, strings.Join(why, "; "))
		}
		if rep.Note != "" {
			fmt.Fprintln(a.stderr, rep.Note)
		}
		if rep.Result != nil {
			return a.onboarded(ctx, t, f, rep.Result)
		}
		if len(rep.Ask) == 0 {
			return exitOK // an instrument that speaks MHP: the note says how to add it
		}
		fmt.Fprintf(a.stderr, "\n[%s]\n", rep.Progress)
		for _, q := range rep.Ask {
			shape, _ := json.Marshal(q.Shape)
			fmt.Fprintf(a.stderr, "\n%s\n  answer as JSON, e.g. %s\n", q.Ask, shape)
			if !q.Required {
				fmt.Fprintln(a.stderr, "  (optional: press Enter to skip)")
			}
			s, err := t.line("> ")
			if err != nil {
				fmt.Fprintf(a.stderr, "\nmhp onboard: the answers so far are kept; resume with: mhp onboard %s\n", id)
				return exitRefused
			}
			switch raw := textAnswer(q.Key, s); {
			case s == "" && !q.Required:
				answers["skip"] = json.RawMessage("true")
			case raw != nil:
				answers[q.Key] = raw
			}
		}
	}
}

// textAnswer reads a typed answer: JSON as it is, or plain words for the
// questions whose answer is mostly one text.
func textAnswer(key, s string) json.RawMessage {
	if s == "" {
		return nil
	}
	if json.Valid([]byte(s)) && (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) {
		return json.RawMessage(s)
	}
	var v any
	switch key {
	case "name":
		v = map[string]string{"nickname": s}
	case "kind":
		v = map[string]string{"kind": s}
	case "purpose":
		v = map[string]string{"description": s}
	case "procedure":
		v = map[string][]string{"steps": splitSteps(s)}
	case "stop":
		v = map[string]string{"estop": s}
	default:
		return json.RawMessage(s) // not JSON: refused with the shape's reason
	}
	b, _ := json.Marshal(v)
	return b
}

func splitSteps(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ";") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// onboarded shows what was written and the safety card, and adds the
// package to the fleet when the person says yes.
func (a *app) onboarded(ctx context.Context, t *term, f *host.Fleet, res *onboard.Result) int {
	fmt.Fprintf(a.stdout, "package %s:\n", res.Package)
	for name, n := range res.Files {
		fmt.Fprintf(a.stdout, "  %s (%d bytes)\n", name, n)
	}
	if !res.Valid {
		for _, pr := range res.Problems {
			fmt.Fprintln(a.stdout, "  problem: "+pr.String())
		}
		fmt.Fprintln(a.stdout, res.Next)
		return exitRefused
	}
	fmt.Fprintln(a.stdout, "safety card (dry runs; nothing reached the instrument):")
	for _, pr := range res.Card {
		mark := "ok  "
		if !pr.Held {
			mark = "FAIL"
		}
		fmt.Fprintf(a.stdout, "  %s %s: expect %s, got %s\n", mark, pr.Probe, pr.Expect, pr.Got)
	}
	e, err := f.Prepare(ctx, res.ID, host.AddOptions{})
	if err != nil {
		return a.fail(err, false)
	}
	if !t.yes(e.Reach() + " Add it to the fleet?") {
		fmt.Fprintf(a.stdout, "not added; later: mhp lab add %s\n", res.ID)
		return exitOK
	}
	if _, err := f.Commit(e); err != nil {
		return a.fail(err, false)
	}
	fmt.Fprintf(a.stdout, "added %s\n", e.ID)
	return exitOK
}
