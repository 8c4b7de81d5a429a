package evidence

// Query selects a page of entries for List.
type Query struct {
	// After is a cursor: only entries with a larger seq (0: from the start).
	After uint64 `json:"after,omitempty"`
	// Limit caps the page ([DefaultPage]; at most [MaxPage]).
	Limit int `json:"limit,omitempty"`
	// CommandID, Session and Device filter exactly when set (a device's
	// handle on a shared log always sets Device to its own).
	CommandID string `json:"command_id,omitempty"`
	Session   string `json:"session,omitempty"`
	Device    string `json:"device,omitempty"`
	// Latest asks for the newest Limit matching entries (still in chain
	// order; After is ignored and Next is 0).
	Latest bool `json:"latest,omitempty"`
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

func (q *Query) normalize() {
	if q.Limit <= 0 {
		q.Limit = DefaultPage
	}
	if q.Limit > MaxPage {
		q.Limit = MaxPage
	}
	if q.Latest {
		q.After = 0
	}
}

func (q Query) match(e Entry) bool {
	return e.Seq > q.After && (q.CommandID == "" || e.CommandID == q.CommandID) && (q.Session == "" || e.Session == q.Session) &&
		(q.Device == "" || e.Device == q.Device)
}

func (q Query) filtered() bool { return q.CommandID != "" || q.Session != "" || q.Device != "" }

// List returns entries in chain order, at most one page. Recent entries come
// from memory; older ones, and filtered queries, are read from the files.
func (l *Log) List(q Query) (Page, error) {
	q.normalize()
	l.mu.Lock()
	head := l.seq
	if !l.closed {
		l.writeLocked() // older pages are read from the files
	}
	recent := l.recentLocked()
	covered := len(recent) > 0 && (recent[0].Seq == 1 || (!q.Latest && !q.filtered() && q.After+1 >= recent[0].Seq))
	if covered || (q.Latest && len(recent) > 0) {
		var out []Entry
		for _, e := range recent {
			if q.match(e) {
				out = append(out, e)
			}
		}
		if covered || len(out) >= q.Limit {
			l.mu.Unlock()
			if q.Latest {
				return latestPage(out, q.Limit, head), nil
			}
			return page(out, q.Limit, head), nil
		}
	}
	dir := l.cfg.Dir
	l.mu.Unlock()
	return listFiles(dir, q, head)
}

// ListDir lists the chain in dir as [Log.List] does, from the files (the
// receipts a Log of this process holds buffered for dir are written first).
func ListDir(dir string, q Query) (Page, error) {
	flushOpen(dir)
	q.normalize()
	return listFiles(dir, q, ^uint64(0))
}

// listFiles reads a page from the chain files, up to seq head.
func listFiles(dir string, q Query, head uint64) (Page, error) {
	segs, err := segments(dir)
	if err != nil {
		return Page{}, err
	}
	if q.Latest {
		return latestFiles(dir, segs, q, head)
	}
	var out []Entry
	last := uint64(0)
	for _, n := range segs {
		_, _, err := scanSegment(segmentPath(dir, n), func(e Entry) {
			last = max(last, e.Seq)
			if e.Seq <= head && q.match(e) && len(out) <= q.Limit {
				out = append(out, e)
			}
		})
		if err != nil {
			return Page{}, err
		}
		if len(out) > q.Limit {
			break
		}
	}
	return page(out, q.Limit, min(head, last)), nil
}

// latestFiles reads the segments newest first until Limit entries match,
// keeping at most Limit of each.
func latestFiles(dir string, segs []int, q Query, head uint64) (Page, error) {
	var out []Entry
	last := uint64(0)
	for i := len(segs) - 1; i >= 0 && len(out) < q.Limit; i-- {
		var seg []Entry
		_, _, err := scanSegment(segmentPath(dir, segs[i]), func(e Entry) {
			last = max(last, e.Seq)
			if e.Seq <= head && q.match(e) {
				if len(seg) == q.Limit {
					seg = append(seg[:0], seg[1:]...)
				}
				seg = append(seg, e)
			}
		})
		if err != nil {
			return Page{}, err
		}
		out = append(seg, out...)
	}
	return latestPage(out, q.Limit, min(head, last)), nil
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

// latestPage keeps the newest limit entries of out.
func latestPage(out []Entry, limit int, head uint64) Page {
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	if out == nil {
		out = []Entry{}
	}
	return Page{Head: head, Entries: out}
}
