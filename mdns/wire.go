package mdns

import (
	"encoding/binary"
	"fmt"
	"net"
	"strings"
)

// A tolerant DNS message decoder for mDNS answers (RFC 1035 section 4,
// RFC 6762). It walks each resource record by its RDLENGTH, so one record
// it cannot read (python-zeroconf 0.47 sends an NSEC whose type bitmap has
// an empty window block, which strict decoders such as miekg/dns reject
// with the whole packet) costs that record only. Everything is bounded by
// the packet: names by 255 octets and strictly backward compression
// pointers, records by maxRecords whatever the header's counts claim.

// DNS record types and classes the browse reads.
const (
	dnsTypeA    uint16 = 1
	dnsTypePTR  uint16 = 12
	dnsTypeTXT  uint16 = 16
	dnsTypeAAAA uint16 = 28
	dnsTypeSRV  uint16 = 33
	dnsTypeNSEC uint16 = 47
	dnsClassIN  uint16 = 1

	dnsHeaderLen = 12
	// dnsMaxName is the longest name on the wire (RFC 1035 section 2.3.4).
	dnsMaxName = 255
	// maxPacket is the largest mDNS message (RFC 6762 section 17).
	maxPacket = 9000
	// maxRecords bounds the questions plus records decoded from one
	// packet, whatever its header counts say.
	maxRecords = 512
)

// dnsRecord is one decoded resource record. Names are in presentation form
// without the trailing dot; a '.' or '\' inside a label is escaped.
type dnsRecord struct {
	Name string
	Type uint16
	// Class is without mDNS's cache-flush bit.
	Class uint16
	TTL   uint32
	// Target is a PTR's name or an SRV's host.
	Target string
	Port   uint16
	// Text holds a TXT record's strings.
	Text []string
	// IP is an A or AAAA record's address.
	IP net.IP
}

// dnsSkip is a record left out of a decoded message and why.
type dnsSkip struct {
	Name   string
	Type   uint16
	Reason string
}

// dnsMessage is what decodeDNS could read of a packet.
type dnsMessage struct {
	ID       uint16
	Response bool
	// Records are the PTR, SRV, TXT, A and AAAA records (class IN) read.
	Records []dnsRecord
	// Skipped are the records of those types that could not be read, and
	// malformed records of other types; well-formed records of other types
	// are neither.
	Skipped []dnsSkip
}

// dnsTypeName names a record type for logs.
func dnsTypeName(t uint16) string {
	switch t {
	case dnsTypeA:
		return "A"
	case dnsTypePTR:
		return "PTR"
	case dnsTypeTXT:
		return "TXT"
	case dnsTypeAAAA:
		return "AAAA"
	case dnsTypeSRV:
		return "SRV"
	case dnsTypeNSEC:
		return "NSEC"
	case 13:
		return "HINFO"
	case 41:
		return "OPT"
	}
	return fmt.Sprintf("TYPE%d", t)
}

// decodeDNS reads the records of one packet. A record whose data cannot be
// read is skipped (msg.Skipped) and the walk goes on at the next record.
// The error says why the walk stopped early: a truncated or unreadable
// header, question or record framing (owner name, fixed fields, RDLENGTH
// past the end), after which no record boundary is known; the records read
// before that are still returned.
func decodeDNS(b []byte) (dnsMessage, error) {
	var msg dnsMessage
	if len(b) < dnsHeaderLen {
		return msg, fmt.Errorf("packet of %d bytes is shorter than a DNS header (12)", len(b))
	}
	msg.ID = binary.BigEndian.Uint16(b)
	msg.Response = b[2]&0x80 != 0
	qd := int(binary.BigEndian.Uint16(b[4:]))
	rr := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) + int(binary.BigEndian.Uint16(b[10:]))
	// Every question takes at least 5 bytes and every record 11, so the
	// walk ends with the packet whatever the counts claim; the cap is a
	// second bound.
	off := dnsHeaderLen
	for i := 0; i < qd; i++ {
		if i >= maxRecords {
			return msg, fmt.Errorf("more than %d questions", maxRecords)
		}
		if off >= len(b) {
			return msg, fmt.Errorf("header claims %d questions, the packet ends after %d", qd, i)
		}
		_, next, err := readDNSName(b, off)
		if err != nil {
			return msg, fmt.Errorf("question %d: %v", i+1, err)
		}
		if next+4 > len(b) {
			return msg, fmt.Errorf("question %d: truncated at byte %d", i+1, next)
		}
		off = next + 4
	}
	for i := 0; i < rr; i++ {
		if i >= maxRecords {
			return msg, fmt.Errorf("more than %d records", maxRecords)
		}
		if off >= len(b) {
			return msg, fmt.Errorf("header claims %d records, the packet ends after %d", rr, i)
		}
		name, next, err := readDNSName(b, off)
		if err != nil {
			return msg, fmt.Errorf("record %d: owner name: %v", i+1, err)
		}
		if next+10 > len(b) {
			return msg, fmt.Errorf("record %d (%s): truncated in its type, class, TTL and length", i+1, name)
		}
		typ := binary.BigEndian.Uint16(b[next:])
		class := binary.BigEndian.Uint16(b[next+2:]) & 0x7fff
		ttl := binary.BigEndian.Uint32(b[next+4:])
		start := next + 10
		end := start + int(binary.BigEndian.Uint16(b[next+8:]))
		if end > len(b) {
			return msg, fmt.Errorf("record %d (%s %s): RDLENGTH %d runs %d bytes past the end of the packet",
				i+1, dnsTypeName(typ), name, end-start, end-len(b))
		}
		off = end
		rec := dnsRecord{Name: name, Type: typ, Class: class, TTL: ttl}
		used, err := decodeRData(b, start, end, &rec)
		switch {
		case err != nil:
			msg.Skipped = append(msg.Skipped, dnsSkip{Name: name, Type: typ, Reason: err.Error()})
		case used && class == dnsClassIN:
			msg.Records = append(msg.Records, rec)
		}
	}
	return msg, nil
}

// decodeRData reads the data of rec (b[start:end]) into rec. used says the
// type is one the browse reads; other types are only checked where their
// format is known (NSEC), so that a malformed one is reported.
func decodeRData(b []byte, start, end int, rec *dnsRecord) (used bool, err error) {
	n := end - start
	switch rec.Type {
	case dnsTypeA:
		if n != net.IPv4len {
			return true, fmt.Errorf("A data is %d bytes, want 4", n)
		}
		rec.IP = net.IP(append([]byte(nil), b[start:end]...))
	case dnsTypeAAAA:
		if n != net.IPv6len {
			return true, fmt.Errorf("AAAA data is %d bytes, want 16", n)
		}
		rec.IP = net.IP(append([]byte(nil), b[start:end]...))
	case dnsTypePTR:
		t, err := readDNSNameIn(b, start, end)
		if err != nil {
			return true, fmt.Errorf("PTR name: %v", err)
		}
		rec.Target = t
	case dnsTypeSRV:
		if n < 7 {
			return true, fmt.Errorf("SRV data is %d bytes, too short for priority, weight, port and target", n)
		}
		rec.Port = binary.BigEndian.Uint16(b[start+4:])
		t, err := readDNSNameIn(b, start+6, end)
		if err != nil {
			return true, fmt.Errorf("SRV target: %v", err)
		}
		rec.Target = t
	case dnsTypeTXT:
		for p := start; p < end; {
			l := int(b[p])
			if p+1+l > end {
				return true, fmt.Errorf("TXT string of %d bytes at offset %d runs past the record's data", l, p-start)
			}
			rec.Text = append(rec.Text, string(b[p+1:p+1+l]))
			p += 1 + l
		}
	case dnsTypeNSEC:
		return false, checkNSEC(b, start, end)
	default:
		return false, nil
	}
	return true, nil
}

// checkNSEC checks an NSEC record's data (RFC 4034 section 4.1): the next
// domain name, then type bitmap blocks of window number, length 1..32 and
// bitmap, windows in increasing order.
func checkNSEC(b []byte, start, end int) error {
	_, p, err := readDNSName(b, start)
	if err != nil || p > end {
		return fmt.Errorf("next domain name unreadable: %v", err)
	}
	last := -1
	for p < end {
		if p+2 > end {
			return fmt.Errorf("type bitmap block truncated at offset %d", p-start)
		}
		win, l := int(b[p]), int(b[p+1])
		switch {
		case l == 0:
			return fmt.Errorf("empty block (window %d, length 0) in the type bitmap; RFC 4034 forbids it (python-zeroconf 0.47 sends it)", win)
		case l > 32:
			return fmt.Errorf("type bitmap block of window %d has length %d, more than 32", win, l)
		case win <= last:
			return fmt.Errorf("type bitmap window %d follows window %d", win, last)
		case p+2+l > end:
			return fmt.Errorf("type bitmap block of window %d runs past the record's data", win)
		}
		last = win
		p += 2 + l
	}
	return nil
}

// readDNSNameIn reads a name that must fill b[start:end] exactly (its
// uncompressed part inside the record's data).
func readDNSNameIn(b []byte, start, end int) (string, error) {
	name, next, err := readDNSName(b[:end], start)
	if err != nil {
		return "", err
	}
	if next != end {
		return "", fmt.Errorf("name ends %d bytes before the record's data", end-next)
	}
	return name, nil
}

// readDNSName reads the (possibly compressed) name at b[off:] and returns
// it with the offset just after its in-place part. Compression pointers
// must point strictly backwards from the labels they continue, which ends
// every loop; the name may not exceed 255 octets on the wire.
func readDNSName(b []byte, off int) (string, int, error) {
	var sb strings.Builder
	next := -1
	wire := 1 // the root label
	pos, floor := off, off
	for {
		if pos >= len(b) {
			return "", 0, fmt.Errorf("name truncated at byte %d", pos)
		}
		l := int(b[pos])
		switch l & 0xc0 {
		case 0x00:
			if l == 0 {
				if next < 0 {
					next = pos + 1
				}
				return sb.String(), next, nil
			}
			if pos+1+l > len(b) {
				return "", 0, fmt.Errorf("label of %d bytes at byte %d runs past the end", l, pos)
			}
			if wire += 1 + l; wire > dnsMaxName {
				return "", 0, fmt.Errorf("name longer than %d octets", dnsMaxName)
			}
			if sb.Len() > 0 {
				sb.WriteByte('.')
			}
			writeLabel(&sb, b[pos+1:pos+1+l])
			pos += 1 + l
		case 0xc0:
			if pos+1 >= len(b) {
				return "", 0, fmt.Errorf("compression pointer truncated at byte %d", pos)
			}
			ptr := (l&0x3f)<<8 | int(b[pos+1])
			if next < 0 {
				next = pos + 2
			}
			if ptr >= floor {
				return "", 0, fmt.Errorf("compression pointer at byte %d to byte %d does not point backwards (a loop or a forward reference)", pos, ptr)
			}
			pos, floor = ptr, ptr
		default:
			return "", 0, fmt.Errorf("label type 0x%02x at byte %d is not supported", l&0xc0, pos)
		}
	}
}

// writeLabel writes a label in presentation form: '.' and '\' escaped,
// control characters and DEL as \DDD.
func writeLabel(sb *strings.Builder, l []byte) {
	for _, c := range l {
		switch {
		case c == '.' || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(sb, "\\%03d", c)
		default:
			sb.WriteByte(c)
		}
	}
}

// unescapeLabel undoes writeLabel.
func unescapeLabel(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out []byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			out = append(out, c)
			continue
		}
		if i+3 < len(s) && isDigit(s[i+1]) && isDigit(s[i+2]) && isDigit(s[i+3]) {
			v := int(s[i+1]-'0')*100 + int(s[i+2]-'0')*10 + int(s[i+3]-'0')
			if v < 256 {
				out = append(out, byte(v))
				i += 3
				continue
			}
		}
		out = append(out, s[i+1])
		i++
	}
	return string(out)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// firstLabel splits a presentation name at its first unescaped dot.
func firstLabel(name string) (label, rest string) {
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '\\':
			i++
		case '.':
			return name[:i], name[i+1:]
		}
	}
	return name, ""
}

// query is a one-question query for the PTR records of service (a
// presentation name such as _mhp._tcp.local); unicast sets the QU bit (RFC
// 6762 section 5.4), asking for a unicast answer.
func query(service string, unicast bool) []byte {
	b := make([]byte, dnsHeaderLen, dnsHeaderLen+len(service)+6)
	b[5] = 1 // QDCOUNT
	for name := service; name != ""; {
		var l string
		l, name = firstLabel(name)
		l = unescapeLabel(l)
		b = append(b, byte(len(l)))
		b = append(b, l...)
	}
	class := dnsClassIN
	if unicast {
		class |= 0x8000
	}
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(append(b, 0), dnsTypePTR), class)
}
