package evidence

import "errors"

// Query selects a page of entries for List.
type Query struct {
	// After is a cursor: only entries with a larger seq (0: from the start).
	After uint64 `json:"after,omitempty"`
	// Limit caps the page ([DefaultPage]; at most [MaxPage]).
	Limit int `json:"limit,omitempty"`
	// CommandID and Session filter exactly when set.
	CommandID string `json:"command_id,omitempty"`
	Session   string `json:"session,omitempty"`
}

// Page sizes of List.
const (
	DefaultPage = 50
	MaxPage     = 200
)

// Page is one answer of List; Next is the cursor for the following page
// (0 when there is none).
type Page struct {
	Entries []Entry `json:"entries"`
	Next    uint64  `json:"next,omitempty"`
	Head    uint64  `json:"head"`
}

// List returns entries in chain order, at most one page. Recent entries come
// from memory; older ones, and filtered queries, are read from the files.
func (l *Log) List(q Query) (Page, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultPage
	}
	if q.Limit > MaxPage {
		q.Limit = MaxPage
	}
	match := func(e Entry) bool {
		return e.Seq > q.After && (q.CommandID == "" || e.CommandID == q.CommandID) && (q.Session == "" || e.Session == q.Session)
	}
	l.mu.Lock()
	head := l.seq
	if !l.closed {
		l.writeLocked() // older pages are read from the files
	}
	if recent := l.recentLocked(); q.CommandID == "" && q.Session == "" && len(recent) > 0 && q.After+1 >= recent[0].Seq {
		var out []Entry
		for _, e := range recent {
			if match(e) {
				out = append(out, e)
			}
		}
		l.mu.Unlock()
		return page(out, q.Limit, head), nil
	}
	dir := l.cfg.Dir
	l.mu.Unlock()
	segs, err := segments(dir)
	if err != nil {
		return Page{}, err
	}
	var out []Entry
	errStop := errors.New("stop")
	for _, n := range segs {
		_, _, err := scanSegment(segmentPath(dir, n), func(e Entry) {
			if e.Seq <= head && match(e) && len(out) <= q.Limit {
				out = append(out, e)
			}
		})
		if err != nil && !errors.Is(err, errStop) {
			return Page{}, err
		}
		if len(out) > q.Limit {
			break
		}
	}
	return page(out, q.Limit, head), nil
}

func page(out []Entry, limit int, head uint64) Page {
	p := Page{Head: head, Entries: out}
	if len(out) > limit {
		p.Entries = out[:limit]
		p.Next = out[limit-1].Seq
	}
	if p.Entries == nil {
		p.Entries = []Entry{}
	}
	return p
}
