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
	// Expect is "refused (Code)" for a probe past a limit or of the wrong
	// type, else "allowed".
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
	write := func(name string, v any, want mhp.Code) {
		_, err := d.Write(ctx, mhp.WriteRequest{Name: name, Value: v, DryRun: true})
		out = append(out, probe(fmt.Sprintf("write %s = %v (dry run)", name, jsonOf(v)), want, err))
	}
	for _, s := range desc.Settings {
		if len(out) >= maxProbes {
			break
		}
		if l := s.Limits; l != nil && l.Min != nil && l.Max != nil {
			write(s.Name, *l.Max+1, mhp.CodeLimitViolation)
			write(s.Name, *l.Min-1, mhp.CodeLimitViolation)
		}
		switch s.Type {
		case mhp.TypeNumber, mhp.TypeInteger:
			write(s.Name, "not a number", mhp.CodeInvalidValue)
		case mhp.TypeBoolean:
			write(s.Name, "maybe", mhp.CodeInvalidValue)
		}
	}
	for _, a := range desc.Actions {
		if len(out) >= maxProbes {
			break
		}
		for _, ex := range a.Examples {
			_, err := d.Invoke(ctx, mhp.InvokeRequest{Name: a.Name, Params: ex, DryRun: true})
			out = append(out, probe(fmt.Sprintf("invoke %s %s (dry run)", a.Name, jsonOf(ex)), 0, err))
			break
		}
	}
	return out
}

// probe is a card line: want is the refusal expected (0: allowed). A
// refusal with another code does not hold (a limit refused for a reason
// other than the limit proves nothing); an allowed probe holds when it
// passes or stops at a gate a person or a signal opens (approval,
// interlock).
func probe(what string, want mhp.Code, err error) Probe {
	p := Probe{Probe: what, Expect: "allowed", Got: "allowed"}
	if want != 0 {
		p.Expect = "refused (" + want.String() + ")"
	}
	if err == nil {
		p.Held = want == 0
		return p
	}
	p.Got = err.Error()
	e, ok := mhp.AsError(err)
	if !ok {
		return p
	}
	p.Got = e.Code.String() + ": " + mhp.Truncate(e.Message, 200)
	if want == 0 {
		p.Held = e.Code == mhp.CodeApprovalRequired || e.Code == mhp.CodeInterlockOpen
	} else {
		p.Held = e.Code == want
	}
	return p
}
