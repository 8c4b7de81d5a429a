package serialtest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Pump is a New Era NE-1000 syringe pump in basic mode (8N1, commands end
// with CR; replies are STX, the two-digit address, the status letter, data,
// ETX, with no CR). It knows DIA, RAT, VOL, DIR, RUN, STP, VER, DIS and the
// empty status query; alarms (A?R after power-up, A?S stall) are reported
// by the next reply and cleared by it; errors are `?`, `?NA`, `?OOR`.
type Pump struct {
	mu        sync.Mutex
	addr      int
	status    byte // I W S P
	dia, rate float64
	rateUnit  string
	vol       float64
	volUnit   string
	dir       string
	alarm     string
	dispensed float64
}

// NewPump returns a stopped pump at address 0 with a 14.43 mm syringe.
func NewPump() *Pump {
	return &Pump{status: 'S', dia: 14.43, rate: 1, rateUnit: "MM", vol: 0, volUnit: "ML", dir: "INF"}
}

// Alarm raises an alarm ("R" power cut, "S" stall) for the next reply.
func (p *Pump) Alarm(code string) { p.mu.Lock(); p.alarm = code; p.mu.Unlock() }

// Finish ends a run as if the volume was dispensed.
func (p *Pump) Finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.status == 'I' || p.status == 'W' {
		p.dispensed = p.vol
		p.status = 'S'
	}
}

// PumpState is the pump's state as a test checks it.
type PumpState struct {
	Status    string
	Dia, Rate float64
	RateUnit  string
	Vol       float64
	Dir       string
}

// State returns the pump's state.
func (p *Pump) State() PumpState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PumpState{Status: string(p.status), Dia: p.dia, Rate: p.rate, RateUnit: p.rateUnit, Vol: p.vol, Dir: p.dir}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

// Handle implements Protocol.
func (p *Pump) Handle(cmd string) ([]byte, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// The pump strips spaces and control characters and upper-cases.
	c := strings.ToUpper(strings.Map(func(r rune) rune {
		if r <= ' ' || r == 0x7f {
			return -1
		}
		return r
	}, cmd))
	addr := 0
	i := 0
	for i < len(c) && i < 2 && c[i] >= '0' && c[i] <= '9' {
		i++
	}
	if i > 0 {
		addr, _ = strconv.Atoi(c[:i])
	}
	c = c[i:]
	if addr != p.addr && !strings.HasPrefix(c, "*") {
		return nil, false // another pump's command
	}
	frame := func(data string) ([]byte, bool) {
		st := string(p.status)
		if p.alarm != "" {
			st, data = "A", "?"+p.alarm
			p.alarm = ""
		}
		return []byte(fmt.Sprintf("\x02%02d%s%s\x03", p.addr, st, data)), true
	}
	if p.alarm != "" {
		return frame("")
	}
	var name, arg string
	for j := 0; j < len(c); j++ {
		if (c[j] >= '0' && c[j] <= '9') || c[j] == '.' {
			name, arg = c[:j], c[j:]
			break
		}
	}
	if name == "" {
		name = c
		if len(c) > 3 {
			name, arg = c[:3], c[3:]
		}
	}
	parse := func() (float64, bool) {
		v, err := strconv.ParseFloat(arg, 64)
		return v, err == nil
	}
	switch name {
	case "":
		return frame("")
	case "VER":
		return frame("NE1000V3.928")
	case "DIA":
		if arg == "" {
			return frame(num(p.dia))
		}
		v, ok := parse()
		if !ok {
			return frame("?")
		}
		if v < 0.1 || v > 80 {
			return frame("?OOR")
		}
		if p.status != 'S' {
			return frame("?NA")
		}
		p.dia = v
		return frame("")
	case "RAT":
		if arg == "" {
			return frame(num(p.rate) + p.rateUnit)
		}
		unit := "MM"
		for _, u := range []string{"UM", "MM", "UH", "MH"} {
			if strings.HasSuffix(arg, u) {
				unit, arg = u, strings.TrimSuffix(arg, u)
			}
		}
		v, ok := parse()
		if !ok {
			return frame("?")
		}
		if v <= 0 || v > 9999 {
			return frame("?OOR")
		}
		p.rate, p.rateUnit = v, unit
		return frame("")
	case "VOL":
		if arg == "" {
			return frame(num(p.vol) + p.volUnit)
		}
		if arg == "UL" || arg == "ML" {
			p.volUnit = arg
			return frame("")
		}
		v, ok := parse()
		if !ok {
			return frame("?")
		}
		if v < 0 || v > 9999 {
			return frame("?OOR")
		}
		p.vol = v
		return frame("")
	case "DIR":
		switch arg {
		case "":
			return frame(p.dir)
		case "INF", "WDR":
			p.dir = arg
			return frame("")
		case "REV":
			p.dir = map[string]string{"INF": "WDR", "WDR": "INF"}[p.dir]
			return frame("")
		}
		return frame("?")
	case "RUN":
		if p.status == 'S' || p.status == 'P' {
			p.status = 'I'
			if p.dir == "WDR" {
				p.status = 'W'
			}
		}
		return frame("")
	case "STP":
		if p.status == 'I' || p.status == 'W' {
			p.status = 'P'
		} else {
			p.status = 'S'
		}
		return frame("")
	case "DIS":
		return frame(fmt.Sprintf("I%sW%s%s", num(p.dispensed), num(0), p.volUnit))
	}
	return frame("?")
}
