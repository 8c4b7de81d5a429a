package sila2_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"testing"
	"time"

	"github.com/openmhp/mhp-go/sila2"
	"github.com/openmhp/mhp-go/sila2/silatest"
)

const imagerFDL = `<Feature FeatureVersion="1.0" Originator="org.example" Category="tests"><Identifier>Imager</Identifier>
<Command><Identifier>Echo</Identifier><Observable>No</Observable>
  <Parameter><Identifier>Images</Identifier><DataType><List><DataType><Structure>
    <Element><Identifier>Name</Identifier><DataType><Basic>String</Basic></DataType></Element>
    <Element><Identifier>Data</Identifier><DataType><Basic>Binary</Basic></DataType></Element>
  </Structure></DataType></List></DataType></Parameter>
  <Response><Identifier>Sizes</Identifier><DataType><List><DataType><Basic>Integer</Basic></DataType></List></DataType></Response>
  <Response><Identifier>Last</Identifier><DataType><Basic>Binary</Basic></DataType></Response>
</Command>
<Property><Identifier>Snapshot</Identifier><Observable>No</Observable><DataType><Basic>Binary</Basic></DataType></Property>
</Feature>`

func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i * 7 % 251)
	}
	return b
}

// serveTLS starts srv over TLS with a fresh self-signed certificate,
// stopped at cleanup.
func serveTLS(t *testing.T, srv *silatest.Server) *lab {
	t.Helper()
	cert, err := silatest.SelfSigned(srv.UUID())
	if err != nil {
		t.Fatal(err)
	}
	addr, err := srv.Start(&cert.TLS)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return &lab{srv: srv, addr: addr, cert: cert}
}

func TestBinaryTransfer(t *testing.T) {
	big := pattern(5<<20 + 123) // three chunks
	small := []byte("tiny")
	srv, err := silatest.New(silatest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = srv.AddFeature(imagerFDL, silatest.Handlers{
		Properties: map[string]func(context.Context) (any, error){
			"Snapshot": func(context.Context) (any, error) { return base64.StdEncoding.EncodeToString(big), nil },
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"Echo": func(_ context.Context, p map[string]any) (map[string]any, error) {
				var sizes []any
				var last string
				for _, im := range p["images"].([]any) {
					data := im.(map[string]any)["data"].(string)
					raw, _ := base64.StdEncoding.DecodeString(data)
					sizes = append(sizes, int64(len(raw)))
					last = data
				}
				return map[string]any{"sizes": sizes, "last": last}, nil
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := serveTLS(t, srv)
	c := l.dial(t, sila2.TLSConfig{PinSHA256: l.cert.PinSHA256})
	// Three 2 MiB chunks each way under -race on a loaded machine: 60s.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	v, err := c.Property(ctx, "Imager", "Snapshot")
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := base64.StdEncoding.DecodeString(v.(string)); !bytes.Equal(raw, big) {
		t.Fatalf("downloaded snapshot differs (%d bytes)", len(raw))
	}
	res, err := c.Call(ctx, "Imager", "Echo", map[string]any{"images": []any{
		map[string]any{"name": "small", "data": base64.StdEncoding.EncodeToString(small)},
		map[string]any{"name": "big", "data": base64.StdEncoding.EncodeToString(big)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sizes := res["sizes"].([]any)
	if len(sizes) != 2 || sizes[0] != int64(len(small)) || sizes[1] != int64(len(big)) {
		t.Fatalf("the server saw sizes %v", sizes)
	}
	if raw, _ := base64.StdEncoding.DecodeString(res["last"].(string)); !bytes.Equal(raw, big) {
		t.Fatal("echoed binary differs")
	}
	// A transfer UUID the server does not know is refused as a ValidationError.
	_, err = c.Call(ctx, "Imager", "Echo", map[string]any{"images": []any{
		map[string]any{"name": "ghost", "data": sila2.BinaryTransfer{UUID: "00000000-0000-4000-8000-000000000000"}}}})
	if se, ok := sila2.AsSiLAError(err); !ok || se.Kind != sila2.KindValidation {
		t.Fatalf("unknown transfer: %v", err)
	}
}
