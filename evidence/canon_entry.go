package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// appendLine encodes e once and uses that one encoding twice: its SHA-256
// is the hash (the canonical JSON without the hash member) and, with the
// hash member put in its sorted place, it is the stored line. It appends
// the line and its newline to dst and returns them with the hash. e.Result
// must be canonical already (Append makes it so); scratch is a work buffer.
// The bytes are those of computeHash and canonical(true), which Verify
// keeps using: the writer and the checker are separate code.
func (e *Entry) appendLine(dst []byte, scratch *bytes.Buffer) ([]byte, string, error) {
	b := scratch
	start := b.Len()
	member := func(k string) {
		if b.Len() > start+1 {
			b.WriteByte(',')
		}
		b.WriteByte('"')
		b.WriteString(k) // member names are ASCII without escapes
		b.WriteString(`":`)
	}
	str := func(k, v string) {
		if v != "" {
			member(k)
			writeString(b, v)
		}
	}
	b.WriteByte('{')
	str("command_id", e.CommandID)
	member("device")
	writeString(b, e.Device)
	if e.Error != nil {
		member("error")
		if err := appendCanonical(b, e.Error); err != nil {
			return dst, "", err
		}
	}
	mark := b.Len() // "hash" sorts here
	str("job", e.Job)
	member("method")
	writeString(b, e.Method)
	str("name", e.Name)
	member("outcome")
	writeString(b, e.Outcome)
	str("params_digest", e.ParamsDigest)
	member("prev")
	writeString(b, e.Prev)
	if len(e.Result) > 0 {
		member("result")
		b.Write(e.Result)
	}
	str("result_digest", e.ResultDigest)
	member("seq")
	b.Write(appendNumber(b.AvailableBuffer(), float64(e.Seq)))
	str("session", e.Session)
	member("ts")
	b.Write(appendNumber(b.AvailableBuffer(), e.TS))
	b.WriteByte('}')
	body := b.Bytes()[start:]
	sum := sha256.Sum256(body)
	mark -= start
	dst = append(dst, body[:mark]...)
	dst = append(dst, `,"hash":"`...)
	at := len(dst)
	dst = hex.AppendEncode(dst, sum[:])
	hash := string(dst[at:]) // the hex the line holds
	dst = append(dst, '"')
	dst = append(dst, body[mark:]...)
	dst = append(dst, '\n')
	b.Truncate(start)
	return dst, hash, nil
}

// canonicalResult puts a receipt's answer in canonical form in scratch (at
// its end) and returns those bytes: Value walked in one pass, else Result
// re-encoded. A Value encoding/json cannot marshal is left out, as the
// guard left it out when it marshalled answers itself; a Result or a
// marshalled Value that is not canonicalisable is an error.
func (r *Receipt) canonicalResult(scratch *bytes.Buffer) ([]byte, error) {
	start := scratch.Len()
	if r.Value != nil {
		if err := (&canonWalk{b: scratch}).value(r.Value, 0); err == nil {
			return scratch.Bytes()[start:], nil
		}
		scratch.Truncate(start)
		raw, err := json.Marshal(r.Value)
		if err != nil {
			return nil, nil
		}
		r.Result = raw
	}
	if len(r.Result) == 0 {
		return nil, nil
	}
	c, err := CanonicalJSON(r.Result)
	if err != nil {
		return nil, fmt.Errorf("evidence: result: %w", err)
	}
	scratch.Write(c)
	return scratch.Bytes()[start:], nil
}
