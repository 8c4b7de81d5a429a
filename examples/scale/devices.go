package main

import (
	"context"
	"fmt"

	"github.com/openmhp/mhp-go"
	"github.com/openmhp/mhp-go/binding"
)

type class struct {
	name, make, model, description string
	tags                           []string
	signals                        []mhp.Signal
	settings                       []mhp.Setting
	actions                        []mhp.Action
}

var classes = []class{
	{name: "thermocycler", make: "SimBio", model: "TC-96", tags: []string{"pcr", "heating", "96-well"},
		description: "96-well PCR thermocycler with heated lid, 4 to 105 degC block. Use for PCR, denaturation and timed temperature programs on a 96-well SBS plate.",
		signals: []mhp.Signal{{Name: "block_temperature", Type: "number", Unit: "degC", Notes: "Measured at block centre; edge wells lag by ~0.5 degC."},
			{Name: "lid_temperature", Type: "number", Unit: "degC"}, {Name: "lid_closed", Type: "boolean", Notes: "True when the lid latch is engaged."},
			{Name: "cycle", Type: "integer"}},
		settings: []mhp.Setting{{Name: "target_temperature", Type: "number", Unit: "degC", Limits: mhp.Range(4, 105), Notes: "Below 4 degC condensation forms; above 105 degC the seal fails."},
			{Name: "lid_heater", Type: "boolean", Notes: "Turn on ~40 s before loading to avoid condensation."}},
		actions: []mhp.Action{{Name: "run_protocol", Duration: "long", Interlocks: []string{"lid_closed"}, Cancellable: true, Pausable: true,
			Notes: "Runs a cycling program; steps are repeated cycles times.",
			Params: mhp.Params{{Name: "steps", Shape: &mhp.Shape{Type: "array", Items: &mhp.Shape{Type: "object", Required: []string{"temp", "hold_s"},
				Properties: map[string]*mhp.Shape{"temp": {Type: "number", Unit: "degC", Limits: mhp.Range(4, 105)}, "hold_s": {Type: "number", Unit: "s", Limits: mhp.Range(0, 3600)}}}}},
				{Name: "cycles", Shape: &mhp.Shape{Type: "integer", Limits: mhp.Range(1, 99)}}},
			Examples: []map[string]any{{"steps": []any{map[string]any{"temp": 95, "hold_s": 30}, map[string]any{"temp": 58, "hold_s": 30}, map[string]any{"temp": 72, "hold_s": 45}}, "cycles": 30}}},
			{Name: "open_lid", Duration: "short", Approval: "confirm", Notes: "Lid may be hot; a human should be present."},
			{Name: "close_lid", Duration: "short"}}},
	{name: "robot_arm", make: "SimMotion", model: "PA-6", tags: []string{"plates", "transfer"},
		description: "Six-axis plate arm moving SBS plates between deck positions and instruments in its bay.",
		signals:     []mhp.Signal{{Name: "holding", Type: "boolean"}, {Name: "position", Type: "string"}, {Name: "gripper_force", Type: "number", Unit: "N"}},
		settings:    []mhp.Setting{{Name: "speed", Type: "number", Unit: "percent", Limits: mhp.Range(1, 100)}},
		actions: []mhp.Action{{Name: "pick_plate", Duration: "long", Params: mhp.Params{{Name: "location", Shape: &mhp.Shape{Type: "string", Limits: mhp.Enum("deck_A1", "deck_A2", "thermocycler", "reader")}}}},
			{Name: "place_plate", Duration: "long", Params: mhp.Params{{Name: "location", Shape: &mhp.Shape{Type: "string", Limits: mhp.Enum("deck_A1", "deck_A2", "thermocycler", "reader")}}}},
			{Name: "home", Duration: "long"}}},
	{name: "plate_reader", make: "SimOptics", model: "PR-384", tags: []string{"absorbance", "fluorescence"},
		description: "Absorbance and fluorescence plate reader for 96- and 384-well plates.",
		signals:     []mhp.Signal{{Name: "chamber_temperature", Type: "number", Unit: "degC"}, {Name: "drawer_open", Type: "boolean"}},
		settings:    []mhp.Setting{{Name: "chamber_setpoint", Type: "number", Unit: "degC", Limits: mhp.Range(20, 45)}},
		actions: []mhp.Action{{Name: "read_absorbance", Duration: "long", Params: mhp.Params{{Name: "wavelength_nm", Shape: &mhp.Shape{Type: "integer", Limits: mhp.Range(230, 1000)}}}},
			{Name: "read_fluorescence", Duration: "long", Params: mhp.Params{{Name: "excitation_nm", Shape: &mhp.Shape{Type: "integer"}}, {Name: "emission_nm", Shape: &mhp.Shape{Type: "integer"}}}}}},
	{name: "liquid_handler", make: "SimFluidics", model: "LH-8", tags: []string{"pipetting", "8-channel"},
		description: "Eight-channel liquid handler for plate replication, dilution series and reagent additions.",
		signals:     []mhp.Signal{{Name: "tips_loaded", Type: "integer"}, {Name: "deck_door_closed", Type: "boolean"}},
		actions: []mhp.Action{{Name: "transfer", Duration: "long", Interlocks: []string{"deck_door_closed"}, Params: mhp.Params{{Name: "source", Shape: &mhp.Shape{Type: "string"}},
			{Name: "destination", Shape: &mhp.Shape{Type: "string"}}, {Name: "volume_ul", Shape: &mhp.Shape{Type: "number", Limits: mhp.Range(0.5, 1000)}}}}}},
	{name: "incubator", make: "SimClimate", model: "IC-200", tags: []string{"co2", "cell culture"},
		description: "CO2 incubator with 20 plate slots for cell culture.",
		signals:     []mhp.Signal{{Name: "temperature", Type: "number", Unit: "degC"}, {Name: "co2_percent", Type: "number"}, {Name: "door_closed", Type: "boolean"}},
		settings:    []mhp.Setting{{Name: "temperature_setpoint", Type: "number", Unit: "degC", Limits: mhp.Range(25, 42)}, {Name: "co2_setpoint", Type: "number", Limits: mhp.Range(0, 10)}}},
	{name: "centrifuge", make: "SimSpin", model: "CF-4", tags: []string{"spin", "plates"},
		description: "Plate centrifuge, up to 4 plates, 3000 g.",
		signals:     []mhp.Signal{{Name: "rpm", Type: "number"}, {Name: "lid_locked", Type: "boolean"}},
		actions: []mhp.Action{{Name: "spin", Duration: "long", Interlocks: []string{"lid_locked"}, Cancellable: true,
			Params: mhp.Params{{Name: "g", Shape: &mhp.Shape{Type: "number", Limits: mhp.Range(100, 3000)}}, {Name: "seconds", Shape: &mhp.Shape{Type: "number", Limits: mhp.Range(1, 3600)}}}}}},
	{name: "hotplate", make: "SimHeat", model: "HP-300", tags: []string{"heating", "stirring"},
		description: "Stirring hotplate for flasks and beakers, up to 300 degC.",
		signals:     []mhp.Signal{{Name: "plate_temperature", Type: "number", Unit: "degC"}},
		settings:    []mhp.Setting{{Name: "target_temperature", Type: "number", Unit: "degC", Limits: mhp.Range(20, 300)}, {Name: "stir_rpm", Type: "number", Limits: mhp.Range(0, 1500)}}},
	{name: "microscope", make: "SimVision", model: "MS-20", tags: []string{"imaging", "brightfield"},
		description: "Automated brightfield and fluorescence microscope with plate stage.",
		signals:     []mhp.Signal{{Name: "stage_x_mm", Type: "number"}, {Name: "stage_y_mm", Type: "number"}},
		actions:     []mhp.Action{{Name: "acquire", Duration: "long", Params: mhp.Params{{Name: "well", Shape: &mhp.Shape{Type: "string", Limits: &mhp.Limits{Pattern: "[A-P][0-9]{1,2}"}}}}}}},
}

// device builds the i-th simulated device: class i%8, bay (i/8)%40+1, so every class is in every bay.
func device(i int) binding.Config {
	c := classes[i%len(classes)]
	cfg := binding.Config{
		Device: mhp.DeviceInfo{ID: fmt.Sprintf("%s-%04d", c.name, i), Class: c.name, Make: c.make, Model: c.model,
			Location: fmt.Sprintf("bay %d", (i/len(classes))%40+1), Tags: c.tags, Description: c.description},
		Notes:        "Simulated for the scale demo.",
		Instructions: "Check the interlocks, then operate through the listed actions. Poll jobs until they end.",
		Safety:       mhp.Safety{WatchdogS: 0},
		EStop:        func(context.Context) error { return nil },
	}
	for _, s := range c.signals {
		s := s
		val := any(0.0)
		switch s.Type {
		case "boolean":
			val = true
		case "string":
			val = "home"
		case "integer":
			val = int64(0)
		}
		cfg.Signals = append(cfg.Signals, binding.Signal{Spec: s, Read: func(context.Context) (binding.Sample, error) { return binding.Sample{Value: val}, nil }})
	}
	for _, s := range c.settings {
		cfg.Settings = append(cfg.Settings, binding.Setting{Spec: s, Write: func(context.Context, any) (binding.WriteStatus, error) { return binding.Applied, nil }})
	}
	for _, a := range c.actions {
		cfg.Actions = append(cfg.Actions, binding.Action{Spec: a, Run: func(context.Context, *binding.Job) (any, error) { return map[string]any{"ok": true}, nil }})
	}
	return cfg
}
