package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/conformance/wire"
)

// rpcCmd runs `mhp TARGET rpc METHOD [JSON]`: initialize (unless METHOD is
// initialize), then the request exactly as given.
func (a *app) rpcCmd(ctx context.Context, target, token string, timeout time.Duration, p parsed, args []string) int {
	if len(args) < 1 || len(args) > 2 {
		return a.usageError("rpc: usage: mhp TARGET rpc METHOD [JSON]")
	}
	method := args[0]
	var params any
	if len(args) == 2 {
		if err := json.Unmarshal([]byte(args[1]), &params); err != nil {
			return a.usageError("rpc: params are not JSON: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hc, err := a.tlsHTTPClient(p)
	if err != nil {
		return a.usageError("rpc: %v", err)
	}
	c, err := wire.Dial(target, wire.DialOptions{Token: token, ClientID: a.clientID(), Stderr: a.stderr, HTTPClient: hc})
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %v\n", err)
		return exitNoPeer
	}
	defer c.Close()
	if method != mhp.MethodInitialize {
		r, err := c.Call(ctx, mhp.MethodInitialize, wire.InitParams(mhp.ProtocolVersion, "mhp-cli"))
		if err != nil {
			fmt.Fprintf(a.stderr, "mhp: initialize: %v\n", err)
			return exitNoPeer
		}
		if r.Error != nil {
			return a.fail(r.Error.Err(), p.has("json"))
		}
	}
	r, err := c.Call(ctx, method, params)
	if err != nil {
		fmt.Fprintf(a.stderr, "mhp: %s: %v\n", method, err)
		return exitNoPeer
	}
	if r.Error != nil {
		return a.fail(r.Error.Err(), p.has("json"))
	}
	// json.Number keeps every digit of the wire's numbers (an int64 beyond
	// 2^53 printed through a float64 would change).
	var v any
	dec := json.NewDecoder(bytes.NewReader(r.Result))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		fmt.Fprintf(a.stdout, "%s\n", r.Result)
		return exitOK
	}
	return a.printJSON(v)
}
