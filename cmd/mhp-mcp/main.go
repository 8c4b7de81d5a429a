// Command mhp-mcp is the lab's MCP server: nine constant tools over every
// MHP device the lab has, over stdio (default) or MCP Streamable HTTP.
//
//	mhp-mcp thermo=http://bench-pc:18921 arm=http://arm-pc:18921
//	mhp-mcp --directory http://directory:18900
//	mhp-mcp --directory http://directory:18900 --http 127.0.0.1:18800 --token-file token --allow-origin https://lab.example
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
	"github.com/openmhp/mhp-go/mcpbridge"
	"github.com/openmhp/mhp-go/metrics"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "mhp-mcp:", err)
		os.Exit(1)
	}
}

type origins []string

func (o *origins) String() string     { return strings.Join(*o, ",") }
func (o *origins) Set(v string) error { *o = append(*o, v); return nil }

// run is the command; ready, when set, is told the MCP URL once HTTP listens.
func run(ctx context.Context, args []string, stderr io.Writer, ready func(url string)) error {
	fs := flag.NewFlagSet("mhp-mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dirURL := fs.String("directory", "", "directory server URL (directory/search finds devices)")
	httpAddr := fs.String("http", "", "serve MCP Streamable HTTP on this address (default: stdio); a bare port binds 127.0.0.1")
	tokenFile := fs.String("token-file", "", "file holding the bearer token HTTP clients must send (and MHP devices are sent)")
	logFormat := fs.String("log-format", "text", "log format on stderr: text or json (for log collectors)")
	var allow origins
	fs.Var(&allow, "allow-origin", "browser Origin allowed over HTTP (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mhp-mcp [--directory URL | name=target ...] [--http ADDR --token-file F --allow-origin O]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *logFormat != "text" && *logFormat != "json" {
		return fmt.Errorf("--log-format %q: want text or json", *logFormat)
	}
	named := map[string]string{}
	for _, a := range fs.Args() {
		name, target, ok := strings.Cut(a, "=")
		if !ok || name == "" || target == "" {
			return fmt.Errorf("argument %q: want name=target (e.g. thermo=http://bench-pc:18921)", a)
		}
		if _, dup := named[name]; dup {
			return fmt.Errorf("device name %q given twice", name)
		}
		named[name] = target
	}
	if (*dirURL == "") == (len(named) == 0) {
		fs.Usage()
		return errors.New("give either --directory URL or name=target devices")
	}
	token := ""
	if *tokenFile != "" {
		b, err := os.ReadFile(*tokenFile)
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	copts := client.Options{ClientName: "mhp-mcp", Token: token}
	var finder directory.Finder
	if *dirURL != "" {
		finder = &directory.Remote{URL: strings.TrimRight(*dirURL, "/")}
	} else {
		n := &mcpbridge.Named{Targets: named, Client: copts}
		defer n.Close()
		finder = n
	}
	b, err := mcpbridge.New(mcpbridge.Config{Finder: finder, Client: copts})
	if err != nil {
		return err
	}
	defer b.Close()
	if *httpAddr == "" {
		return b.Server().Run(ctx, &mcp.StdioTransport{})
	}
	addr := *httpAddr
	if !strings.Contains(addr, ":") {
		addr = "127.0.0.1:" + addr
	} else if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mx := metrics.New(metrics.Config{})
	mux := http.NewServeMux()
	mux.Handle("/mcp", b.HTTPHandler(mcpbridge.HTTPOptions{Token: token, AllowedOrigins: allow, Middleware: []mcp.Middleware{mx.MCPMiddleware()}}))
	mux.Handle("GET /metrics", mx.Handler(token))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	url := "http://" + ln.Addr().String() + "/mcp"
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if *logFormat == "json" {
		log = slog.New(slog.NewJSONHandler(stderr, nil))
	}
	log.Info("mhp-mcp serving", "url", url, "metrics", "http://"+ln.Addr().String()+"/metrics", "token", token != "")
	if ready != nil {
		ready(url)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
