package madsci

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
)

// nodeDescription is what the adapter builds a device from, and what the
// descriptor cache keeps: the node's /info, its first /state reply (the
// state signals and their types) and the action layout.
type nodeDescription struct {
	Layout string         `json:"layout"`
	Info   *NodeInfo      `json:"info"`
	State  map[string]any `json:"state"`
}

// describe reads the node's description: the layout (when auto and the
// client is ours), /info and /state.
func describe(ctx context.Context, cfg Config, node Node, c *Client) (*nodeDescription, error) {
	d := &nodeDescription{Layout: cfg.Layout}
	if c != nil && cfg.Layout == LayoutAuto {
		layout, err := c.Detect(ctx)
		if err != nil {
			return nil, err
		}
		d.Layout = layout
	}
	info, err := node.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("madsci: reading %s/info: %w", cfg.NodeURL, err)
	}
	d.Info = info
	if d.State, err = node.State(ctx); err != nil {
		return nil, fmt.Errorf("madsci: reading %s/state: %w", cfg.NodeURL, err)
	}
	return d, nil
}

// gated is the part of /info the device's items and gates were built from:
// a node that comes back with a different one is not silently adopted.
// Config values (they change with every settings write), the node's URL
// and id are left out.
func gated(info *NodeInfo) map[string]any {
	keys := make([]string, 0, len(info.Config))
	for k := range info.Config {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return map[string]any{"actions": info.Actions, "capabilities": info.Capabilities, "config_schema": info.ConfigSchema,
		"config_keys": keys, "module": info.ModuleName, "module_version": info.ModuleVersion}
}

// loadDescription is the start without the node: the descriptor cache, or
// an error saying how to start anyway.
func loadDescription(cfg Config, cause error) (*nodeDescription, error) {
	if cfg.Link.FailFast {
		return nil, fmt.Errorf("%w (link.fail_fast is set: not starting without the node)", cause)
	}
	if cfg.Link.DescriptorCache == "" {
		return nil, adapters.NeverReached(fmt.Errorf("%w; the device's items come from the node's /info, so starting before the node needs link.descriptor_cache (written on the first start with the node up)", cause))
	}
	var d nodeDescription
	if _, err := adapters.LoadDescriptor(cfg.Link.DescriptorCache, Kind, cfg.NodeURL, &d); err != nil {
		return nil, adapters.NeverReached(fmt.Errorf("%w; and no usable descriptor cache: %v", cause, err))
	}
	if d.Info == nil {
		return nil, fmt.Errorf("%w; descriptor cache %s has no node info", cause, cfg.Link.DescriptorCache)
	}
	if d.Layout == "" || d.Layout == LayoutAuto {
		d.Layout = LayoutV5
	}
	return &d, nil
}

// linkDown reports whether err shows the node unreachable: the request
// failed below HTTP (refused, reset, dropped) and not by our own context.
// A reply with any HTTP status is the node answering, never a link drop.
func linkDown(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var ue *url.Error
	return errors.As(err, &ue) || adapters.Unreachable(err)
}

// probe is the link's reconnect attempt: the node answers /status and
// describes itself as it did when the device was built.
func (a *adapter) probe(ctx context.Context) error {
	if _, err := a.node.Status(ctx); err != nil {
		return err
	}
	info, err := a.node.Info(ctx)
	if err != nil {
		return err
	}
	if !adapters.SameDescription(gated(info), gated(a.info)) {
		return adapters.DescriptionChanged("madsci node "+a.cfg.NodeURL, "actions, capabilities or config schema")
	}
	a.status.invalidate()
	a.state.invalidate()
	// Read the node's word now, so an errored node latches at once.
	_, _ = a.readStatus(ctx)
	return nil
}

// refusedByNode reports whether a submit error carries the node's own
// answer (an HTTP status), as opposed to a request that got no answer.
func refusedByNode(err error) bool {
	e, ok := mhp.AsError(err)
	return ok && (e.Data["http_status"] != nil || e.Data["node_errors"] != nil)
}
