package sila2

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// MaxFDLSize bounds the size of a Feature Definition the parser accepts.
const MaxFDLSize = 4 << 20

// maxExpanded bounds the size of a data type with every data type
// identifier expanded, so a small FDL cannot make shapes of exponential size.
const maxExpanded = 1 << 14

// maxTypeDepth bounds how deeply data types may nest (lists, structures,
// constrained types and data type identifiers together).
const maxTypeDepth = 32

// Feature is a parsed SiLA 2 Feature Definition (FDL).
type Feature struct {
	SiLA2Version   string `xml:"SiLA2Version,attr"`
	FeatureVersion string `xml:"FeatureVersion,attr"`
	Originator     string `xml:"Originator,attr"`
	Category       string `xml:"Category,attr"`
	MaturityLevel  string `xml:"MaturityLevel,attr"`
	Locale         string `xml:"Locale,attr"`

	Identifier  string `xml:"Identifier"`
	DisplayName string `xml:"DisplayName"`
	Description string `xml:"Description"`

	Commands   []Command            `xml:"Command"`
	Properties []Property           `xml:"Property"`
	Metadata   []Metadata           `xml:"Metadata"`
	Errors     []DefinedError       `xml:"DefinedExecutionError"`
	DataTypes  []DataTypeDefinition `xml:"DataTypeDefinition"`
}

// Command is a feature's command.
type Command struct {
	Identifier   string    `xml:"Identifier"`
	DisplayName  string    `xml:"DisplayName"`
	Description  string    `xml:"Description"`
	Observable   string    `xml:"Observable"`
	Parameters   []Element `xml:"Parameter"`
	Responses    []Element `xml:"Response"`
	Intermediate []Element `xml:"IntermediateResponse"`
	Errors       []string  `xml:"DefinedExecutionErrors>Identifier"`
}

// IsObservable reports whether the command is observable.
func (c *Command) IsObservable() bool {
	return strings.EqualFold(strings.TrimSpace(c.Observable), "Yes")
}

// Property is a feature's property.
type Property struct {
	Identifier  string   `xml:"Identifier"`
	DisplayName string   `xml:"DisplayName"`
	Description string   `xml:"Description"`
	Observable  string   `xml:"Observable"`
	DataType    DataType `xml:"DataType"`
	Errors      []string `xml:"DefinedExecutionErrors>Identifier"`
}

// IsObservable reports whether the property is observable.
func (p *Property) IsObservable() bool {
	return strings.EqualFold(strings.TrimSpace(p.Observable), "Yes")
}

// Metadata is a feature's metadata declaration.
type Metadata struct {
	Identifier  string   `xml:"Identifier"`
	DisplayName string   `xml:"DisplayName"`
	Description string   `xml:"Description"`
	DataType    DataType `xml:"DataType"`
	Errors      []string `xml:"DefinedExecutionErrors>Identifier"`
}

// DefinedError is a defined execution error.
type DefinedError struct {
	Identifier  string `xml:"Identifier"`
	DisplayName string `xml:"DisplayName"`
	Description string `xml:"Description"`
}

// DataTypeDefinition is a named custom data type.
type DataTypeDefinition struct {
	Identifier  string   `xml:"Identifier"`
	DisplayName string   `xml:"DisplayName"`
	Description string   `xml:"Description"`
	DataType    DataType `xml:"DataType"`
}

// Element is a parameter, response, intermediate response or structure element.
type Element struct {
	Identifier  string   `xml:"Identifier"`
	DisplayName string   `xml:"DisplayName"`
	Description string   `xml:"Description"`
	DataType    DataType `xml:"DataType"`
}

// DataType is one FDL data type: exactly one of Basic, List, Structure,
// Constrained or Identifier is set.
type DataType struct {
	Basic       string       `xml:"Basic"`
	List        *DataType    `xml:"List>DataType"`
	Structure   *Structure   `xml:"Structure"`
	Constrained *Constrained `xml:"Constrained"`
	Identifier  string       `xml:"DataTypeIdentifier"`
}

// Structure is a structure type's elements.
type Structure struct {
	Elements []Element `xml:"Element"`
}

// Constrained is a base type with constraints.
type Constrained struct {
	DataType    DataType    `xml:"DataType"`
	Constraints Constraints `xml:"Constraints"`
}

// Constraints are the constraints of a constrained type; numeric bounds are
// kept as the FDL's strings.
type Constraints struct {
	Length           *int     `xml:"Length"`
	MinimalLength    *int     `xml:"MinimalLength"`
	MaximalLength    *int     `xml:"MaximalLength"`
	Set              []string `xml:"Set>Value"`
	Pattern          *string  `xml:"Pattern"`
	MaximalExclusive *string  `xml:"MaximalExclusive"`
	MaximalInclusive *string  `xml:"MaximalInclusive"`
	MinimalExclusive *string  `xml:"MinimalExclusive"`
	MinimalInclusive *string  `xml:"MinimalInclusive"`
	Unit             *Unit    `xml:"Unit"`
	ContentType      *struct {
		Type    string `xml:"Type"`
		Subtype string `xml:"Subtype"`
	} `xml:"ContentType"`
	ElementCount             *int    `xml:"ElementCount"`
	MinimalElementCount      *int    `xml:"MinimalElementCount"`
	MaximalElementCount      *int    `xml:"MaximalElementCount"`
	FullyQualifiedIdentifier *string `xml:"FullyQualifiedIdentifier"`
	Schema                   *struct {
		Type string `xml:"Type"`
		URL  string `xml:"Url"`
	} `xml:"Schema"`
	AllowedTypes []DataType `xml:"AllowedTypes>DataType"`
}

// Unit is a unit constraint.
type Unit struct {
	Label      string          `xml:"Label"`
	Factor     string          `xml:"Factor"`
	Offset     string          `xml:"Offset"`
	Components []UnitComponent `xml:"UnitComponent"`
}

// UnitComponent is one SI unit factor of a unit.
type UnitComponent struct {
	SIUnit   string `xml:"SIUnit"`
	Exponent string `xml:"Exponent"`
}

// Basic type names.
const (
	BasicString    = "String"
	BasicInteger   = "Integer"
	BasicReal      = "Real"
	BasicBoolean   = "Boolean"
	BasicBinary    = "Binary"
	BasicDate      = "Date"
	BasicTime      = "Time"
	BasicTimestamp = "Timestamp"
	BasicAny       = "Any"
)

var basicTypes = map[string]bool{BasicString: true, BasicInteger: true, BasicReal: true, BasicBoolean: true,
	BasicBinary: true, BasicDate: true, BasicTime: true, BasicTimestamp: true, BasicAny: true}

var identRE = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]*$`)

// ParseFDL parses and checks a Feature Definition. It refuses what would
// make a broken gRPC mapping: bad or duplicate identifiers, a data type
// that is not exactly one kind, unknown basic types, lists of lists,
// undefined or cyclic data type identifiers and undeclared errors.
func ParseFDL(data []byte) (*Feature, error) {
	if len(data) > MaxFDLSize {
		return nil, fmt.Errorf("fdl: %d bytes is above the %d byte limit", len(data), MaxFDLSize)
	}
	var f Feature
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	// Root element must be <Feature>.
	var root struct {
		XMLName xml.Name
		Feature
	}
	if err := dec.Decode(&root); err != nil {
		return nil, fmt.Errorf("fdl: %w", err)
	}
	if root.XMLName.Local != "Feature" {
		return nil, fmt.Errorf("fdl: root element is <%s>, want <Feature>", root.XMLName.Local)
	}
	f = root.Feature
	trimFeature(&f)
	if err := f.check(); err != nil {
		return nil, fmt.Errorf("fdl %s: %w", f.Identifier, err)
	}
	return &f, nil
}

func trimFeature(f *Feature) {
	f.Identifier = strings.TrimSpace(f.Identifier)
	f.Originator = strings.TrimSpace(f.Originator)
	f.Category = strings.TrimSpace(f.Category)
	f.FeatureVersion = strings.TrimSpace(f.FeatureVersion)
	for i := range f.Commands {
		c := &f.Commands[i]
		c.Identifier = strings.TrimSpace(c.Identifier)
		trimElements(c.Parameters)
		trimElements(c.Responses)
		trimElements(c.Intermediate)
		for j := range c.Errors {
			c.Errors[j] = strings.TrimSpace(c.Errors[j])
		}
	}
	for i := range f.Properties {
		p := &f.Properties[i]
		p.Identifier = strings.TrimSpace(p.Identifier)
		trimType(&p.DataType)
		for j := range p.Errors {
			p.Errors[j] = strings.TrimSpace(p.Errors[j])
		}
	}
	for i := range f.Metadata {
		f.Metadata[i].Identifier = strings.TrimSpace(f.Metadata[i].Identifier)
		trimType(&f.Metadata[i].DataType)
	}
	for i := range f.Errors {
		f.Errors[i].Identifier = strings.TrimSpace(f.Errors[i].Identifier)
	}
	for i := range f.DataTypes {
		f.DataTypes[i].Identifier = strings.TrimSpace(f.DataTypes[i].Identifier)
		trimType(&f.DataTypes[i].DataType)
	}
}

func trimElements(es []Element) {
	for i := range es {
		es[i].Identifier = strings.TrimSpace(es[i].Identifier)
		trimType(&es[i].DataType)
	}
}

func trimType(t *DataType) {
	t.Basic = strings.TrimSpace(t.Basic)
	t.Identifier = strings.TrimSpace(t.Identifier)
	if t.List != nil {
		trimType(t.List)
	}
	if t.Structure != nil {
		trimElements(t.Structure.Elements)
	}
	if t.Constrained != nil {
		trimType(&t.Constrained.DataType)
		c := &t.Constrained.Constraints
		for i := range c.Set {
			c.Set[i] = strings.TrimSpace(c.Set[i])
		}
		for _, s := range []*string{c.MaximalExclusive, c.MaximalInclusive, c.MinimalExclusive, c.MinimalInclusive} {
			if s != nil {
				*s = strings.TrimSpace(*s)
			}
		}
		if c.Unit != nil {
			c.Unit.Label = strings.TrimSpace(c.Unit.Label)
		}
		for i := range c.AllowedTypes {
			trimType(&c.AllowedTypes[i])
		}
	}
}

func checkIdent(kind, id string) error {
	if !identRE.MatchString(id) || len(id) > 255 {
		return fmt.Errorf("%s identifier %q is not [A-Z][a-zA-Z0-9]* of at most 255 characters", kind, id)
	}
	return nil
}

func (f *Feature) check() error {
	if err := checkIdent("feature", f.Identifier); err != nil {
		return err
	}
	if _, err := f.Major(); err != nil {
		return err
	}
	if f.Originator == "" {
		return fmt.Errorf("no Originator")
	}
	for _, part := range strings.Split(f.Originator+"."+f.category(), ".") {
		if !isNamePart(part) {
			return fmt.Errorf("originator %q / category %q: each dotted part must be an identifier", f.Originator, f.Category)
		}
	}
	names := map[string]string{}
	claim := func(kind, id string) error {
		if err := checkIdent(kind, id); err != nil {
			return err
		}
		key := strings.ToLower(id)
		if prev, ok := names[key]; ok {
			return fmt.Errorf("%s %q clashes with %s of the same identifier", kind, id, prev)
		}
		names[key] = kind
		return nil
	}
	types := map[string]*DataType{}
	for i := range f.DataTypes {
		d := &f.DataTypes[i]
		if err := claim("data type", d.Identifier); err != nil {
			return err
		}
		types[d.Identifier] = &d.DataType
	}
	errs := map[string]bool{}
	for _, e := range f.Errors {
		if err := checkIdent("defined execution error", e.Identifier); err != nil {
			return err
		}
		if errs[e.Identifier] {
			return fmt.Errorf("defined execution error %q declared twice", e.Identifier)
		}
		errs[e.Identifier] = true
	}
	checkErrs := func(where string, ids []string) error {
		for _, id := range ids {
			if !errs[id] {
				return fmt.Errorf("%s names defined execution error %q that the feature does not declare", where, id)
			}
		}
		return nil
	}
	tc := typeChecker{types: types, state: map[string]int{}}
	for id := range types {
		if err := tc.checkDef(id); err != nil {
			return err
		}
	}
	sizes := map[string]int{}
	for id, t := range types {
		if n := expandedSize(t, types, sizes, 0); n > maxExpanded {
			return fmt.Errorf("data type %s expands to more than %d nodes", id, maxExpanded)
		}
	}
	for i := range f.Commands {
		c := &f.Commands[i]
		if err := claim("command", c.Identifier); err != nil {
			return err
		}
		switch strings.TrimSpace(c.Observable) {
		case "Yes", "No":
		default:
			return fmt.Errorf("command %s: Observable %q is not Yes or No", c.Identifier, c.Observable)
		}
		for _, group := range []struct {
			kind string
			es   []Element
		}{{"parameter", c.Parameters}, {"response", c.Responses}, {"intermediate response", c.Intermediate}} {
			if err := tc.checkElements(c.Identifier+" "+group.kind, group.es, 0); err != nil {
				return err
			}
		}
		if len(c.Intermediate) > 0 && !c.IsObservable() {
			return fmt.Errorf("command %s: intermediate responses on an unobservable command", c.Identifier)
		}
		if err := checkErrs("command "+c.Identifier, c.Errors); err != nil {
			return err
		}
	}
	for i := range f.Properties {
		p := &f.Properties[i]
		if err := claim("property", p.Identifier); err != nil {
			return err
		}
		switch strings.TrimSpace(p.Observable) {
		case "Yes", "No":
		default:
			return fmt.Errorf("property %s: Observable %q is not Yes or No", p.Identifier, p.Observable)
		}
		if err := tc.check("property "+p.Identifier, &p.DataType, 0); err != nil {
			return err
		}
		if err := checkErrs("property "+p.Identifier, p.Errors); err != nil {
			return err
		}
	}
	for i := range f.Metadata {
		m := &f.Metadata[i]
		if err := claim("metadata", m.Identifier); err != nil {
			return err
		}
		if err := tc.check("metadata "+m.Identifier, &m.DataType, 0); err != nil {
			return err
		}
		if err := checkErrs("metadata "+m.Identifier, m.Errors); err != nil {
			return err
		}
	}
	return nil
}

// isNamePart reports whether s can be one dotted part of an originator or
// category: it becomes part of a protobuf package name (lower-cased there).
func isNamePart(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return s != ""
}

type typeChecker struct {
	types map[string]*DataType
	state map[string]int // 1 visiting, 2 done
}

func (tc *typeChecker) checkDef(id string) error {
	switch tc.state[id] {
	case 1:
		return fmt.Errorf("data type %s refers to itself", id)
	case 2:
		return nil
	}
	tc.state[id] = 1
	if err := tc.check("data type "+id, tc.types[id], 0); err != nil {
		return err
	}
	tc.state[id] = 2
	return nil
}

func (tc *typeChecker) checkElements(where string, es []Element, depth int) error {
	seen := map[string]bool{}
	for i := range es {
		e := &es[i]
		if err := checkIdent(where, e.Identifier); err != nil {
			return err
		}
		if seen[e.Identifier] {
			return fmt.Errorf("%s %q appears twice", where, e.Identifier)
		}
		seen[e.Identifier] = true
		if err := tc.check(where+" "+e.Identifier, &e.DataType, depth); err != nil {
			return err
		}
	}
	return nil
}

func (tc *typeChecker) check(where string, t *DataType, depth int) error {
	if depth > maxTypeDepth {
		return fmt.Errorf("%s: data types nest deeper than %d", where, maxTypeDepth)
	}
	n := 0
	if t.Basic != "" {
		n++
	}
	if t.List != nil {
		n++
	}
	if t.Structure != nil {
		n++
	}
	if t.Constrained != nil {
		n++
	}
	if t.Identifier != "" {
		n++
	}
	if n != 1 {
		return fmt.Errorf("%s: a data type must be exactly one of Basic, List, Structure, Constrained, DataTypeIdentifier (found %d)", where, n)
	}
	switch {
	case t.Basic != "":
		if !basicTypes[t.Basic] {
			return fmt.Errorf("%s: unknown basic type %q", where, t.Basic)
		}
	case t.List != nil:
		if t.List.resolveKind(tc.types, 0) == kindList {
			return fmt.Errorf("%s: a list of lists is not allowed", where)
		}
		return tc.check(where+" list", t.List, depth+1)
	case t.Structure != nil:
		if len(t.Structure.Elements) == 0 {
			return fmt.Errorf("%s: a structure needs at least one element", where)
		}
		return tc.checkElements(where+" element", t.Structure.Elements, depth+1)
	case t.Constrained != nil:
		inner := &t.Constrained.DataType
		k := inner.resolveKind(tc.types, 0)
		if k != kindBasic && k != kindList {
			return fmt.Errorf("%s: only basic and list types can be constrained", where)
		}
		if err := tc.check(where+" constrained", inner, depth+1); err != nil {
			return err
		}
		return checkConstraints(where, &t.Constrained.Constraints, inner.basicName(tc.types))
	case t.Identifier != "":
		if _, ok := tc.types[t.Identifier]; !ok {
			return fmt.Errorf("%s: data type %q is not defined in the feature", where, t.Identifier)
		}
		return tc.checkDef(t.Identifier)
	}
	return nil
}

func checkConstraints(where string, c *Constraints, basic string) error {
	numeric := basic == BasicInteger || basic == BasicReal
	for _, b := range []*string{c.MaximalExclusive, c.MaximalInclusive, c.MinimalExclusive, c.MinimalInclusive} {
		if b == nil {
			continue
		}
		if numeric {
			if _, err := strconv.ParseFloat(*b, 64); err != nil {
				return fmt.Errorf("%s: bound %q is not a number", where, *b)
			}
		}
	}
	if c.Pattern != nil {
		if _, err := regexp.Compile("^(?:" + *c.Pattern + ")$"); err != nil {
			return fmt.Errorf("%s: pattern %q: %v", where, *c.Pattern, err)
		}
	}
	for _, n := range []*int{c.Length, c.MinimalLength, c.MaximalLength, c.ElementCount, c.MinimalElementCount, c.MaximalElementCount} {
		if n != nil && *n < 0 {
			return fmt.Errorf("%s: negative length or count %d", where, *n)
		}
	}
	if numeric {
		for _, v := range c.Set {
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				return fmt.Errorf("%s: set value %q is not a number", where, v)
			}
		}
	}
	return nil
}

// expandedSize counts a type's nodes with identifiers expanded (memoised
// per definition; the definitions are known to be acyclic).
func expandedSize(t *DataType, types map[string]*DataType, memo map[string]int, depth int) int {
	if t == nil || depth > 4*maxTypeDepth {
		return 1
	}
	switch {
	case t.List != nil:
		return 1 + expandedSize(t.List, types, memo, depth+1)
	case t.Structure != nil:
		n := 1
		for i := range t.Structure.Elements {
			n += expandedSize(&t.Structure.Elements[i].DataType, types, memo, depth+1)
			if n > maxExpanded {
				return n
			}
		}
		return n
	case t.Constrained != nil:
		return 1 + expandedSize(&t.Constrained.DataType, types, memo, depth+1)
	case t.Identifier != "":
		if n, ok := memo[t.Identifier]; ok {
			return n
		}
		n := 1 + expandedSize(types[t.Identifier], types, memo, depth+1)
		memo[t.Identifier] = n
		return n
	}
	return 1
}

type typeKind int

const (
	kindInvalid typeKind = iota
	kindBasic
	kindList
	kindStructure
)

// resolveKind follows constrained types and data type identifiers.
func (t *DataType) resolveKind(types map[string]*DataType, depth int) typeKind {
	if depth > maxTypeDepth {
		return kindInvalid
	}
	switch {
	case t.Basic != "":
		return kindBasic
	case t.List != nil:
		return kindList
	case t.Structure != nil:
		return kindStructure
	case t.Constrained != nil:
		return t.Constrained.DataType.resolveKind(types, depth+1)
	case t.Identifier != "":
		if d, ok := types[t.Identifier]; ok {
			return d.resolveKind(types, depth+1)
		}
	}
	return kindInvalid
}

// basicName returns the basic type under constraints and identifiers, or "".
func (t *DataType) basicName(types map[string]*DataType) string {
	for i := 0; t != nil && i <= maxTypeDepth; i++ {
		switch {
		case t.Basic != "":
			return t.Basic
		case t.Constrained != nil:
			t = &t.Constrained.DataType
		case t.Identifier != "":
			t = types[t.Identifier]
		default:
			return ""
		}
	}
	return ""
}

// Major returns the feature's major version from FeatureVersion ("1.0" -> 1).
func (f *Feature) Major() (int, error) {
	v := f.FeatureVersion
	if i := strings.IndexByte(v, '.'); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("FeatureVersion %q is not major.minor", f.FeatureVersion)
	}
	return n, nil
}

func (f *Feature) category() string {
	if f.Category == "" {
		return "none"
	}
	return f.Category
}

// FullyQualifiedID returns originator/category/Identifier/vMajor.
func (f *Feature) FullyQualifiedID() string {
	m, _ := f.Major()
	return fmt.Sprintf("%s/%s/%s/v%d", f.Originator, f.category(), f.Identifier, m)
}

// ProtoPackage returns the feature's protobuf package,
// sila2.<originator>.<category>.<lower(identifier)>.v<major>.
func (f *Feature) ProtoPackage() string {
	m, _ := f.Major()
	return strings.ToLower(fmt.Sprintf("sila2.%s.%s.%s.v%d", f.Originator, f.category(), f.Identifier, m))
}

// Command returns the command with the identifier (case-insensitive).
func (f *Feature) Command(id string) (*Command, bool) {
	for i := range f.Commands {
		if strings.EqualFold(f.Commands[i].Identifier, id) {
			return &f.Commands[i], true
		}
	}
	return nil, false
}

// Property returns the property with the identifier (case-insensitive).
func (f *Feature) Property(id string) (*Property, bool) {
	for i := range f.Properties {
		if strings.EqualFold(f.Properties[i].Identifier, id) {
			return &f.Properties[i], true
		}
	}
	return nil, false
}

// TypeDef returns the data type a DataTypeIdentifier names.
func (f *Feature) TypeDef(id string) (*DataType, bool) {
	for i := range f.DataTypes {
		if f.DataTypes[i].Identifier == id {
			return &f.DataTypes[i].DataType, true
		}
	}
	return nil, false
}

func (f *Feature) typeMap() map[string]*DataType {
	m := make(map[string]*DataType, len(f.DataTypes))
	for i := range f.DataTypes {
		m[f.DataTypes[i].Identifier] = &f.DataTypes[i].DataType
	}
	return m
}

// SnakeCase turns a SiLA identifier into an MHP name: TargetTemperature ->
// target_temperature, DurationS -> duration_s, PH -> ph.
func SnakeCase(id string) string {
	var b strings.Builder
	rs := []rune(id)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) ||
				(i+1 < len(rs) && unicode.IsLower(rs[i+1]) && unicode.IsUpper(rs[i-1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
