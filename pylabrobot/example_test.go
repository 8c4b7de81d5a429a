package pylabrobot_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/pylabrobot"
	"github.com/openmhp/mhp-go/pylabrobot/plrtest"
)

// A PyLabRobot machine behind plrbridge, here the fake bridge of package
// plrtest: Load reads the config file, New builds the driver from the
// bridge's /describe, and the machine's state reads as signals.
func Example() {
	bridge := plrtest.NewBridge() // stands in for `python plrbridge.py ...`
	defer bridge.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg, err := pylabrobot.Load(adapters.Source{Path: "star.yaml", Data: []byte(`
adapter: pylabrobot
device: {id: star-01, class: liquid_handler}
mode: bridge
url: ` + bridge.URL + `
`)})
	if err != nil {
		log.Fatal(err)
	}
	drv, err := pylabrobot.New(ctx, cfg, pylabrobot.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := drv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	desc := drv.Descriptor()
	fmt.Println(desc.ID, desc.Make, desc.Model)
	r, err := drv.Read(ctx, []string{"door_closed", "setup_finished"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("door_closed:", r.Values["door_closed"], "setup_finished:", r.Values["setup_finished"])
	// Output:
	// star-01 PyLabRobot FixtureMachine
	// door_closed: true setup_finished: true
}
