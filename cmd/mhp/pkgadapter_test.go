package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/devicepkg"
	"github.com/openmhp/mhp-go/examples/sim"
	"github.com/openmhp/mhp-go/ros2/rosbridgetest"
)

// A device package may run on an adapter config: the package's descriptor
// narrows the adapter's generated bindings before the driver is built.
func TestPackageOnAnAdapterConfig(t *testing.T) {
	fake := rosbridgetest.New(rosbridgetest.Options{})
	defer fake.Close()
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("robot.yaml", "adapter: ros2\ndevice: {id: arm-07, class: robot_arm}\nurl: "+fake.URL()+"\n"+
		"settings:\n  - {name: speed_scale, type: number, limits: {min: 0.05, max: 1.0}, topic: /arm/speed_scale, msg_type: std_msgs/msg/Float64, field: data}\n")
	write("DEVICE.md", "---\nmhp: \"2026-09-12\"\nid: arm-07\nclass: robot_arm\nlocation: bay 7\n"+
		"description: Test arm on a fake rosbridge. Use for adapter package tests only.\ndriver: robot.yaml\n---\n\n# Arm 07\n\nKeep speed low.\n")
	write("descriptor.yaml", "settings:\n  - name: speed_scale\n    limits: {min: 0.05, max: 0.5}\n    notes: Half speed at most on this bench.\n")
	pkg, err := devicepkg.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pkg.Close()
	dev, err := buildPackage(context.Background(), pkg, simOptionsForTest(), (&app{stderr: io.Discard}).quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx := context.Background()
	desc, err := dev.Describe(ctx, mhp.DescribeRequest{Select: &mhp.Selection{Settings: []string{"speed_scale"}}})
	if err != nil {
		t.Fatal(err)
	}
	if s := desc.Settings[0]; *s.Limits.Max != 0.5 || s.Notes == "" {
		t.Fatalf("package refinement not applied: %+v", s)
	}
	_, err = dev.Write(ctx, mhp.WriteRequest{Name: "speed_scale", Value: 0.8})
	if mhp.CodeOf(err) != mhp.CodeLimitViolation {
		t.Fatalf("0.8 above the package's max 0.5: %v", err)
	}
	if res, _ := dev.ListResources(ctx); len(res) == 0 {
		t.Fatal("package resources not served")
	}
}

func simOptionsForTest() sim.Options { return sim.Options{} }
