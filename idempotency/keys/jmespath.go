package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jmespath "github.com/jmespath-community/go-jmespath"

	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// Key selection by JMESPath (Powertools' event_key_jmespath and
// payload_validation_jmespath; the library choice is in docs/design.md §16).

var (
	// ErrBadExpression: the text is not a JMESPath expression.
	ErrBadExpression = errors.New("keys: not a JMESPath expression")
	// ErrNothingSelected: the expression selected nothing in the document
	// (see JMESPath.Select); the message names the expression.
	ErrNothingSelected = errors.New("keys: the expression selects nothing")
)

// JMESPath is a compiled expression; safe for concurrent use.
type JMESPath struct {
	src      string
	prog     jmespath.JMESPath
	top      parsing.ASTNode // what yields the result (selectsNothing)
	computes bool            // it compares, calls or does arithmetic (precise)
}

// CompileJMESPath compiles expr once, at start (an error wraps
// ErrBadExpression).
func CompileJMESPath(expr string) (*JMESPath, error) {
	src := strings.TrimSpace(expr)
	if src == "" {
		return nil, fmt.Errorf("%w: empty", ErrBadExpression)
	}
	ast, err := parsing.NewParser().Parse(src)
	if err == nil {
		err = checkCalls(ast)
	}
	if err == nil {
		err = checkOrder(ast)
	}
	var prog jmespath.JMESPath
	if err == nil {
		prog, err = jmespath.Compile(src, totalOrder...)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %q: %v", ErrBadExpression, src, err)
	}
	return &JMESPath{src: src, prog: prog, top: yields(ast), computes: computes(ast)}, nil
}

// builtins are the functions an expression may call, by name.
var builtins = func() map[string][]functions.ArgSpec {
	m := map[string][]functions.ArgSpec{}
	for _, f := range functions.GetDefaultFunctions() {
		m[f.Name] = f.Arguments
	}
	return m
}()

// checkCalls finds an unknown function or a wrong number of arguments at
// compile time: the library finds them only when a document is searched,
// and the template must refuse the expression at start, not per event.
func checkCalls(n parsing.ASTNode) error {
	if n.NodeType == parsing.ASTFunctionExpression {
		name, _ := n.Value.(string)
		spec, ok := builtins[name]
		if !ok {
			return fmt.Errorf("unknown function %s()", name)
		}
		lo, hi := 0, len(spec)
		for _, a := range spec {
			if !a.Optional { // a variadic argument is given at least once
				lo++
			}
			if a.Variadic {
				hi = -1
			}
		}
		if got := len(n.Children); got < lo || (hi >= 0 && got > hi) {
			return fmt.Errorf("%s() takes %s arguments, got %d", name, arity(lo, hi), got)
		}
	}
	for _, c := range n.Children {
		if err := checkCalls(c); err != nil {
			return err
		}
	}
	return nil
}

func arity(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("at least %d", lo)
	case lo == hi:
		return fmt.Sprint(lo)
	}
	return fmt.Sprintf("%d to %d", lo, hi)
}

// String is the expression as compiled.
func (j *JMESPath) String() string { return j.src }

// Select evaluates the expression over a decoded JSON document (DecodeJSON).
// Nothing selected is ErrNothingSelected: a null result, "", an empty
// array or object, or — when the expression is a multi-select, as written —
// one with a null or "" member ([tenant_id, input.order_id] where one is
// absent; nested multi-selects alike): a key that silently ignored a
// missing field would merge unrelated events. A selected object or array
// holding a null or "" is a value (input, @).
func (j *JMESPath) Select(doc any) (v any, err error) {
	defer func() { // the library is third-party: a panic on odd input is an error, never a crash
		if p := recover(); p != nil {
			v, err = nil, fmt.Errorf("keys: %q: evaluation failed: %v", j.src, p)
		}
	}()
	v, err = j.prog.Search(doc)
	if err != nil {
		return nil, fmt.Errorf("keys: %q: %w", j.src, err)
	}
	if err := j.precise(doc, v); err != nil {
		return nil, err
	}
	if selectsNothing(v, j.top) {
		return nil, fmt.Errorf("%w: %q", ErrNothingSelected, j.src)
	}
	return v, nil
}

// selectsNothing decides by the expression's shape, not the value's: a
// multi-select (n, as yields gives it) is nothing when a member is, each
// member judged by its own shape, so [tenant_id, input.[order_id, line_id]]
// needs all three; any other expression only when its value is null or
// empty, so input over {"order_id":"o-1","coupon":null} is a selection. A
// multi-select under a projection or a function is a value like any other.
func selectsNothing(v any, n parsing.ASTNode) bool {
	if v == nil {
		return true
	}
	switch c := v.(type) {
	case []any:
		if n.NodeType == parsing.ASTMultiSelectList && len(n.Children) == len(c) {
			for i, m := range c {
				if memberNothing(m, yields(n.Children[i])) {
					return true
				}
			}
		}
		return len(c) == 0
	case map[string]any:
		if n.NodeType == parsing.ASTMultiSelectHash {
			for k, kv := range pairs(n) {
				if memberNothing(c[k], yields(kv)) {
					return true
				}
			}
		}
		return len(c) == 0
	case string:
		return c == ""
	}
	return false
}

// memberNothing: a multi-select's member is nothing when it is null or ""
// or is itself a multi-select with a member that is nothing. "" is absent
// as a typed event says it (encoding/json writes a missing string field
// so), and Powertools treats an empty key as a missing one.
func memberNothing(v any, n parsing.ASTNode) bool {
	switch n.NodeType {
	case parsing.ASTMultiSelectList, parsing.ASTMultiSelectHash:
		return selectsNothing(v, n)
	}
	return v == nil || v == ""
}

// yields is the node whose value an expression's result is: the right-hand
// side of a.b, a | b and let … in b, however deep.
func yields(n parsing.ASTNode) parsing.ASTNode {
	for len(n.Children) == 2 {
		switch n.NodeType {
		case parsing.ASTSubexpression, parsing.ASTPipe, parsing.ASTLetExpression:
			n = n.Children[1]
			continue
		}
		break
	}
	return n
}

// pairs are a multi-select hash's members by name, the last of a repeated
// name winning as it does in the result.
func pairs(n parsing.ASTNode) map[string]parsing.ASTNode {
	m := make(map[string]parsing.ASTNode, len(n.Children))
	for _, kv := range n.Children {
		if name, ok := kv.Value.(string); ok && len(kv.Children) == 1 {
			m[name] = kv.Children[0]
		}
	}
	return m
}

// Hash is hex(sha256(JCS({"jmespath": <expression>, "value": <selection>})))
// over a decoded document: 64 lowercase hex, K (KEY_JMESPATH) or a payload
// hash (PAYLOAD_JMESPATH). The expression is part of the hashed document, as
// the paths are in FromPaths: another expression is another key space.
func (j *JMESPath) Hash(doc any) (string, error) {
	v, err := j.Select(doc)
	if err != nil {
		return "", err
	}
	return hashValue(map[string]any{"jmespath": j.src, "value": v})
}

// DecodeJSON decodes a JSON document for Select and Hash; numbers become
// float64, as JMESPath compares them and as JCS writes them. A document JCS
// refuses is refused here (ErrInvalidField), but for a number a double
// cannot hold exactly (12345678901234567890): that one is refused only
// where Select selects it, or computes over a document holding it (it would
// otherwise select as its neighbour and merge two keys).
func DecodeJSON(doc []byte) (any, error) {
	if _, err := jcs.Canonicalize(doc); errors.Is(err, jcs.ErrNumber) {
		return decodeImprecise(doc)
	} else if err != nil {
		return nil, fieldError("document", err)
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return v, nil
}

// FromJMESPath derives K from a JSON document with a JMESPath expression:
// Powertools' event_key_jmespath, canonical JSON and SHA-256 (see Hash). A
// bad expression is ErrBadExpression, a selection of nothing
// ErrNothingSelected. Compile once with CompileJMESPath where one expression
// serves many documents.
func FromJMESPath(doc []byte, expr string) (string, error) {
	j, err := CompileJMESPath(expr)
	if err != nil {
		return "", err
	}
	v, err := DecodeJSON(doc)
	if err != nil {
		return "", err
	}
	return j.Hash(v)
}
