package spec

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// obj is a JSON/YAML object that keeps its keys in insertion order, so the
// generated document reads top-down (info, paths, components) and a diff of
// it after a change is small.
type obj struct {
	keys []string
	vals map[string]any
}

// o builds an object from key, value pairs. Nil values are left out, which
// keeps optional parts terse at the call sites.
func o(kv ...any) *obj {
	if len(kv)%2 != 0 {
		panic("spec: odd number of arguments to o")
	}
	m := &obj{vals: map[string]any{}}
	for i := 0; i < len(kv); i += 2 {
		m.set(kv[i].(string), kv[i+1])
	}
	return m
}

// set adds or replaces key. A nil value (or a nil *obj) is ignored.
func (m *obj) set(key string, v any) *obj {
	if isNil(v) {
		return m
	}
	if _, ok := m.vals[key]; !ok {
		m.keys = append(m.keys, key)
	}
	m.vals[key] = v
	return m
}

func (m *obj) get(key string) (any, bool) {
	v, ok := m.vals[key]
	return v, ok
}

func isNil(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case *obj:
		return x == nil
	case []any:
		return x == nil
	case []string:
		return x == nil
	}
	return false
}

// encode renders the tree as YAML with two-space indentation.
func encode(root *obj) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(toNode(root)); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return buf.Bytes(), nil
}

func toNode(v any) *yaml.Node {
	switch x := v.(type) {
	case *obj:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range x.keys {
			n.Content = append(n.Content, str(k), toNode(x.vals[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range x {
			n.Content = append(n.Content, toNode(e))
		}
		return n
	case []string:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, e := range x {
			n.Content = append(n.Content, str(e))
		}
		return n
	case string:
		return str(x)
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(x)}
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(x)}
	case int64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatInt(x, 10)}
	case uint64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.FormatUint(x, 10)}
	}
	panic(fmt.Sprintf("spec: cannot encode %T", v))
}

// str is a string scalar. Multi-line text is written as a literal block;
// the encoder quotes anything that would otherwise read as another type
// ("200", "true", patterns starting with "^").
func str(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if strings.Contains(s, "\n") {
		n.Style = yaml.LiteralStyle
	}
	return n
}
