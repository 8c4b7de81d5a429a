package serialtest

import (
	"strconv"
	"strings"
	"sync"
)

// Hotplate is an IKA C-MAG HS 7 class hotplate stirrer speaking NAMUR
// (9600 7E1, CR LF): queries answer `<value> <channel>`, sets and
// START/STOP/RESET answer nothing, OUT_WD1@m is echoed, an unknown command
// gets silence. A setpoint above the safety temperature (IN_SP_3) is
// ignored, as the instrument does.
type Hotplate struct {
	mu sync.Mutex
	// Name is IN_NAME's answer.
	Name                      string
	external, plate, speed    float64
	tempSet, safety, speedSet float64
	heating, stirring         bool
	watchdog                  int
}

// NewHotplate returns a plate at 25 °C, stopped, safety temperature 320.
func NewHotplate() *Hotplate {
	return &Hotplate{Name: "C-MAG HS7", external: 24.8, plate: 25.0, safety: 320, tempSet: 0, speedSet: 0}
}

// State is the instrument's state as a test checks it.
type HotplateState struct {
	TempSet, SpeedSet float64
	Heating, Stirring bool
	Watchdog          int
}

// State returns the plate's setpoints and outputs.
func (h *Hotplate) State() HotplateState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return HotplateState{TempSet: h.tempSet, SpeedSet: h.speedSet, Heating: h.heating, Stirring: h.stirring, Watchdog: h.watchdog}
}

// SetPlate sets the plate sensor's reading.
func (h *Hotplate) SetPlate(v float64) { h.mu.Lock(); h.plate = v; h.mu.Unlock() }

func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// Handle implements Protocol.
func (h *Hotplate) Handle(cmd string) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	reply := func(s string) ([]byte, bool) { return []byte(s + "\r\n"), true }
	fields := strings.Fields(cmd)
	if len(fields) == 0 {
		return nil, false
	}
	arg := func() (float64, bool) {
		if len(fields) != 2 {
			return 0, false
		}
		v, err := strconv.ParseFloat(fields[1], 64)
		return v, err == nil
	}
	switch fields[0] {
	case "IN_NAME":
		return reply(h.Name)
	case "IN_PV_1":
		return reply(f1(h.external) + " 1")
	case "IN_PV_2":
		return reply(f1(h.plate) + " 2")
	case "IN_PV_4":
		return reply(strconv.FormatFloat(h.speed, 'f', 0, 64) + " 4")
	case "IN_SP_1":
		return reply(f1(h.tempSet) + " 1")
	case "IN_SP_3":
		return reply(f1(h.safety) + " 3")
	case "IN_SP_4":
		return reply(strconv.FormatFloat(h.speedSet, 'f', 0, 64) + " 4")
	case "OUT_SP_1":
		if v, ok := arg(); ok && v >= 0 && v <= h.safety {
			h.tempSet = v
		}
	case "OUT_SP_4":
		if v, ok := arg(); ok && v >= 0 && v <= 1500 {
			h.speedSet = v
			if h.stirring {
				h.speed = v
			}
		}
	case "START_1":
		h.heating = true
	case "STOP_1":
		h.heating = false
	case "START_4":
		h.stirring, h.speed = true, h.speedSet
	case "STOP_4":
		h.stirring, h.speed = false, 0
	case "RESET":
		h.heating, h.stirring, h.speed = false, false, 0
	default:
		if m, ok := strings.CutPrefix(cmd, "OUT_WD1@"); ok {
			if n, err := strconv.Atoi(m); err == nil && n >= 20 && n <= 1500 {
				h.watchdog = n
				return reply(cmd)
			}
		}
	}
	return nil, false
}
