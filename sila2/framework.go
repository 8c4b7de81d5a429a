package sila2

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// FrameworkPackage is the protobuf package of the SiLA framework messages.
const FrameworkPackage = "sila2.org.silastandard"

// frameworkFile is the file name the feature files import.
const frameworkFile = "SiLAFramework.proto"

// Command statuses of ExecutionInfo.commandStatus.
const (
	StatusWaiting              = 0
	StatusRunning              = 1
	StatusFinishedSuccessfully = 2
	StatusFinishedWithError    = 3
)

// Framework error types of FrameworkError.errorType.
const (
	FrameworkCommandExecutionNotAccepted = 0
	FrameworkInvalidCommandExecutionUUID = 1
	FrameworkCommandExecutionNotFinished = 2
	FrameworkInvalidMetadata             = 3
	FrameworkNoMetadataAllowed           = 4
)

var frameworkErrorNames = map[int32]string{
	FrameworkCommandExecutionNotAccepted: "COMMAND_EXECUTION_NOT_ACCEPTED",
	FrameworkInvalidCommandExecutionUUID: "INVALID_COMMAND_EXECUTION_UUID",
	FrameworkCommandExecutionNotFinished: "COMMAND_EXECUTION_NOT_FINISHED",
	FrameworkInvalidMetadata:             "INVALID_METADATA",
	FrameworkNoMetadataAllowed:           "NO_METADATA_ALLOWED",
}

// Framework holds the descriptors of SiLAFramework.proto, built in Go at
// run time, and the registry feature files resolve against.
type Framework struct {
	File protoreflect.FileDescriptor
	// Binary is SiLABinaryTransfer.proto (BinaryUpload, BinaryDownload).
	Binary protoreflect.FileDescriptor
	files  *protoregistry.Files
}

type fieldSpec struct {
	name   string
	num    int32
	typ    descriptorpb.FieldDescriptorProto_Type
	msg    string // type name for messages and enums, relative to the package
	oneof  *int32
	repeat bool
}

func msgProto(name string, fields ...fieldSpec) *descriptorpb.DescriptorProto {
	m := &descriptorpb.DescriptorProto{Name: proto.String(name)}
	for _, f := range fields {
		fd := &descriptorpb.FieldDescriptorProto{
			Name:     proto.String(f.name),
			JsonName: proto.String(f.name),
			Number:   proto.Int32(f.num),
			Type:     f.typ.Enum(),
			Label:    descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum(),
		}
		if f.repeat {
			fd.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
		}
		if f.msg != "" {
			fd.TypeName = proto.String("." + FrameworkPackage + "." + f.msg)
		}
		if f.oneof != nil {
			fd.OneofIndex = f.oneof
		}
		m.Field = append(m.Field, fd)
	}
	return m
}

const (
	tString  = descriptorpb.FieldDescriptorProto_TYPE_STRING
	tInt64   = descriptorpb.FieldDescriptorProto_TYPE_INT64
	tInt32   = descriptorpb.FieldDescriptorProto_TYPE_INT32
	tUint32  = descriptorpb.FieldDescriptorProto_TYPE_UINT32
	tUint64  = descriptorpb.FieldDescriptorProto_TYPE_UINT64
	tDouble  = descriptorpb.FieldDescriptorProto_TYPE_DOUBLE
	tBool    = descriptorpb.FieldDescriptorProto_TYPE_BOOL
	tBytes   = descriptorpb.FieldDescriptorProto_TYPE_BYTES
	tMessage = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE
	tEnum    = descriptorpb.FieldDescriptorProto_TYPE_ENUM
)

func enumProto(name string, values ...string) *descriptorpb.EnumDescriptorProto {
	e := &descriptorpb.EnumDescriptorProto{Name: proto.String(name)}
	for i, v := range values {
		e.Value = append(e.Value, &descriptorpb.EnumValueDescriptorProto{Name: proto.String(v), Number: proto.Int32(int32(i))})
	}
	return e
}

// frameworkProto writes SiLAFramework.proto as a descriptor.
func frameworkProto() *descriptorpb.FileDescriptorProto {
	zero := proto.Int32(0)
	binary := msgProto("Binary",
		fieldSpec{name: "value", num: 1, typ: tBytes, oneof: zero},
		fieldSpec{name: "binaryTransferUUID", num: 2, typ: tString, oneof: zero})
	binary.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("union")}}

	execInfo := msgProto("ExecutionInfo",
		fieldSpec{name: "commandStatus", num: 1, typ: tEnum, msg: "ExecutionInfo.CommandStatus"},
		fieldSpec{name: "progressInfo", num: 2, typ: tMessage, msg: "Real"},
		fieldSpec{name: "estimatedRemainingTime", num: 3, typ: tMessage, msg: "Duration"},
		fieldSpec{name: "updatedLifetimeOfExecution", num: 4, typ: tMessage, msg: "Duration"})
	execInfo.EnumType = []*descriptorpb.EnumDescriptorProto{
		enumProto("CommandStatus", "waiting", "running", "finishedSuccessfully", "finishedWithError")}

	silaErr := msgProto("SiLAError",
		fieldSpec{name: "validationError", num: 1, typ: tMessage, msg: "ValidationError", oneof: zero},
		fieldSpec{name: "definedExecutionError", num: 2, typ: tMessage, msg: "DefinedExecutionError", oneof: zero},
		fieldSpec{name: "undefinedExecutionError", num: 3, typ: tMessage, msg: "UndefinedExecutionError", oneof: zero},
		fieldSpec{name: "frameworkError", num: 4, typ: tMessage, msg: "FrameworkError", oneof: zero})
	silaErr.OneofDecl = []*descriptorpb.OneofDescriptorProto{{Name: proto.String("error")}}

	fwErr := msgProto("FrameworkError",
		fieldSpec{name: "errorType", num: 1, typ: tEnum, msg: "FrameworkError.ErrorType"},
		fieldSpec{name: "message", num: 2, typ: tString})
	fwErr.EnumType = []*descriptorpb.EnumDescriptorProto{enumProto("ErrorType",
		"COMMAND_EXECUTION_NOT_ACCEPTED", "INVALID_COMMAND_EXECUTION_UUID", "COMMAND_EXECUTION_NOT_FINISHED",
		"INVALID_METADATA", "NO_METADATA_ALLOWED")}

	tz := fieldSpec{name: "timezone", typ: tMessage, msg: "Timezone"}
	at := func(f fieldSpec, n int32) fieldSpec { f.num = n; return f }

	return &descriptorpb.FileDescriptorProto{
		Name:    proto.String(frameworkFile),
		Package: proto.String(FrameworkPackage),
		Syntax:  proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{
			msgProto("String", fieldSpec{name: "value", num: 1, typ: tString}),
			msgProto("Integer", fieldSpec{name: "value", num: 1, typ: tInt64}),
			msgProto("Real", fieldSpec{name: "value", num: 1, typ: tDouble}),
			msgProto("Boolean", fieldSpec{name: "value", num: 1, typ: tBool}),
			binary,
			msgProto("Timezone", fieldSpec{name: "hours", num: 1, typ: tInt32}, fieldSpec{name: "minutes", num: 2, typ: tUint32}),
			msgProto("Date", fieldSpec{name: "day", num: 1, typ: tUint32}, fieldSpec{name: "month", num: 2, typ: tUint32},
				fieldSpec{name: "year", num: 3, typ: tUint32}, at(tz, 4)),
			msgProto("Time", fieldSpec{name: "second", num: 1, typ: tUint32}, fieldSpec{name: "minute", num: 2, typ: tUint32},
				fieldSpec{name: "hour", num: 3, typ: tUint32}, at(tz, 4)),
			msgProto("Timestamp", fieldSpec{name: "second", num: 1, typ: tUint32}, fieldSpec{name: "minute", num: 2, typ: tUint32},
				fieldSpec{name: "hour", num: 3, typ: tUint32}, fieldSpec{name: "day", num: 4, typ: tUint32},
				fieldSpec{name: "month", num: 5, typ: tUint32}, fieldSpec{name: "year", num: 6, typ: tUint32}, at(tz, 7)),
			msgProto("Any", fieldSpec{name: "type", num: 1, typ: tString}, fieldSpec{name: "payload", num: 2, typ: tBytes}),
			msgProto("Duration", fieldSpec{name: "seconds", num: 1, typ: tInt64}, fieldSpec{name: "nanos", num: 2, typ: tInt32}),
			msgProto("CommandExecutionUUID", fieldSpec{name: "value", num: 1, typ: tString}),
			msgProto("CommandConfirmation",
				fieldSpec{name: "commandExecutionUUID", num: 1, typ: tMessage, msg: "CommandExecutionUUID"},
				fieldSpec{name: "lifetimeOfExecution", num: 2, typ: tMessage, msg: "Duration"}),
			execInfo,
			silaErr,
			msgProto("ValidationError", fieldSpec{name: "parameter", num: 1, typ: tString}, fieldSpec{name: "message", num: 2, typ: tString}),
			msgProto("DefinedExecutionError", fieldSpec{name: "errorIdentifier", num: 1, typ: tString}, fieldSpec{name: "message", num: 2, typ: tString}),
			msgProto("UndefinedExecutionError", fieldSpec{name: "message", num: 1, typ: tString}),
			fwErr,
		},
	}
}

// NewFramework builds the framework descriptors.
func NewFramework() (*Framework, error) {
	files := new(protoregistry.Files)
	fd, err := protodesc.NewFile(frameworkProto(), files)
	if err != nil {
		return nil, fmt.Errorf("sila2: framework descriptor: %w", err)
	}
	if err := files.RegisterFile(fd); err != nil {
		return nil, err
	}
	bin, err := protodesc.NewFile(binaryProto(), files)
	if err != nil {
		return nil, fmt.Errorf("sila2: binary transfer descriptor: %w", err)
	}
	if err := files.RegisterFile(bin); err != nil {
		return nil, err
	}
	return &Framework{File: fd, Binary: bin, files: files}, nil
}

// Message returns the framework message descriptor with the short name ("String", "ExecutionInfo").
func (fw *Framework) Message(name string) protoreflect.MessageDescriptor {
	md := fw.File.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		panic("sila2: no framework message " + name)
	}
	return md
}

// New returns an empty dynamic framework message.
func (fw *Framework) New(name string) *dynamicpb.Message {
	return dynamicpb.NewMessage(fw.Message(name))
}

// UUID returns a CommandExecutionUUID message.
func (fw *Framework) UUID(id string) *dynamicpb.Message {
	m := fw.New("CommandExecutionUUID")
	setScalar(m, 1, protoreflect.ValueOfString(id))
	return m
}

// Duration returns a Duration message.
func (fw *Framework) Duration(d time.Duration) *dynamicpb.Message {
	m := fw.New("Duration")
	setScalar(m, 1, protoreflect.ValueOfInt64(int64(d/time.Second)))
	setScalar(m, 2, protoreflect.ValueOfInt32(int32(d%time.Second)))
	return m
}

// Confirmation returns a CommandConfirmation.
func (fw *Framework) Confirmation(id string, lifetime time.Duration) *dynamicpb.Message {
	m := fw.New("CommandConfirmation")
	setMsg(m, 1, fw.UUID(id))
	if lifetime > 0 {
		setMsg(m, 2, fw.Duration(lifetime))
	}
	return m
}

// ExecInfo is a decoded ExecutionInfo.
type ExecInfo struct {
	Status int32
	// Progress is 0..1, or -1 when the server sent none.
	Progress float64
	// Remaining is the estimated remaining time, or -1.
	Remaining time.Duration
	// Lifetime is the updated lifetime of execution, or 0.
	Lifetime time.Duration
}

// Terminal reports whether the status is finishedSuccessfully or finishedWithError.
func (e ExecInfo) Terminal() bool {
	return e.Status == StatusFinishedSuccessfully || e.Status == StatusFinishedWithError
}

// ExecutionInfo encodes an ExecutionInfo; negative progress or remaining are left out.
func (fw *Framework) ExecutionInfo(e ExecInfo) *dynamicpb.Message {
	m := fw.New("ExecutionInfo")
	setScalar(m, 1, protoreflect.ValueOfEnum(protoreflect.EnumNumber(e.Status)))
	if e.Progress >= 0 {
		r := fw.New("Real")
		setScalar(r, 1, protoreflect.ValueOfFloat64(e.Progress))
		setMsg(m, 2, r)
	}
	if e.Remaining >= 0 {
		setMsg(m, 3, fw.Duration(e.Remaining))
	}
	if e.Lifetime > 0 {
		setMsg(m, 4, fw.Duration(e.Lifetime))
	}
	return m
}

// DecodeExecInfo reads an ExecutionInfo message.
func DecodeExecInfo(m protoreflect.Message) ExecInfo {
	e := ExecInfo{Progress: -1, Remaining: -1}
	e.Status = int32(getField(m, 1).Enum())
	if p, ok := getMsg(m, 2); ok {
		e.Progress = getField(p, 1).Float()
	}
	if d, ok := getMsg(m, 3); ok {
		e.Remaining = decodeDuration(d)
	}
	if d, ok := getMsg(m, 4); ok {
		e.Lifetime = decodeDuration(d)
	}
	return e
}

func decodeDuration(m protoreflect.Message) time.Duration {
	return time.Duration(getField(m, 1).Int())*time.Second + time.Duration(getField(m, 2).Int())
}

// DecodeUUID reads a CommandExecutionUUID.
func DecodeUUID(m protoreflect.Message) string { return getField(m, 1).String() }

// DecodeConfirmation reads a CommandConfirmation.
func DecodeConfirmation(m protoreflect.Message) (id string, lifetime time.Duration) {
	if u, ok := getMsg(m, 1); ok {
		id = DecodeUUID(u)
	}
	if d, ok := getMsg(m, 2); ok {
		lifetime = decodeDuration(d)
	}
	return id, lifetime
}

func fieldByNum(m protoreflect.Message, n protoreflect.FieldNumber) protoreflect.FieldDescriptor {
	fd := m.Descriptor().Fields().ByNumber(n)
	if fd == nil {
		panic(fmt.Sprintf("sila2: %s has no field %d", m.Descriptor().FullName(), n))
	}
	return fd
}

func setScalar(m protoreflect.Message, n protoreflect.FieldNumber, v protoreflect.Value) {
	m.Set(fieldByNum(m, n), v)
}

func setMsg(m protoreflect.Message, n protoreflect.FieldNumber, v proto.Message) {
	m.Set(fieldByNum(m, n), protoreflect.ValueOfMessage(v.ProtoReflect()))
}

func getField(m protoreflect.Message, n protoreflect.FieldNumber) protoreflect.Value {
	return m.Get(fieldByNum(m, n))
}

func getMsg(m protoreflect.Message, n protoreflect.FieldNumber) (protoreflect.Message, bool) {
	fd := fieldByNum(m, n)
	if !m.Has(fd) {
		return nil, false
	}
	return m.Get(fd).Message(), true
}
