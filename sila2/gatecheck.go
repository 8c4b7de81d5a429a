package sila2

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// CheckValue checks what the shape gates cannot see in a value for t,
// without encoding it: Timestamp, Date and Time strings must parse (RFC
// 3339 / ISO 8601 as the encoder reads them) and Binary text must be base64,
// through lists, structures and defined types. Anything else is left to the
// shape gate and the encoder. It is the action's Validate, so a dry run says
// what the invoke would refuse, and nothing is sent.
func (c *Compiled) CheckValue(t *DataType, v any, path string) error {
	return c.checkValue(t, v, path, 0)
}

func (c *Compiled) checkValue(t *DataType, v any, path string, depth int) error {
	if depth > maxTypeDepth || v == nil {
		return nil
	}
	t = unconstrain(t)
	switch {
	case t.List != nil:
		items, _ := v.([]any)
		for i, it := range items {
			if err := c.checkValue(t.List, it, fmt.Sprintf("%s[%d]", path, i), depth+1); err != nil {
				return err
			}
		}
	case t.Identifier != "":
		if def, ok := c.types[t.Identifier]; ok {
			return c.checkValue(def, v, path, depth+1)
		}
	case t.Structure != nil:
		obj, _ := v.(map[string]any)
		for i := range t.Structure.Elements {
			e := &t.Structure.Elements[i]
			name := SnakeCase(e.Identifier)
			x, ok := obj[name]
			if !ok {
				x = obj[e.Identifier]
			}
			if err := c.checkValue(&e.DataType, x, path+"."+name, depth+1); err != nil {
				return err
			}
		}
	case t.Basic == BasicBinary:
		if s, ok := v.(string); ok {
			if _, err := base64.StdEncoding.DecodeString(s); err != nil {
				return invalid(path, "binary must be base64: %v", err)
			}
		}
	case t.Basic == BasicDate || t.Basic == BasicTime || t.Basic == BasicTimestamp:
		s, ok := v.(string)
		if !ok {
			return invalid(path, "want an ISO 8601 %s string, got %T", strings.ToLower(t.Basic), v)
		}
		layouts := timeLayouts[t.Basic]
		if _, err := time.Parse(layouts[0], s); err != nil {
			if _, err := time.Parse(layouts[1], s); err != nil {
				return invalid(path, "%q is not %s", s, layouts[0])
			}
		}
	}
	return nil
}
