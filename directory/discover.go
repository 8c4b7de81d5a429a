package directory

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// MDNSService is the DNS-SD service type MHP servers advertise.
const MDNSService = "_mhp._tcp"

// Conventional MHP ports: servers listen in 18900..18939.
const (
	FirstPort = 18900
	LastPort  = 18939
)

// Ports returns the conventional port range.
func Ports() []int {
	out := make([]int, 0, LastPort-FirstPort+1)
	for p := FirstPort; p <= LastPort; p++ {
		out = append(out, p)
	}
	return out
}

// Probe asks GET /mhp.json on every host:port in parallel (bounded by
// timeout each) and returns a card for each device that answered, its
// Target made by TargetURL. A host is a name, an IPv4 address or an IPv6
// address (brackets optional), a link-local one with its zone as the
// system writes it (fe80::1%eth0). It works on networks that block
// multicast. Give it only hosts you own.
func Probe(ctx context.Context, hosts []string, ports []int, timeout time.Duration) []Card {
	if timeout <= 0 {
		timeout = 500 * time.Millisecond
	}
	hc := &http.Client{Timeout: timeout}
	var mu sync.Mutex
	var out []Card
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, h := range hosts {
		for _, p := range ports {
			target := TargetURL(h, p)
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				card, err := fetchCard(ctx, hc, target)
				if err != nil {
					return
				}
				mu.Lock()
				out = append(out, card)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return out
}

// TargetURL is the URL of the MHP server at host and port: http://host:port,
// an IPv6 address in brackets, its zone's "%" written "%25" as RFC 6874
// has it (http://[fe80::1%25eth0]:18900), the form url.Parse reads back to
// the zone the system dials. host is a name or an address as the system
// writes it (fe80::1%eth0; brackets optional).
func TargetURL(host string, port int) string {
	if len(host) > 1 && host[0] == '[' && host[len(host)-1] == ']' {
		host = host[1 : len(host)-1]
	}
	return (&url.URL{Scheme: "http", Host: net.JoinHostPort(host, strconv.Itoa(port))}).String()
}

func fetchCard(ctx context.Context, hc *http.Client, target string) (Card, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target+"/mhp.json", nil)
	if err != nil {
		return Card{}, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return Card{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Card{}, fmt.Errorf("%s/mhp.json: HTTP %d", target, resp.StatusCode)
	}
	var d mhp.Description
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&d); err != nil {
		return Card{}, err
	}
	if d.ID == "" {
		return Card{}, fmt.Errorf("%s/mhp.json has no device id", target)
	}
	return CardFrom(&d, target), nil
}
