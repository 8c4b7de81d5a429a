// Package directory finds one device among thousands. A directory indexes
// device cards — identity, location, tags and capability names, never state —
// ranks them for a free-text query with BM25, applies exact filters, and at
// query time pings the top candidates in parallel to fill in live state before
// a state filter is applied. A device that does not answer is reported
// unreachable and never matches a state such as "idle".
package directory

import (
	"math"
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
	removed  map[int]bool
	scratch  sync.Pool // *scoreBuf, reused across queries
}

// NewIndex builds an index of cards; a later card with the same id replaces an earlier one.
func NewIndex(cards []Card) *Index {
	x := &Index{byID: map[string]int{}, postings: map[string][]posting{}, removed: map[int]bool{}}
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
		x.totalLen -= float64(x.lengths[old])
	}
	doc := int32(len(x.cards))
	x.cards = append(x.cards, c)
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
		seen := map[string]bool{}
		for _, t := range terms {
			if seen[t] {
				continue
			}
			seen[t] = true
			plist := x.postings[t]
			if len(plist) == 0 {
				continue
			}
			df := len(plist)
			if len(x.removed) > 0 {
				df = 0
				for _, p := range plist {
					if !x.removed[int(p.doc)] {
						df++
					}
				}
			}
			idf := math.Log(1 + (float64(live)-float64(df)+0.5)/(float64(df)+0.5))
			for _, p := range plist {
				if len(x.removed) > 0 && x.removed[int(p.doc)] {
					continue
				}
				tf := float64(p.tf)
				norm := tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(x.lengths[p.doc])/avg))
				if scores[p.doc] == 0 {
					touched = append(touched, p.doc)
				}
				scores[p.doc] += idf * norm
			}
		}
		better := func(a, b Scored) bool {
			if a.Score != b.Score {
				return a.Score > b.Score
			}
			return a.Card.ID < b.Card.ID
		}
		for _, doc := range touched {
			sc := scores[doc]
			scores[doc] = 0
			c := &x.cards[doc]
			if !f.match(c) {
				continue
			}
			cand := Scored{Card: *c, Score: math.Round(sc*100) / 100}
			if n <= 0 || len(out) < n {
				out = append(out, cand)
				if n > 0 && len(out) == n {
					sort.Slice(out, func(i, j int) bool { return better(out[i], out[j]) })
				}
				continue
			}
			if better(cand, out[n-1]) { // keep the best n, in order
				i := sort.Search(n, func(i int) bool { return better(cand, out[i]) })
				copy(out[i+1:], out[i:n-1])
				out[i] = cand
			}
		}
		buf.touched = touched
		sort.Slice(out, func(i, j int) bool { return better(out[i], out[j]) })
	}
	if n > 0 && len(out) > n {
		out = out[:n]
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
