package deploy

import (
	"fmt"
	"strings"
)

// Value is what a property or variable is set to. Each kind knows how to
// spell itself in both formats: an s.yaml scalar (a literal or a ${…}
// expression of Serverless Devs) and a ROS value (a literal or an intrinsic
// function). Adding a kind means adding both spellings here.
type Value interface {
	sdevs(r *renderer) string
	ros(r *renderer) any
}

// Lit is a literal string.
type Lit string

func (l Lit) sdevs(*renderer) string { return string(l) }
func (l Lit) ros(*renderer) any      { return string(l) }

// Input is a value the deployer supplies: a variable exported before
// `s deploy` (Env) and a parameter of the ROS stack (Param). An input one
// format does not take has that name empty; in ROS such an input is always
// its default.
type Input struct {
	Env     string
	Param   string
	Default Value // nil: required
	Secret  bool  // ROS NoEcho
	Number  bool  // ROS Type Number (ROS only: s.yaml reads strings)
	// MinValue bounds a Number.
	MinValue int
	Pattern  string
	Doc      string // the s.yaml header and the ROS parameter's Description
	ROSDoc   string // replaces Doc in ROS when the remark is ROS-only
}

// Required reports that the input has no default: the deployer must supply it.
func (in *Input) Required() bool { return in.Default == nil }

func (in *Input) sdevs(r *renderer) string {
	r.use(in)
	if in.Env == "" {
		r.fail("input %s is used in s.yaml but has no variable name", in.Param)
		return ""
	}
	if in.Required() {
		return fmt.Sprintf("${env('%s')}", in.Env)
	}
	return fmt.Sprintf("${env('%s', %s)}", in.Env, sdevsExpr(r, in.Default))
}

func (in *Input) ros(r *renderer) any {
	r.use(in)
	switch {
	case in.Param == "" && in.Required():
		r.fail("input %s is used in template.yml but has no parameter name", in.Env)
		return ""
	case in.Param == "":
		return in.Default.ros(r)
	}
	if _, derived := in.Default.(Regional); derived {
		// A parameter default cannot name the region: the parameter defaults
		// to '' and a condition picks the derived value.
		return fn("Fn::If", []any{conditionName(in), in.Default.ros(r), ref(in.Param)})
	}
	return ref(in.Param)
}

// conditionName is the ROS condition "this input was left empty".
func conditionName(in *Input) string { return "Default" + in.Param }

// Regional is a string made from the deployment's region: "{region}" stands
// for it (s.yaml: vars.region; ROS: the stack's region).
type Regional string

func (g Regional) sdevs(r *renderer) string { return "${" + sdevsExpr(r, g) + "}" }

func (g Regional) ros(*renderer) any {
	if g == "{region}" {
		return ref("ALIYUN::Region")
	}
	return fn("Fn::Sub", strings.ReplaceAll(string(g), "{region}", "${ALIYUN::Region}"))
}

// Sub is a ROS Fn::Sub over literal strings, inputs and pseudo parameters
// (ROS only: role names and ARNs built inside the stack).
type Sub []any

// Pseudo parameters of ROS.
const (
	AccountID = Pseudo("ALIYUN::AccountId")
	Region    = Pseudo("ALIYUN::Region")
)

// Pseudo is a ROS pseudo parameter, for Sub.
type Pseudo string

func (s Sub) sdevs(r *renderer) string {
	r.fail("Fn::Sub %v has no s.yaml spelling", s)
	return ""
}

func (s Sub) ros(r *renderer) any {
	var b strings.Builder
	for _, part := range s {
		switch p := part.(type) {
		case string:
			b.WriteString(p)
		case Pseudo:
			b.WriteString("${" + string(p) + "}")
		case *Input:
			r.use(p)
			b.WriteString("${" + p.Param + "}")
		default:
			r.fail("Fn::Sub part %T", part)
		}
	}
	return fn("Fn::Sub", b.String())
}

// GetAtt is an attribute of another resource of the stack (ROS only).
type GetAtt struct{ Resource, Attr string }

func (g GetAtt) sdevs(r *renderer) string {
	r.fail("Fn::GetAtt %s.%s has no s.yaml spelling", g.Resource, g.Attr)
	return ""
}
func (g GetAtt) ros(*renderer) any { return fn("Fn::GetAtt", []any{g.Resource, g.Attr}) }

// PerFormat is a value the two formats take from different places: s.yaml
// from what the deployer exports, ROS from the resources the stack creates.
// A nil side leaves the property out of that file.
type PerFormat struct{ S, ROS any }

// sdevsExpr spells a value inside ${…}: a quoted literal, vars.region, or a
// concatenation of the two.
func sdevsExpr(r *renderer, v Value) string {
	switch v := v.(type) {
	case Lit:
		if strings.ContainsAny(string(v), `'\`) {
			r.fail("literal %q cannot be quoted in an s.yaml expression", v)
		}
		return "'" + string(v) + "'"
	case Regional:
		var parts []string
		for i, s := range strings.Split(string(v), "{region}") {
			if i > 0 {
				parts = append(parts, "vars.region")
			}
			if s != "" {
				parts = append(parts, "'"+s+"'")
			}
		}
		return strings.Join(parts, " + ")
	}
	r.fail("%T cannot be a default in s.yaml", v)
	return ""
}

func ref(name string) tree { return tree{{key: "Ref", val: name}} }

func fn(name string, arg any) tree { return tree{{key: name, val: arg}} }
