package keys

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// An object's members have no order in JMESPath, and the library lists
// them in Go's map order, another on each search: `*` over an object,
// keys(), values() and items() would give one event another key (or
// payload hash) on each delivery. checkOrder follows such a list through the
// expression at compile time (through pipes, projections, flattens and let
// bindings, which keep its order) and refuses it unless it ends in a
// function its order cannot change.

// orderFree are the functions whose result is the same for an array in any
// order: sort() orders strings or numbers, whose equal elements are alike
// (not sort_by, max_by or min_by, whose ties keep the order they meet; not
// sum or avg, whose floating-point total depends on the order it adds in).
var orderFree = map[string]bool{"sort": true, "length": true, "max": true, "min": true, "contains": true,
	"type": true}

// byFirst are the functions that are order-free over items() when keyed by
// the member's name (&[0]): names are unique, so there are no ties.
var byFirst = map[string]bool{"sort_by": true, "max_by": true, "min_by": true}

// checkOrder refuses an expression in which such a list could reach the
// result in its order.
func checkOrder(n parsing.ASTNode) error {
	what, err := flow(n, "", nil)
	if err == nil && what != "" {
		err = orderError(what)
	}
	return err
}

// flow names what n yields in map order ("" for nothing), given what the
// current node holds in map order (cur) and which variables do (vars). It
// fails where such a list meets anything that could tell its order.
func flow(n parsing.ASTNode, cur string, vars map[string]string) (string, error) {
	if err := checkShape(n); err != nil {
		return "", err
	}
	switch n.NodeType {
	case parsing.ASTCurrentNode, parsing.ASTIdentity: // an index after it reads it: refused there
		return cur, nil
	case parsing.ASTExpRef:
		// The library resolves an expression reference's variables where it
		// is called, not where it is written: one held in a variable or a
		// list could read a later binding this check never saw it under.
		return "", errors.New("an expression reference (&...) may only be an argument of the function that takes one")
	case parsing.ASTVariable:
		name, _ := n.Value.(string)
		return vars[name], nil
	case parsing.ASTLiteral, parsing.ASTRootNode:
		return "", nil
	case parsing.ASTPipe, parsing.ASTSubexpression, parsing.ASTIndexExpression:
		return flowRight(n, cur, vars) // the right side reads what the left yields
	case parsing.ASTProjection, parsing.ASTValueProjection, parsing.ASTFilterProjection:
		return flowProjection(n, cur, vars)
	case parsing.ASTFlatten: // keeps its argument's order
		return flow(n.Children[0], cur, vars)
	case parsing.ASTFunctionExpression:
		return flowCall(n, cur, vars)
	case parsing.ASTLetExpression:
		return flowLet(n, cur, vars)
	}
	if len(n.Children) == 0 && cur != "" { // a field, an index, a slice: reads the current node's order
		return "", orderError(cur)
	}
	for _, c := range n.Children { // comparisons, and/or/not, multi-selects: keep what they get
		if what, err := flow(c, cur, vars); err != nil || what != "" {
			return "", firstErr(err, what)
		}
	}
	return "", nil
}

// shapeArity is how many children the nodes flow reads by position have
// (-1: any).
func shapeArity(n parsing.ASTNode) int {
	switch n.NodeType {
	case parsing.ASTPipe, parsing.ASTSubexpression, parsing.ASTIndexExpression, parsing.ASTProjection,
		parsing.ASTValueProjection, parsing.ASTLetExpression:
		return 2
	case parsing.ASTFilterProjection:
		return 3
	case parsing.ASTFlatten:
		return 1
	}
	return -1
}

// checkShape refuses a node the parser built short: it takes `let $x in y`
// (a binding without its value), on which the library's search panics.
func checkShape(n parsing.ASTNode) error {
	if k := shapeArity(n); k >= 0 && len(n.Children) != k {
		return fmt.Errorf("malformed %s", n.NodeType)
	}
	if n.NodeType != parsing.ASTLetExpression {
		return nil
	}
	if n.Children[0].NodeType != parsing.ASTBindings {
		return errors.New("malformed let")
	}
	for _, b := range n.Children[0].Children {
		if b.NodeType != parsing.ASTBinding || len(b.Children) != 2 || b.Children[0].NodeType != parsing.ASTVariable {
			return errors.New("a let binding needs `$name = expression`")
		}
	}
	return nil
}

func flowRight(n parsing.ASTNode, cur string, vars map[string]string) (string, error) {
	left, err := flow(n.Children[0], cur, vars)
	if err != nil {
		return "", err
	}
	return flow(n.Children[1], left, vars)
}

// flowProjection: a projection keeps its left side's order (an object's
// values have none); its other children run once per element, each of
// which is an element, not the list.
func flowProjection(n parsing.ASTNode, cur string, vars map[string]string) (string, error) {
	left, err := flow(n.Children[0], cur, vars)
	if err != nil {
		return "", err
	}
	if n.NodeType == parsing.ASTValueProjection {
		if left != "" {
			return "", orderError(left)
		}
		left = "`*` over an object"
	}
	for _, c := range n.Children[1:] {
		if what, err := flow(c, "", vars); err != nil || what != "" {
			return "", firstErr(err, what)
		}
	}
	return left, nil
}

func flowCall(n parsing.ASTNode, cur string, vars map[string]string) (string, error) {
	name, _ := n.Value.(string)
	if orderedByName(n, cur, vars) {
		return "", nil
	}
	kept := "" // what the result lists in map order
	for i, a := range n.Children {
		what, err := "", error(nil)
		if a.NodeType == parsing.ASTExpRef && takesExpref(name, i) {
			what, err = flow(a.Children[0], "", vars) // runs once per element, called here
		} else {
			what, err = flow(a, cur, vars)
		}
		if err != nil {
			return "", err
		}
		switch {
		case what == "" || orderFree[name]:
		case keepsOrder(name, i) && kept == "":
			kept = what
		default:
			return "", orderError(what)
		}
	}
	if name == "keys" || name == "values" || name == "items" {
		return name + "()", nil
	}
	return kept, nil
}

// keepsOrder: map(&e, list) and reverse(list) give their list back in
// an order it decides, mapped or reversed.
func keepsOrder(name string, i int) bool {
	return name == "map" && i == 1 || name == "reverse" && i == 0
}

// orderedByName: from_items(items(x)) (an object again, whose members are
// unique by name) and sort_by/max_by/min_by(items(x), &[0]).
func orderedByName(n parsing.ASTNode, cur string, vars map[string]string) bool {
	name, _ := n.Value.(string)
	items := len(n.Children) > 0 && n.Children[0].NodeType == parsing.ASTFunctionExpression &&
		n.Children[0].Value == "items"
	if !items {
		return false
	}
	if what, err := flow(n.Children[0].Children[0], cur, vars); err != nil || what != "" {
		return false
	}
	switch {
	case name == "from_items":
		return len(n.Children) == 1
	case byFirst[name]:
		return len(n.Children) == 2 && isFirstIndex(n.Children[1])
	}
	return false
}

// isFirstIndex: &[0].
func isFirstIndex(n parsing.ASTNode) bool {
	if n.NodeType != parsing.ASTExpRef || len(n.Children) != 1 {
		return false
	}
	e := n.Children[0]
	return e.NodeType == parsing.ASTIndexExpression && len(e.Children) == 2 &&
		e.Children[0].NodeType == parsing.ASTIdentity && e.Children[1].NodeType == parsing.ASTIndex &&
		e.Children[1].Value == 0
}

// flowLet: a binding holds what its expression yields; the body sees it.
// The library evaluates every binding in the outer scope; a binding is
// taken as a map-order list if it is one there or under the earlier
// bindings, so that a reading either way is covered.
func flowLet(n parsing.ASTNode, cur string, vars map[string]string) (string, error) {
	inner := maps.Clone(vars)
	if inner == nil {
		inner = map[string]string{}
	}
	for _, b := range n.Children[0].Children {
		outer, err := flow(b.Children[1], cur, vars)
		if err != nil {
			return "", err
		}
		seq, err := flow(b.Children[1], cur, inner)
		if err != nil {
			return "", err
		}
		name, _ := b.Children[0].Value.(string)
		inner[name] = cmp.Or(outer, seq)
	}
	return flow(n.Children[1], cur, inner)
}

// takesExpref reports whether argument i of function name may be an
// expression reference (the library's argument spec; a variadic one
// repeats).
func takesExpref(name string, i int) bool {
	spec := builtins[name]
	if len(spec) == 0 {
		return false
	}
	a := spec[min(i, len(spec)-1)]
	if i >= len(spec) && !a.Variadic {
		return false
	}
	return slices.Contains(a.Types, functions.JpExpref)
}

func firstErr(err error, what string) error {
	if err != nil {
		return err
	}
	return orderError(what)
}

func orderError(what string) error {
	return fmt.Errorf("%s lists an object's members in no fixed order, so one event could derive another key "+
		"on each delivery: name the members ([a.x, a.y]) or sort them (sort(values(a)))", what)
}
