package silatest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/openmhp/mhp-go/sila2"
)

// CancelControllerFDL is the standard CancelController feature, as this fake serves it.
const CancelControllerFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="core.commands" xmlns="http://www.sila-standard.org">
  <Identifier>CancelController</Identifier>
  <DisplayName>Cancel Controller</DisplayName>
  <Description>Cancels running observable commands.</Description>
  <Command>
    <Identifier>CancelCommand</Identifier><DisplayName>Cancel Command</DisplayName><Description>Cancels one command execution.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>CommandExecutionUUID</Identifier><DisplayName>Command Execution UUID</DisplayName><Description>The execution to cancel.</Description>
      <DataType><Constrained><DataType><Basic>String</Basic></DataType><Constraints>
        <Pattern>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}</Pattern></Constraints></Constrained></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>InvalidCommandExecutionUUID</Identifier><Identifier>OperationNotSupported</Identifier></DefinedExecutionErrors>
  </Command>
  <Command>
    <Identifier>CancelAll</Identifier><DisplayName>Cancel All</DisplayName><Description>Cancels every running execution.</Description>
    <Observable>No</Observable>
  </Command>
  <DefinedExecutionError><Identifier>InvalidCommandExecutionUUID</Identifier><DisplayName>Invalid Command Execution UUID</DisplayName><Description>No such running execution.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>OperationNotSupported</Identifier><DisplayName>Operation Not Supported</DisplayName><Description>The command cannot be cancelled.</Description></DefinedExecutionError>
</Feature>`

// PauseControllerFDL is the standard PauseController feature, as this fake serves it.
const PauseControllerFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="core.commands" xmlns="http://www.sila-standard.org">
  <Identifier>PauseController</Identifier>
  <DisplayName>Pause Controller</DisplayName>
  <Description>Pauses and resumes running observable commands.</Description>
  <Command>
    <Identifier>Pause</Identifier><DisplayName>Pause</DisplayName><Description>Pauses one command execution.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>CommandExecutionUUID</Identifier><DisplayName>Command Execution UUID</DisplayName><Description>The execution.</Description><DataType><Basic>String</Basic></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>InvalidCommandExecutionUUID</Identifier><Identifier>InvalidCommandState</Identifier><Identifier>OperationNotSupported</Identifier></DefinedExecutionErrors>
  </Command>
  <Command>
    <Identifier>Resume</Identifier><DisplayName>Resume</DisplayName><Description>Resumes one command execution.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>CommandExecutionUUID</Identifier><DisplayName>Command Execution UUID</DisplayName><Description>The execution.</Description><DataType><Basic>String</Basic></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>InvalidCommandExecutionUUID</Identifier><Identifier>InvalidCommandState</Identifier><Identifier>OperationNotSupported</Identifier></DefinedExecutionErrors>
  </Command>
  <DefinedExecutionError><Identifier>InvalidCommandExecutionUUID</Identifier><DisplayName>Invalid Command Execution UUID</DisplayName><Description>No such running execution.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>InvalidCommandState</Identifier><DisplayName>Invalid Command State</DisplayName><Description>Already in that state.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>OperationNotSupported</Identifier><DisplayName>Operation Not Supported</DisplayName><Description>The command cannot be paused.</Description></DefinedExecutionError>
</Feature>`

// LockControllerFDL is the standard LockController feature, as this fake serves it.
const LockControllerFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="core" xmlns="http://www.sila-standard.org">
  <Identifier>LockController</Identifier>
  <DisplayName>Lock Controller</DisplayName>
  <Description>Locks the server for one client.</Description>
  <Command>
    <Identifier>LockServer</Identifier><DisplayName>Lock Server</DisplayName><Description>Locks the server.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>LockIdentifier</Identifier><DisplayName>Lock Identifier</DisplayName><Description>Secret of the lock.</Description><DataType><Basic>String</Basic></DataType></Parameter>
    <Parameter><Identifier>Timeout</Identifier><DisplayName>Timeout</DisplayName><Description>Seconds of inactivity until the lock ends; 0 never.</Description>
      <DataType><Constrained><DataType><Basic>Integer</Basic></DataType><Constraints><MinimalInclusive>0</MinimalInclusive><Unit><Label>s</Label><Factor>1</Factor><Offset>0</Offset><UnitComponent><SIUnit>Second</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>ServerAlreadyLocked</Identifier></DefinedExecutionErrors>
  </Command>
  <Command>
    <Identifier>UnlockServer</Identifier><DisplayName>Unlock Server</DisplayName><Description>Unlocks the server.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>LockIdentifier</Identifier><DisplayName>Lock Identifier</DisplayName><Description>Secret of the lock.</Description><DataType><Basic>String</Basic></DataType></Parameter>
    <DefinedExecutionErrors><Identifier>ServerNotLocked</Identifier><Identifier>InvalidLockIdentifier</Identifier></DefinedExecutionErrors>
  </Command>
  <Property><Identifier>IsLocked</Identifier><DisplayName>Is Locked</DisplayName><Description>Whether the server is locked.</Description><Observable>No</Observable><DataType><Basic>Boolean</Basic></DataType></Property>
  <Metadata><Identifier>LockIdentifier</Identifier><DisplayName>Lock Identifier</DisplayName><Description>Identifier of the lock, sent with every call of a locked server.</Description><DataType><Basic>String</Basic></DataType>
    <DefinedExecutionErrors><Identifier>InvalidLockIdentifier</Identifier></DefinedExecutionErrors></Metadata>
  <DefinedExecutionError><Identifier>ServerAlreadyLocked</Identifier><DisplayName>Server Already Locked</DisplayName><Description>Already locked.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>ServerNotLocked</Identifier><DisplayName>Server Not Locked</DisplayName><Description>Not locked.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>InvalidLockIdentifier</Identifier><DisplayName>Invalid Lock Identifier</DisplayName><Description>Wrong lock identifier.</Description></DefinedExecutionError>
</Feature>`

// AuthorizationServiceFDL declares the AccessToken metadata, as the
// standard's AuthorizationService does (its commands are left out).
const AuthorizationServiceFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="core" xmlns="http://www.sila-standard.org">
  <Identifier>AuthorizationService</Identifier>
  <DisplayName>Authorization Service</DisplayName>
  <Description>Access tokens for calls.</Description>
  <Metadata><Identifier>AccessToken</Identifier><DisplayName>Access Token</DisplayName><Description>Token from the authentication service.</Description>
    <DataType><Basic>String</Basic></DataType><DefinedExecutionErrors><Identifier>InvalidAccessToken</Identifier></DefinedExecutionErrors></Metadata>
  <DefinedExecutionError><Identifier>InvalidAccessToken</Identifier><DisplayName>Invalid Access Token</DisplayName><Description>The token is not valid.</Description></DefinedExecutionError>
</Feature>`

// AuthorizationServiceID is the fully qualified id of AuthorizationServiceFDL.
const AuthorizationServiceID = "org.silastandard/core/AuthorizationService/v1"

// GreetingProviderFDL is a greeting feature modelled on the standard's example.
const GreetingProviderFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="examples" xmlns="http://www.sila-standard.org">
  <Identifier>GreetingProvider</Identifier>
  <DisplayName>Greeting Provider</DisplayName>
  <Description>Says hello.</Description>
  <Command>
    <Identifier>SayHello</Identifier><DisplayName>Say Hello</DisplayName><Description>Greets a name.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>Name</Identifier><DisplayName>Name</DisplayName><Description>Who to greet.</Description>
      <DataType><Constrained><DataType><Basic>String</Basic></DataType><Constraints><MaximalLength>20</MaximalLength></Constraints></Constrained></DataType></Parameter>
    <Response><Identifier>Greeting</Identifier><DisplayName>Greeting</DisplayName><Description>The greeting.</Description><DataType><Basic>String</Basic></DataType></Response>
  </Command>
  <Property><Identifier>StartYear</Identifier><DisplayName>Start Year</DisplayName><Description>Year the server started.</Description><Observable>No</Observable><DataType><Basic>Integer</Basic></DataType></Property>
</Feature>`

// TemperatureControllerFDL is a temperature controller modelled on the
// standard's example: observable ControlTemperature with a constrained
// target in kelvin, an intermediate response, two defined execution errors,
// an observable CurrentTemperature, and Stabilize, a command that ignores
// cancel requests.
const TemperatureControllerFDL = `<?xml version="1.0" encoding="utf-8"?>
<Feature SiLA2Version="1.0" FeatureVersion="1.0" Originator="org.silastandard" Category="examples" xmlns="http://www.sila-standard.org">
  <Identifier>TemperatureController</Identifier>
  <DisplayName>Temperature Controller</DisplayName>
  <Description>Controls the temperature of a block.</Description>
  <Command>
    <Identifier>ControlTemperature</Identifier><DisplayName>Control Temperature</DisplayName><Description>Brings the block to a target temperature.</Description>
    <Observable>Yes</Observable>
    <Parameter><Identifier>TargetTemperature</Identifier><DisplayName>Target Temperature</DisplayName><Description>Target in kelvin.</Description>
      <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints>
        <MinimalExclusive>277</MinimalExclusive><MaximalInclusive>363</MaximalInclusive>
        <Unit><Label>K</Label><Factor>1</Factor><Offset>0</Offset><UnitComponent><SIUnit>Kelvin</SIUnit><Exponent>1</Exponent></UnitComponent></Unit>
      </Constraints></Constrained></DataType></Parameter>
    <Response><Identifier>ReachedTemperature</Identifier><DisplayName>Reached Temperature</DisplayName><Description>Where it ended.</Description><DataType><Basic>Real</Basic></DataType></Response>
    <IntermediateResponse><Identifier>CurrentTemperature</Identifier><DisplayName>Current Temperature</DisplayName><Description>Temperature on the way.</Description><DataType><Basic>Real</Basic></DataType></IntermediateResponse>
    <DefinedExecutionErrors><Identifier>TemperatureNotReachable</Identifier><Identifier>ControlInterrupted</Identifier></DefinedExecutionErrors>
  </Command>
  <Command>
    <Identifier>Stabilize</Identifier><DisplayName>Stabilize</DisplayName><Description>Holds the temperature until stable; cannot be interrupted.</Description>
    <Observable>Yes</Observable>
  </Command>
  <Command>
    <Identifier>SetMode</Identifier><DisplayName>Set Mode</DisplayName><Description>Sets the control mode.</Description>
    <Observable>No</Observable>
    <Parameter><Identifier>Mode</Identifier><DisplayName>Mode</DisplayName><Description>Control mode.</Description>
      <DataType><DataTypeIdentifier>ControlMode</DataTypeIdentifier></DataType></Parameter>
  </Command>
  <Property><Identifier>CurrentTemperature</Identifier><DisplayName>Current Temperature</DisplayName><Description>Block temperature.</Description><Observable>Yes</Observable>
    <DataType><Constrained><DataType><Basic>Real</Basic></DataType><Constraints><Unit><Label>K</Label><Factor>1</Factor><Offset>0</Offset><UnitComponent><SIUnit>Kelvin</SIUnit><Exponent>1</Exponent></UnitComponent></Unit></Constraints></Constrained></DataType></Property>
  <Property><Identifier>Profile</Identifier><DisplayName>Profile</DisplayName><Description>Programmed steps.</Description><Observable>No</Observable>
    <DataType><List><DataType><Structure>
      <Element><Identifier>Target</Identifier><DisplayName>Target</DisplayName><Description>K</Description><DataType><Basic>Real</Basic></DataType></Element>
      <Element><Identifier>HoldTime</Identifier><DisplayName>Hold Time</DisplayName><Description>s</Description><DataType><Basic>Integer</Basic></DataType></Element>
    </Structure></DataType></List></DataType></Property>
  <DefinedExecutionError><Identifier>TemperatureNotReachable</Identifier><DisplayName>Temperature Not Reachable</DisplayName><Description>The target cannot be reached.</Description></DefinedExecutionError>
  <DefinedExecutionError><Identifier>ControlInterrupted</Identifier><DisplayName>Control Interrupted</DisplayName><Description>Control was interrupted (also: cancelled).</Description></DefinedExecutionError>
  <DataTypeDefinition><Identifier>ControlMode</Identifier><DisplayName>Control Mode</DisplayName><Description>Mode.</Description>
    <DataType><Constrained><DataType><Basic>String</Basic></DataType><Constraints><Set><Value>Heat</Value><Value>Cool</Value><Value>Off</Value></Set></Constraints></Constrained></DataType></DataTypeDefinition>
</Feature>`

// Greeter serves GreetingProvider.
func Greeter(startYear int64) Handlers {
	return Handlers{
		Properties: map[string]func(context.Context) (any, error){
			"StartYear": func(context.Context) (any, error) { return startYear, nil },
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"SayHello": func(_ context.Context, p map[string]any) (map[string]any, error) {
				name, _ := p["name"].(string)
				switch name {
				case "":
					return nil, fmt.Errorf("nobody to greet")
				case "Nobody":
					// A server-side check the FDL's constraints do not express.
					return nil, &sila2.Error{Kind: sila2.KindValidation,
						Parameter: "org.silastandard/examples/GreetingProvider/v1/Command/SayHello/Parameter/Name",
						Message:   "Nobody is not a name"}
				}
				return map[string]any{"greeting": "Hello SiLA 2 " + name}, nil
			},
		},
	}
}

// Outcome is how the thermostat's running command ends.
type Outcome int

// Outcomes a test hands the running command.
const (
	// Reach: the target is reached; the command succeeds.
	Reach Outcome = iota
	// Interrupt: the command ends with ControlInterrupted.
	Interrupt
	// Drop: the connection drops mid-command.
	Drop
)

// Thermostat is the simulated device behind TemperatureController. A
// running ControlTemperature or Stabilize waits for End (or, for
// ControlTemperature only, a cancel).
type Thermostat struct {
	mu      sync.Mutex
	current float64
	mode    string
	changed chan struct{}
	outcome chan Outcome
	running chan struct{} // one token per command that started waiting
}

// NewThermostat starts at k kelvin.
func NewThermostat(k float64) *Thermostat {
	return &Thermostat{current: k, mode: "Off", changed: make(chan struct{}), outcome: make(chan Outcome), running: make(chan struct{}, 16)}
}

// Set changes the current temperature; subscribers see it.
func (t *Thermostat) Set(k float64) {
	t.mu.Lock()
	t.current = k
	close(t.changed)
	t.changed = make(chan struct{})
	t.mu.Unlock()
}

// Current returns the current temperature.
func (t *Thermostat) Current() float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.current
}

// Mode returns the last mode set.
func (t *Thermostat) Mode() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.mode
}

// Running is sent a token each time a command starts waiting for its outcome.
func (t *Thermostat) Running() <-chan struct{} { return t.running }

// End hands an outcome to the running command, waiting at most d for one to take it.
func (t *Thermostat) End(o Outcome, d time.Duration) error {
	select {
	case t.outcome <- o:
		return nil
	case <-time.After(d):
		return fmt.Errorf("silatest: no command took outcome %d within %v", o, d)
	}
}

// Handlers serves TemperatureController from the thermostat.
func (t *Thermostat) Handlers() Handlers {
	fq := "org.silastandard/examples/TemperatureController/v1/DefinedExecutionError/"
	defined := func(id, msg string) error {
		return &sila2.Error{Kind: sila2.KindDefined, Identifier: fq + id, Message: msg}
	}
	return Handlers{
		Subscriptions: map[string]func(context.Context, func(any) error) error{
			"CurrentTemperature": func(ctx context.Context, send func(any) error) error {
				for {
					t.mu.Lock()
					v, ch := t.current, t.changed
					t.mu.Unlock()
					if err := send(v); err != nil {
						return err
					}
					select {
					case <-ch:
					case <-ctx.Done():
						return nil
					}
				}
			},
		},
		Properties: map[string]func(context.Context) (any, error){
			"Profile": func(context.Context) (any, error) {
				return []any{map[string]any{"target": 300.0, "hold_time": int64(60)}, map[string]any{"target": 310.5, "hold_time": int64(30)}}, nil
			},
		},
		Commands: map[string]func(context.Context, map[string]any) (map[string]any, error){
			"SetMode": func(_ context.Context, p map[string]any) (map[string]any, error) {
				t.mu.Lock()
				t.mode, _ = p["mode"].(string)
				t.mu.Unlock()
				return map[string]any{}, nil
			},
		},
		Observable: map[string]func(context.Context, *Exec) (map[string]any, error){
			"ControlTemperature": func(ctx context.Context, x *Exec) (map[string]any, error) {
				target, _ := x.Params["target_temperature"].(float64)
				if target > 350 {
					return nil, defined("TemperatureNotReachable", fmt.Sprintf("%.1f K is beyond the heater", target))
				}
				x.Progress(0.25, 30*time.Second)
				x.Intermediate(map[string]any{"current_temperature": t.Current()})
				t.running <- struct{}{}
				select {
				case o := <-t.outcome:
					switch o {
					case Reach:
						t.Set(target)
						return map[string]any{"reached_temperature": target}, nil
					case Drop:
						return nil, ErrDrop
					}
					return nil, defined("ControlInterrupted", "control was interrupted")
				case <-x.CancelRequested():
					return nil, defined("ControlInterrupted", "cancelled by CancelCommand")
				case <-x.ServerStopped():
					return nil, ErrDrop
				}
			},
			"Stabilize": func(ctx context.Context, x *Exec) (map[string]any, error) {
				x.Progress(0.5, -1)
				t.running <- struct{}{}
				select { // cancel requests are acknowledged and ignored
				case o := <-t.outcome:
					if o == Drop {
						return nil, ErrDrop
					}
					return map[string]any{}, nil
				case <-x.ServerStopped():
					return nil, ErrDrop
				}
			},
		},
	}
}
