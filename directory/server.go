package directory

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/transport"
)

// Handler serves the directory over HTTP JSON-RPC 2.0 (POST /rpc):
// initialize, ping, directory/search {query, class, state, location, tags,
// limit, live} -> {results}, and directory/get {id} -> {device}. A directory
// keeps no sessions: every request stands alone.
func (d *Directory) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /rpc", d.serveRPC)
	return mux
}

const maxFrame = 1 << 20

func (d *Directory) serveRPC(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxFrame+1))
	resp := transport.Response{JSONRPC: transport.Version, ID: json.RawMessage("null")}
	switch {
	case err != nil:
		resp.Error = mhp.Errorf(mhp.CodeParseError, "reading the request: %v", err)
	case len(body) > maxFrame:
		resp.Error = mhp.Errorf(mhp.CodeInvalidRequest, "frame larger than %d bytes", maxFrame)
	default:
		req, err := transport.DecodeFrame(body)
		if err != nil {
			resp.Error, _ = mhp.AsError(err) // DecodeFrame's errors are *mhp.Error
			break
		}
		if req.ID != nil {
			resp.ID = req.ID
		}
		resp.Result, err = d.call(r.Context(), req.Method, req.Params)
		if err != nil {
			if me, ok := mhp.AsError(err); ok {
				resp.Error = me
			} else {
				resp.Error = mhp.Errorf(mhp.CodeInternal, "%v", err)
			}
			resp.Result = nil
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

func (d *Directory) call(ctx context.Context, method string, params json.RawMessage) (any, error) {
	decode := func(v any) error {
		if len(params) == 0 {
			return nil
		}
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return mhp.Errorf(mhp.CodeInvalidParams, "%s: %v", method, err)
		}
		return nil
	}
	switch method {
	case mhp.MethodInitialize:
		var p struct {
			ProtocolVersion string         `json:"protocolVersion"`
			ClientInfo      map[string]any `json:"clientInfo"`
		}
		if err := decode(&p); err != nil {
			return nil, err
		}
		v, err := mhp.NegotiateVersion(p.ProtocolVersion)
		if err != nil {
			return nil, err
		}
		return map[string]any{"protocolVersion": v, "role": "directory",
			"capabilities": map[string]bool{"directory": true}, "devices": d.cfg.Index.Len()}, nil
	case mhp.MethodPing:
		return map[string]any{"state": "idle", "ts": mhp.UnixSeconds(time.Now()), "devices": d.cfg.Index.Len()}, nil
	case "directory/search":
		var q Query
		if err := decode(&q); err != nil {
			return nil, err
		}
		res, err := d.Search(ctx, q)
		if err != nil {
			return nil, err
		}
		if res == nil {
			res = []Result{}
		}
		return map[string]any{"results": res}, nil
	case "directory/get":
		var p struct {
			ID string `json:"id"`
		}
		if err := decode(&p); err != nil {
			return nil, err
		}
		if p.ID == "" {
			return nil, mhp.Errorf(mhp.CodeInvalidParams, "directory/get: id is required").With(mhp.DataField, "id")
		}
		res, err := d.Get(ctx, p.ID)
		if err != nil {
			return nil, err
		}
		return map[string]any{"device": res}, nil
	}
	return nil, mhp.Errorf(mhp.CodeMethodNotFound, "a directory does not answer %q (it answers initialize, ping, directory/search, directory/get)", method)
}

// Remote is a client of a directory server.
type Remote struct {
	// URL is the directory's base URL, e.g. http://directory:18900.
	URL string
	// HTTP is the client used; default one with a 10s timeout.
	HTTP *http.Client
}

func (r *Remote) rpc(ctx context.Context, method string, params, out any) error {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL+"/rpc", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	hc := r.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("directory %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	var frame struct {
		Result json.RawMessage `json:"result"`
		Error  *mhp.Error      `json:"error"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&frame); err != nil {
		return fmt.Errorf("directory %s: bad answer (HTTP %d): %w", r.URL, resp.StatusCode, err)
	}
	if frame.Error != nil {
		return frame.Error
	}
	return json.Unmarshal(frame.Result, out)
}

// Search calls directory/search.
func (r *Remote) Search(ctx context.Context, q Query) ([]Result, error) {
	var out struct {
		Results []Result `json:"results"`
	}
	if err := r.rpc(ctx, "directory/search", q, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// Get calls directory/get.
func (r *Remote) Get(ctx context.Context, id string) (*Result, error) {
	var out struct {
		Device *Result `json:"device"`
	}
	if err := r.rpc(ctx, "directory/get", map[string]string{"id": id}, &out); err != nil {
		return nil, err
	}
	return out.Device, nil
}

// Finder is what both a Directory and a Remote offer.
type Finder interface {
	Search(ctx context.Context, q Query) ([]Result, error)
	Get(ctx context.Context, id string) (*Result, error)
}

var (
	_ Finder = (*Directory)(nil)
	_ Finder = (*Remote)(nil)
)
