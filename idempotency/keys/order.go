package keys

import (
	"fmt"

	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// An object's members have no order in JMESPath, and the library lists
// them in Go's map order, another on each search: `*` over an object,
// keys(), values() and items() would give one event another key (or
// payload hash) on each delivery. checkOrder refuses such a list at compile
// time unless it goes straight into a function its order cannot change.

// orderFree are the functions whose result is the same for an array in any
// order: sort() orders strings or numbers, whose equal elements are alike
// (not sort_by, max_by or min_by, whose ties keep the order they meet).
var orderFree = map[string]bool{"sort": true, "length": true, "max": true, "min": true, "contains": true}

// unorderedList names what n lists in map order, or "".
func unorderedList(n parsing.ASTNode) string {
	switch n.NodeType {
	case parsing.ASTValueProjection:
		return "`*` over an object"
	case parsing.ASTFunctionExpression:
		if name, _ := n.Value.(string); name == "keys" || name == "values" || name == "items" {
			return name + "()"
		}
	}
	return ""
}

// checkOrder refuses an expression in which such a list reaches anything
// but an order-free function's argument.
func checkOrder(n parsing.ASTNode) error {
	if what := unorderedList(n); what != "" {
		return orderError(what)
	}
	return checkOrderBelow(n)
}

func checkOrderBelow(n parsing.ASTNode) error {
	name, _ := n.Value.(string)
	free := n.NodeType == parsing.ASTFunctionExpression && orderFree[name]
	for _, c := range n.Children {
		if what := unorderedList(c); what != "" && !free {
			return orderError(what)
		}
		if err := checkOrderBelow(c); err != nil {
			return err
		}
	}
	return nil
}

func orderError(what string) error {
	return fmt.Errorf("%s lists an object's members in no fixed order, so one event could derive another key "+
		"on each delivery: name the members ([a.x, a.y]) or sort them (sort(values(a)))", what)
}
