package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/openmhp/mhp-go"
)

// describeText renders a card or summary for a person.
func describeText(d *mhp.Description) string {
	var b strings.Builder
	id := d.DeviceInfo
	fmt.Fprintf(&b, "%s", id.ID)
	if id.Class != "" {
		fmt.Fprintf(&b, " (%s)", id.Class)
	}
	if mm := strings.TrimSpace(id.Make + " " + id.Model); mm != "" {
		fmt.Fprintf(&b, " %s", mm)
	}
	fmt.Fprintf(&b, ": %s\n", d.State)
	if id.Location != "" {
		fmt.Fprintf(&b, "  location: %s\n", id.Location)
	}
	if len(id.Tags) > 0 {
		fmt.Fprintf(&b, "  tags: %s\n", strings.Join(id.Tags, ", "))
	}
	if id.Description != "" {
		fmt.Fprintf(&b, "  %s\n", oneLine(id.Description))
	}
	if d.Detail == mhp.DetailCard {
		list := func(what string, names []string) {
			if len(names) > 0 {
				fmt.Fprintf(&b, "  %s: %s\n", what, strings.Join(names, ", "))
			}
		}
		var sig, set, act []string
		for _, s := range d.Signals {
			sig = append(sig, s.Name)
		}
		for _, s := range d.Settings {
			set = append(set, s.Name)
		}
		for _, a := range d.Actions {
			act = append(act, a.Name)
		}
		list("signals", sig)
		list("settings", set)
		list("actions", act)
		return b.String()
	}
	if d.Notes != "" {
		fmt.Fprintf(&b, "\nnotes: %s\n", oneLine(d.Notes))
	}
	if len(d.Signals) > 0 {
		fmt.Fprintf(&b, "\nsignals:\n")
		for _, s := range d.Signals {
			fmt.Fprintf(&b, "  %-22s %-8s %s\n", s.Name, s.Type, s.Unit)
		}
	}
	if len(d.Settings) > 0 {
		fmt.Fprintf(&b, "\nsettings:\n")
		for _, s := range d.Settings {
			extra := []string{}
			if l := limitsString(s.Limits); l != "" {
				extra = append(extra, l)
			}
			if s.Approval != "" && s.Approval != mhp.ApprovalAuto {
				extra = append(extra, "approval "+string(s.Approval))
			}
			if len(s.Interlocks) > 0 {
				extra = append(extra, "interlocks "+strings.Join(s.Interlocks, ","))
			}
			if s.DuringJob {
				extra = append(extra, "during_job")
			}
			fmt.Fprintf(&b, "  %-22s %-8s %-6s %s\n", s.Name, s.Type, s.Unit, strings.Join(extra, "; "))
		}
	}
	if len(d.Actions) > 0 {
		fmt.Fprintf(&b, "\nactions:\n")
		for _, a := range d.Actions {
			extra := []string{a.Duration}
			if a.Approval != "" && a.Approval != mhp.ApprovalAuto {
				extra = append(extra, "approval "+string(a.Approval))
			}
			if len(a.Interlocks) > 0 {
				extra = append(extra, "interlocks "+strings.Join(a.Interlocks, ","))
			}
			for _, f := range []struct {
				on   bool
				name string
			}{{a.Concurrent, "concurrent"}, {a.Cancellable, "cancellable"}, {a.Pausable, "pausable"}} {
				if f.on {
					extra = append(extra, f.name)
				}
			}
			fmt.Fprintf(&b, "  %-22s (%s) %s\n", a.Name, strings.Join(actionParamNames(a), ", "), strings.Join(extra, "; "))
		}
	}
	s := d.Safety
	fmt.Fprintf(&b, "\nsafety: estop %v", s.EStop)
	if s.WatchdogS > 0 {
		fmt.Fprintf(&b, ", watchdog %gs", s.WatchdogS)
	}
	if len(s.Interlocks) > 0 {
		fmt.Fprintf(&b, ", interlocks %s", strings.Join(s.Interlocks, ","))
	}
	fmt.Fprintln(&b)
	if len(d.Resources) > 0 {
		fmt.Fprintf(&b, "resources: %s\n", strings.Join(d.Resources, ", "))
	}
	if d.Instructions != "" {
		fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(d.Instructions))
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// limitsString renders limits: "4..105", "one of a|b", "pattern ...".
func limitsString(l *mhp.Limits) string {
	if l.Empty() {
		return ""
	}
	var parts []string
	lo, hi := "", ""
	if l.Min != nil {
		lo = fmt.Sprint(*l.Min)
	} else if l.ExclusiveMin != nil {
		lo = fmt.Sprintf("(%v", *l.ExclusiveMin)
	}
	if l.Max != nil {
		hi = fmt.Sprint(*l.Max)
	} else if l.ExclusiveMax != nil {
		hi = fmt.Sprintf("%v)", *l.ExclusiveMax)
	}
	if lo != "" || hi != "" {
		parts = append(parts, lo+".."+hi)
	}
	if len(l.Enum) > 0 {
		var vs []string
		for _, v := range l.Enum {
			vs = append(vs, compact(v))
		}
		parts = append(parts, "one of "+strings.Join(vs, "|"))
	}
	if l.Pattern != "" {
		parts = append(parts, "pattern "+l.Pattern)
	}
	if l.MinLength != nil || l.MaxLength != nil {
		lo, hi := "", ""
		if l.MinLength != nil {
			lo = fmt.Sprint(*l.MinLength)
		}
		if l.MaxLength != nil {
			hi = fmt.Sprint(*l.MaxLength)
		}
		parts = append(parts, "length "+lo+".."+hi)
	}
	return strings.Join(parts, ", ")
}

// jobText renders a job.
func jobText(j *mhp.Job) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s %s: %s", j.ID, j.Action, j.State)
	if !j.State.Terminal() {
		fmt.Fprintf(&b, " %.0f%%", j.Progress*100)
		if j.Paused {
			b.WriteString(" (paused)")
		}
		if j.CancelRequested {
			b.WriteString(" (cancel requested)")
		}
	}
	if j.Outcome != "" {
		fmt.Fprintf(&b, " (outcome %s)", j.Outcome)
	}
	b.WriteString("\n")
	if j.Result != nil {
		fmt.Fprintf(&b, "  result: %s\n", compact(j.Result))
	}
	if j.Error != nil {
		fmt.Fprintf(&b, "  error: %s (%d): %s\n", j.Error.Code, int(j.Error.Code), j.Error.Message)
	}
	return b.String()
}

// limitsText renders safety/limits as a table.
func limitsText(r *mhp.LimitsReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "estop %v", r.EStop)
	if r.WatchdogS > 0 {
		fmt.Fprintf(&b, ", watchdog %gs", r.WatchdogS)
	}
	if len(r.Interlocks) > 0 {
		fmt.Fprintf(&b, ", interlocks %s", strings.Join(r.Interlocks, ","))
	}
	b.WriteString("\n")
	names := make([]string, 0, len(r.Settings))
	for n := range r.Settings {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		b.WriteString("settings:\n")
	}
	for _, n := range names {
		s := r.Settings[n]
		extra := ""
		if len(s.Interlocks) > 0 {
			extra = " interlocks " + strings.Join(s.Interlocks, ",")
		}
		if s.DuringJob {
			extra += " during_job"
		}
		fmt.Fprintf(&b, "  %-22s %-8s %-18s %s%s\n", n, s.Approval, limitsString(s.Limits), s.Unit, extra)
	}
	names = names[:0]
	for n := range r.Actions {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		b.WriteString("actions:\n")
	}
	for _, n := range names {
		a := r.Actions[n]
		var ps []string
		keys := make([]string, 0, len(a.Limits))
		for k := range a.Limits {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps = append(ps, k+" "+limitsString(a.Limits[k]))
		}
		extra := ""
		if len(a.Interlocks) > 0 {
			extra = " interlocks " + strings.Join(a.Interlocks, ",")
		}
		fmt.Fprintf(&b, "  %-22s %-8s %s%s\n", n, a.Approval, strings.Join(ps, "; "), extra)
	}
	return b.String()
}

// progressDetail renders a job's extra progress fields briefly.
func progressDetail(extra map[string]any) string {
	if len(extra) == 0 {
		return ""
	}
	if m, ok := extra["message"].(string); ok {
		return m
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+compact(extra[k]))
	}
	return strings.Join(parts, " ")
}

// actionParamNames lists an action's parameters: its params in declared
// order, then required names the params do not list (a summary that sends
// only required, as the reference's does).
func actionParamNames(a mhp.Action) []string {
	names := a.Params.Names()
	for _, r := range a.Required {
		if !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	return names
}
