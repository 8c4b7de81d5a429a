package transport

import (
	"strconv"
	"strings"
	"testing"
)

// fakeHead is a body that reads as a smuggling head.
const fakeHead = "GET / HTTP/1.1\r\nTransfer-Encoding: x\r\nContent-Length: 1\r\n\r\n"

// framerStreams are connection byte streams with what the framer must make
// of them: the request heads it saw and the first flagged one (0: none).
var framerStreams = []struct {
	name           string
	stream         string
	heads, flagged int64
}{
	{"one request with a body",
		"POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Type: application/json\r\n\r\n{\"a\"}", 1, 0},
	{"pipelined, the second smuggles",
		"POST /rpc HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}" +
			"POST /rpc HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 2, 2},
	{"both headers, any case and spacing",
		"POST /rpc HTTP/1.1\r\ncontent-length : 4\r\n  TRANSFER-ENCODING:chunked\r\n\r\n", 1, 1},
	{"a body that spells a head is skipped",
		"POST /rpc HTTP/1.1\r\nContent-Length: " + strconv.Itoa(len(fakeHead)) + "\r\n\r\n" + fakeHead +
			"GET /mhp.json HTTP/1.1\r\n\r\n", 2, 0},
	{"chunked with extensions and trailers, then a request",
		"POST /rpc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nab\r\n\r\n0\r\nX-Trailer: 1\r\n\r\n" +
			"GET /events HTTP/1.1\r\nHost: h\r\n\r\n", 2, 0},
	{"bare LF line ends, an empty line before a request",
		"\r\nGET / HTTP/1.1\nContent-Length: 0\n\nGET / HTTP/1.1\nContent-Length: 1\nTransfer-Encoding: chunked\n\n", 2, 2},
	{"a bad chunk size: lost, nothing flagged",
		"POST /rpc HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nPOST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 1, 0},
	{"a header line over the bound: lost",
		"GET / HTTP/1.1\r\nX-Long: " + strings.Repeat("a", maxFramerLine) + "\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 0, 0},
}

// TestFramerSplitAnywhere: the framer makes the same of a stream read in
// one piece, in two at every split point, and byte by byte.
func TestFramerSplitAnywhere(t *testing.T) {
	for _, tt := range framerStreams {
		t.Run(tt.name, func(t *testing.T) {
			check := func(how string, f *framer) {
				t.Helper()
				if f.heads != tt.heads || f.flagged != tt.flagged {
					t.Fatalf("%s: heads %d, flagged %d; want %d, %d", how, f.heads, f.flagged, tt.heads, tt.flagged)
				}
			}
			var whole framer
			whole.feed([]byte(tt.stream))
			check("in one piece", &whole)
			var bytewise framer
			for i := 0; i < len(tt.stream); i++ {
				bytewise.feed([]byte{tt.stream[i]})
			}
			check("byte by byte", &bytewise)
			if len(tt.stream) > 4096 {
				return // the long line: one piece and byte by byte suffice
			}
			for i := 1; i < len(tt.stream); i++ {
				var f framer
				f.feed([]byte(tt.stream[:i]))
				f.feed([]byte(tt.stream[i:]))
				check("split at "+tt.stream[:i], &f)
			}
		})
	}
}

// BenchmarkFramer is the framer following one usual request (the bench's
// read, as Go's client sends it) per op.
func BenchmarkFramer(b *testing.B) {
	req := []byte("POST /rpc HTTP/1.1\r\nHost: 127.0.0.1:40000\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: 88\r\n" +
		"Content-Type: application/json\r\nMhp-Session: s_0123456789abcdef0123456789abcdef\r\nAccept-Encoding: gzip\r\n\r\n" +
		`{"jsonrpc":"2.0","id":1,"method":"signals/read","params":{"names":["block_temperature"]}}`)
	var f framer
	b.ReportAllocs()
	for b.Loop() {
		f.feed(req)
	}
	if f.state == lost || f.flagged != 0 {
		b.Fatal("the framer lost the stream")
	}
}
