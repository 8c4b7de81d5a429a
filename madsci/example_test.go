package madsci_test

import (
	"context"
	"fmt"
	"log"

	"github.com/openmhp/mhp-go/adapters"
	"github.com/openmhp/mhp-go/madsci"
	"github.com/openmhp/mhp-go/madsci/madscitest"
)

// A madsci driver from a config file, against the fake node of package
// madscitest: Load, New, Start, then read a signal the node's /state serves.
func Example() {
	node := madscitest.New(madscitest.Options{})
	defer node.Close()

	src := adapters.Source{Path: "node.yaml", Data: []byte(`
adapter: madsci
device: {id: incubator-01, class: incubator}
node_url: ` + node.URL + `
`)}
	cfg, err := madsci.Load(src)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	drv, err := madsci.New(ctx, cfg, madsci.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if err := drv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer drv.Close()

	desc := drv.Descriptor()
	fmt.Println(desc.ID, desc.Make, desc.Model)
	r, err := drv.Read(ctx, []string{"temperature"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("temperature:", r.Values["temperature"])
	// Output:
	// incubator-01 MADSci fake_module
	// temperature: 21.5
}
