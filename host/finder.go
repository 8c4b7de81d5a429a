package host

import (
	"context"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/directory"
)

// Finder is the fleet as the MCP bridge's finder: search ranks the fleet's
// cards (with the location the person recorded) and pings each device (a
// hosted one is started on first use); get resolves an id to its target.
// The fleet file is read on every call, so a device another process added
// is found at once.
func (f *Fleet) Finder() directory.Finder { return finder{f} }

type finder struct{ f *Fleet }

func (fi finder) directory() (*directory.Directory, error) {
	list, err := fi.f.List()
	if err != nil {
		return nil, err
	}
	cards := make([]directory.Card, 0, len(list))
	for _, e := range list {
		cards = append(cards, e.card())
	}
	return directory.New(directory.Config{Index: directory.NewIndex(cards), Pinger: directory.PingerFunc(fi.f.ping)})
}

// card is the entry's card as the directory indexes it.
func (e Entry) card() directory.Card {
	c := directory.Card{DeviceInfo: e.Card.DeviceInfo, Signals: e.Card.Signals, Settings: e.Card.Settings, Actions: e.Card.Actions, Target: e.Target}
	c.ID = e.ID
	if e.Location != "" {
		c.Location = e.Location
	}
	return c
}

// Search implements directory.Finder.
func (fi finder) Search(ctx context.Context, q directory.Query) ([]directory.Result, error) {
	d, err := fi.directory()
	if err != nil {
		return nil, err
	}
	return d.Search(ctx, q)
}

// Get implements directory.Finder: the entry's card and target, not pinged
// (the connection that follows starts a hosted device).
func (fi finder) Get(ctx context.Context, id string) (*directory.Result, error) {
	e, err := fi.f.Entry(id)
	if err != nil {
		return nil, err
	}
	return &directory.Result{Card: e.card()}, nil
}

func (f *Fleet) ping(ctx context.Context, target string) (mhp.DeviceState, error) {
	var d *client.Device
	if IsHosted(target) {
		dev, err := f.Hosted(ctx, target)
		if err != nil {
			return "", err
		}
		p, err := dev.Ping(ctx)
		if err != nil {
			return "", err
		}
		return p.State, nil
	}
	d, err := f.Dial(ctx, target)
	if err != nil {
		return "", err
	}
	defer d.Close()
	p, err := d.Ping(ctx)
	if err != nil {
		return "", err
	}
	return p.State, nil
}

// Dial connects to a fleet target: an in-process connection (its own MHP
// session) to a hosted device, started on first use, or a client over
// HTTP to a remote one. It never starts a stdio: command and never carries
// an operator token: it is the model's connection.
func (f *Fleet) Dial(ctx context.Context, target string) (*client.Device, error) {
	opts := f.cfg.Client
	opts.OperatorToken = ""
	return f.DialWith(ctx, target, opts)
}

// DialWith is Dial with the caller's client options: the operator's
// connection (mhp_operator, mhp_permit) passes its operator token, which
// an in-process connection honours as the transport would.
func (f *Fleet) DialWith(ctx context.Context, target string, opts client.Options) (*client.Device, error) {
	opts.AllowStdio = false
	if IsHosted(target) {
		dev, err := f.Hosted(ctx, target)
		if err != nil {
			return nil, err
		}
		return client.Connect(dev, opts), nil
	}
	if directory.IsCommandTarget(target) {
		return nil, mhp.Errorf(mhp.CodeInvalidParams, "the fleet never starts a stdio: command (%s)", mhp.Truncate(target, 120))
	}
	return client.Dial(ctx, target, opts)
}

// Simulated is the host's decision whether the fleet's device with the id
// is simulated (a twin or a sim: package), never the device's tags; an id
// not in the fleet is hardware.
func (f *Fleet) Simulated(id string) bool {
	e, err := f.Entry(id)
	return err == nil && e.Simulated
}
