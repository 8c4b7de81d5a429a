// Package directory finds one device among thousands. A directory indexes
// device cards — identity, location, tags and capability names, never state —
// ranks them for a free-text query with BM25, applies exact filters, and at
// query time pings the top candidates in parallel to fill in live state before
// a state filter is applied. A device that does not answer is reported
// unreachable and never matches a state such as "idle".
package directory

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"

	"github.com/openmhp/mhp-go"
)

// Card is what the directory knows of one device: its card, where to reach it.
type Card struct {
	mhp.DeviceInfo `yaml:",inline"`
	Notes          string   `json:"notes,omitempty" yaml:"notes,omitempty"`
	Signals        []string `json:"signals,omitempty" yaml:"signals,omitempty"`
	Settings       []string `json:"settings,omitempty" yaml:"settings,omitempty"`
	Actions        []string `json:"actions,omitempty" yaml:"actions,omitempty"`
	// Target is how to reach the device: an http:// URL or stdio:<command>.
	Target string `json:"target" yaml:"target"`
}

// CardFrom makes a card from a device's describe(card) answer.
func CardFrom(d *mhp.Description, target string) Card {
	c := Card{DeviceInfo: d.DeviceInfo, Notes: d.Notes, Target: target}
	for _, s := range d.Signals {
		c.Signals = append(c.Signals, s.Name)
	}
	for _, s := range d.Settings {
		c.Settings = append(c.Settings, s.Name)
	}
	for _, a := range d.Actions {
		c.Actions = append(c.Actions, a.Name)
	}
	return c
}

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Field weights: a term in the id, class or tags says more than one in the notes.
var fieldWeights = struct{ id, class, makeModel, location, tags, text, names float64 }{
	id: 3, class: 3, makeModel: 2, location: 2, tags: 2, text: 1, names: 1.5,
}

type posting struct {
	doc int32
	tf  float32
}

// Index is an in-memory BM25 index of cards. It is safe for concurrent use.
type Index struct {
	mu       sync.RWMutex
	cards    []Card
	byID     map[string]int
	lengths  []float32
	postings map[string][]posting
	totalLen float64
	removed  []bool // by doc: replaced or removed
	nRemoved int
	// The exact filters' fields as small ids, by doc, so a posting of a
	// card the filter refuses is skipped before it is scored.
	classOf, locOf   []int32
	classIDs, locIDs map[string]int32
	scratch          sync.Pool // *scoreBuf, reused across queries
}

// NewIndex builds an index of cards; a later card with the same id replaces an earlier one.
func NewIndex(cards []Card) *Index {
	x := &Index{byID: map[string]int{}, postings: map[string][]posting{}, classIDs: map[string]int32{}, locIDs: map[string]int32{}}
	for _, c := range cards {
		x.Add(c)
	}
	return x
}

// Len is the number of cards indexed.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}

// Add indexes a card, replacing any card with the same id.
func (x *Index) Add(c Card) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if old, ok := x.byID[c.ID]; ok {
		x.removed[old] = true
		x.nRemoved++
		x.totalLen -= float64(x.lengths[old])
	}
	doc := int32(len(x.cards))
	x.cards = append(x.cards, c)
	x.removed = append(x.removed, false)
	x.classOf = append(x.classOf, smallID(x.classIDs, c.Class))
	x.locOf = append(x.locOf, smallID(x.locIDs, c.Location))
	x.byID[c.ID] = int(doc)
	tf := map[string]float64{}
	add := func(text string, w float64) {
		for _, t := range Tokenize(text) {
			tf[t] += w
		}
	}
	add(c.ID, fieldWeights.id)
	add(c.Class, fieldWeights.class)
	add(c.Make+" "+c.Model, fieldWeights.makeModel)
	add(c.Location, fieldWeights.location)
	add(strings.Join(c.Tags, " "), fieldWeights.tags)
	add(c.Description+" "+c.Notes, fieldWeights.text)
	add(strings.Join(c.Signals, " ")+" "+strings.Join(c.Settings, " ")+" "+strings.Join(c.Actions, " "), fieldWeights.names)
	var length float64
	for t, f := range tf {
		x.postings[t] = append(x.postings[t], posting{doc: doc, tf: float32(f)})
		length += f
	}
	x.lengths = append(x.lengths, float32(length))
	x.totalLen += length
}

// Remove drops a card by id.
func (x *Index) Remove(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	doc, ok := x.byID[id]
	if !ok {
		return false
	}
	delete(x.byID, id)
	x.removed[doc] = true
	x.nRemoved++
	x.totalLen -= float64(x.lengths[doc])
	return true
}

// Card returns the card with the id.
func (x *Index) Card(id string) (Card, bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	doc, ok := x.byID[id]
	if !ok {
		return Card{}, false
	}
	return x.cards[doc], true
}

// Filter is the exact part of a query: every non-empty field must match exactly.
type Filter struct {
	Class    string
	Location string
	// Tags must all be present on the card.
	Tags []string
}

func (f Filter) match(c *Card) bool {
	if f.Class != "" && c.Class != f.Class {
		return false
	}
	if f.Location != "" && c.Location != f.Location {
		return false
	}
	for _, want := range f.Tags {
		found := false
		for _, t := range c.Tags {
			if t == want {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

type scoreBuf struct {
	scores  []float64
	touched []int32
	heap    []hit
}

// Scored is a card with its BM25 score.
type Scored struct {
	Card  Card
	Score float64
}

// Rank scores the cards that pass the filter against the query, best first,
// and returns at most n (all when n <= 0). An empty query ranks every
// passing card equally, in id order.
func (x *Index) Rank(query string, f Filter, n int) []Scored {
	x.mu.RLock()
	defer x.mu.RUnlock()
	terms := Tokenize(query)
	live := len(x.byID)
	var out []Scored
	if len(terms) == 0 {
		for _, doc := range x.byID {
			if c := &x.cards[doc]; f.match(c) {
				out = append(out, Scored{Card: *c})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Card.ID < out[j].Card.ID })
	} else {
		avg := x.totalLen / math.Max(1, float64(live))
		buf, _ := x.scratch.Get().(*scoreBuf)
		if buf == nil {
			buf = new(scoreBuf)
		}
		defer x.scratch.Put(buf)
		if cap(buf.scores) < len(x.cards) {
			buf.scores = make([]float64, len(x.cards))
		}
		scores := buf.scores[:len(x.cards)]
		touched := buf.touched[:0]
		// The exact filters as ids: a posting of a card they refuse is
		// never scored (the idf still counts every live card).
		classID, locID := int32(-1), int32(-1)
		if f.Class != "" {
			id, ok := x.classIDs[f.Class]
			if !ok {
				return nil
			}
			classID = id
		}
		if f.Location != "" {
			id, ok := x.locIDs[f.Location]
			if !ok {
				return nil
			}
			locID = id
		}
		for i, t := range terms {
			if slices.Contains(terms[:i], t) {
				continue
			}
			plist := x.postings[t]
			if len(plist) == 0 {
				continue
			}
			df := len(plist)
			if x.nRemoved > 0 {
				df = 0
				for _, p := range plist {
					if !x.removed[p.doc] {
						df++
					}
				}
			}
			idf := math.Log(1 + (float64(live)-float64(df)+0.5)/(float64(df)+0.5))
			// norm = tf(k1+1) / (tf + k1(1-b) + k1 b len/avg)
			base, perLen := bm25K1*(1-bm25B), bm25K1*bm25B/avg
			for _, p := range plist {
				doc := p.doc
				if (classID >= 0 && x.classOf[doc] != classID) || (locID >= 0 && x.locOf[doc] != locID) ||
					(x.nRemoved > 0 && x.removed[doc]) {
					continue
				}
				tf := float64(p.tf)
				norm := tf * (bm25K1 + 1) / (tf + base + perLen*float64(x.lengths[doc]))
				if scores[doc] == 0 {
					touched = append(touched, doc)
				}
				scores[doc] += idf * norm
			}
		}
		out = x.selectTop(buf, scores, touched, f, n)
	}
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// smallID is the id of value in ids, a new one when it has none.
func smallID(ids map[string]int32, value string) int32 {
	id, ok := ids[value]
	if !ok {
		id = int32(len(ids))
		ids[value] = id
	}
	return id
}

// hit is a scored card during selection: its doc and its score.
type hit struct {
	doc   int32
	score float64
}

// selectTop picks the best n of the touched docs that pass the filter's
// tags (all of them when n <= 0), best first (ties by id). With n > 0 it
// keeps a min-heap of n (the worst kept on top): the cost grows with the
// touched docs, not with a sort of all of them, and only the n kept cards
// are copied. It clears the scores it reads.
func (x *Index) selectTop(buf *scoreBuf, scores []float64, touched []int32, f Filter, n int) []Scored {
	worse := func(a, b hit) bool { // a ranks below b
		if a.score != b.score {
			return a.score < b.score
		}
		return x.cards[a.doc].ID > x.cards[b.doc].ID
	}
	heap := buf.heap[:0]
	down := func(i int) {
		for {
			l, m := 2*i+1, i
			if l < len(heap) && worse(heap[l], heap[m]) {
				m = l
			}
			if r := l + 1; r < len(heap) && worse(heap[r], heap[m]) {
				m = r
			}
			if m == i {
				return
			}
			heap[i], heap[m] = heap[m], heap[i]
			i = m
		}
	}
	for _, doc := range touched {
		h := hit{doc: doc, score: math.Round(scores[doc]*100) / 100}
		scores[doc] = 0
		if len(f.Tags) > 0 && !f.match(&x.cards[doc]) {
			continue
		}
		switch {
		case n <= 0 || len(heap) < n:
			heap = append(heap, h)
			for i := len(heap) - 1; i > 0; { // up
				parent := (i - 1) / 2
				if !worse(heap[i], heap[parent]) {
					break
				}
				heap[i], heap[parent] = heap[parent], heap[i]
				i = parent
			}
		case worse(heap[0], h):
			heap[0] = h
			down(0)
		}
	}
	buf.touched, buf.heap = touched[:0], heap
	sort.Slice(heap, func(i, j int) bool { return worse(heap[j], heap[i]) })
	out := make([]Scored, len(heap))
	for i, h := range heap {
		out[i] = Scored{Card: x.cards[h.doc], Score: h.score}
	}
	return out
}

// Tokenize lowercases text and splits it into terms on anything that is not a
// letter or digit; identifiers such as block_temperature give both their
// parts and the whole.
func Tokenize(text string) []string {
	var out []string
	for _, word := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-')
	}) {
		parts := strings.FieldsFunc(word, func(r rune) bool { return r == '_' || r == '-' })
		out = append(out, parts...)
		if len(parts) > 1 {
			out = append(out, strings.Join(parts, "_"))
		}
	}
	return out
}
