package sila2

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"
)

// MaxInlineBinary is the largest binary sent inline in a message (2 MiB);
// larger binaries go through the binary transfer services in chunks of at
// most this size.
const MaxInlineBinary = 2 << 20

// BinaryTransfer is the value of a Binary that travels through the binary
// transfer services instead of inline: decoding yields it for a
// binaryTransferUUID, encoding accepts it.
type BinaryTransfer struct {
	UUID string
}

// Paths of the binary transfer services (SiLABinaryTransfer.proto).
const (
	BinaryUploadService   = FrameworkPackage + ".BinaryUpload"
	BinaryDownloadService = FrameworkPackage + ".BinaryDownload"
)

// binaryProto writes SiLABinaryTransfer.proto as a descriptor: the
// messages (field numbers from the standard) and the two services.
func binaryProto() *descriptorpb.FileDescriptorProto {
	errType := msgProto("BinaryTransferError",
		fieldSpec{name: "errorType", num: 1, typ: tEnum, msg: "BinaryTransferError.ErrorType"},
		fieldSpec{name: "message", num: 2, typ: tString})
	errType.EnumType = []*descriptorpb.EnumDescriptorProto{enumProto("ErrorType",
		"INVALID_BINARY_TRANSFER_UUID", "BINARY_UPLOAD_FAILED", "BINARY_DOWNLOAD_FAILED")}
	uuid := fieldSpec{name: "binaryTransferUUID", num: 1, typ: tString}
	life := func(n int32) fieldSpec {
		return fieldSpec{name: "lifetimeOfBinary", num: n, typ: tMessage, msg: "Duration"}
	}
	m := func(name, in, out string, client, server bool) *descriptorpb.MethodDescriptorProto {
		md := method(name, "."+FrameworkPackage+"."+in, "."+FrameworkPackage+"."+out, server)
		if client {
			md.ClientStreaming = proto.Bool(true)
		}
		return md
	}
	return &descriptorpb.FileDescriptorProto{
		Name:       proto.String("SiLABinaryTransfer.proto"),
		Package:    proto.String(FrameworkPackage),
		Syntax:     proto.String("proto3"),
		Dependency: []string{frameworkFile},
		MessageType: []*descriptorpb.DescriptorProto{
			msgProto("CreateBinaryRequest", fieldSpec{name: "binarySize", num: 1, typ: tUint64},
				fieldSpec{name: "chunkCount", num: 2, typ: tUint32}, fieldSpec{name: "parameterIdentifier", num: 3, typ: tString}),
			msgProto("CreateBinaryResponse", uuid, life(2)),
			msgProto("UploadChunkRequest", uuid, fieldSpec{name: "chunkIndex", num: 2, typ: tUint32},
				fieldSpec{name: "payload", num: 3, typ: tBytes}),
			msgProto("UploadChunkResponse", uuid, fieldSpec{name: "chunkIndex", num: 2, typ: tUint32}, life(3)),
			msgProto("DeleteBinaryRequest", uuid),
			msgProto("DeleteBinaryResponse"),
			msgProto("GetBinaryInfoRequest", uuid),
			msgProto("GetBinaryInfoResponse", fieldSpec{name: "binarySize", num: 1, typ: tUint64}, life(2)),
			msgProto("GetChunkRequest", uuid, fieldSpec{name: "offset", num: 2, typ: tUint64},
				fieldSpec{name: "length", num: 3, typ: tUint32}),
			msgProto("GetChunkResponse", uuid, fieldSpec{name: "offset", num: 2, typ: tUint64},
				fieldSpec{name: "payload", num: 3, typ: tBytes}, life(4)),
			errType,
		},
		Service: []*descriptorpb.ServiceDescriptorProto{
			{Name: proto.String("BinaryUpload"), Method: []*descriptorpb.MethodDescriptorProto{
				m("CreateBinary", "CreateBinaryRequest", "CreateBinaryResponse", false, false),
				m("UploadChunk", "UploadChunkRequest", "UploadChunkResponse", true, true),
				m("DeleteBinary", "DeleteBinaryRequest", "DeleteBinaryResponse", false, false),
			}},
			{Name: proto.String("BinaryDownload"), Method: []*descriptorpb.MethodDescriptorProto{
				m("GetBinaryInfo", "GetBinaryInfoRequest", "GetBinaryInfoResponse", false, false),
				m("GetChunk", "GetChunkRequest", "GetChunkResponse", true, true),
				m("DeleteBinary", "DeleteBinaryRequest", "DeleteBinaryResponse", false, false),
			}},
		},
	}
}

// BinaryMessage returns a message of SiLABinaryTransfer.proto by short name.
func (fw *Framework) BinaryMessage(name string) *dynamicpb.Message {
	md := fw.Binary.Messages().ByName(protoreflect.Name(name))
	if md == nil {
		panic("sila2: no binary transfer message " + name)
	}
	return dynamicpb.NewMessage(md)
}

// maxDownload bounds a binary the client downloads into memory.
const maxDownload = 256 << 20

// download fetches a binary through BinaryDownload.
func (c *Client) download(ctx context.Context, id string) ([]byte, error) {
	in := c.fw.BinaryMessage("GetBinaryInfoRequest")
	setScalar(in, 1, protoreflect.ValueOfString(id))
	info := c.fw.BinaryMessage("GetBinaryInfoResponse")
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	err := c.conn.Invoke(cctx, "/"+BinaryDownloadService+"/GetBinaryInfo", in, info)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("sila2: binary %s: GetBinaryInfo: %w", id, c.fw.DecodeBinaryError(err))
	}
	size := getField(info, 1).Uint()
	if size > maxDownload {
		return nil, fmt.Errorf("sila2: binary %s of %d bytes is above the %d byte limit", id, size, maxDownload)
	}
	st, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+BinaryDownloadService+"/GetChunk")
	if err != nil {
		return nil, c.fw.DecodeError(err)
	}
	out := make([]byte, size)
	for off := uint64(0); off < size; {
		n := size - off
		if n > MaxInlineBinary {
			n = MaxInlineBinary
		}
		req := c.fw.BinaryMessage("GetChunkRequest")
		setScalar(req, 1, protoreflect.ValueOfString(id))
		setScalar(req, 2, protoreflect.ValueOfUint64(off))
		setScalar(req, 3, protoreflect.ValueOfUint32(uint32(n)))
		if err := st.SendMsg(req); err != nil {
			return nil, fmt.Errorf("sila2: binary %s: GetChunk: %w", id, c.streamErr(ctx, st.RecvMsg(c.fw.BinaryMessage("GetChunkResponse"))))
		}
		resp := c.fw.BinaryMessage("GetChunkResponse")
		if err := st.RecvMsg(resp); err != nil {
			return nil, fmt.Errorf("sila2: binary %s: GetChunk: %w", id, c.streamErr(ctx, err))
		}
		payload := getField(resp, 3).Bytes()
		if getField(resp, 2).Uint() != off || uint64(len(payload)) != n {
			return nil, fmt.Errorf("sila2: binary %s: chunk at %d has %d bytes, want %d", id, off, len(payload), n)
		}
		copy(out[off:], payload)
		off += n
	}
	_ = st.CloseSend()
	return out, nil
}

// upload sends a binary through BinaryUpload for the parameter (fully
// qualified id) and returns its transfer UUID.
func (c *Client) upload(ctx context.Context, param string, data []byte) (string, error) {
	chunks := (len(data) + MaxInlineBinary - 1) / MaxInlineBinary
	in := c.fw.BinaryMessage("CreateBinaryRequest")
	setScalar(in, 1, protoreflect.ValueOfUint64(uint64(len(data))))
	setScalar(in, 2, protoreflect.ValueOfUint32(uint32(chunks)))
	setScalar(in, 3, protoreflect.ValueOfString(param))
	created := c.fw.BinaryMessage("CreateBinaryResponse")
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	err := c.conn.Invoke(cctx, "/"+BinaryUploadService+"/CreateBinary", in, created)
	cancel()
	if err != nil {
		return "", fmt.Errorf("sila2: upload for %s: CreateBinary: %w", param, c.fw.DecodeBinaryError(err))
	}
	id := getField(created, 1).String()
	st, err := c.conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}, "/"+BinaryUploadService+"/UploadChunk")
	if err != nil {
		return "", c.fw.DecodeError(err)
	}
	for i := 0; i < chunks; i++ {
		end := (i + 1) * MaxInlineBinary
		if end > len(data) {
			end = len(data)
		}
		req := c.fw.BinaryMessage("UploadChunkRequest")
		setScalar(req, 1, protoreflect.ValueOfString(id))
		setScalar(req, 2, protoreflect.ValueOfUint32(uint32(i)))
		setScalar(req, 3, protoreflect.ValueOfBytes(data[i*MaxInlineBinary:end]))
		if err := st.SendMsg(req); err != nil {
			return "", fmt.Errorf("sila2: upload chunk %d: %w", i, c.streamErr(ctx, st.RecvMsg(c.fw.BinaryMessage("UploadChunkResponse"))))
		}
		if err := st.RecvMsg(c.fw.BinaryMessage("UploadChunkResponse")); err != nil {
			return "", fmt.Errorf("sila2: upload chunk %d: %w", i, c.streamErr(ctx, err))
		}
	}
	if err := st.CloseSend(); err != nil {
		return "", err
	}
	if err := st.RecvMsg(c.fw.BinaryMessage("UploadChunkResponse")); err != nil && err != io.EOF {
		return "", c.streamErr(ctx, err)
	}
	return id, nil
}

// resolveBinaries replaces every BinaryTransfer in a decoded value with the
// base64 of the downloaded binary.
func (c *Client) resolveBinaries(ctx context.Context, v any) (any, error) {
	switch x := v.(type) {
	case BinaryTransfer:
		b, err := c.download(ctx, x.UUID)
		if err != nil {
			return nil, err
		}
		return base64.StdEncoding.EncodeToString(b), nil
	case map[string]any:
		for k, e := range x {
			r, err := c.resolveBinaries(ctx, e)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
	case []any:
		for i, e := range x {
			r, err := c.resolveBinaries(ctx, e)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
	}
	return v, nil
}

// uploadLarge uploads every binary parameter above MaxInlineBinary and
// puts its BinaryTransfer in its place.
func (c *Client) uploadLarge(ctx context.Context, f *Compiled, cmd *Command, params map[string]any) (map[string]any, error) {
	return f.MapBinaries(cmd.Parameters, params, func(id string, v any) (any, error) {
		s, ok := v.(string)
		if !ok || base64.StdEncoding.DecodedLen(len(s)) <= MaxInlineBinary {
			return v, nil
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil || len(raw) <= MaxInlineBinary {
			return v, nil // encoding reports bad base64
		}
		tid, err := c.upload(ctx, f.FQID("Command", cmd.Identifier, "Parameter", id), raw)
		if err != nil {
			return nil, err
		}
		return BinaryTransfer{UUID: tid}, nil
	})
}

// MapBinaries walks values (keyed by snake_case identifiers of es) along
// their data types and replaces every Binary-typed value with fn's answer;
// fn gets the identifier of the top-level element. The input is not
// modified: changed maps and lists are copies.
func (c *Compiled) MapBinaries(es []Element, values map[string]any, fn func(element string, v any) (any, error)) (map[string]any, error) {
	var out map[string]any
	for i := range es {
		e := &es[i]
		name := SnakeCase(e.Identifier)
		v, ok := values[name]
		if !ok {
			continue
		}
		nv, changed, err := c.mapBinary(&e.DataType, v, func(v any) (any, error) { return fn(e.Identifier, v) }, 0)
		if err != nil {
			return nil, err
		}
		if changed {
			if out == nil {
				out = make(map[string]any, len(values))
				for k, x := range values {
					out[k] = x
				}
			}
			out[name] = nv
		}
	}
	if out == nil {
		return values, nil
	}
	return out, nil
}

func (c *Compiled) mapBinary(t *DataType, v any, fn func(any) (any, error), depth int) (any, bool, error) {
	if depth > maxTypeDepth || t == nil || v == nil {
		return v, false, nil
	}
	t = unconstrain(t)
	switch {
	case t.Identifier != "":
		return c.mapBinary(c.types[t.Identifier], v, fn, depth+1)
	case t.List != nil:
		items, ok := v.([]any)
		if !ok {
			return v, false, nil
		}
		var out []any
		for i, it := range items {
			nv, changed, err := c.mapBinary(t.List, it, fn, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed && out == nil {
				out = append([]any(nil), items...)
			}
			if out != nil {
				out[i] = nv
			}
		}
		if out == nil {
			return v, false, nil
		}
		return out, true, nil
	case t.Structure != nil:
		obj, ok := v.(map[string]any)
		if !ok {
			return v, false, nil
		}
		var out map[string]any
		for i := range t.Structure.Elements {
			e := &t.Structure.Elements[i]
			name := SnakeCase(e.Identifier)
			x, ok := obj[name]
			if !ok {
				continue
			}
			nv, changed, err := c.mapBinary(&e.DataType, x, fn, depth+1)
			if err != nil {
				return nil, false, err
			}
			if changed {
				if out == nil {
					out = make(map[string]any, len(obj))
					for k, y := range obj {
						out[k] = y
					}
				}
				out[name] = nv
			}
		}
		if out == nil {
			return v, false, nil
		}
		return out, true, nil
	case t.Basic == BasicBinary:
		nv, err := fn(v)
		if err != nil {
			return nil, false, err
		}
		return nv, !sameScalar(nv, v), nil
	}
	return v, false, nil
}

// sameScalar compares the values a Binary can hold without panicking on
// uncomparable ones ([]byte counts as changed).
func sameScalar(a, b any) bool {
	switch x := a.(type) {
	case string:
		y, ok := b.(string)
		return ok && x == y
	case BinaryTransfer:
		y, ok := b.(BinaryTransfer)
		return ok && x == y
	}
	return false
}

// DecodeBinaryError reads a BinaryTransferError from an ABORTED status of a
// binary transfer call; anything else goes through DecodeError.
func (fw *Framework) DecodeBinaryError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.Aborted {
		return fw.DecodeError(err)
	}
	raw, derr := base64.StdEncoding.DecodeString(strings.TrimSpace(st.Message()))
	m := fw.BinaryMessage("BinaryTransferError")
	if derr != nil || proto.Unmarshal(raw, m) != nil {
		return fw.DecodeError(err)
	}
	names := []string{"INVALID_BINARY_TRANSFER_UUID", "BINARY_UPLOAD_FAILED", "BINARY_DOWNLOAD_FAILED"}
	t := int(getField(m, 1).Enum())
	name := fmt.Sprintf("BinaryTransferError(%d)", t)
	if t >= 0 && t < len(names) {
		name = names[t]
	}
	return &Error{Kind: KindUndefined, Message: "binary transfer " + name + ": " + getField(m, 2).String()}
}

// BinaryStatus encodes a BinaryTransferError as the ABORTED status a server sends.
func (fw *Framework) BinaryStatus(errorType int32, message string) error {
	m := fw.BinaryMessage("BinaryTransferError")
	setScalar(m, 1, protoreflect.ValueOfEnum(protoreflect.EnumNumber(errorType)))
	setScalar(m, 2, protoreflect.ValueOfString(message))
	b, err := proto.Marshal(m)
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	return status.Error(codes.Aborted, base64.StdEncoding.EncodeToString(b))
}
