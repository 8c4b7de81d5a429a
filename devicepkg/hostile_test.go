//go:build unix

package devicepkg

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/examples/sim"
)

// hostilePkg writes a minimal package with a reference file and returns its folder.
func hostilePkg(t *testing.T, body, descriptor string) string {
	t.Helper()
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(CardFile, "---\nid: tc-7\nclass: thermocycler\ndescription: Test thermocycler.\ndriver: sim:thermocycler\n---\n"+body)
	if descriptor != "" {
		write(DescriptorFile, descriptor)
	}
	write("references/manual.md", "# Manual\n")
	return dir
}

func fifo(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
}

// within runs f and fails the test if it has not returned in 10 s.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s hung", what)
	}
	var zero T
	return zero
}

func TestFIFOsAreRefusedNotOpened(t *testing.T) {
	for _, name := range []string{CardFile, DescriptorFile} {
		t.Run(name, func(t *testing.T) {
			dir := hostilePkg(t, "Operate carefully.\n", "device:\n  notes: fine\n")
			fifo(t, filepath.Join(dir, name))
			probs := within(t, "validate", func() []Problem { return Validate(dir) })
			if len(probs) == 0 || !strings.Contains(probs[0].Message, "named pipe") || probs[0].File != name {
				t.Fatalf("validate: %v", probs)
			}
			err := within(t, "load", func() error { _, err := Load(dir); return err })
			if err == nil || !strings.Contains(err.Error(), "named pipe") {
				t.Fatalf("load: %v", err)
			}
		})
	}
}

func TestResourceSwappedForAFIFOAfterLoad(t *testing.T) {
	dir := hostilePkg(t, "Operate carefully.\n", "")
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := p.ReadResource("references/manual.md"); err != nil {
		t.Fatal(err)
	}
	fifo(t, filepath.Join(dir, "references/manual.md"))
	err = within(t, "resources/read", func() error { _, err := p.ReadResource("references/manual.md"); return err })
	me, ok := mhp.AsError(err)
	if !ok || me.Code != mhp.CodeUnknownName || !strings.Contains(me.Message, "named pipe") {
		t.Fatalf("read of a FIFO: %v", err)
	}
	// The non-blocking open itself, as in a race where the swap lands
	// between the check and the open.
	if _, err := readPrefix(p.fsys, p.root, "references/manual.md", 10); err == nil {
		t.Fatal("a FIFO was read")
	}
}

func TestPackageTextIsBounded(t *testing.T) {
	huge := strings.Repeat("Keep the lid closed while heating. ", 2<<20/35) // ~2 MiB
	dir := hostilePkg(t, huge, "")
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a 2 MiB DEVICE.md loaded: %v", err)
	}
	if probs := Validate(dir); len(probs) != 1 || !strings.Contains(probs[0].Message, "larger than 262144 bytes") {
		t.Fatalf("validate of a 2 MiB DEVICE.md: %v", probs)
	}

	long := strings.Repeat("Keep the lid closed while heating.\n", 40<<10/35) // ~40 KiB: loads, not valid
	notes := strings.Repeat("n", MaxNotes+1)
	dir = hostilePkg(t, long, "device:\n  notes: "+notes+"\nsettings:\n  - name: target_temperature\n    notes: "+notes+"\n")
	got := map[string]string{}
	for _, pr := range Validate(dir) {
		got[pr.File+"|"+pr.Field] = pr.Message
	}
	for _, k := range []string{"DEVICE.md|body", "descriptor.yaml|device.notes", "descriptor.yaml|settings.target_temperature.notes"} {
		if !strings.Contains(got[k], "above the limit") {
			t.Errorf("%s: %q (all: %v)", k, got[k], got)
		}
	}
	// Served anyway (mhp serve does not validate), describe is cut to the bounds.
	p, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	cfg, err := sim.Config("sim:thermocycler", sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := Build(p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	desc, err := dev.Describe(context.Background(), mhp.DescribeRequest{Detail: mhp.DetailFull})
	if err != nil {
		t.Fatal(err)
	}
	if len(desc.Instructions) > MaxInstructions || len(desc.Notes) > MaxNotes {
		t.Fatalf("describe returned %d bytes of instructions and %d of notes", len(desc.Instructions), len(desc.Notes))
	}

	// A long description in the card is cut too.
	dir = hostilePkg(t, "Fine.\n", "")
	card := "---\nid: tc-7\nclass: thermocycler\ndescription: " + strings.Repeat("d", 100<<10) + "\ndriver: sim:thermocycler\n---\nFine.\n"
	if err := os.WriteFile(filepath.Join(dir, CardFile), []byte(card), 0o644); err != nil {
		t.Fatal(err)
	}
	p2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	dev2, err := Build(p2, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer dev2.Close()
	if c, _ := dev2.Describe(context.Background(), mhp.DescribeRequest{Detail: mhp.DetailCard}); len(c.Description) > 4*MaxDescription {
		t.Fatalf("describe card returned a %d-byte description", len(c.Description))
	}
}

func TestInvalidUTF8BodyIsReported(t *testing.T) {
	dir := hostilePkg(t, "Heat to 95 \xff\xfeC.\n", "")
	for _, pr := range Validate(dir) {
		if pr.File == CardFile && pr.Field == "body" && strings.Contains(pr.Message, "UTF-8") {
			return
		}
	}
	t.Fatalf("invalid UTF-8 in the body was not reported: %v", Validate(dir))
}
