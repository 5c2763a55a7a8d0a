package keys

import (
	"cmp"
	"math"
	"slices"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
	"github.com/jmespath-community/go-jmespath/pkg/util"
)

// The library's sort, max and min compare numbers with < alone: 0 and -0
// are equal to it and keep the order they meet, and NaN (0/0,
// to_number('NaN')) is neither less nor more, so max() keeps a NaN met
// first and skips one met later. Over a list in map order (order.go) that
// is another key on each delivery (to_string(max(values(x))): "0" or "-0").
// These replacements order numbers totally (NaN, then -Inf … -0, +0 …
// +Inf), so equal elements are alike; strings are the library's.

// totalCompare orders NaN first, then by value, -0 before +0.
func totalCompare(a, b float64) int {
	if c := cmp.Compare(a, b); c != 0 { // cmp.Compare puts NaN first
		return c
	}
	switch sa, sb := math.Signbit(a), math.Signbit(b); {
	case sa && !sb:
		return -1
	case !sa && sb:
		return 1
	}
	return 0
}

func totalSort(lib functions.JpFunction) functions.JpFunction {
	return func(arguments []any) (any, error) {
		ns, ok := util.ToArrayNum(arguments[0])
		if !ok {
			return lib(arguments)
		}
		slices.SortFunc(ns, totalCompare)
		out := make([]any, len(ns))
		for i, n := range ns {
			out[i] = n
		}
		return out, nil
	}
}

// totalPick is max (sign 1) or min (sign -1) under totalCompare.
func totalPick(lib functions.JpFunction, sign int) functions.JpFunction {
	return func(arguments []any) (any, error) {
		ns, ok := util.ToArrayNum(arguments[0])
		if !ok || len(ns) == 0 {
			return lib(arguments)
		}
		best := ns[0]
		for _, n := range ns[1:] {
			if totalCompare(n, best)*sign > 0 {
				best = n
			}
		}
		return best, nil
	}
}

// totalOrder are the replacements, with the library's argument specs; the
// library's own functions table takes a later entry of a name over its own.
var totalOrder = func() []functions.FunctionEntry {
	var out []functions.FunctionEntry
	for _, f := range functions.GetDefaultFunctions() {
		switch f.Name {
		case "sort":
			f.Handler = totalSort(f.Handler)
		case "max":
			f.Handler = totalPick(f.Handler, 1)
		case "min":
			f.Handler = totalPick(f.Handler, -1)
		default:
			continue
		}
		out = append(out, f)
	}
	return out
}()
