package opcua

import (
	"context"
	"errors"
	"fmt"

	"github.com/gopcua/opcua/ua"

	"github.com/openmhp/mhp-go"
)

// LADS control functions as actions. A lads action runs a functional unit;
// pointed at a LADS control function (ControlFunctionState, TargetValue) it
// cannot run. The config does not say which kind a node is, only the
// server's address space does, so the config is refused as soon as the
// server is reached: by [Probe] (so by [Register], when the file is
// loaded), and by Start when the server answers at start. A server first
// reached later makes the action refused NotSupported at the invoke, dry
// runs included, before a job is made and with nothing sent.

// KindError is a lads action whose node is of a kind the adapter cannot
// run (a LADS control function).
type KindError struct {
	Action string // the action's name
	Node   string // its lads.functional_unit
	Kind   string // what the node is
}

func (e *KindError) Error() string {
	return fmt.Sprintf("opcua: action %s: lads.functional_unit %s: %v", e.Action, e.Node, errUnsupportedKind{e.Kind})
}

// checkKinds browses every lads action's node and returns the first that
// is of an unsupported kind; a node that cannot be browsed is no error
// here (the action reports it when invoked).
func checkKinds(ctx context.Context, cl Client, cfg Config, resolve func(string) *ua.NodeID) error {
	for _, it := range cfg.Actions {
		if it.LADS == nil {
			continue
		}
		_, err := resolveLADS(ctx, cl, resolve(it.LADS.FunctionalUnit))
		var kind errUnsupportedKind
		if errors.As(err, &kind) {
			return &KindError{Action: it.Name, Node: it.LADS.FunctionalUnit, Kind: kind.kind}
		}
	}
	return nil
}

// noteKind records what a connection found of a lads action's node: an
// unsupported kind (the action is refused from now on), or a node that
// resolved (err nil).
func (a *adapter) noteKind(item ActionItem, err error) {
	var kind errUnsupportedKind
	a.mu.Lock()
	defer a.mu.Unlock()
	if errors.As(err, &kind) {
		a.badKind[item.Name] = &KindError{Action: item.Name, Node: item.LADS.FunctionalUnit, Kind: kind.kind}
		return
	}
	if err == nil {
		delete(a.badKind, item.Name)
	}
}

// firstBadKind is the first lads action a connection found unsupported.
func (a *adapter) firstBadKind() *KindError {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range a.cfg.Actions {
		if e, ok := a.badKind[it.Name]; ok {
			return e
		}
	}
	return nil
}

// validateKind is a lads action's Validate hook (the limits gate): an
// action whose node a connection found to be of an unsupported kind is
// refused NotSupported, naming the kind; nothing is sent.
func (a *adapter) validateKind(item ActionItem) func(map[string]any) error {
	return func(map[string]any) error {
		a.mu.Lock()
		e, bad := a.badKind[item.Name]
		a.mu.Unlock()
		if !bad {
			return nil
		}
		return mhp.Errorf(mhp.CodeNotSupported, "action %s: lads.functional_unit %s: %v; nothing was sent",
			item.Name, e.Node, errUnsupportedKind{e.Kind}).With("reason", "unsupported_kind").With(mhp.DataGate, mhp.GateLimits)
	}
}
