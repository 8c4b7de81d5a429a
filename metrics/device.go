package metrics

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/openmhp/mhp-go"
)

// Device is an mhp.Device decorator that times every call by kind, counts
// refusals by their data.gate, counts estops with their answer latency, and
// sees sessions end. Listen-fed job outcomes and backend link state are
// collected from the moment Device is made until Close.
type Device struct {
	mhp.Device
	m       *Metrics
	adapter string
	stop    func()
	once    sync.Once
}

// resourceDevice keeps the inner device's mhp.ResourceProvider visible to
// servers that type-assert it.
type resourceDevice struct {
	*Device
	mhp.ResourceProvider
}

// Device wraps dev. adapter labels the backend link metrics ("sim",
// "opcua", ...; see AdapterLabel). The result implements
// mhp.ResourceProvider when dev does, and Unwrap for mhp.Find. stop ends
// the notification feed; it does not close dev.
func (m *Metrics) Device(dev mhp.Device, adapter string) (wrapped mhp.Device, stop func()) {
	d := &Device{Device: dev, m: m, adapter: adapter}
	link := m.backendUp.WithLabelValues(adapter)
	if desc, err := dev.Describe(context.Background(), mhp.DescribeRequest{Detail: mhp.DetailCard}); err == nil && desc.Backend != nil {
		link.Set(b2f(desc.Backend.Connected))
	} else {
		link.Set(1) // a driver that tracks no link is as connected as it says
	}
	up := true
	d.stop = dev.Listen(func(n mhp.Notification) {
		switch n.Method {
		case mhp.NotifyJobsFinished:
			if j := n.Job(); j != nil {
				m.jobs.WithLabelValues(j.Action, string(j.State)).Inc()
			}
		case mhp.NotifyBackendLink:
			connected := linkConnected(n.Params["backend"])
			link.Set(b2f(connected))
			if connected && !up {
				m.reconnects.WithLabelValues(adapter).Inc()
			}
			up = connected
		}
	})
	if rp, ok := dev.(mhp.ResourceProvider); ok {
		return &resourceDevice{Device: d, ResourceProvider: rp}, d.Close
	}
	return d, d.Close
}

// AdapterLabel is the adapter label of a serve target: "sim" for
// sim:thermocycler, "package" for a folder, else the config file's base
// name without extension (opcua.yaml: "opcua").
func AdapterLabel(target string) string {
	if strings.HasPrefix(target, "sim:") {
		return "sim"
	}
	if fi, err := os.Stat(target); err == nil && fi.IsDir() {
		return "package"
	}
	base := filepath.Base(target)
	if i := strings.IndexByte(base, '.'); i > 0 {
		base = base[:i]
	}
	if len(base) > 40 {
		base = base[:40]
	}
	return base
}

func linkConnected(v any) bool {
	switch b := v.(type) {
	case mhp.BackendLink:
		return b.Connected
	case *mhp.BackendLink:
		return b != nil && b.Connected
	case map[string]any:
		c, _ := b["connected"].(bool)
		return c
	}
	return false
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Unwrap returns the decorated device.
func (d *Device) Unwrap() mhp.Device { return d.Device }

// Close stops collecting notifications; it does not close the device.
func (d *Device) Close() { d.once.Do(d.stop) }

// observe records a call's latency and, when it was refused, its gate.
func (d *Device) observe(kind string, start time.Time, err error) {
	d.m.hookLatency.WithLabelValues(kind).Observe(since(start))
	if err == nil {
		return
	}
	gate := "other"
	if me, ok := mhp.AsError(err); ok {
		if g, ok := me.Data["gate"].(string); ok && g != "" && len(g) <= 32 {
			gate = g
		} else if me.Code == mhp.CodeLimitViolation || me.Code == mhp.CodeInvalidValue {
			gate = "limits"
		} else if me.Code == mhp.CodeInvalidParams || me.Code == mhp.CodeUnknownName {
			gate = "params"
		}
	}
	d.m.refusals.WithLabelValues(gate).Inc()
}

// Read implements mhp.Device.
func (d *Device) Read(ctx context.Context, names []string) (*mhp.ReadResult, error) {
	t := time.Now()
	r, err := d.Device.Read(ctx, names)
	d.observe("read", t, err)
	return r, err
}

// Write implements mhp.Device.
func (d *Device) Write(ctx context.Context, req mhp.WriteRequest) (*mhp.WriteResult, error) {
	t := time.Now()
	r, err := d.Device.Write(ctx, req)
	d.observe("write", t, err)
	return r, err
}

// Invoke implements mhp.Device.
func (d *Device) Invoke(ctx context.Context, req mhp.InvokeRequest) (*mhp.InvokeResult, error) {
	t := time.Now()
	r, err := d.Device.Invoke(ctx, req)
	d.observe("invoke", t, err)
	return r, err
}

// Acquire implements mhp.Device.
func (d *Device) Acquire(ctx context.Context, ttl time.Duration) (*mhp.Lease, error) {
	t := time.Now()
	r, err := d.Device.Acquire(ctx, ttl)
	d.observe("acquire", t, err)
	return r, err
}

// Reset implements mhp.Device.
func (d *Device) Reset(ctx context.Context) (*mhp.ResetResult, error) {
	t := time.Now()
	r, err := d.Device.Reset(ctx)
	d.observe("reset", t, err)
	return r, err
}

// EStop implements mhp.Device: counted, and its answer latency observed.
func (d *Device) EStop(ctx context.Context, reason string) (*mhp.EStopResult, error) {
	t := time.Now()
	r, err := d.Device.EStop(ctx, reason)
	d.m.estops.Inc()
	d.m.estopLatency.Observe(since(t))
	d.observe("estop", t, err)
	return r, err
}

// CancelJob implements mhp.Device.
func (d *Device) CancelJob(ctx context.Context, id string) (*mhp.Job, error) {
	t := time.Now()
	r, err := d.Device.CancelJob(ctx, id)
	d.observe("cancel", t, err)
	return r, err
}

// EndSession implements mhp.Device; the session leaves the sessions gauge.
func (d *Device) EndSession(ctx context.Context) {
	d.m.sessionEnded(mhp.SessionFrom(ctx))
	d.Device.EndSession(ctx)
}
