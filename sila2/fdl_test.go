package sila2_test

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

var seedFDLs = []string{
	sila2.SiLAServiceFDL,
	silatest.GreetingProviderFDL,
	silatest.TemperatureControllerFDL,
	silatest.CancelControllerFDL,
	silatest.LockControllerFDL,
	silatest.FixtureFDL,
}

func TestParseFDLStandardShapes(t *testing.T) {
	f, err := sila2.ParseFDL([]byte(silatest.TemperatureControllerFDL))
	if err != nil {
		t.Fatal(err)
	}
	if f.FullyQualifiedID() != "org.silastandard/examples/TemperatureController/v1" ||
		f.ProtoPackage() != "sila2.org.silastandard.examples.temperaturecontroller.v1" {
		t.Fatalf("ids %s %s", f.FullyQualifiedID(), f.ProtoPackage())
	}
	fw, err := sila2.NewFramework()
	if err != nil {
		t.Fatal(err)
	}
	c, err := sila2.Compile(fw, f)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"ControlTemperature", "ControlTemperature_Info", "ControlTemperature_Intermediate",
		"ControlTemperature_Result", "Subscribe_CurrentTemperature", "Get_Profile", "SetMode", "Stabilize_Info"} {
		if _, ok := c.Method(m); !ok {
			t.Errorf("no method %s", m)
		}
	}
	if _, ok := c.Method("Stabilize_Intermediate"); ok {
		t.Error("Stabilize has no intermediate responses, so no _Intermediate method")
	}
	if p := c.Path("ControlTemperature"); p != "/sila2.org.silastandard.examples.temperaturecontroller.v1.TemperatureController/ControlTemperature" {
		t.Errorf("path %s", p)
	}
	md, _ := c.Method("ControlTemperature")
	if md.Output().FullName() != "sila2.org.silastandard.CommandConfirmation" {
		t.Errorf("observable command returns %s", md.Output().FullName())
	}
	info, _ := c.Method("ControlTemperature_Info")
	if !info.IsStreamingServer() || info.Input().FullName() != "sila2.org.silastandard.CommandExecutionUUID" {
		t.Errorf("_Info %v", info)
	}
	// A structure inside a list is a nested <Id>_Struct message, elements numbered from 1.
	get, _ := c.Method("Get_Profile")
	fd := get.Output().Fields().ByNumber(1)
	if !fd.IsList() || fd.Message().FullName() != "sila2.org.silastandard.examples.temperaturecontroller.v1.Get_Profile_Responses.Profile_Struct" {
		t.Fatalf("Profile field %v %s", fd.IsList(), fd.Message().FullName())
	}
	if fd.Message().Fields().ByNumber(2).Name() != protoreflect.Name("HoldTime") {
		t.Fatalf("struct element 2 %s", fd.Message().Fields().ByNumber(2).Name())
	}
	// A data type identifier references DataType_<Id>.
	set, _ := c.Method("SetMode")
	if got := set.Input().Fields().ByNumber(1).Message().FullName(); got != "sila2.org.silastandard.examples.temperaturecontroller.v1.DataType_ControlMode" {
		t.Fatalf("Mode type %s", got)
	}
	// Metadata get their affected-calls method.
	lc, _ := sila2.ParseFDL([]byte(silatest.LockControllerFDL))
	lcc, err := sila2.Compile(fw, lc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := lcc.Method("Get_FCPAffectedByMetadata_LockIdentifier"); !ok {
		t.Fatal("no Get_FCPAffectedByMetadata_LockIdentifier")
	}
	if lcc.File.Messages().ByName("Metadata_LockIdentifier") == nil {
		t.Fatal("no Metadata_LockIdentifier message")
	}
}

func TestParseFDLRefuses(t *testing.T) {
	wrap := func(body string) string {
		return `<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.example" Category="tests"><Identifier>T</Identifier>` + body + `</Feature>`
	}
	cmd := func(dt string) string {
		return wrap(`<Command><Identifier>C</Identifier><Observable>No</Observable><Parameter><Identifier>P</Identifier><DataType>` + dt + `</DataType></Parameter></Command>`)
	}
	for _, tc := range []struct{ name, fdl, want string }{
		{"not xml", "<Feature", "fdl"},
		{"wrong root", "<Thing/>", "want <Feature>"},
		{"bad identifier", strings.Replace(wrap(""), "<Identifier>T<", "<Identifier>t<", 1), "identifier"},
		{"bad version", strings.Replace(wrap(""), `FeatureVersion="1.0"`, `FeatureVersion="x"`, 1), "FeatureVersion"},
		{"no originator", strings.Replace(wrap(""), `Originator="org.example"`, ``, 1), "Originator"},
		{"two kinds", cmd(`<Basic>String</Basic><DataTypeIdentifier>X</DataTypeIdentifier>`), "exactly one"},
		{"no kind", cmd(``), "exactly one"},
		{"unknown basic", cmd(`<Basic>Float</Basic>`), "unknown basic"},
		{"list of lists", cmd(`<List><DataType><List><DataType><Basic>String</Basic></DataType></List></DataType></List>`), "list of lists"},
		{"undefined type", cmd(`<DataTypeIdentifier>Nope</DataTypeIdentifier>`), "not defined"},
		{"bad bound", cmd(`<Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MaximalInclusive>hot</MaximalInclusive></Constraints></Constrained>`), "not a number"},
		{"bad pattern", cmd(`<Constrained><DataType><Basic>String</Basic></DataType><Constraints><Pattern>(</Pattern></Constraints></Constrained>`), "pattern"},
		{"constrained struct", cmd(`<Constrained><DataType><Structure><Element><Identifier>A</Identifier><DataType><Basic>String</Basic></DataType></Element></Structure></DataType><Constraints/></Constrained>`), "constrained"},
		{"cyclic types", wrap(`<DataTypeDefinition><Identifier>A</Identifier><DataType><Structure><Element><Identifier>E</Identifier><DataType><DataTypeIdentifier>B</DataTypeIdentifier></DataType></Element></Structure></DataType></DataTypeDefinition>
			<DataTypeDefinition><Identifier>B</Identifier><DataType><DataTypeIdentifier>A</DataTypeIdentifier></DataType></DataTypeDefinition>`), "itself"},
		{"duplicate", wrap(`<Property><Identifier>C</Identifier><Observable>No</Observable><DataType><Basic>String</Basic></DataType></Property>
			<Command><Identifier>C</Identifier><Observable>No</Observable></Command>`), "clashes"},
		{"undeclared error", wrap(`<Command><Identifier>C</Identifier><Observable>No</Observable><DefinedExecutionErrors><Identifier>Boom</Identifier></DefinedExecutionErrors></Command>`), "does not declare"},
		{"observable?", wrap(`<Command><Identifier>C</Identifier><Observable>Maybe</Observable></Command>`), "Yes or No"},
		{"intermediate on unobservable", wrap(`<Command><Identifier>C</Identifier><Observable>No</Observable><IntermediateResponse><Identifier>I</Identifier><DataType><Basic>Real</Basic></DataType></IntermediateResponse></Command>`), "intermediate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sila2.ParseFDL([]byte(tc.fdl))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want an error mentioning %q, got %v", tc.want, err)
			}
		})
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{"TargetTemperature": "target_temperature", "DurationS": "duration_s",
		"CommandExecutionUUID": "command_execution_uuid", "PH": "ph", "ServerVendorURL": "server_vendor_url",
		"HoldS": "hold_s", "Ok": "ok", "Step2Temp": "step2_temp", "UUIDValue": "uuid_value"} {
		if got := sila2.SnakeCase(in); got != want {
			t.Errorf("SnakeCase(%s) = %s, want %s", in, got, want)
		}
	}
}

// FuzzParseFDL: whatever the input, ParseFDL never panics, and whatever it
// accepts compiles to descriptors and yields shapes for every element.
func FuzzParseFDL(f *testing.F) {
	for _, s := range seedFDLs {
		f.Add([]byte(s))
	}
	f.Add([]byte(`<Feature FeatureVersion="2.1" Originator="a.b" Category="c"><Identifier>X</Identifier>
		<DataTypeDefinition><Identifier>D</Identifier><DataType><Structure><Element><Identifier>E</Identifier><DataType><List><DataType><Basic>Date</Basic></DataType></List></DataType></Element></Structure></DataType></DataTypeDefinition>
		<Property><Identifier>P</Identifier><Observable>Yes</Observable><DataType><DataTypeIdentifier>D</DataTypeIdentifier></DataType></Property></Feature>`))
	f.Add([]byte(`<Feature/>`))
	fw, err := sila2.NewFramework()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		feat, err := sila2.ParseFDL(data)
		if err != nil {
			return
		}
		c, err := sila2.Compile(fw, feat)
		if err != nil {
			t.Fatalf("ParseFDL accepted a feature that does not compile: %v", err)
		}
		for _, cmd := range feat.Commands {
			for _, p := range cmd.Parameters {
				if s := c.Shape(&p.DataType); s == nil || s.Type == "" {
					t.Fatalf("no shape for %s/%s", cmd.Identifier, p.Identifier)
				}
			}
		}
		for _, p := range feat.Properties {
			if s := c.Shape(&p.DataType); s == nil || s.Type == "" {
				t.Fatalf("no shape for property %s", p.Identifier)
			}
		}
		_ = feat.FullyQualifiedID()
	})
}

func TestParseFDLRefusesExponentialTypes(t *testing.T) {
	var b strings.Builder
	b.WriteString(`<Feature FeatureVersion="1.0" Originator="org.example"><Identifier>T</Identifier>`)
	b.WriteString(`<DataTypeDefinition><Identifier>D0</Identifier><DataType><Basic>Real</Basic></DataType></DataTypeDefinition>`)
	for i := 1; i <= 20; i++ {
		tpl := `<DataTypeDefinition><Identifier>D%d</Identifier><DataType><Structure>` +
			`<Element><Identifier>A</Identifier><DataType><DataTypeIdentifier>D%d</DataTypeIdentifier></DataType></Element>` +
			`<Element><Identifier>B</Identifier><DataType><DataTypeIdentifier>D%d</DataTypeIdentifier></DataType></Element>` +
			`</Structure></DataType></DataTypeDefinition>`
		b.WriteString(fmt.Sprintf(tpl, i, i-1, i-1))
	}
	b.WriteString(`</Feature>`)
	_, err := sila2.ParseFDL([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "expands") {
		t.Fatalf("2^20-node type: want a refusal, got %v", err)
	}
}

func TestParseFDLOriginatorBecomesPackage(t *testing.T) {
	fw, _ := sila2.NewFramework()
	for _, tc := range []struct {
		orig, cat string
		ok        bool
	}{
		{"org.silastandard", "core.commands", true},
		{"de.Uni_Lab", "", true},
		{"my-org", "tests", false},
		{"org.2lab", "tests", false},
		{"org..x", "tests", false},
	} {
		text := fmt.Sprintf(`<Feature FeatureVersion="1.0" Originator=%q Category=%q><Identifier>T</Identifier></Feature>`, tc.orig, tc.cat)
		f, err := sila2.ParseFDL([]byte(text))
		if (err == nil) != tc.ok {
			t.Fatalf("%s/%s: err %v, want ok=%v", tc.orig, tc.cat, err, tc.ok)
		}
		if err == nil {
			if _, err := sila2.Compile(fw, f); err != nil {
				t.Fatalf("%s/%s: accepted but does not compile: %v", tc.orig, tc.cat, err)
			}
		}
	}
}
