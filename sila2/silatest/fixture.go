package silatest

import (
	"context"
	"errors"
	"time"

	"github.com/openmhp/mhp-go/conformance"
	"github.com/openmhp/mhp-go/sila2"
)

// FixtureID is the fully qualified id of the conformance fixture feature.
const FixtureID = "org.openmhp/conformance/Fixture/v1"

// FixtureFDL exposes the conformance fixture as a SiLA 2 feature:
// properties Temperature and DoorClosed; one-parameter unobservable Set*
// commands for the settings; observable Run and Monitor (long actions);
// unobservable Quick, Profile, ConfirmAction, ForbiddenAction; and Stop,
// the estop command. Constraints carry the fixture's limits and units.
const FixtureFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.1" FeatureVersion="1.0" Originator="org.openmhp" Category="conformance" xmlns="http://www.sila-standard.org">
  <Identifier>Fixture</Identifier>
  <DisplayName>MHP Conformance Fixture</DisplayName>
  <Description>The simulated instrument of the MHP conformance suite.</Description>
  <Command><Identifier>SetSetpoint</Identifier><DisplayName>Set Setpoint</DisplayName><Description>Temperature setpoint.</Description><Observable>No</Observable>
    <Parameter><Identifier>Setpoint</Identifier><DisplayName>Setpoint</DisplayName><Description>degC</Description>
      <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MinimalInclusive>0</MinimalInclusive><MaximalInclusive>100</MaximalInclusive>
        <Unit><Label>degC</Label><Factor>1</Factor><Offset>273.15</Offset><UnitComponent><SIUnit>Kelvin</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>SetMode</Identifier><DisplayName>Set Mode</DisplayName><Description>Operating mode.</Description><Observable>No</Observable>
    <Parameter><Identifier>Mode</Identifier><DisplayName>Mode</DisplayName><Description>idle, heat or cool</Description>
      <DataType><Constrained><DataType><Basic>String</Basic></DataType><Constraints><Set><Value>idle</Value><Value>heat</Value><Value>cool</Value></Set></Constraints></Constrained></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>SetConfirmLevel</Identifier><DisplayName>Set Confirm Level</DisplayName><Description>A level that needs confirmation.</Description><Observable>No</Observable>
    <Parameter><Identifier>ConfirmLevel</Identifier><DisplayName>Confirm Level</DisplayName><Description>0..10</Description>
      <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MinimalInclusive>0</MinimalInclusive><MaximalInclusive>10</MaximalInclusive></Constraints></Constrained></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>SetForbiddenLevel</Identifier><DisplayName>Set Forbidden Level</DisplayName><Description>A level MHP must never write.</Description><Observable>No</Observable>
    <Parameter><Identifier>ForbiddenLevel</Identifier><DisplayName>Forbidden Level</DisplayName><Description>any number</Description><DataType><Basic>Real</Basic></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>SetFan</Identifier><DisplayName>Set Fan</DisplayName><Description>Fan on or off.</Description><Observable>No</Observable>
    <Parameter><Identifier>Fan</Identifier><DisplayName>Fan</DisplayName><Description>on</Description><DataType><Basic>Boolean</Basic></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>Run</Identifier><DisplayName>Run</DisplayName><Description>A long run.</Description><Observable>Yes</Observable>
    <Parameter><Identifier>DurationS</Identifier><DisplayName>Duration</DisplayName><Description>seconds</Description>
      <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MinimalInclusive>0</MinimalInclusive><MaximalInclusive>3600</MaximalInclusive>
        <Unit><Label>s</Label><Factor>1</Factor><Offset>0</Offset><UnitComponent><SIUnit>Second</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Parameter>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>Quick</Identifier><DisplayName>Quick</DisplayName><Description>A short action.</Description><Observable>No</Observable>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>Monitor</Identifier><DisplayName>Monitor</DisplayName><Description>Watches until cancelled.</Description><Observable>Yes</Observable>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>Profile</Identifier><DisplayName>Profile</DisplayName><Description>Runs temperature steps.</Description><Observable>No</Observable>
    <Parameter><Identifier>Steps</Identifier><DisplayName>Steps</DisplayName><Description>steps</Description>
      <DataType><List><DataType><Structure>
        <Element><Identifier>Temp</Identifier><DisplayName>Temperature</DisplayName><Description>degC</Description>
          <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MinimalInclusive>4</MinimalInclusive><MaximalInclusive>99</MaximalInclusive>
            <Unit><Label>degC</Label><Factor>1</Factor><Offset>273.15</Offset><UnitComponent><SIUnit>Kelvin</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Element>
        <Element><Identifier>HoldS</Identifier><DisplayName>Hold</DisplayName><Description>seconds</Description>
          <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><MinimalInclusive>0</MinimalInclusive>
            <Unit><Label>s</Label><Factor>1</Factor><Offset>0</Offset><UnitComponent><SIUnit>Second</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Element>
      </Structure></DataType></List></DataType></Parameter>
    <Parameter><Identifier>Cycles</Identifier><DisplayName>Cycles</DisplayName><Description>1..99</Description>
      <DataType><Constrained><DataType><Basic>Integer</Basic></DataType><Constraints><MinimalInclusive>1</MinimalInclusive><MaximalInclusive>99</MaximalInclusive></Constraints></Constrained></DataType></Parameter>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>ConfirmAction</Identifier><DisplayName>Confirm Action</DisplayName><Description>Needs confirmation.</Description><Observable>No</Observable>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>ForbiddenAction</Identifier><DisplayName>Forbidden Action</DisplayName><Description>Never through MHP.</Description><Observable>No</Observable>
    <Response><Identifier>Ok</Identifier><DisplayName>Ok</DisplayName><Description>done</Description><DataType><Basic>Boolean</Basic></DataType></Response>
    <Response><Identifier>Action</Identifier><DisplayName>Action</DisplayName><Description>name</Description><DataType><Basic>String</Basic></DataType></Response>
    <DefinedExecutionErrors><Identifier>WorkFailed</Identifier><Identifier>Cancelled</Identifier></DefinedExecutionErrors></Command>
  <Command><Identifier>Stop</Identifier><DisplayName>Stop</DisplayName><Description>Emergency stop.</Description><Observable>No</Observable>
    <DefinedExecutionErrors><Identifier>StopFailed</Identifier></DefinedExecutionErrors></Command>
  <Property><Identifier>Temperature</Identifier><DisplayName>Temperature</DisplayName><Description>Reading.</Description><Observable>No</Observable>
    <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><Unit><Label>degC</Label><Factor>1</Factor><Offset>273.15</Offset><UnitComponent><SIUnit>Kelvin</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Property>
  <Property><Identifier>DoorClosed</Identifier><DisplayName>Door Closed</DisplayName><Description>Interlock of Run.</Description><Observable>No</Observable><DataType><Basic>Boolean</Basic></DataType></Property>
  <DefinedExecutionError><Identifier>WorkFailed</Identifier><DisplayName>Work Failed</DisplayName><Description>The instrument reports the work failed.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>Cancelled</Identifier><DisplayName>Cancelled</DisplayName><Description>The work stopped because it was cancelled.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>StopFailed</Identifier><DisplayName>Stop Failed</DisplayName><Description>The stop command failed.</Description></DefinedExecutionError>
</Feature>`

// fixtureProgressEvery is how often a running command's progress is copied
// from the instrument into ExecutionInfo.
const fixtureProgressEvery = 20 * time.Millisecond

func fixtureErr(id, msg string) error {
	return &sila2.Error{Kind: sila2.KindDefined, Identifier: FixtureID + "/DefinedExecutionError/" + id, Message: msg}
}

// instrumentErr maps an Instrument error to what a SiLA server sends.
func instrumentErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, conformance.ErrRefused):
		return frameworkErr(sila2.FrameworkCommandExecutionNotAccepted, "%v", err)
	case errors.Is(err, conformance.ErrReported):
		return fixtureErr("WorkFailed", err.Error())
	case errors.Is(err, conformance.ErrStopFailed):
		return fixtureErr("StopFailed", err.Error())
	default:
		// ErrDropped, or the call cut off: the reply never comes.
		return ErrDrop
	}
}

func workResult(w *conformance.Work) (map[string]any, error) {
	state, result, err := w.State()
	switch state {
	case conformance.WorkSucceeded:
		out := map[string]any{"ok": true, "action": w.Action}
		if m, ok := result.(map[string]any); ok {
			if v, ok := m["ok"].(bool); ok {
				out["ok"] = v
			}
			if v, ok := m["action"].(string); ok {
				out["action"] = v
			}
		}
		return out, nil
	case conformance.WorkCancelled:
		return nil, fixtureErr("Cancelled", "the work was cancelled")
	case conformance.WorkFailed:
		msg := "work failed"
		if err != nil {
			msg = err.Error()
		}
		return nil, fixtureErr("WorkFailed", msg)
	}
	return nil, ErrDrop
}

// FixtureHandlers serve FixtureFDL from an Instrument, which keeps the
// state and decides every outcome as the conformance suite scripts it.
func FixtureHandlers(in *conformance.Instrument) Handlers {
	read := func(name string) func(context.Context) (any, error) {
		return func(context.Context) (any, error) {
			v, err := in.ReadSignal(name)
			if err != nil {
				return nil, &sila2.Error{Kind: sila2.KindUndefined, Message: err.Error()}
			}
			return v, nil
		}
	}
	write := func(name, param string) func(context.Context, map[string]any) (map[string]any, error) {
		return func(ctx context.Context, p map[string]any) (map[string]any, error) {
			if err := in.WriteSetting(ctx, name, p[param]); err != nil {
				return nil, instrumentErr(err)
			}
			return map[string]any{}, nil
		}
	}
	short := func(name string) func(context.Context, map[string]any) (map[string]any, error) {
		return func(ctx context.Context, p map[string]any) (map[string]any, error) {
			w, err := in.Start(name, p)
			if err != nil {
				return nil, instrumentErr(err)
			}
			select {
			case <-w.Done():
				return workResult(w)
			case <-ctx.Done():
				return nil, ErrDrop
			}
		}
	}
	accept := func(name string) func(context.Context, map[string]any) (any, error) {
		return func(_ context.Context, p map[string]any) (any, error) {
			w, err := in.Start(name, p)
			if err != nil {
				return nil, instrumentErr(err)
			}
			return w, nil
		}
	}
	long := func(_ context.Context, x *Exec) (map[string]any, error) {
		w := x.Accepted.(*conformance.Work)
		tick := time.NewTicker(fixtureProgressEvery)
		defer tick.Stop()
		last := -1.0
		cancel := x.CancelRequested()
		for {
			if p := w.Progress(); p != last {
				last = p
				x.Progress(p, -1)
			}
			select {
			case <-w.Done():
				return workResult(w)
			case <-cancel:
				w.Cancel()
				cancel = nil
			case <-x.ServerStopped():
				return nil, ErrDrop
			case <-tick.C:
			}
		}
	}
	return Handlers{
		Properties: map[string]func(context.Context) (any, error){
			"Temperature": read(conformance.SignalTemperature),
			"DoorClosed":  read(conformance.SignalDoorClosed),
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"SetSetpoint":       write(conformance.SettingSetpoint, "setpoint"),
			"SetMode":           write(conformance.SettingMode, "mode"),
			"SetConfirmLevel":   write(conformance.SettingConfirmed, "confirm_level"),
			"SetForbiddenLevel": write(conformance.SettingForbidden, "forbidden_level"),
			"SetFan":            write(conformance.SettingFan, "fan"),
			"Quick":             short(conformance.ActionQuick),
			"Profile":           short(conformance.ActionProfile),
			"ConfirmAction":     short(conformance.ActionConfirm),
			"ForbiddenAction":   short(conformance.ActionForbidden),
			"Stop": func(context.Context, map[string]any) (map[string]any, error) {
				if err := in.Stop(); err != nil {
					return nil, instrumentErr(err)
				}
				return map[string]any{}, nil
			},
		},
		Accept: map[string]func(context.Context, map[string]any) (any, error){
			"Run":     accept(conformance.ActionRun),
			"Monitor": accept(conformance.ActionMonitor),
		},
		Observable: map[string]func(context.Context, *Exec) (map[string]any, error){
			"Run":     long,
			"Monitor": long,
		},
	}
}

// FixtureConfig is the adapter config (YAML, without endpoint and tls)
// that presents FixtureFDL as exactly conformance.FixtureDescriptor().
const FixtureConfig = `adapter: sila2
device: {id: conformance-01, class: test_fixture, make: OpenMHP, model: Fixture}
safety: {estop: true}
features: [Fixture]
default_approval: auto
poll_interval_s: 0.02
cancel_wait_s: 30
estop: Fixture/Stop
cancelled_errors: [Fixture/Cancelled]
properties:
  - {property: Fixture/Temperature, signal: temperature}
  - {property: Fixture/DoorClosed, signal: door_closed}
commands:
  - {command: Fixture/SetSetpoint, setting: setpoint}
  - {command: Fixture/SetMode, setting: mode}
  - {command: Fixture/SetConfirmLevel, setting: confirm_level, approval: confirm}
  - {command: Fixture/SetForbiddenLevel, setting: forbidden_level, approval: forbid}
  - {command: Fixture/SetFan, setting: fan, during_job: true}
  - {command: Fixture/Run, action: run, interlocks: [door_closed]}
  - {command: Fixture/Quick, action: quick}
  - {command: Fixture/Monitor, action: monitor, concurrent: true}
  - {command: Fixture/Profile, action: profile}
  - {command: Fixture/ConfirmAction, action: confirm_action, approval: confirm, interlocks: [door_closed]}
  - {command: Fixture/ForbiddenAction, action: forbidden_action, approval: forbid}
`
