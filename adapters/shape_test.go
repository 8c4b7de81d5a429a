package adapters_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/binding"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/mqtt"
	"github.com/openmhp/mhp-go/opcua"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/ros2"
	"github.com/openmhp/mhp-go/serial"
	"github.com/openmhp/mhp-go/sila2"
)

// shapeOf is the public face every adapter package has; building one for
// a package fails to compile when the package drifts from it.
type shapeOf[C any, O any] struct {
	kind     string
	load     func(adapters.Source) (C, error)
	validate func(C) error
	new      func(context.Context, C, O) (*binding.Driver, error)
	register func(*adapters.Registry) error
}

// check runs what the shape promises beyond its signatures.
func (s shapeOf[C, O]) check(t *testing.T) {
	t.Helper()
	// Options embed the shared adapters.Options (clock, logger, Refine).
	f, ok := reflect.TypeFor[O]().FieldByName("Options")
	if !ok || !f.Anonymous || f.Type != reflect.TypeFor[adapters.Options]() {
		t.Errorf("%s: Options does not embed adapters.Options", s.kind)
	}
	// Register adds exactly the package's Kind.
	r := adapters.NewRegistry()
	if err := s.register(r); err != nil {
		t.Fatalf("%s: Register: %v", s.kind, err)
	}
	if got := r.Kinds(); len(got) != 1 || got[0] != s.kind {
		t.Errorf("%s: Register added %v", s.kind, got)
	}
	// Load is strict: a misspelt key is refused and named, never dropped.
	src := adapters.Source{Path: "x.yaml", Data: []byte("adapter: " + s.kind + "\nno_such_key: 1\n")}
	if _, err := s.load(src); err == nil || !strings.Contains(err.Error(), "no_such_key") {
		t.Errorf("%s: Load of an unknown key: %v, want it refused by name", s.kind, err)
	}
	// The zero config is not a device: Validate and New refuse it.
	var zero C
	if err := s.validate(zero); err == nil {
		t.Errorf("%s: the zero Config validates", s.kind)
	}
	var opt O
	if d, err := s.new(context.Background(), zero, opt); err == nil {
		d.Close()
		t.Errorf("%s: New built a driver from the zero Config", s.kind)
	}
}

// discoverShape is the discovery part of the shape (package doc of
// adapters, discover.go): Discover with DiscoverOptions embedding
// adapters.DiscoverOptions, registered by Register.
type discoverShape[C any, DO any] struct {
	kind     string
	discover func(context.Context, string, DO) (C, adapters.Report, error)
	register func(*adapters.Registry) error
}

func (s discoverShape[C, DO]) check(t *testing.T) {
	t.Helper()
	f, ok := reflect.TypeFor[DO]().FieldByName("DiscoverOptions")
	if !ok || !f.Anonymous || f.Type != reflect.TypeFor[adapters.DiscoverOptions]() {
		t.Errorf("%s: DiscoverOptions does not embed adapters.DiscoverOptions", s.kind)
	}
	r := adapters.NewRegistry()
	if err := s.register(r); err != nil {
		t.Fatalf("%s: Register: %v", s.kind, err)
	}
	if got := r.Discoverable(); len(got) != 1 || got[0] != s.kind {
		t.Errorf("%s: Register added the discoveries %v", s.kind, got)
	}
	// An empty target is refused before any I/O.
	var opt DO
	if _, _, err := s.discover(context.Background(), "", opt); err == nil {
		t.Errorf("%s: Discover of an empty target succeeded", s.kind)
	}
}

// TestEveryAdapterHasTheShape: the adapter packages share one public
// face (package doc of adapters): Kind, Load, Config.Validate, New with
// Options embedding adapters.Options, Register, and Discover with
// DiscoverOptions embedding adapters.DiscoverOptions.
func TestEveryAdapterHasTheShape(t *testing.T) {
	shapeOf[opcua.Config, opcua.Options]{opcua.Kind, opcua.Load, opcua.Config.Validate, opcua.New, opcua.Register}.check(t)
	shapeOf[sila2.Config, sila2.Options]{sila2.Kind, sila2.Load, sila2.Config.Validate, sila2.New, sila2.Register}.check(t)
	shapeOf[ros2.Config, ros2.Options]{ros2.Kind, ros2.Load, ros2.Config.Validate, ros2.New, ros2.Register}.check(t)
	shapeOf[madsci.Config, madsci.Options]{madsci.Kind, madsci.Load, madsci.Config.Validate, madsci.New, madsci.Register}.check(t)
	shapeOf[pylabrobot.Config, pylabrobot.Options]{pylabrobot.Kind, pylabrobot.Load, pylabrobot.Config.Validate, pylabrobot.New, pylabrobot.Register}.check(t)
	shapeOf[mqtt.Config, mqtt.Options]{mqtt.Kind, mqtt.Load, mqtt.Config.Validate, mqtt.New, mqtt.Register}.check(t)
	shapeOf[serial.Config, serial.Options]{serial.Kind, serial.Load, serial.Config.Validate, serial.New, serial.Register}.check(t)

	discoverShape[opcua.Config, opcua.DiscoverOptions]{opcua.Kind, opcua.Discover, opcua.Register}.check(t)
	discoverShape[madsci.Config, madsci.DiscoverOptions]{madsci.Kind, madsci.Discover, madsci.Register}.check(t)
	discoverShape[pylabrobot.Config, pylabrobot.DiscoverOptions]{pylabrobot.Kind, pylabrobot.Discover, pylabrobot.Register}.check(t)
	discoverShape[sila2.Config, sila2.DiscoverOptions]{sila2.Kind, sila2.Discover, sila2.Register}.check(t)
	discoverShape[ros2.Config, ros2.DiscoverOptions]{ros2.Kind, ros2.Discover, ros2.Register}.check(t)
	discoverShape[mqtt.Config, mqtt.DiscoverOptions]{mqtt.Kind, mqtt.Discover, mqtt.Register}.check(t)
	discoverShape[serial.Config, serial.DiscoverOptions]{serial.Kind, serial.Discover, serial.Register}.check(t)
}
