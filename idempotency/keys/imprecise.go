package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/idempotency/jcs"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// The number rule (docs/design.md §4) holds for what an expression selects,
// not for the whole document: a typed event's int64 user id over 2^53 must
// not stop a key over its order id. DecodeJSON keeps each number a double
// cannot hold as an imprecise value, which JMESPath sees as no number and
// Select refuses once selected.

// imprecise is a number JCS refuses; its field is unexported, so no
// JMESPath field reads into it.
type imprecise struct{ ne *jcs.NumberError }

// decodeImprecise decodes doc, which JCS refused for a number: its other
// rules (UTF-8, lone surrogates, repeated names, depth) still refuse it.
func decodeImprecise(doc []byte) (any, error) {
	canon := jsontext.Value(slices.Clone(doc))
	if err := canon.Canonicalize(); err != nil {
		return nil, fieldError("document", fmt.Errorf("%w: %w", jcs.ErrInvalidJSON, err))
	}
	if jcs.NestedDeeper(doc, jcs.MaxDepth) {
		return nil, fieldError("document", jcs.ErrTooDeep)
	}
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return numbers(v, "")
}

// numbers turns v's json.Numbers into float64, or imprecise where JCS
// would refuse them; path is where v is, as jcs.NumberError says it.
func numbers(v any, path string) (any, error) {
	var err error
	switch c := v.(type) {
	case json.Number:
		var ne *jcs.NumberError
		if errors.As(jcs.CheckNumbers([]byte(c)), &ne) {
			ne.Path = path
			return imprecise{ne}, nil
		}
		return strconv.ParseFloat(string(c), 64)
	case []any:
		for i := range c {
			if c[i], err = numbers(c[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return nil, err
			}
		}
	case map[string]any:
		for k := range c {
			if c[k], err = numbers(c[k], path+member(k)); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

var plain = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func member(name string) string {
	if plain.MatchString(name) {
		return "." + name
	}
	return "[" + strconv.Quote(name) + "]"
}

// firstImprecise is an imprecise number in v, or nil.
func firstImprecise(v any) *jcs.NumberError {
	switch c := v.(type) {
	case imprecise:
		return c.ne
	case []any:
		for _, e := range c {
			if ne := firstImprecise(e); ne != nil {
				return ne
			}
		}
	case map[string]any:
		// By name, not in map order: the error names the same member on
		// every delivery.
		for _, name := range slices.Sorted(maps.Keys(c)) {
			if ne := firstImprecise(c[name]); ne != nil {
				return ne
			}
		}
	}
	return nil
}

// computes reports whether n compares, calls or does arithmetic: such an
// expression may read a number its selection does not show (a filter
// `[?user_id > ...]`), so any imprecise number in the document refuses it.
// Field, index, slice, projection, multi-select, pipe, let and the logical
// operators only move values (a number and an imprecise one are both
// truthy), so only what they select is checked.
func computes(n parsing.ASTNode) bool {
	switch n.NodeType {
	case parsing.ASTComparator, parsing.ASTArithmeticExpression, parsing.ASTArithmeticUnaryExpression, parsing.ASTFunctionExpression:
		return true
	}
	return slices.ContainsFunc(n.Children, computes)
}

// precise refuses a selection v of doc that holds an imprecise number, or
// that j computed over a document holding one.
func (j *JMESPath) precise(doc, v any) error {
	ne := firstImprecise(v)
	if ne == nil && j.computes {
		ne = firstImprecise(doc)
	}
	if ne != nil {
		return fieldError("document", ne)
	}
	return nil
}
