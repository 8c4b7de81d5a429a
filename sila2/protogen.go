package sila2

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// Compiled is a feature with its gRPC service built from the FDL at run time.
type Compiled struct {
	Feature *Feature
	File    protoreflect.FileDescriptor
	Service protoreflect.ServiceDescriptor
	types   map[string]*DataType
}

// Method returns the service's method by name ("SayHello", "Get_StartYear").
func (c *Compiled) Method(name string) (protoreflect.MethodDescriptor, bool) {
	m := c.Service.Methods().ByName(protoreflect.Name(name))
	return m, m != nil
}

// Path returns the gRPC path of a method: /<package>.<Feature>/<Method>.
func (c *Compiled) Path(method string) string {
	return "/" + string(c.Service.FullName()) + "/" + method
}

// FQID returns a fully qualified identifier below the feature:
// FQID("Command", "SayHello", "Parameter", "Name").
func (c *Compiled) FQID(parts ...string) string {
	return c.Feature.FullyQualifiedID() + "/" + strings.Join(parts, "/")
}

// Compile builds the feature's protobuf file against the framework.
func Compile(fw *Framework, f *Feature) (*Compiled, error) {
	g := &gen{f: f, pkg: f.ProtoPackage(), types: f.typeMap()}
	fdp, err := g.file()
	if err != nil {
		return nil, fmt.Errorf("sila2: feature %s: %w", f.Identifier, err)
	}
	fd, err := protodesc.NewFile(fdp, fw.files)
	if err != nil {
		return nil, fmt.Errorf("sila2: feature %s: descriptor: %w", f.Identifier, err)
	}
	svc := fd.Services().ByName(protoreflect.Name(f.Identifier))
	if svc == nil {
		return nil, fmt.Errorf("sila2: feature %s: no service", f.Identifier)
	}
	return &Compiled{Feature: f, File: fd, Service: svc, types: g.types}, nil
}

type gen struct {
	f     *Feature
	pkg   string
	types map[string]*DataType
}

func (g *gen) full(name string) string { return "." + g.pkg + "." + name }

func fwType(name string) string { return "." + FrameworkPackage + "." + name }

// message builds a message of elements numbered 1..N; scope is the full
// name of the message (for nested structure types).
func (g *gen) message(name, scope string, es []Element) (*descriptorpb.DescriptorProto, error) {
	m := &descriptorpb.DescriptorProto{Name: proto.String(name)}
	for i, e := range es {
		fd, nested, err := g.field(e.Identifier, int32(i+1), &e.DataType, scope)
		if err != nil {
			return nil, err
		}
		m.Field = append(m.Field, fd)
		m.NestedType = append(m.NestedType, nested...)
	}
	return m, nil
}

func (g *gen) field(id string, num int32, t *DataType, scope string) (*descriptorpb.FieldDescriptorProto, []*descriptorpb.DescriptorProto, error) {
	fd := &descriptorpb.FieldDescriptorProto{
		Name:     proto.String(id),
		JsonName: proto.String(id),
		Number:   proto.Int32(num),
		Type:     tMessage.Enum(),
		Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
	}
	t = unconstrain(t)
	if t.List != nil {
		fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		t = unconstrain(t.List)
	}
	switch {
	case t.Basic != "":
		fd.TypeName = proto.String(fwType(t.Basic))
	case t.Identifier != "":
		fd.TypeName = proto.String(g.full("DataType_" + t.Identifier))
	case t.Structure != nil:
		sname := id + "_Struct"
		nested, err := g.message(sname, scope+"."+sname, t.Structure.Elements)
		if err != nil {
			return nil, nil, err
		}
		fd.TypeName = proto.String("." + scope + "." + sname)
		return fd, []*descriptorpb.DescriptorProto{nested}, nil
	default:
		return nil, nil, fmt.Errorf("element %s: unsupported data type", id)
	}
	return fd, nil, nil
}

func unconstrain(t *DataType) *DataType {
	for t.Constrained != nil {
		t = &t.Constrained.DataType
	}
	return t
}

func method(name, in, out string, serverStream bool) *descriptorpb.MethodDescriptorProto {
	m := &descriptorpb.MethodDescriptorProto{Name: proto.String(name), InputType: proto.String(in), OutputType: proto.String(out)}
	if serverStream {
		m.ServerStreaming = proto.Bool(true)
	}
	return m
}

func (g *gen) file() (*descriptorpb.FileDescriptorProto, error) {
	f := g.f
	file := &descriptorpb.FileDescriptorProto{
		Name:       proto.String(strings.ReplaceAll(f.FullyQualifiedID(), "/", "_") + ".proto"),
		Package:    proto.String(g.pkg),
		Syntax:     proto.String("proto3"),
		Dependency: []string{frameworkFile},
	}
	svc := &descriptorpb.ServiceDescriptorProto{Name: proto.String(f.Identifier)}
	add := func(name string, es []Element) error {
		m, err := g.message(name, g.pkg+"."+name, es)
		if err != nil {
			return err
		}
		file.MessageType = append(file.MessageType, m)
		return nil
	}
	for _, d := range f.DataTypes {
		if err := add("DataType_"+d.Identifier, []Element{{Identifier: d.Identifier, DataType: d.DataType}}); err != nil {
			return nil, err
		}
	}
	uuid := fwType("CommandExecutionUUID")
	for _, c := range f.Commands {
		id := c.Identifier
		if err := add(id+"_Parameters", c.Parameters); err != nil {
			return nil, err
		}
		if err := add(id+"_Responses", c.Responses); err != nil {
			return nil, err
		}
		if !c.IsObservable() {
			svc.Method = append(svc.Method, method(id, g.full(id+"_Parameters"), g.full(id+"_Responses"), false))
			continue
		}
		svc.Method = append(svc.Method,
			method(id, g.full(id+"_Parameters"), fwType("CommandConfirmation"), false),
			method(id+"_Info", uuid, fwType("ExecutionInfo"), true))
		if len(c.Intermediate) > 0 {
			if err := add(id+"_IntermediateResponses", c.Intermediate); err != nil {
				return nil, err
			}
			svc.Method = append(svc.Method, method(id+"_Intermediate", uuid, g.full(id+"_IntermediateResponses"), true))
		}
		svc.Method = append(svc.Method, method(id+"_Result", uuid, g.full(id+"_Responses"), false))
	}
	for _, p := range f.Properties {
		id := p.Identifier
		verb := "Get_"
		if p.IsObservable() {
			verb = "Subscribe_"
		}
		if err := add(verb+id+"_Parameters", nil); err != nil {
			return nil, err
		}
		if err := add(verb+id+"_Responses", []Element{{Identifier: id, DataType: p.DataType}}); err != nil {
			return nil, err
		}
		svc.Method = append(svc.Method, method(verb+id, g.full(verb+id+"_Parameters"), g.full(verb+id+"_Responses"), p.IsObservable()))
	}
	for _, md := range f.Metadata {
		id := md.Identifier
		if err := add("Metadata_"+id, []Element{{Identifier: id, DataType: md.DataType}}); err != nil {
			return nil, err
		}
		name := "Get_FCPAffectedByMetadata_" + id
		if err := add(name+"_Parameters", nil); err != nil {
			return nil, err
		}
		affected := Element{Identifier: "AffectedCalls", DataType: DataType{List: &DataType{Basic: BasicString}}}
		if err := add(name+"_Responses", []Element{affected}); err != nil {
			return nil, err
		}
		svc.Method = append(svc.Method, method(name, g.full(name+"_Parameters"), g.full(name+"_Responses"), false))
	}
	file.Service = []*descriptorpb.ServiceDescriptorProto{svc}
	return file, nil
}
