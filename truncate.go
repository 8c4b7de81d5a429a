package mhp

import (
	"strconv"
	"unicode/utf8"
)

// Truncate caps s at max bytes, cut on a UTF-8 boundary, with a marker that
// says how much was dropped ("…[+1234 bytes]"). Every string a server keeps or
// echoes from outside (a reason, an id, a backend's message) goes through it,
// so nothing stored grows without bound. A max below 32 is raised to 32.
func Truncate(s string, max int) string {
	if max < 32 {
		max = 32
	}
	if len(s) <= max {
		return s
	}
	marker := func(dropped int) string { return "…[+" + strconv.Itoa(dropped) + " bytes]" }
	keep := max - len(marker(len(s)))
	for keep > 0 && !utf8.RuneStart(s[keep]) {
		keep--
	}
	return s[:keep] + marker(len(s)-keep)
}
