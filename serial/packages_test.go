//go:build linux

package serial_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/serial/serialtest"
)

// TestPackagesServeAgainstTheirFakes: each instrument package validates,
// and served as `mhp serve` serves it (its serial config through the
// adapter registry, the package merged over the bindings) it reads its
// instrument's fake.
func TestPackagesServeAgainstTheirFakes(t *testing.T) {
	cases := []struct {
		dir, file string
		proto     serialtest.Protocol
		opt       serialtest.Options
		signal    string
		want      any
		note      string // a descriptor.yaml note the merge must carry
	}{
		{"ika-cmag-hs7", "hotplate.yaml", serialtest.NewHotplate(), serialtest.Options{}, "plate_temperature", 25.0, "IN_PV_2"},
		{"mettler-balance", "balance.yaml", serialtest.NewBalance(), serialtest.Options{}, "weight", 0.0, "Stable net weight"},
		{"ne1000-pump", "pump.yaml", serialtest.NewPump(), serialtest.Options{Terminator: "\r"}, "pumping", false, "infuses"},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			src := filepath.Join("..", "examples", "devices", tc.dir)
			if probs := devicepkg.Validate(src); len(probs) > 0 {
				t.Fatalf("%s: %v", tc.dir, probs)
			}
			fake := serialtest.New(t, tc.proto, tc.opt)
			dir := copyPackage(t, src, tc.file, fake.Path())
			pkg, err := devicepkg.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = pkg.Close() })
			file, err := pkg.DriverFile()
			if err != nil {
				t.Fatal(err)
			}
			reg := adapters.NewRegistry()
			if err := serial.Register(reg); err != nil {
				t.Fatal(err)
			}
			drv, err := reg.OpenRefined(context.Background(), file, func(c *binding.Config) error { c.Logger = quiet(); return pkg.Apply(c) })
			if err != nil {
				t.Fatal(err)
			}
			dev := devicepkg.NewDevice(drv, pkg)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := dev.Start(ctx); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dev.Close() })
			r, err := dev.Read(ctx, []string{tc.signal})
			if err != nil || r.Values[tc.signal] != tc.want {
				t.Fatalf("%s = %v (%v %v), want %v", tc.signal, r.Values[tc.signal], r.Unavailable, err, tc.want)
			}
			desc, err := dev.Describe(ctx, mhp.DescribeRequest{Detail: mhp.DetailFull})
			if err != nil {
				t.Fatal(err)
			}
			if !regexp.MustCompile(regexp.QuoteMeta(tc.note)).MatchString(mustJSON(t, desc)) {
				t.Fatalf("descriptor lacks the package's note %q", tc.note)
			}
		})
	}
}

// copyPackage copies a package folder to a temp dir with its serial
// config's port pointed at the fake.
func copyPackage(t *testing.T, src, config, port string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == config {
			b = regexp.MustCompile(`(?m)^port: .*$`).ReplaceAll(b, []byte("port: "+port))
			b = regexp.MustCompile(`(?m)^inter_command_delay_s: .*$`).ReplaceAll(b, []byte("inter_command_delay_s: 0"))
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
