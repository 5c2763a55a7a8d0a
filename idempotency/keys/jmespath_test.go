package keys

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/idemgate/idemgate/idempotency/jcs"
)

// The golden keys were computed apart from this package (Python's
// json.dumps(sort_keys=True, separators=(",", ":")) of {"jmespath", "value"},
// then sha256).
func TestFromJMESPathGolden(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "jmespath.golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Document json.RawMessage
		Cases    []struct{ Expression, Key string }
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	for _, c := range g.Cases {
		t.Run(c.Expression, func(t *testing.T) {
			k, err := FromJMESPath(g.Document, c.Expression)
			if err != nil || k != c.Key {
				t.Fatalf("got %s, %v; want %s", k, err, c.Key)
			}
		})
	}
}

func TestFromJMESPath(t *testing.T) {
	base := `{"tenant_id":"t","input":{"order_id":"o-1","doc":"a"}}`
	k0, err := FromJMESPath([]byte(base), "input.order_id")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, doc, expr string
		same            bool
	}{
		{"other content, same order", `{"tenant_id":"t","input":{"doc":"b","order_id":"o-1"}}`, "input.order_id", true},
		{"whitespace around the expression", base, "  input.order_id\n", true},
		{"other order", `{"tenant_id":"t","input":{"order_id":"o-2","doc":"a"}}`, "input.order_id", false},
		{"same value, a number", `{"input":{"order_id":1}}`, "input.order_id", false},
		{"another expression", base, "input.order_id || tenant_id", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := FromJMESPath([]byte(c.doc), c.expr)
			if err != nil {
				t.Fatal(err)
			}
			if (k == k0) != c.same {
				t.Fatalf("same key %v, want %v", k == k0, c.same)
			}
		})
	}
}

func TestFromJMESPathRefuses(t *testing.T) {
	doc := `{"tenant_id":"t","input":{"order_id":"o-1","none":null,"empty":[],"obj":{}}}`
	for _, c := range []struct {
		name, doc, expr string
		want            error
	}{
		{"absent", doc, "input.missing", ErrNothingSelected},
		{"null", doc, "input.none", ErrNothingSelected},
		{"empty array", doc, "input.empty", ErrNothingSelected},
		{"empty object", doc, "input.obj", ErrNothingSelected},
		{"one of a list absent", doc, "[tenant_id, input.missing]", ErrNothingSelected},
		{"one of a hash absent", doc, "{t: tenant_id, o: input.missing}", ErrNothingSelected},
		{"filter matching nothing", `{"a":[{"x":1}]}`, "a[?x == `2`]", ErrNothingSelected},
		{"an empty string", `{"a":""}`, "a", ErrNothingSelected},
		{"one of a list an empty string", `{"t":"t","o":""}`, "[t, o]", ErrNothingSelected},
		{"one of a hash an empty string", `{"t":"t","o":""}`, "{t: t, o: o}", ErrNothingSelected},
		{"one of a nested list an empty string", `{"t":"t","in":{"o":"o-1","l":""}}`, "[t, in.[o, l]]", ErrNothingSelected},
		{"syntax error", doc, "input.[", ErrBadExpression},
		{"unknown function", doc, "nope(input)", ErrBadExpression},
		{"empty expression", doc, "  ", ErrBadExpression},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := FromJMESPath([]byte(c.doc), c.expr)
			if !errors.Is(err, c.want) || k != "" {
				t.Fatalf("got %q, %v; want %v", k, err, c.want)
			}
		})
	}
	if _, err := FromJMESPath([]byte(`{"a":`), "a"); err == nil {
		t.Fatal("a document that is not JSON was accepted")
	}
	// Two order ids a double cannot tell apart are refused, not merged.
	for _, doc := range []string{`{"order_id":12345678901234567890}`, `{"order_id":12345678901234567891}`} {
		if k, err := FromJMESPath([]byte(doc), "order_id"); !errors.Is(err, jcs.ErrNumber) || !errors.Is(err, ErrInvalidField) || k != "" {
			t.Fatalf("%s: %q, %v", doc, k, err)
		}
	}
	// Several imprecise numbers: the error names the same one each time,
	// the first by member name, not in map order.
	manyBig := `{"a":{"p":12345678901234567891,"q":12345678901234567893,"r":12345678901234567895,"s":12345678901234567897}}`
	msgs := map[string]bool{}
	for range 30 {
		_, err := FromJMESPath([]byte(manyBig), "a")
		msgs[fmt.Sprint(err)] = true
	}
	if len(msgs) != 1 {
		t.Fatalf("one document, %d errors: %v", len(msgs), msgs)
	}
	// An evaluation error (a function given the wrong type) is an error,
	// never a panic nor a key.
	if k, err := FromJMESPath([]byte(`{"a":"x"}`), "abs(a)"); err == nil || k != "" {
		t.Fatalf("abs of a string: %q, %v", k, err)
	}
}

// Nothing is decided by the expression's shape: a multi-select's members
// must each be there (nested multi-selects' too), while a selected object or
// array may hold a null.
func TestJMESPathNothingIsByShape(t *testing.T) {
	doc := `{"tenant_id":"t","input":{"order_id":"o-1","coupon":null,"tags":["a",null],"lines":[{"sku":"s"}]}}`
	for _, c := range []struct {
		name, expr string
		nothing    bool
	}{
		{"an object with a null member", "input", false},
		{"an object with an empty string", "input.lines[0] | {sku: sku, note: ''} | @", false},
		{"an array with a null element", "input.tags", false},
		{"the whole document", "@", false},
		{"an object with a null member, piped", "@ | input", false},
		{"a list whose member holds a null", "[tenant_id, input]", false},
		{"a nested list with a member absent", "[tenant_id, input.[order_id, line_id]]", true},
		{"a nested list, all there", "[tenant_id, input.[order_id, coupon_id || 'none']]", false},
		{"a nested hash with a member absent", "{t: tenant_id, o: input.{id: order_id, line: line_id}}", true},
		{"a list in a hash with a member absent", "{t: tenant_id, o: [input.order_id, input.line_id]}", true},
		{"a list after a subexpression, a member absent", "input.[order_id, line_id]", true},
		{"a list after a pipe, a member absent", "input | [order_id, line_id]", true},
		{"a list under let, a member absent", "let $t = tenant_id in [$t, input.line_id]", true},
		{"the parent of a nested list absent", "[tenant_id, missing.[a, b]]", true},
		{"a list indexed: a value", "[input.coupon, tenant_id][1]", false},
		{"a projection of lists: a value", "input.lines[*].[sku, qty]", false},
		{"a hash with a repeated name, the last present", "{a: input.line_id, a: tenant_id}", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromJMESPath([]byte(doc), c.expr)
			if errors.Is(err, ErrNothingSelected) != c.nothing || (err != nil && !errors.Is(err, ErrNothingSelected)) {
				t.Fatalf("%v, want nothing %v", err, c.nothing)
			}
		})
	}
}

// The number rule is for what is selected: a number a double cannot hold
// is refused where the expression selects it, or computes over a document
// holding it, and nowhere else; the document's other rules still hold.
func TestJMESPathNumberRuleIsForTheSelection(t *testing.T) {
	const big = `12345678901234567891`
	for _, c := range []struct {
		name, doc, expr string
		refused         bool
	}{
		{"not selected", `{"o":"o-1","user":` + big + `}`, "o", false},
		{"not selected, beyond a double", `{"o":"o-1","user":1e400}`, "o", false},
		{"not selected, in a list", `{"o":"o-1","ids":[1,` + big + `]}`, "[o, ids[0]]", false},
		{"selected", `{"o":"o-1","user":` + big + `}`, "user", true},
		{"selected, beyond a double", `{"o":"o-1","user":1e400}`, "user", true},
		{"a member of a multi-select", `{"o":"o-1","user":` + big + `}`, "[o, user]", true},
		{"inside a selected object", `{"in":{"o":"o-1","user":` + big + `}}`, "in", true},
		{"inside the whole document", `{"o":"o-1","user":` + big + `}`, "@", true},
		{"projected", `{"l":[{"u":` + big + `}]}`, "l[*].u", true},
		{"compared in a filter", `{"l":[{"u":` + big + `,"s":"a"}]}`, "l[?u > `1`].s", true},
		{"a function, elsewhere in the document", `{"o":"o-1","user":` + big + `}`, "length(o)", true},
		{"invalid UTF-8 elsewhere", "{\"o\":\"o-1\",\"user\":" + big + ",\"s\":\"\xff\"}", "o", true},
		{"a repeated name elsewhere", `{"o":"o-1","user":` + big + `,"s":1,"s":2}`, "o", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			k, err := FromJMESPath([]byte(c.doc), c.expr)
			if c.refused != (err != nil) || (err != nil && !errors.Is(err, ErrInvalidField)) {
				t.Fatalf("%q, %v; want refused %v (ErrInvalidField)", k, err, c.refused)
			}
		})
	}
	// Unselected, it changes nothing: the key is the one without it.
	a, _ := FromJMESPath([]byte(`{"o":"o-1","user":`+big+`}`), "o")
	b, _ := FromJMESPath([]byte(`{"o":"o-1"}`), "o")
	if a != b || a == "" {
		t.Fatalf("%q != %q", a, b)
	}
}

func FuzzJMESPathSelect(f *testing.F) {
	f.Add(`{"a":{"b":[1,2]}}`, "a.b[0]")
	f.Add(`{"a":1}`, "@(foo)")     // panicked in jmespath/go-jmespath v0.4.0
	f.Add(`{"A":1}`, "let$0 in A") // the library's search panics: refused at compile time (order.go)
	const members = `{"a":{"p":"1","q":"2","r":"3","s":"4","t":"5","u":"6","v":"7","w":"8"}}`
	for _, e := range []string{"values(a) | sort(@)", "sort_by(items(a), &[0])", "let $v = values(a) in sort($v)",
		"a.* | [0]", "from_items(items(a))", "sort(values(a)[?@ != '3'])", "let $v = values(a) in let $v = `1`, $w = $v in $w",
		"let $f = &$v in let $v = values(a) in map($f, [`0`])", "to_string(sort(values(a)[*].to_number(@)))"} {
		f.Add(members, e)
	}
	f.Add(`{"a":{"p":0,"q":-0,"r":0,"s":-0,"t":0,"u":-0,"v":0,"w":-0}}`, "to_string(max(values(a)))")
	f.Fuzz(func(t *testing.T, doc, expr string) {
		j, err := CompileJMESPath(expr)
		if err != nil {
			return
		}
		v, err := DecodeJSON([]byte(doc))
		if err != nil {
			return
		}
		k, err := j.Hash(v)
		if err != nil {
			return
		}
		if !hex64.MatchString(k) {
			t.Fatalf("key %q", k)
		}
		// An accepted expression derives one key from one document
		// (order.go): the library lists an object's members in another
		// order on each search.
		for range 8 {
			if again, err := j.Hash(v); err != nil || again != k {
				t.Fatalf("%q derived %q, then %q (%v)", expr, k, again, err)
			}
		}
	})
}

// sort, max and min order numbers totally: 0 and -0 (and NaN, which < does
// not order) met in map order would otherwise pick or place another one on
// each search (totalorder.go).
func TestOrderFreeFunctionsOrderNumbersTotally(t *testing.T) {
	zeros := `{"a":{"p":0,"q":-0,"r":0,"s":-0,"t":0,"u":-0,"v":0,"w":-0}}`
	signs := `{"a":{"p":1,"q":-1,"r":2,"s":-2,"t":3,"u":-3,"v":4,"w":-4}}`
	cases := []struct{ name, doc, expr string }{
		{"max of signed zeros", zeros, "to_string(max(values(a)))"},
		{"min of signed zeros", zeros, "to_string(min(values(a)))"},
		{"sorted signed zeros", zeros, "to_string(sort(values(a)))"},
		{"zeros made by arithmetic", signs, "to_string(min(values(a)[*].[@ * `0`][]))"},
		{"NaN made by arithmetic", `{"a":{"p":0,"q":1,"r":1,"s":1,"t":1,"u":1,"v":1,"w":1}}`, "max(values(a)[*].[@ / @][]) == `1`"},
		{"NaN from to_number", `{"a":{"p":"NaN","q":"1","r":"1","s":"1","t":"1","u":"1","v":"1","w":"1"}}`,
			"max(values(a)[*].to_number(@)) == `1`"},
		{"sorted NaN", `{"a":{"p":"NaN","q":"1","r":"2","s":"3","t":"4","u":"5","v":"6","w":"7"}}`,
			"to_string(sort(values(a)[*].to_number(@)))"},
		{"strings", `{"a":{"p":"b","q":"a","r":"c","s":"d","t":"e","u":"f","v":"g","w":"h"}}`, "[max(values(a)), sort(values(a))]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, err := CompileJMESPath(c.expr)
			if err != nil {
				t.Fatal(err)
			}
			v, err := DecodeJSON([]byte(c.doc))
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for range 30 {
				k, err := j.Hash(v)
				seen[fmt.Sprint(k, err)] = true
			}
			if len(seen) != 1 {
				t.Fatalf("one document, %d answers: %v", len(seen), seen)
			}
		})
	}
}

func TestCompileJMESPathChecksCalls(t *testing.T) {
	for _, c := range []struct {
		expr string
		ok   bool
	}{
		{"length(input.lines)", true},
		{"join(',', input.lines[*].sku)", true},
		{"not_null(a, b, c)", true}, // variadic
		{"sort_by(input.lines, &sku)[0].sku", true},
		{"length(a, b)", false},
		{"join(',')", false},
		{"not_null()", false},
		{"a.nope(b)", false},
		{"[a, nope(b)]", false},
	} {
		t.Run(c.expr, func(t *testing.T) {
			_, err := CompileJMESPath(c.expr)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadExpression)) {
				t.Fatalf("%v, want ok %v", err, c.ok)
			}
		})
	}
}

// A list of an object's members comes in no fixed order: refused at compile
// time unless an order-free function takes it whole; what is accepted
// derives one key for one document, search after search.
func TestCompileJMESPathRefusesUnorderedLists(t *testing.T) {
	doc := []byte(`{"tenant_id":"t","input":{"a":"1","b":"2","c":"3","d":"4","e":"5","f":"6","g":"7","h":"8"}}`)
	for _, c := range []struct {
		expr string
		ok   bool
	}{
		{"input.*", false},
		{"*", false},
		{"[tenant_id, input.*]", false},
		{"input.*.x", false},
		{"values(input)", false},
		{"keys(input)", false},
		{"items(input)", false},
		{"values(input)[0]", false},
		{"values(input) | sort(@)", true},
		{"input.* | length(@)", true},
		{"[tenant_id, input.* | sort(@)]", true},
		{"values(input) | [0]", false},
		{"values(input) | @", false},
		{"values(input).to_string(@)", false},
		{"sort(values(input)[*])", true},
		{"sort(values(input)[])", true},
		{"sort(values(input)[?@ != '2'])", true},
		{"values(input)[?@ != '2']", false},
		{"sort(values(input)[:2])", false},
		{"sum(map(&to_number(@), values(input)))", false},
		{"let $v = values(input) in sort($v)", true},
		{"let $v = values(input) in $v", false},
		{"let $a = values(input), $b = $a in $b", false},
		{"let $v = values(input) in let $v = tenant_id in $v", true},
		{"values(input) == values(input)", false},
		{"length(values(input)) == `8`", true},
		{"type(values(input))", true},
		{"let $v in tenant_id", false}, // a binding without a value: the library's search panics on it
		// The library evaluates every binding in the outer scope.
		{"let $v = values(input) in let $v = `1`, $w = $v in $w", false},
		// An expression reference reads the variables where it is called.
		{"let $f = &$v in let $v = values(input) in map($f, [`0`])", false},
		{"let $f = not_null(&$v) in let $v = values(input) in map($f, [`0`])", false},
		{"let $f = [&$v] in let $v = values(input) in map($f[0], [`0`])", false},
		{"map(&@, values(input))", false},
		{"sort(map(&@, values(input)))", true},
		{"sort(reverse(values(input)))", true},
		{"reverse(values(input))", false},
		{"map(&values(@), [input])", false},
		{"values(input) | [?@ != '2'] | sort(@)", true},
		{"join(',', keys(input))", false},
		{"sort_by(items(input), &[0])", true},
		{"max_by(items(input), &[0])", true},
		{"sort_by(items(input), &[1])", false},
		{"sort_by(items(input), &[-1])", false},
		{"sort_by(values(input), &@)", false},
		{"from_items(items(values(input)))", false},
		{"sort(keys(input.*))", false},
		{"sort(values(input))", true},
		{"[tenant_id, sort(keys(input))]", true},
		{"length(input.*)", true},
		{"max(values(input))", true},
		{"contains(values(input), '3')", true},
		{"input.a", true},
		{"input.[a, b]", true},
		{"input", true},
		{"from_items(items(input))", true}, // an object again: its members are unique by name
		{"to_array(items(input))", false},
	} {
		t.Run(c.expr, func(t *testing.T) {
			j, err := CompileJMESPath(c.expr)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadExpression)) {
				t.Fatalf("%v, want ok %v", err, c.ok)
			}
			if err != nil {
				return
			}
			seen := map[string]bool{}
			for range 30 {
				v, err := DecodeJSON(doc)
				if err != nil {
					t.Fatal(err)
				}
				h, err := j.Hash(v)
				if err != nil {
					t.Fatal(err)
				}
				seen[h] = true
			}
			if len(seen) != 1 {
				t.Fatalf("one document, %d keys", len(seen))
			}
		})
	}
}
