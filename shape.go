package mhp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Shape is the type of a value: a setting's value or an action parameter,
// nested through Items (arrays) and Properties (objects). A shape written as
// prose in a descriptor ("array of {temp, hold_s}") keeps the text in Prose
// and is not checked.
type Shape struct {
	Type       string            `json:"type,omitempty" yaml:"type,omitempty"`
	Unit       string            `json:"unit,omitempty" yaml:"unit,omitempty"`
	Limits     *Limits           `json:"limits,omitempty" yaml:"limits,omitempty"`
	Items      *Shape            `json:"items,omitempty" yaml:"items,omitempty"`
	Properties map[string]*Shape `json:"properties,omitempty" yaml:"properties,omitempty"`
	// Required names the properties an object must have.
	Required []string `json:"required,omitempty" yaml:"required,omitempty"`
	// Optional marks a top-level action parameter that may be omitted.
	Optional bool   `json:"optional,omitempty" yaml:"optional,omitempty"`
	Default  any    `json:"default,omitempty" yaml:"default,omitempty"`
	Notes    string `json:"notes,omitempty" yaml:"notes,omitempty"`
	// Prose is a free-text shape; when set the value is not checked.
	Prose string `json:"-" yaml:"-"`
}

var typeNames = map[string]bool{TypeNumber: true, TypeInteger: true, TypeBoolean: true, TypeString: true,
	TypeArray: true, TypeObject: true, TypeAny: true}

// IsType reports whether name is one of the value types.
func IsType(name string) bool { return typeNames[name] }

type shapeAlias Shape

// MarshalJSON writes a prose shape as its text and any other as an object.
func (s *Shape) MarshalJSON() ([]byte, error) {
	if s.Prose != "" {
		return json.Marshal(s.Prose)
	}
	return json.Marshal((*shapeAlias)(s))
}

// UnmarshalJSON accepts an object, a bare type name ("integer") or prose.
func (s *Shape) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var text string
		if err := json.Unmarshal(b, &text); err != nil {
			return err
		}
		*s = shapeFromText(text)
		return nil
	}
	return json.Unmarshal(b, (*shapeAlias)(s))
}

// MarshalYAML writes a prose shape as its text.
func (s *Shape) MarshalYAML() (any, error) {
	if s.Prose != "" {
		return s.Prose, nil
	}
	return (*shapeAlias)(s), nil
}

// UnmarshalYAML accepts a mapping, a bare type name or prose.
func (s *Shape) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*s = shapeFromText(n.Value)
		return nil
	}
	return n.Decode((*shapeAlias)(s))
}

func shapeFromText(text string) Shape {
	t := strings.TrimSpace(text)
	if IsType(t) {
		return Shape{Type: t}
	}
	return Shape{Prose: text}
}

// Param is one named action parameter.
type Param struct {
	Name  string
	Shape *Shape
}

// Params is an action's parameters in declared order; on the wire an object
// of name -> shape whose key order is kept.
type Params []Param

// Get returns the named parameter's shape.
func (p Params) Get(name string) (*Shape, bool) {
	for _, x := range p {
		if x.Name == name {
			return x.Shape, true
		}
	}
	return nil, false
}

// Names lists the parameter names in declared order.
func (p Params) Names() []string {
	out := make([]string, len(p))
	for i, x := range p {
		out[i] = x.Name
	}
	return out
}

// MarshalJSON writes an object keeping declared order.
func (p Params) MarshalJSON() ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteByte('{')
	for i, x := range p {
		if i > 0 {
			buf.WriteByte(',')
		}
		k, _ := json.Marshal(x.Name)
		buf.Write(k)
		buf.WriteByte(':')
		v, err := json.Marshal(x.Shape)
		if err != nil {
			return nil, err
		}
		buf.Write(v)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// UnmarshalJSON reads an object keeping key order.
func (p *Params) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*p = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("params: want an object of name -> shape")
	}
	var out Params
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := kt.(string)
		var s Shape
		if err := dec.Decode(&s); err != nil {
			return fmt.Errorf("params.%s: %w", name, err)
		}
		out = append(out, Param{Name: name, Shape: &s})
	}
	*p = out
	return nil
}

// MarshalYAML writes a mapping keeping declared order.
func (p Params) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode}
	for _, x := range p {
		var v yaml.Node
		if err := v.Encode(x.Shape); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: x.Name}, &v)
	}
	return n, nil
}

// UnmarshalYAML reads a mapping keeping key order.
func (p *Params) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: params: want a mapping of name -> shape", n.Line)
	}
	var out Params
	for i := 0; i+1 < len(n.Content); i += 2 {
		var s Shape
		if err := n.Content[i+1].Decode(&s); err != nil {
			return fmt.Errorf("params.%s: %w", n.Content[i].Value, err)
		}
		out = append(out, Param{Name: n.Content[i].Value, Shape: &s})
	}
	*p = out
	return nil
}
