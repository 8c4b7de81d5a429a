package madsci

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Downloader fetches an action's result files as the node's zip
// (GET /action/{name}/{id}/download, or /action/{id}/download). The HTTP
// Client implements it.
type Downloader interface {
	Download(ctx context.Context, action, id string) ([]byte, error)
}

// Limits of one download.
const (
	maxResultFiles = 1000
	maxResultBytes = 256 << 20
)

// Download implements Downloader: the per-name route first, then the
// per-id route (older v0.5 nodes, or a 5xx from the first).
func (c *Client) Download(ctx context.Context, action, id string) ([]byte, error) {
	data, err := c.do(ctx, "GET", "/action/"+url.PathEscape(action)+"/"+url.PathEscape(id)+"/download", nil, nil)
	if err == nil {
		return data, nil
	}
	if !serverError(err) && !notFound(err) {
		return nil, err
	}
	return c.do(ctx, "GET", "/action/"+url.PathEscape(id)+"/download", nil, nil)
}

// fetchFiles downloads a succeeded action's result files into
// results_dir/<action_id>/ and describes them: [{name, path, bytes}]. Paths
// that would leave that folder, more than maxResultFiles files or more than
// maxResultBytes in all are refused. Without results_dir, or when the node
// lists no files, it returns nil.
func (a *adapter) fetchFiles(ctx context.Context, action string, res *ActionResult) ([]any, error) {
	dl, ok := a.acts.(Downloader)
	if a.cfg.ResultsDir == "" || !ok || !hasFiles(res.Files) {
		return nil, nil
	}
	data, err := dl.Download(ctx, action, res.ActionID)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("download: not a zip: %w", err)
	}
	if len(zr.File) > maxResultFiles {
		return nil, fmt.Errorf("download: %d files, more than %d", len(zr.File), maxResultFiles)
	}
	dir := filepath.Join(a.cfg.ResultsDir, filepath.Base(res.ActionID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []any
	var total int64
	for _, f := range zr.File {
		if f.FileInfo().IsDir() {
			continue
		}
		name := filepath.Clean(filepath.FromSlash(f.Name))
		if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return nil, fmt.Errorf("download: entry %q leaves the results folder", f.Name)
		}
		full := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		n, err := extract(f, full, maxResultBytes-total)
		if err != nil {
			return nil, err
		}
		total += n
		out = append(out, map[string]any{"name": filepath.ToSlash(name), "path": full, "bytes": n})
	}
	return out, nil
}

func extract(f *zip.File, path string, budget int64) (int64, error) {
	rc, err := f.Open()
	if err != nil {
		return 0, fmt.Errorf("download: %s: %w", f.Name, err)
	}
	defer rc.Close()
	w, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(rc, budget+1))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("download: %s: %w", f.Name, err)
	}
	if n > budget {
		os.Remove(path)
		return n, fmt.Errorf("download: result files exceed %d bytes", int64(maxResultBytes))
	}
	return n, nil
}

func hasFiles(files any) bool {
	switch x := files.(type) {
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	case []string:
		return len(x) > 0
	}
	return false
}
