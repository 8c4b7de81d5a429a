package sila2

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/openmhp/mhp-go"
)

// Values cross the adapter as MHP values: String -> string, Integer ->
// int64, Real -> float64, Boolean -> bool, Binary -> base64 string, Date ->
// "2006-01-02+07:00", Time -> "15:04:05+07:00", Timestamp -> RFC 3339,
// Any -> {"type": XML data type, "payload": base64}, List -> []any,
// Structure -> map[string]any keyed by snake_case element identifiers.

// EncodeElements builds the message md (a _Parameters, _Responses or
// Metadata_ message) from values keyed by the snake_case identifiers of es.
// Every element is required.
func (c *Compiled) EncodeElements(md protoreflect.MessageDescriptor, es []Element, values map[string]any) (*dynamicpb.Message, error) {
	m := dynamicpb.NewMessage(md)
	for i := range es {
		e := &es[i]
		name := SnakeCase(e.Identifier)
		v, ok := values[name]
		if !ok {
			v, ok = values[e.Identifier]
		}
		if !ok {
			return nil, mhp.Errorf(mhp.CodeInvalidValue, "missing %q", name).With("field", name)
		}
		fd := md.Fields().ByNumber(protoreflect.FieldNumber(i + 1))
		if fd == nil {
			return nil, fmt.Errorf("sila2: %s has no field %d", md.FullName(), i+1)
		}
		if err := c.setField(m, fd, &e.DataType, v, name, 0); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// DecodeElements reads a message of elements into a map keyed by
// snake_case identifiers. A missing element reads as nil.
func (c *Compiled) DecodeElements(m protoreflect.Message, es []Element) (map[string]any, error) {
	out := make(map[string]any, len(es))
	for i := range es {
		e := &es[i]
		fd := m.Descriptor().Fields().ByNumber(protoreflect.FieldNumber(i + 1))
		if fd == nil {
			return nil, fmt.Errorf("sila2: %s has no field %d for %s", m.Descriptor().FullName(), i+1, e.Identifier)
		}
		v, err := c.getField(m, fd, &e.DataType, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Identifier, err)
		}
		out[SnakeCase(e.Identifier)] = v
	}
	return out, nil
}

func invalid(path, format string, args ...any) *mhp.Error {
	return mhp.Errorf(mhp.CodeInvalidValue, "%s: %s", path, fmt.Sprintf(format, args...)).With("field", path)
}

func (c *Compiled) setField(m *dynamicpb.Message, fd protoreflect.FieldDescriptor, t *DataType, v any, path string, depth int) error {
	if depth > maxTypeDepth {
		return invalid(path, "value nests too deeply")
	}
	t = unconstrain(t)
	if t.List != nil {
		items, ok := v.([]any)
		if !ok {
			return invalid(path, "want a list, got %T", v)
		}
		list := m.Mutable(fd).List()
		for i, it := range items {
			p := fmt.Sprintf("%s[%d]", path, i)
			msg, err := c.encodeMessage(fd.Message(), t.List, it, p, depth+1)
			if err != nil {
				return err
			}
			list.Append(protoreflect.ValueOfMessage(msg))
		}
		return nil
	}
	msg, err := c.encodeMessage(fd.Message(), t, v, path, depth+1)
	if err != nil {
		return err
	}
	m.Set(fd, protoreflect.ValueOfMessage(msg))
	return nil
}

func (c *Compiled) encodeMessage(md protoreflect.MessageDescriptor, t *DataType, v any, path string, depth int) (protoreflect.Message, error) {
	t = unconstrain(t)
	m := dynamicpb.NewMessage(md)
	switch {
	case t.Identifier != "":
		def, ok := c.types[t.Identifier]
		if !ok {
			return nil, invalid(path, "undefined data type %s", t.Identifier)
		}
		if err := c.setField(m, md.Fields().ByNumber(1), def, v, path, depth+1); err != nil {
			return nil, err
		}
	case t.Structure != nil:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, invalid(path, "want an object, got %T", v)
		}
		for i := range t.Structure.Elements {
			e := &t.Structure.Elements[i]
			name := SnakeCase(e.Identifier)
			x, ok := obj[name]
			if !ok {
				x, ok = obj[e.Identifier]
			}
			p := path + "." + name
			if !ok {
				return nil, invalid(p, "missing")
			}
			if err := c.setField(m, md.Fields().ByNumber(protoreflect.FieldNumber(i+1)), &e.DataType, x, p, depth+1); err != nil {
				return nil, err
			}
		}
	case t.Basic != "":
		if err := encodeBasic(m, t.Basic, v, path); err != nil {
			return nil, err
		}
	default:
		return nil, invalid(path, "unsupported data type")
	}
	return m, nil
}

func toInt64(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case int:
		return int64(x), true
	case int32:
		return int64(x), true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= 1<<53 {
			return int64(x), true
		}
	}
	return 0, false
}

func encodeBasic(m *dynamicpb.Message, basic string, v any, path string) error {
	switch basic {
	case BasicString:
		s, ok := v.(string)
		if !ok {
			return invalid(path, "want a string, got %T", v)
		}
		setScalar(m, 1, protoreflect.ValueOfString(s))
	case BasicInteger:
		n, ok := toInt64(v)
		if !ok {
			return invalid(path, "want an integer, got %v", v)
		}
		setScalar(m, 1, protoreflect.ValueOfInt64(n))
	case BasicReal:
		f, ok := mhp.Number(v)
		if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
			return invalid(path, "want a finite number, got %v", v)
		}
		setScalar(m, 1, protoreflect.ValueOfFloat64(f))
	case BasicBoolean:
		b, ok := v.(bool)
		if !ok {
			return invalid(path, "want a boolean, got %T", v)
		}
		setScalar(m, 1, protoreflect.ValueOfBool(b))
	case BasicBinary:
		var raw []byte
		switch x := v.(type) {
		case BinaryTransfer:
			setScalar(m, 2, protoreflect.ValueOfString(x.UUID))
			return nil
		case []byte:
			raw = x
		case string:
			b, err := base64.StdEncoding.DecodeString(x)
			if err != nil {
				return invalid(path, "binary must be base64: %v", err)
			}
			raw = b
		default:
			return invalid(path, "want base64 text, got %T", v)
		}
		if len(raw) > MaxInlineBinary {
			return invalid(path, "binary of %d bytes is above the 2 MiB inline limit: send it through binary transfer", len(raw))
		}
		setScalar(m, 1, protoreflect.ValueOfBytes(raw))
	case BasicDate, BasicTime, BasicTimestamp:
		s, ok := v.(string)
		if !ok {
			return invalid(path, "want an ISO 8601 %s string, got %T", strings.ToLower(basic), v)
		}
		return encodeTime(m, basic, s, path)
	case BasicAny:
		obj, ok := v.(map[string]any)
		if !ok {
			return invalid(path, `want {"type": "<DataType>...", "payload": base64}, got %T`, v)
		}
		typ, _ := obj["type"].(string)
		pl, _ := obj["payload"].(string)
		raw, err := base64.StdEncoding.DecodeString(pl)
		if err != nil || typ == "" {
			return invalid(path, `an Any needs a "type" and a base64 "payload"`)
		}
		setScalar(m, 1, protoreflect.ValueOfString(typ))
		setScalar(m, 2, protoreflect.ValueOfBytes(raw))
	default:
		return invalid(path, "unknown basic type %s", basic)
	}
	return nil
}

var timeLayouts = map[string][2]string{
	BasicDate:      {"2006-01-02Z07:00", "2006-01-02"},
	BasicTime:      {"15:04:05Z07:00", "15:04:05"},
	BasicTimestamp: {time.RFC3339, "2006-01-02T15:04:05"},
}

func encodeTime(m *dynamicpb.Message, basic, s, path string) error {
	layouts := timeLayouts[basic]
	t, err := time.Parse(layouts[0], s)
	if err != nil {
		t, err = time.Parse(layouts[1], s)
	}
	if err != nil {
		return invalid(path, "%q is not %s", s, layouts[0])
	}
	_, off := t.Zone()
	tz := dynamicpb.NewMessage(m.Descriptor().Fields().ByName("timezone").Message())
	setScalar(tz, 1, protoreflect.ValueOfInt32(int32(off/3600)))
	mins := off % 3600 / 60
	if mins < 0 {
		mins = -mins
	}
	setScalar(tz, 2, protoreflect.ValueOfUint32(uint32(mins)))
	set := func(name string, n int) {
		m.Set(m.Descriptor().Fields().ByName(protoreflect.Name(name)), protoreflect.ValueOfUint32(uint32(n)))
	}
	if basic != BasicTime {
		set("day", t.Day())
		set("month", int(t.Month()))
		set("year", t.Year())
	}
	if basic != BasicDate {
		set("second", t.Second())
		set("minute", t.Minute())
		set("hour", t.Hour())
	}
	m.Set(m.Descriptor().Fields().ByName("timezone"), protoreflect.ValueOfMessage(tz))
	return nil
}

func (c *Compiled) getField(m protoreflect.Message, fd protoreflect.FieldDescriptor, t *DataType, depth int) (any, error) {
	if depth > maxTypeDepth {
		return nil, fmt.Errorf("value nests too deeply")
	}
	t = unconstrain(t)
	if t.List != nil {
		if !fd.IsList() {
			return nil, fmt.Errorf("field %s is not repeated", fd.Name())
		}
		l := m.Get(fd).List()
		out := make([]any, 0, l.Len())
		for i := 0; i < l.Len(); i++ {
			v, err := c.decodeMessage(l.Get(i).Message(), t.List, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	if fd.IsList() || fd.Message() == nil {
		return nil, fmt.Errorf("field %s does not hold a SiLA value", fd.Name())
	}
	if !m.Has(fd) {
		return nil, nil
	}
	return c.decodeMessage(m.Get(fd).Message(), t, depth+1)
}

func (c *Compiled) decodeMessage(m protoreflect.Message, t *DataType, depth int) (any, error) {
	t = unconstrain(t)
	md := m.Descriptor()
	switch {
	case t.Identifier != "":
		def, ok := c.types[t.Identifier]
		if !ok {
			return nil, fmt.Errorf("undefined data type %s", t.Identifier)
		}
		return c.getField(m, md.Fields().ByNumber(1), def, depth+1)
	case t.Structure != nil:
		out := map[string]any{}
		for i := range t.Structure.Elements {
			e := &t.Structure.Elements[i]
			fd := md.Fields().ByNumber(protoreflect.FieldNumber(i + 1))
			if fd == nil {
				return nil, fmt.Errorf("%s has no field %d", md.FullName(), i+1)
			}
			v, err := c.getField(m, fd, &e.DataType, depth+1)
			if err != nil {
				return nil, err
			}
			out[SnakeCase(e.Identifier)] = v
		}
		return out, nil
	case t.Basic != "":
		return decodeBasic(m, t.Basic)
	}
	return nil, fmt.Errorf("unsupported data type")
}

func decodeBasic(m protoreflect.Message, basic string) (any, error) {
	if string(m.Descriptor().FullName()) != FrameworkPackage+"."+basic {
		return nil, fmt.Errorf("got %s where %s was due", m.Descriptor().FullName(), basic)
	}
	switch basic {
	case BasicString:
		return getField(m, 1).String(), nil
	case BasicInteger:
		return getField(m, 1).Int(), nil
	case BasicReal:
		return getField(m, 1).Float(), nil
	case BasicBoolean:
		return getField(m, 1).Bool(), nil
	case BasicBinary:
		if id := getField(m, 2).String(); id != "" {
			return BinaryTransfer{UUID: id}, nil
		}
		return base64.StdEncoding.EncodeToString(getField(m, 1).Bytes()), nil
	case BasicDate, BasicTime, BasicTimestamp:
		return decodeTime(m, basic), nil
	case BasicAny:
		return map[string]any{"type": getField(m, 1).String(), "payload": base64.StdEncoding.EncodeToString(getField(m, 2).Bytes())}, nil
	}
	return nil, fmt.Errorf("unknown basic type %s", basic)
}

func decodeTime(m protoreflect.Message, basic string) string {
	u := func(name string) int {
		return int(m.Get(m.Descriptor().Fields().ByName(protoreflect.Name(name))).Uint())
	}
	zone := "Z"
	if tz, ok := getMsg(m, m.Descriptor().Fields().ByName("timezone").Number()); ok {
		h, mi := getField(tz, 1).Int(), getField(tz, 2).Uint()
		if h != 0 || mi != 0 {
			sign := "+"
			if h < 0 {
				sign, h = "-", -h
			}
			zone = fmt.Sprintf("%s%02d:%02d", sign, h, mi)
		}
	}
	switch basic {
	case BasicDate:
		return fmt.Sprintf("%04d-%02d-%02d%s", u("year"), u("month"), u("day"), zone)
	case BasicTime:
		return fmt.Sprintf("%02d:%02d:%02d%s", u("hour"), u("minute"), u("second"), zone)
	}
	return fmt.Sprintf("%04d-%02d-%02dT%02d:%02d:%02d%s", u("year"), u("month"), u("day"), u("hour"), u("minute"), u("second"), zone)
}

// Shape returns the MHP shape of an FDL data type: its type, unit and the
// limits its constraints imply (bounds, set, pattern, lengths, element counts).
func (c *Compiled) Shape(t *DataType) *mhp.Shape { return shapeOf(c.types, t, 0) }

func shapeOf(types map[string]*DataType, t *DataType, depth int) *mhp.Shape {
	if t == nil || depth > maxTypeDepth {
		return &mhp.Shape{Type: mhp.TypeAny}
	}
	switch {
	case t.Basic != "":
		s := &mhp.Shape{}
		switch t.Basic {
		case BasicString:
			s.Type = mhp.TypeString
		case BasicInteger:
			s.Type = mhp.TypeInteger
		case BasicReal:
			s.Type = mhp.TypeNumber
		case BasicBoolean:
			s.Type = mhp.TypeBoolean
		case BasicBinary:
			s.Type, s.Notes = mhp.TypeString, "base64"
		case BasicDate:
			s.Type, s.Notes = mhp.TypeString, "date, 2006-01-02+07:00"
		case BasicTime:
			s.Type, s.Notes = mhp.TypeString, "time, 15:04:05+07:00"
		case BasicTimestamp:
			s.Type, s.Notes = mhp.TypeString, "timestamp, RFC 3339"
		case BasicAny:
			s.Type, s.Notes = mhp.TypeObject, `SiLA Any: {"type": "<DataType> XML", "payload": base64}`
		}
		return s
	case t.List != nil:
		return &mhp.Shape{Type: mhp.TypeArray, Items: shapeOf(types, t.List, depth+1)}
	case t.Structure != nil:
		s := &mhp.Shape{Type: mhp.TypeObject, Properties: map[string]*mhp.Shape{}}
		for i := range t.Structure.Elements {
			e := &t.Structure.Elements[i]
			name := SnakeCase(e.Identifier)
			s.Properties[name] = shapeOf(types, &e.DataType, depth+1)
			s.Required = append(s.Required, name)
		}
		return s
	case t.Identifier != "":
		return shapeOf(types, types[t.Identifier], depth+1)
	case t.Constrained != nil:
		inner := &t.Constrained.DataType
		s := shapeOf(types, inner, depth+1)
		applyConstraints(s, &t.Constrained.Constraints, inner.basicName(types))
		return s
	}
	return &mhp.Shape{Type: mhp.TypeAny}
}

func applyConstraints(s *mhp.Shape, c *Constraints, basic string) {
	lim := s.Limits
	if lim == nil {
		lim = &mhp.Limits{}
	}
	num := func(p *string) *float64 {
		if p == nil || (basic != BasicReal && basic != BasicInteger) {
			return nil
		}
		f, err := strconv.ParseFloat(*p, 64)
		if err != nil {
			return nil
		}
		return &f
	}
	tighten := func(dst **float64, v *float64, lower bool) {
		if v == nil {
			return
		}
		if *dst == nil || (lower && *v > **dst) || (!lower && *v < **dst) {
			*dst = v
		}
	}
	tighten(&lim.Min, num(c.MinimalInclusive), true)
	tighten(&lim.Max, num(c.MaximalInclusive), false)
	tighten(&lim.ExclusiveMin, num(c.MinimalExclusive), true)
	tighten(&lim.ExclusiveMax, num(c.MaximalExclusive), false)
	if len(c.Set) > 0 {
		lim.Enum = nil
		for _, v := range c.Set {
			switch basic {
			case BasicInteger:
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					lim.Enum = append(lim.Enum, n)
					continue
				}
				f, _ := strconv.ParseFloat(v, 64)
				lim.Enum = append(lim.Enum, f)
			case BasicReal:
				f, _ := strconv.ParseFloat(v, 64)
				lim.Enum = append(lim.Enum, f)
			default:
				lim.Enum = append(lim.Enum, v)
			}
		}
	}
	if c.Pattern != nil {
		lim.Pattern = *c.Pattern
	}
	ip := func(n int) *int { return &n }
	if s.Type == mhp.TypeString {
		if c.Length != nil {
			lim.MinLength, lim.MaxLength = ip(*c.Length), ip(*c.Length)
		}
		if c.MinimalLength != nil {
			lim.MinLength = ip(*c.MinimalLength)
		}
		if c.MaximalLength != nil {
			lim.MaxLength = ip(*c.MaximalLength)
		}
	}
	if s.Type == mhp.TypeArray {
		if c.ElementCount != nil {
			lim.MinLength, lim.MaxLength = ip(*c.ElementCount), ip(*c.ElementCount)
		}
		if c.MinimalElementCount != nil {
			lim.MinLength = ip(*c.MinimalElementCount)
		}
		if c.MaximalElementCount != nil {
			lim.MaxLength = ip(*c.MaximalElementCount)
		}
	}
	if c.Unit != nil && c.Unit.Label != "" {
		s.Unit = c.Unit.Label
	}
	var notes []string
	if c.ContentType != nil {
		notes = append(notes, "content type "+c.ContentType.Type+"/"+c.ContentType.Subtype)
	}
	if c.FullyQualifiedIdentifier != nil {
		notes = append(notes, "a fully qualified "+*c.FullyQualifiedIdentifier+" identifier")
	}
	if c.Schema != nil {
		notes = append(notes, "matches the "+c.Schema.Type+" schema "+c.Schema.URL)
	}
	if len(notes) > 0 {
		if s.Notes != "" {
			notes = append([]string{s.Notes}, notes...)
		}
		s.Notes = strings.Join(notes, "; ")
	}
	if !lim.Empty() {
		s.Limits = lim
	}
}
