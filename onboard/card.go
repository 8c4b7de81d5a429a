package onboard

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/client"
	"github.com/openmhp/mhp-go/devicepkg"
)

// Probe is one line of the safety card: a dry-run request and what the
// device answered.
type Probe struct {
	Probe string `json:"probe"`
	// Expect is "refused" for a probe past a limit or of the wrong type,
	// else "allowed".
	Expect string `json:"expect"`
	Got    string `json:"got"`
	// Held is true when the answer is the one expected.
	Held bool `json:"held"`
}

// maxProbes bounds the safety card.
const maxProbes = 24

// safetyCard dry-runs, on the package's device (built, not started, so
// nothing reaches the instrument), a write past each end of every numeric
// setting's range, a wrong type, and each action's example.
func (iv *Interview) safetyCard(ctx context.Context, dir string) []Probe {
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		return []Probe{{Probe: "load the package", Expect: "allowed", Got: err.Error()}}
	}
	defer pkg.Close()
	dev, err := iv.cfg.Fleet.BuildPackage(ctx, pkg)
	if err != nil {
		return []Probe{{Probe: "build the package", Expect: "allowed", Got: err.Error()}}
	}
	defer dev.Close()
	d := client.Connect(dev, client.Options{ClientName: "mhp-onboard"})
	defer d.Close()
	desc, err := d.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		return []Probe{{Probe: "describe", Expect: "allowed", Got: err.Error()}}
	}
	var out []Probe
	write := func(name string, v any, expect string) {
		_, err := d.Write(ctx, mhp.WriteRequest{Name: name, Value: v, DryRun: true})
		out = append(out, probe(fmt.Sprintf("write %s = %v (dry run)", name, jsonOf(v)), expect, err))
	}
	for _, s := range desc.Settings {
		if len(out) >= maxProbes {
			break
		}
		if l := s.Limits; l != nil && l.Min != nil && l.Max != nil {
			write(s.Name, *l.Max+1, "refused")
			write(s.Name, *l.Min-1, "refused")
		}
		switch s.Type {
		case mhp.TypeNumber, mhp.TypeInteger:
			write(s.Name, "not a number", "refused")
		case mhp.TypeBoolean:
			write(s.Name, "maybe", "refused")
		}
	}
	for _, a := range desc.Actions {
		if len(out) >= maxProbes {
			break
		}
		for _, ex := range a.Examples {
			_, err := d.Invoke(ctx, mhp.InvokeRequest{Name: a.Name, Params: ex, DryRun: true})
			out = append(out, probe(fmt.Sprintf("invoke %s %s (dry run)", a.Name, jsonOf(ex)), "allowed", err))
			break
		}
	}
	return out
}

func probe(what, expect string, err error) Probe {
	p := Probe{Probe: what, Expect: expect, Got: "allowed"}
	if err != nil {
		p.Got = err.Error()
		if e, ok := mhp.AsError(err); ok {
			p.Got = e.Code.String() + ": " + mhp.Truncate(e.Message, 200)
			// An approval or interlock refusal on an allowed probe is the
			// gate a person or a signal opens, not a wrong limit.
			if expect == "allowed" && (e.Code == mhp.CodeApprovalRequired || e.Code == mhp.CodeInterlockOpen) {
				p.Held = true
				return p
			}
		}
		p.Held = expect == "refused"
		return p
	}
	p.Held = expect == "allowed"
	return p
}
