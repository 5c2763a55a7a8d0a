package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// tree is an ordered YAML mapping under construction.
type tree []entry

// entry is one key of a tree. why becomes a comment above the key, note one
// at the end of its line; blank puts an empty line before it. A nil val
// leaves the key out.
type entry struct {
	key   string
	val   any
	why   string
	note  string
	blank bool
}

// verbatim is a mapping whose keys ROS keeps as written (environment
// variable names, trigger configuration, which the FC API spells the same in
// both formats).
type verbatim tree

type format int

const (
	sdevsFormat format = iota
	rosFormat
)

// renderer turns trees and values into yaml.Node for one format, collecting
// the inputs it meets and every mistake of the description.
type renderer struct {
	f    format
	errs []error
	used []*Input
}

func (r *renderer) fail(format string, args ...any) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *renderer) use(in *Input) {
	for _, u := range r.used {
		if u == in {
			return
		}
	}
	r.used = append(r.used, in)
}

// node converts v; nil means "leave the key out". caps: this mapping is
// spelled like fc3's properties, which ROS capitalises (memorySize →
// MemorySize).
func (r *renderer) node(v any, caps bool) *yaml.Node {
	switch v := v.(type) {
	case nil:
		return nil
	case PerFormat:
		if r.f == sdevsFormat {
			return r.node(v.S, caps)
		}
		return r.node(v.ROS, caps)
	case Value:
		if r.f == sdevsFormat {
			return str(v.sdevs(r))
		}
		return r.node(v.ros(r), false)
	case string:
		return str(v)
	case int:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(v)}
	case float64:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!float", Value: strconv.FormatFloat(v, 'f', -1, 64)}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(v)}
	case []string:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, s := range v {
			seq.Content = append(seq.Content, str(s))
		}
		return seq
	case []any:
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, item := range v {
			if n := r.node(item, caps); n != nil {
				if n.Kind == yaml.MappingNode && len(n.Content) > 0 {
					// A comment on an item's first key goes above its "- ".
					n.HeadComment, n.Content[0].HeadComment = n.Content[0].HeadComment, ""
				}
				seq.Content = append(seq.Content, n)
			}
		}
		return seq
	case verbatim:
		return r.mapping(tree(v), false)
	case capsTree:
		return r.mapping(tree(v), true)
	case tree:
		return r.mapping(v, caps)
	case *yaml.Node: // rendered earlier
		return v
	}
	r.fail("cannot render %T", v)
	return nil
}

func (r *renderer) mapping(t tree, caps bool) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for _, e := range t {
		val := r.node(e.val, caps)
		if val == nil {
			continue
		}
		key := e.key
		if caps && r.f == rosFormat {
			key = strings.ToUpper(key[:1]) + key[1:]
		}
		k := &yaml.Node{Kind: yaml.ScalarNode, Value: key, HeadComment: wrap(e.why)}
		if e.blank {
			k.HeadComment = "\n" + k.HeadComment
		}
		if e.note != "" {
			val.LineComment = "# " + e.note
		}
		m.Content = append(m.Content, k, val)
	}
	return m
}

// str is a string scalar, single-quoted when plain YAML would read it as
// something else ('true', ”, '60', '@every 1m').
func str(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	var probe yaml.Node
	if err := yaml.Unmarshal([]byte(s), &probe); s == "" || err != nil || len(probe.Content) != 1 ||
		probe.Content[0].Tag != "!!str" || probe.Content[0].Value != s || probe.Content[0].Style != 0 {
		if !strings.ContainsAny(s, "\n\\") {
			n.Style = yaml.SingleQuotedStyle
		}
	}
	return n
}

// wrap breaks a comment's lines at spaces so that none exceeds 100
// characters; a broken list item (an indented line) continues under its
// text. Spacing inside a line is kept, so aligned columns stay aligned.
func wrap(text string) string {
	if text == "" {
		return ""
	}
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" {
			out = append(out, "#") // an empty line would end the comment block
			continue
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		cont := indent
		if indent != "" {
			cont += "  "
		}
		for len(line) > 100 {
			i := strings.LastIndex(line[:101], " ")
			if i <= len(cont) {
				break // one long word
			}
			out = append(out, strings.TrimRight(line[:i], " "))
			line = cont + strings.TrimLeft(line[i:], " ")
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

// encode writes a document: its head comment, then the rendered mapping.
func (r *renderer) encode(head string, m *yaml.Node) ([]byte, error) {
	doc := &yaml.Node{Kind: yaml.DocumentNode, HeadComment: wrap(head), Content: []*yaml.Node{m}}
	if err := errors.Join(r.errs...); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// yaml.v3 indents the empty line before a nested key; drop that space.
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return []byte(strings.Join(lines, "\n")), nil
}
