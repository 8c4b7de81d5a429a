package transport

import (
	"bytes"
	"strconv"
)

// framer follows the HTTP/1.1 byte stream a connection reads (request heads,
// then each body by its own framing, RFC 9112 §6) to see every request head
// as the client sent it, before net/http parses it. net/http drops a
// Content-Length sent beside Transfer-Encoding and serves the chunked body,
// keeping the connection: a front proxy that framed by Content-Length would
// then have smuggled the bytes after the chunked body in as a second request.
// The framer flags such a head (RFC 9112 §6.1: the connection must close)
// and stops following the stream.
type framer struct {
	state   framerState
	line    []byte // the line being read (heads, chunk sizes, trailers)
	head    int    // bytes of the current head so far
	hasCL   bool
	hasTE   bool
	cl      int64
	remain  int64 // body or chunk bytes still to skip
	heads   int64 // request heads seen
	flagged int64 // the number of the first head with both Content-Length and Transfer-Encoding (1-based), 0: none
}

type framerState int

const (
	inHead      framerState = iota // request line and header lines, up to the empty line
	inBody                         // remain bytes of a Content-Length body
	inChunkSize                    // a chunk-size line
	inChunkData                    // remain bytes of a chunk
	inChunkEnd                     // the CRLF after a chunk's data
	inTrailer                      // trailer lines, up to the empty line
	lost                           // flagged, or framing net/http would refuse anyway: nothing more to follow
)

// maxFramerLine bounds a line the framer keeps; a longer one is refused by
// net/http (its header limit) and the framer stops following.
const maxFramerLine = 80 << 10

// feed follows b, the next bytes read from the connection.
func (f *framer) feed(b []byte) {
	for len(b) > 0 && f.state != lost {
		switch f.state {
		case inBody, inChunkData:
			n := int64(len(b))
			if n > f.remain {
				n = f.remain
			}
			f.remain -= n
			b = b[n:]
			if f.remain == 0 {
				if f.state == inBody {
					f.state = inHead
				} else {
					f.state = inChunkEnd
				}
			}
			continue
		}
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			f.keep(b)
			return
		}
		// A line read whole is taken where it lies; only one split
		// between reads is gathered in f.line.
		line := b[:i]
		if len(f.line) > 0 {
			f.keep(line)
			line = f.line
		} else if i > maxFramerLine {
			f.state = lost
		}
		b = b[i+1:]
		if f.state == lost {
			return
		}
		if n := len(line); n > 0 && line[n-1] == '\r' {
			line = line[:n-1]
		}
		f.endLine(line)
		f.line = f.line[:0]
	}
}

func (f *framer) keep(b []byte) {
	if len(f.line)+len(b) > maxFramerLine {
		f.state = lost
		return
	}
	f.line = append(f.line, b...)
}

// endLine handles one complete line (without its CRLF).
func (f *framer) endLine(line []byte) {
	switch f.state {
	case inHead:
		f.head += len(line) + 2
		if f.head > maxFramerLine {
			f.state = lost
			return
		}
		if len(line) > 0 {
			f.header(line)
			return
		}
		if f.head == 2 {
			f.head = 0 // an empty line before a request line: ignored
			return
		}
		f.endHead()
	case inChunkSize:
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		switch {
		case err != nil || n < 0:
			f.state = lost // net/http refuses the body and closes
		case n == 0:
			f.state = inTrailer
		default:
			f.state, f.remain = inChunkData, n
		}
	case inChunkEnd:
		if len(line) != 0 {
			f.state = lost
			return
		}
		f.state = inChunkSize
	case inTrailer:
		if len(line) == 0 {
			f.state = inHead
		}
	}
}

func (f *framer) header(line []byte) {
	colon := bytes.IndexByte(line, ':')
	if colon < 0 {
		return // the request line, or a line net/http refuses
	}
	name, value := bytes.TrimSpace(line[:colon]), line[colon+1:]
	if len(name) != len("Content-Length") && len(name) != len("Transfer-Encoding") {
		return // neither: no need to compare
	}
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil || n < 0 {
			f.state = lost // net/http answers 400 and closes
			return
		}
		f.hasCL, f.cl = true, n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		f.hasTE = true
	}
}

func (f *framer) endHead() {
	f.heads++
	switch {
	case f.hasCL && f.hasTE:
		f.flagged, f.state = f.heads, lost
	case f.hasTE:
		f.state = inChunkSize
	case f.hasCL && f.cl > 0:
		f.state, f.remain = inBody, f.cl
	default:
		f.state = inHead
	}
	f.head, f.hasCL, f.hasTE, f.cl = 0, false, false, 0
}
