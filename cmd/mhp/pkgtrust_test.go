package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/devicepkg"
)

// serve refuses a driver: file that is a symlink out of the package, as
// validate flags it; the adapter config outside is never opened.
func TestServeRefusesADriverSymlinkOutOfThePackage(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "robot.yaml")
	if err := os.WriteFile(outside, []byte("adapter: ros2\ndevice: {id: arm-07, class: robot_arm}\nurl: http://127.0.0.1:1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, driver := range []string{"robot.yaml", "../robot.yaml", outside} {
		dir := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, "robot.yaml")); err != nil {
			t.Skipf("no symlinks here: %v", err)
		}
		card := "---\nid: arm-07\nclass: robot_arm\ndescription: Test arm.\ndriver: " + driver + "\n---\nKeep speed low.\n"
		if err := os.WriteFile(filepath.Join(dir, "DEVICE.md"), []byte(card), 0o600); err != nil {
			t.Fatal(err)
		}
		pkg, err := devicepkg.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		_, err = buildPackage(context.Background(), pkg, simOptionsForTest(), (&app{stderr: io.Discard}).quietLogger())
		pkg.Close()
		if err == nil || !strings.Contains(err.Error(), "inside the package") {
			t.Fatalf("driver %q: %v", driver, err)
		}
	}
}
