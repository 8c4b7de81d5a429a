package opcuatest

import (
	"github.com/gopcua/opcua/id"
	"github.com/gopcua/opcua/server"
	"github.com/gopcua/opcua/ua"
)

// The plant: a nested address space for discovery (Options.Plant). Its
// values are constants; writes to it are refused BadNodeIdUnknown.
//
//	Plant (folder)
//	  Line1 (folder) / Oven: Temperature (Double, degC, EURange -20..300, read only),
//	      Setpoint (Double, degC, EURange 0..250), Power (Double, writable, no range),
//	      DoorClosed (Boolean), Ready (Boolean), Mode (String, writable),
//	      Recipe (custom DataType), Add(a, b Double) -> sum Double, EmergencyStop()
//	  Line2 (folder) / Oven: Temperature (the name collides with Line1's)
//
// The fixture's Device methods get OutputArguments (ok Boolean, action
// String) and FU_run a ProgramManager/ProgramTemplateSet {fixture, other}.

// buildPlant adds the plant.
func (s *Server) buildPlant() {
	root := s.ns.Objects()
	plant := s.object(root, "Plant", "Plant")
	line1 := s.object(plant, "Line1", "Plant.Line1")
	oven := s.object(line1, "Oven", "Plant.Line1.Oven")
	val := func(v any) func() *ua.DataValue { return func() *ua.DataValue { return good(v) } }
	k := "Plant.Line1.Oven."
	t := s.variable(oven, "Temperature", k+"Temperature", id.Double, 1, val(180.5))
	s.analog(t, k+"Temperature", "degC", &ua.Range{Low: -20, High: 300})
	sp := s.variable(oven, "Setpoint", k+"Setpoint", id.Double, 3, val(175.0))
	s.analog(sp, k+"Setpoint", "degC", &ua.Range{Low: 0, High: 250})
	s.variable(oven, "Power", k+"Power", id.Double, 3, val(40.0))
	s.variable(oven, "DoorClosed", k+"DoorClosed", id.Boolean, 1, val(true))
	s.variable(oven, "Ready", k+"Ready", id.Boolean, 1, val(true))
	s.variable(oven, "Mode", k+"Mode", id.String, 3, val("bake"))
	s.variable(oven, "Recipe", k+"Recipe", 0, 1, val(int32(0)))
	recipe := s.ns.Node(s.nid(k + "Recipe"))
	recipe.SetAttribute(ua.AttributeIDDataType, server.DataValueFromValue(ua.NewStringExpandedNodeID(s.ns.ID(), "RecipeType")))
	dbl := ua.NewNumericNodeID(0, id.Double)
	add := s.method(oven, "Add", k+"Add", []*ua.Argument{
		{Name: "a", DataType: dbl, ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "b", DataType: dbl, ValueRank: -1, Description: &ua.LocalizedText{}},
	})
	s.outputs(add, k+"Add", []*ua.Argument{{Name: "sum", DataType: dbl, ValueRank: -1, Description: &ua.LocalizedText{}}})
	s.method(oven, "EmergencyStop", k+"EmergencyStop", []*ua.Argument{})
	line2 := s.object(plant, "Line2", "Plant.Line2")
	oven2 := s.object(line2, "Oven", "Plant.Line2.Oven")
	s.variable(oven2, "Temperature", "Plant.Line2.Oven.Temperature", id.Double, 1, val(20.0))

	outs := []*ua.Argument{
		{Name: "ok", DataType: ua.NewNumericNodeID(0, id.Boolean), ValueRank: -1, Description: &ua.LocalizedText{}},
		{Name: "action", DataType: ua.NewNumericNodeID(0, id.String), ValueRank: -1, Description: &ua.LocalizedText{}},
	}
	for _, m := range []string{"quick", "confirm_action", "forbidden_action", "profile"} {
		if n := s.ns.Node(s.nid(m)); n != nil {
			s.outputs(n, m, outs)
		}
	}
	if pm := s.ns.Node(s.nid("FU_run.ProgramManager")); pm != nil {
		set := s.object(pm, "ProgramTemplateSet", "FU_run.ProgramTemplateSet")
		for _, name := range []string{"fixture", "other"} {
			s.object(set, name, "FU_run.ProgramTemplateSet."+name)
		}
	}
}

// outputs gives a method its OutputArguments property.
func (s *Server) outputs(m *server.Node, key string, args []*ua.Argument) {
	eos := make([]*ua.ExtensionObject, len(args))
	for i, a := range args {
		eos[i] = ua.NewExtensionObject(a)
	}
	v := s.variable(nil, "OutputArguments", key+".OutputArguments", id.Argument, 1, func() *ua.DataValue { return server.DataValueFromValue(eos) })
	m.AddRef(v, id.HasProperty, true)
}
