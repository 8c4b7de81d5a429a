package adapters

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// Render writes an adapter config as the commented, ordered YAML file
// `mhp init` leaves for the integrator: keys in the Config's field order
// (adapter, device, notes, safety, the connection, then the items), small
// collections of scalars in flow style ({min: 0, max: 100}, [a, b]), a
// blank line between top-level sections, and comments at config paths.
//
// A comment's path is the keys from the top joined by "." ("endpoint",
// "safety.watchdog_s"); an element of a list is named by its `name` field,
// else by the value of its first field ("settings.setpoint",
// "properties.TemperatureController/CurrentTemperature"). The comment goes
// above the key or list element; a path ending in "#" puts it at the end
// of the line. The path "" is the file's head comment. Comments whose path
// names nothing in the file are an error: a comment must not vanish.
func Render(cfg any, comments map[string]string) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(cfg); err != nil {
		return nil, fmt.Errorf("adapters: render config: %w", err)
	}
	used := map[string]bool{}
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{&n}}
	if c, ok := comments[""]; ok {
		doc.HeadComment = commentText(c)
		used[""] = true
	}
	annotate(&n, "", comments, used, 0)
	for k := range comments {
		if !used[k] {
			return nil, fmt.Errorf("adapters: render config: comment at %q names nothing in the file", k)
		}
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("adapters: render config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return spaceSections(buf.Bytes()), nil
}

// commentText makes "# " lines of a comment (yaml.v3 adds the "#" only
// when missing).
func commentText(c string) string {
	lines := strings.Split(strings.TrimRight(c, "\n"), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "#") {
			lines[i] = "# " + l
		}
		lines[i] = strings.TrimRight(lines[i], " ")
	}
	return strings.Join(lines, "\n")
}

func annotate(n *yaml.Node, at string, comments map[string]string, used map[string]bool, depth int) {
	join := func(k string) string {
		if at == "" {
			return k
		}
		return at + "." + k
	}
	put := func(p string, key, value *yaml.Node) {
		if c, ok := comments[p]; ok {
			key.HeadComment = commentText(c)
			used[p] = true
		}
		if c, ok := comments[p+"#"]; ok {
			target := value
			if value == nil || value.Kind != yaml.ScalarNode {
				target = key
			}
			target.LineComment = commentText(c)
			used[p+"#"] = true
		}
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(k.Value)
			put(p, k, v)
			annotate(v, p, comments, used, depth+1)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			p := join(elementName(item))
			if item.Kind == yaml.MappingNode && len(item.Content) > 0 {
				if c, ok := comments[p]; ok {
					item.HeadComment = commentText(c)
					used[p] = true
				}
				if c, ok := comments[p+"#"]; ok {
					item.Content[1].LineComment = commentText(c)
					used[p+"#"] = true
				}
			} else {
				put(p, item, item)
			}
			annotate(item, p, comments, used, depth+1)
		}
	}
	if depth > 0 && flowable(n) {
		n.Style = yaml.FlowStyle
	}
}

// elementName names a list element: its `name`, else its first value.
func elementName(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	if n.Kind != yaml.MappingNode || len(n.Content) < 2 {
		return ""
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "name" {
			return n.Content[i+1].Value
		}
	}
	return n.Content[1].Value
}

// flowable: a small mapping or list of short scalars, without comments,
// reads best on one line.
func flowable(n *yaml.Node) bool {
	if n.Kind != yaml.MappingNode && n.Kind != yaml.SequenceNode {
		return false
	}
	width := 0
	for _, c := range n.Content {
		if c.Kind != yaml.ScalarNode || strings.Contains(c.Value, "\n") || c.HeadComment != "" || c.LineComment != "" {
			return false
		}
		width += len(c.Value) + 2
	}
	return len(n.Content) > 0 && width <= 60
}

// spaceSections puts a blank line before every top-level key after the
// first (and before its head comment).
func spaceSections(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	out := make([]string, 0, len(lines)+16)
	seenKey := false
	for i, l := range lines {
		top := l != "" && l[0] != ' ' && l[0] != '-'
		if top && seenKey {
			prevComment := i > 0 && strings.HasPrefix(lines[i-1], "#")
			if !prevComment && out[len(out)-1] != "" {
				out = append(out, "")
			}
		}
		if top && !strings.HasPrefix(l, "#") {
			seenKey = true
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}
