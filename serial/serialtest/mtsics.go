package serialtest

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// Balance is a Mettler Toledo balance speaking MT-SICS level 0/1 (CR LF):
// S, SI, Z, T, TA, TAC, @, I2, I4. Weights are fixed-width (`S S
// 100.00 g`); an unknown command answers ES; while busy S, Z and T answer
// `<id> I`; an unstable pan makes S answer `S I` and SI `S D ...`.
type Balance struct {
	mu                sync.Mutex
	gross, zero, tare float64
	stable, busy      bool
	serial, model     string
}

// NewBalance returns a stable, empty balance.
func NewBalance() *Balance {
	return &Balance{stable: true, serial: "B123456789", model: "XS205 220.00 g"}
}

// Load puts mass (grams) on the pan.
func (b *Balance) Load(g float64) { b.mu.Lock(); b.gross = g; b.mu.Unlock() }

// Stable sets whether the reading has settled.
func (b *Balance) Stable(on bool) { b.mu.Lock(); b.stable = on; b.mu.Unlock() }

// Busy makes commands that need the weighing cell answer I.
func (b *Balance) Busy(on bool) { b.mu.Lock(); b.busy = on; b.mu.Unlock() }

// Tare returns the tare memory.
func (b *Balance) Tare() float64 { b.mu.Lock(); defer b.mu.Unlock(); return b.tare }

func weight(v float64) string { return fmt.Sprintf("%10.2f g", v) }

// Handle implements Protocol.
func (b *Balance) Handle(cmd string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	reply := func(s string) ([]byte, bool) { return []byte(s + "\r\n"), true }
	f := strings.Fields(cmd)
	if len(f) == 0 {
		return reply("ES")
	}
	net := b.gross - b.zero - b.tare
	switch {
	case cmd == "S":
		if b.busy || !b.stable {
			return reply("S I")
		}
		return reply("S S " + weight(net))
	case cmd == "SI":
		if b.busy {
			return reply("S I")
		}
		if !b.stable {
			return reply("S D " + weight(net))
		}
		return reply("S S " + weight(net))
	case cmd == "Z":
		if b.busy || !b.stable {
			return reply("Z I")
		}
		b.zero, b.tare = b.gross, 0
		return reply("Z A")
	case cmd == "T":
		if b.busy || !b.stable {
			return reply("T I")
		}
		b.tare = b.gross - b.zero
		return reply("T S " + weight(b.tare))
	case cmd == "TA":
		return reply("TA A " + weight(b.tare))
	case f[0] == "TA" && len(f) == 3:
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil || f[2] != "g" {
			return reply("TA L")
		}
		b.tare = v
		return reply("TA A " + weight(b.tare))
	case cmd == "TAC":
		b.tare = 0
		return reply("TAC A")
	case cmd == "@":
		b.busy = false
		return reply(`I4 A "` + b.serial + `"`)
	case cmd == "I4":
		return reply(`I4 A "` + b.serial + `"`)
	case cmd == "I2":
		return reply(`I2 A "` + b.model + `"`)
	}
	return reply("ES")
}
