package silatest

import (
	"encoding/base64"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/openmhp/mhp-go/sila2"
)

// Binary transfer error types of BinaryTransferError.errorType.
const (
	binaryInvalidUUID      = 0
	binaryUploadFailed     = 1
	binaryDownloadFailed   = 2
	binaryTransferPrefixUp = "/" + sila2.BinaryUploadService + "/"
	binaryTransferPrefixDn = "/" + sila2.BinaryDownloadService + "/"
)

// blob is one binary held for transfer: an upload being assembled, or a
// response waiting to be downloaded.
type blob struct {
	size   uint64
	chunks [][]byte
	data   []byte // complete binary (downloads, finished uploads)
}

func (b *blob) complete() bool {
	if b.data != nil {
		return true
	}
	var n uint64
	for _, c := range b.chunks {
		if c == nil {
			return false
		}
		n += uint64(len(c))
	}
	if n != b.size {
		return false
	}
	b.data = make([]byte, 0, n)
	for _, c := range b.chunks {
		b.data = append(b.data, c...)
	}
	return true
}

func (s *Server) isBinaryPath(path string) bool {
	return strings.HasPrefix(path, binaryTransferPrefixUp) || strings.HasPrefix(path, binaryTransferPrefixDn)
}

func field(m protoreflect.Message, n protoreflect.FieldNumber) protoreflect.Value {
	return m.Get(m.Descriptor().Fields().ByNumber(n))
}

func set(m protoreflect.Message, n protoreflect.FieldNumber, v protoreflect.Value) {
	m.Set(m.Descriptor().Fields().ByNumber(n), v)
}

// handleBinary serves BinaryUpload and BinaryDownload.
func (s *Server) handleBinary(path string, stream grpc.ServerStream) error {
	fw := s.fw
	method := path[strings.LastIndexByte(path, '/')+1:]
	find := func(id string) (*blob, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		b, ok := s.binaries[strings.ToLower(id)]
		if !ok {
			return nil, fw.BinaryStatus(binaryInvalidUUID, "no binary "+id)
		}
		return b, nil
	}
	upload := strings.HasPrefix(path, binaryTransferPrefixUp)
	switch {
	case upload && method == "CreateBinary":
		in := fw.BinaryMessage("CreateBinaryRequest")
		if err := stream.RecvMsg(in); err != nil {
			return err
		}
		size, count := field(in, 1).Uint(), field(in, 2).Uint()
		if count == 0 || count > (size+sila2.MaxInlineBinary-1)/sila2.MaxInlineBinary+1 || size > 1<<30 {
			return fw.BinaryStatus(binaryUploadFailed, "bad size or chunk count")
		}
		id := newUUID()
		s.mu.Lock()
		s.binaries[id] = &blob{size: size, chunks: make([][]byte, count)}
		s.mu.Unlock()
		out := fw.BinaryMessage("CreateBinaryResponse")
		set(out, 1, protoreflect.ValueOfString(id))
		return stream.SendMsg(out)
	case upload && method == "UploadChunk":
		for {
			in := fw.BinaryMessage("UploadChunkRequest")
			if err := stream.RecvMsg(in); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			id, idx := field(in, 1).String(), field(in, 2).Uint()
			b, err := find(id)
			if err != nil {
				return err
			}
			payload := field(in, 3).Bytes()
			s.mu.Lock()
			bad := idx >= uint64(len(b.chunks)) || len(payload) > sila2.MaxInlineBinary
			if !bad {
				b.chunks[idx] = append([]byte(nil), payload...)
			}
			s.mu.Unlock()
			if bad {
				return fw.BinaryStatus(binaryUploadFailed, "bad chunk")
			}
			out := fw.BinaryMessage("UploadChunkResponse")
			set(out, 1, protoreflect.ValueOfString(id))
			set(out, 2, protoreflect.ValueOfUint32(uint32(idx)))
			if err := stream.SendMsg(out); err != nil {
				return err
			}
		}
	case !upload && method == "GetBinaryInfo":
		in := fw.BinaryMessage("GetBinaryInfoRequest")
		if err := stream.RecvMsg(in); err != nil {
			return err
		}
		b, err := find(field(in, 1).String())
		if err != nil {
			return err
		}
		out := fw.BinaryMessage("GetBinaryInfoResponse")
		set(out, 1, protoreflect.ValueOfUint64(uint64(len(b.data))))
		return stream.SendMsg(out)
	case !upload && method == "GetChunk":
		for {
			in := fw.BinaryMessage("GetChunkRequest")
			if err := stream.RecvMsg(in); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			id, off, n := field(in, 1).String(), field(in, 2).Uint(), field(in, 3).Uint()
			b, err := find(id)
			if err != nil {
				return err
			}
			if n > sila2.MaxInlineBinary || off > uint64(len(b.data)) || off+n > uint64(len(b.data)) {
				return fw.BinaryStatus(binaryDownloadFailed, "chunk out of range")
			}
			out := fw.BinaryMessage("GetChunkResponse")
			set(out, 1, protoreflect.ValueOfString(id))
			set(out, 2, protoreflect.ValueOfUint64(off))
			set(out, 3, protoreflect.ValueOfBytes(b.data[off:off+n]))
			if err := stream.SendMsg(out); err != nil {
				return err
			}
		}
	case method == "DeleteBinary":
		in := fw.BinaryMessage("DeleteBinaryRequest")
		if err := stream.RecvMsg(in); err != nil {
			return err
		}
		s.mu.Lock()
		delete(s.binaries, strings.ToLower(field(in, 1).String()))
		s.mu.Unlock()
		return stream.SendMsg(fw.BinaryMessage("DeleteBinaryResponse"))
	}
	return status.Errorf(codes.Unimplemented, "silatest: no method %s", path)
}

// resolveUploads replaces BinaryTransfer parameters with the base64 of the
// uploaded binary; an unknown or incomplete upload is a ValidationError.
func (s *Server) resolveUploads(f *feature, cmd *sila2.Command, vals map[string]any) (map[string]any, error) {
	return f.c.MapBinaries(cmd.Parameters, vals, func(id string, v any) (any, error) {
		bt, ok := v.(sila2.BinaryTransfer)
		if !ok {
			return v, nil
		}
		s.mu.Lock()
		b, found := s.binaries[strings.ToLower(bt.UUID)]
		done := found && b.complete()
		s.mu.Unlock()
		if !done {
			return nil, &sila2.Error{Kind: sila2.KindValidation, Parameter: f.c.FQID("Command", cmd.Identifier, "Parameter", id),
				Message: "binary transfer " + bt.UUID + " is unknown or incomplete"}
		}
		return base64.StdEncoding.EncodeToString(b.data), nil
	})
}

// offerDownloads stores binaries above the inline limit for download and
// puts their BinaryTransfer in the responses.
func (s *Server) offerDownloads(f *feature, es []sila2.Element, vals map[string]any) (map[string]any, error) {
	return f.c.MapBinaries(es, vals, func(_ string, v any) (any, error) {
		str, ok := v.(string)
		if !ok || base64.StdEncoding.DecodedLen(len(str)) <= sila2.MaxInlineBinary {
			return v, nil
		}
		raw, err := base64.StdEncoding.DecodeString(str)
		if err != nil || len(raw) <= sila2.MaxInlineBinary {
			return v, nil
		}
		id := newUUID()
		s.mu.Lock()
		s.binaries[id] = &blob{size: uint64(len(raw)), data: raw}
		s.mu.Unlock()
		return sila2.BinaryTransfer{UUID: id}, nil
	})
}
