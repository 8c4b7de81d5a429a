package bench

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A load client's session ends when it leaves: a read on it afterwards is
// refused as unknown.
func TestEndSessionEndsIt(t *testing.T) {
	srv, closeFn, err := simServer()
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	hc := newHTTPClient(2)
	sid, err := initialize(hc, hs.URL, "load-0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := post(hc, hs.URL, sid, readBody); err != nil {
		t.Fatal(err)
	}
	endSession(hc, hs.URL, sid)
	b, err := post(hc, hs.URL, sid, readBody)
	if err == nil || !strings.Contains(string(b), "session_unknown") {
		t.Fatalf("a read on the ended session: %s %v", b, err)
	}
}
