package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// repoRoot is where s.yaml, template.yml and scripts/ live (tests run in deploy/).
const repoRoot = ".."

// Values that stand in for the deploy-time inputs that have no default
// (secrets and account-specific names), so that the rendered environment can
// be fed to config.Load. Keyed by function environment variable name.
var placeholders = map[string]string{
	"MYSQL_DSN":   "idemgate:secret@tcp(rm-example.mysql.rds.aliyuncs.com:3306)/idemgate",
	"LLM_API_KEY": "sk-placeholder",
	"OSS_BUCKET":  "idemgate-results",
}

// Pseudo parameters of ROS, for rendering template.yml.
var rosPseudo = map[string]string{
	"ALIYUN::Region":    "cn-hangzhou",
	"ALIYUN::AccountId": "1234567890123456",
	"ALIYUN::StackName": "idemgate",
}

// function is what both deployment files say about the one function, in the
// same shape, so that every check can run on either file.
type function struct {
	file        string
	runtime     string
	handler     string
	code        string // s.yaml: local directory; template.yml: "oss"
	cpu         float64
	memory      int
	disk        int
	timeout     int
	concurrency int
	hooks       map[string]hook // instance lifecycle hooks: "initializer", "preStop"
	internet    bool
	port        int
	command     []string
	role        string // an expression; "" when absent
	vpc         map[string]string
	logConfig   string // "auto", "project/logstore", or ""
	env         map[string]envVar
	async       *asyncConfig
	triggers    []trigger
	actions     map[string][]string // s.yaml hooks: pre-deploy → commands
	policy      []statement         // template.yml: the role's inline policy, rendered
	unknown     []string            // property names the platform does not know
	problems    []string            // values that could not be read
}

// readShared reads the properties both files spell alike but for the case
// of their first letters (name maps fc3's spelling to the file's); str and
// num are the file's own readers of a value.
func (f *function) readShared(props *yaml.Node, name func(string) string,
	str func(*yaml.Node, string) string, num func(*yaml.Node, string) int) {
	at := func(path ...string) (*yaml.Node, string) {
		for i, p := range path {
			path[i] = name(p)
		}
		return get(props, path...), strings.Join(path, ".")
	}
	f.runtime = str(at("runtime"))
	f.handler = str(at("handler"))
	if c, _ := at("cpu"); c != nil {
		f.cpu, _ = strconv.ParseFloat(c.Value, 64)
	}
	f.memory = num(at("memorySize"))
	f.disk = num(at("diskSize"))
	f.timeout = num(at("timeout"))
	f.concurrency = num(at("instanceConcurrency"))
	f.hooks = map[string]hook{}
	for _, h := range []string{"initializer", "preStop"} {
		if n, _ := at("instanceLifecycleConfig", h); n != nil {
			handler, _ := at("instanceLifecycleConfig", h, "handler")
			f.hooks[h] = hook{handler: scalar(handler), timeout: num(at("instanceLifecycleConfig", h, "timeout"))}
		}
	}
	internet, _ := at("internetAccess")
	f.internet = scalar(internet) == "true"
	f.port = num(at("customRuntimeConfig", "port"))
	if cmd, what := at("customRuntimeConfig", "command"); cmd != nil {
		for _, c := range cmd.Content {
			f.command = append(f.command, str(c, what))
		}
	}
}

type hook struct {
	handler string
	timeout int
}

type envVar struct {
	source   string // deploy-time input the value comes from (env name or ROS parameter)
	required bool   // no default: the deployer must supply it
	secret   bool   // ROS: NoEcho parameter
	literal  bool   // written in the file, not read from an input
	rendered string // with defaults; a required input shows as <NAME>
	value    string // rendered, with the test's placeholder for a required input
}

type asyncConfig struct {
	retries   int
	maxAge    int
	onFailure string
}

type trigger struct {
	name   string
	typ    string
	config map[string]any
}

func (f *function) problem(format string, args ...any) {
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

func (f *function) trigger(typ string) (trigger, bool) {
	for _, t := range f.triggers {
		if t.typ == typ {
			return t, true
		}
	}
	return trigger{}, false
}

// manifests holds both files, parsed.
type manifests struct {
	s   *function
	ros *function
}

// loadDocs reads and parses the two files from the repository.
func loadDocs() (sDoc, rosDoc *yaml.Node, err error) {
	sDoc, err = parseFile(filepath.Join(repoRoot, "s.yaml"))
	if err != nil {
		return nil, nil, err
	}
	rosDoc, err = parseFile(filepath.Join(repoRoot, "template.yml"))
	return sDoc, rosDoc, err
}

func parseFile(path string) (*yaml.Node, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node // a Node, not a map: ROS short-form tags (!Ref, !Sub) survive decoding
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &doc, nil
}

func newManifests(sDoc, rosDoc *yaml.Node) *manifests {
	return &manifests{s: readServerlessDevs(sDoc), ros: readROS(rosDoc)}
}

// ---- yaml.Node helpers

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && (n.Kind == yaml.DocumentNode || n.Kind == yaml.AliasNode) {
		if n.Kind == yaml.DocumentNode {
			if len(n.Content) == 0 {
				return nil
			}
			n = n.Content[0]
		} else {
			n = n.Alias
		}
	}
	return n
}

// get walks mapping keys; nil when any step is missing.
func get(n *yaml.Node, keys ...string) *yaml.Node {
	n = deref(n)
	for _, k := range keys {
		if n == nil || n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = deref(n.Content[i+1])
				break
			}
		}
		n = next
	}
	return n
}

// keys lists a mapping's keys in file order.
func keys(n *yaml.Node) []string {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var ks []string
	for i := 0; i < len(n.Content); i += 2 {
		ks = append(ks, n.Content[i].Value)
	}
	return ks
}

func isPlainScalar(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && (n.Tag == "" || strings.HasPrefix(n.Tag, "!!"))
}

func scalar(n *yaml.Node) string {
	if isPlainScalar(n) {
		return n.Value
	}
	return ""
}

// ---- ROS intrinsic functions, long form (Fn::Sub: …) and short form (!Sub …)

var shortTags = map[string]string{
	"!Ref": "Ref", "!Sub": "Fn::Sub", "!GetAtt": "Fn::GetAtt", "!If": "Fn::If", "!Join": "Fn::Join",
	"!Equals": "Fn::Equals", "!Not": "Fn::Not", "!And": "Fn::And", "!Or": "Fn::Or", "!Select": "Fn::Select",
	"!FindInMap": "Fn::FindInMap", "!Base64": "Fn::Base64",
}

// intrinsic reports whether n is an intrinsic function call, its name and argument.
func intrinsic(n *yaml.Node) (name string, arg *yaml.Node, ok bool) {
	n = deref(n)
	if n == nil {
		return "", nil, false
	}
	if full, found := shortTags[n.Tag]; found {
		arg := *n
		arg.Tag = "" // the argument without the tag
		return full, &arg, true
	}
	if n.Kind == yaml.MappingNode && len(n.Content) == 2 {
		k := n.Content[0].Value
		if k == "Ref" || strings.HasPrefix(k, "Fn::") {
			return k, deref(n.Content[1]), true
		}
	}
	return "", nil, false
}

// rosRenderer renders template.yml values with parameter defaults.
type rosRenderer struct {
	params     *yaml.Node
	conditions *yaml.Node
}

var subVar = regexp.MustCompile(`\$\{([^}]+)\}`)

// ref resolves a parameter or pseudo parameter; required is true for a
// parameter without a default (the value is then "").
func (r rosRenderer) ref(name string) (value string, required bool, err error) {
	if v, ok := rosPseudo[name]; ok {
		return v, false, nil
	}
	p := get(r.params, name)
	if p == nil {
		return "", false, fmt.Errorf("Ref %s: no such parameter", name)
	}
	d := get(p, "Default")
	if d == nil {
		return "<" + name + ">", true, nil
	}
	return d.Value, false, nil
}

// render turns a value into the string the function would see. required
// reports that it rests on a parameter without a default.
func (r rosRenderer) render(n *yaml.Node) (value string, required bool, err error) {
	n = deref(n)
	name, arg, ok := intrinsic(n)
	if !ok {
		if isPlainScalar(n) {
			return n.Value, false, nil
		}
		return "", false, fmt.Errorf("line %d: not a string value", n.Line)
	}
	switch name {
	case "Ref":
		return r.ref(scalar(arg))
	case "Fn::Sub":
		tmpl := scalar(arg)
		if arg.Kind == yaml.SequenceNode && len(arg.Content) > 0 {
			tmpl = scalar(arg.Content[0]) // [template, {vars}] form: vars not used in this template
		}
		var firstErr error
		out := subVar.ReplaceAllStringFunc(tmpl, func(m string) string {
			v, req, err := r.ref(m[2 : len(m)-1])
			if err != nil && firstErr == nil {
				firstErr = err
			}
			required = required || req
			return v
		})
		return out, required, firstErr
	case "Fn::If":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 3 {
			return "", false, fmt.Errorf("line %d: Fn::If wants [condition, then, else]", n.Line)
		}
		holds, err := r.condition(scalar(arg.Content[0]))
		if err != nil {
			return "", false, err
		}
		if holds {
			return r.render(arg.Content[1])
		}
		return r.render(arg.Content[2])
	}
	return "", false, fmt.Errorf("line %d: %s is not rendered by this test", n.Line, name)
}

func (r rosRenderer) condition(name string) (bool, error) {
	c := get(r.conditions, name)
	if c == nil {
		return false, fmt.Errorf("no condition %s", name)
	}
	return r.evalCondition(c)
}

func (r rosRenderer) evalCondition(n *yaml.Node) (bool, error) {
	name, arg, ok := intrinsic(n)
	if !ok {
		return false, fmt.Errorf("line %d: condition is not a function", n.Line)
	}
	switch name {
	case "Fn::Equals":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 2 {
			return false, fmt.Errorf("line %d: Fn::Equals wants two values", n.Line)
		}
		a, _, err := r.render(arg.Content[0])
		if err != nil {
			return false, err
		}
		b, _, err := r.render(arg.Content[1])
		return a == b, err
	case "Fn::Not":
		if arg.Kind != yaml.SequenceNode || len(arg.Content) != 1 {
			return false, fmt.Errorf("line %d: Fn::Not wants one condition", n.Line)
		}
		v, err := r.evalCondition(arg.Content[0])
		return !v, err
	}
	return false, fmt.Errorf("line %d: condition %s is not evaluated by this test", n.Line, name)
}

// ---- Serverless Devs expressions: ${env('X')}, ${env('X', 'default' + vars.y)}, ${vars.y}

var sExpr = regexp.MustCompile(`\$\{([^}]*)\}`)
var envCall = regexp.MustCompile(`^env\(\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*(?:,\s*(.*?))?\s*\)$`)

type sRenderer struct{ vars *yaml.Node }

// render evaluates every ${…} of a string value. sources lists the env()
// inputs it reads; required is true when one of them has no default.
func (r sRenderer) render(v string, depth int) (value string, sources []string, required bool, err error) {
	if depth > 5 {
		return "", nil, false, fmt.Errorf("vars nested too deep in %q", v)
	}
	out := sExpr.ReplaceAllStringFunc(v, func(m string) string {
		if err != nil {
			return ""
		}
		inner := strings.TrimSpace(m[2 : len(m)-1])
		if call := envCall.FindStringSubmatch(inner); call != nil {
			sources = append(sources, call[1])
			if call[2] == "" {
				required = true
				return "<" + call[1] + ">"
			}
			var s string
			s, err = r.concat(call[2], depth)
			return s
		}
		var s string
		s, err = r.concat(inner, depth)
		return s
	})
	return out, sources, required, err
}

// concat evaluates 'literal' + vars.name + 123 (the forms s.yaml uses).
func (r sRenderer) concat(expr string, depth int) (string, error) {
	var b strings.Builder
	for _, part := range splitPlus(expr) {
		part = strings.TrimSpace(part)
		switch {
		case len(part) >= 2 && part[0] == '\'' && part[len(part)-1] == '\'':
			b.WriteString(part[1 : len(part)-1])
		case strings.HasPrefix(part, "vars."):
			n := get(r.vars, strings.TrimPrefix(part, "vars."))
			if !isPlainScalar(n) {
				return "", fmt.Errorf("%s: no such var", part)
			}
			v, _, req, err := r.render(n.Value, depth+1)
			if err != nil {
				return "", err
			}
			if req {
				return "", fmt.Errorf("%s has no default", part)
			}
			b.WriteString(v)
		default:
			if _, err := strconv.ParseFloat(part, 64); err != nil {
				return "", fmt.Errorf("expression %q is not evaluated by this test", part)
			}
			b.WriteString(part)
		}
	}
	return b.String(), nil
}

func splitPlus(s string) []string {
	var parts []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\'':
			quoted = !quoted
		case '+':
			if !quoted {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}
	}
	return append(parts, s[start:])
}

// ---- s.yaml

func readServerlessDevs(doc *yaml.Node) *function {
	f := &function{file: "s.yaml", env: map[string]envVar{}, vpc: map[string]string{}}
	root := deref(doc)
	r := sRenderer{vars: get(root, "vars")}
	var res *yaml.Node
	for _, name := range keys(get(root, "resources")) {
		if scalar(get(root, "resources", name, "component")) == "fc3" {
			if res != nil {
				f.problem("more than one fc3 resource")
			}
			res = get(root, "resources", name)
		}
	}
	if res == nil {
		f.problem("no resource with component fc3")
		return f
	}
	f.actions = map[string][]string{}
	for _, hook := range keys(get(res, "actions")) {
		for _, a := range nodeList(get(res, "actions", hook)) {
			f.actions[hook] = append(f.actions[hook], scalar(get(a, "run")))
		}
	}
	props := get(res, "props")
	for _, k := range keys(props) {
		if !fc3Props[k] {
			f.unknown = append(f.unknown, k)
		}
	}
	str := func(n *yaml.Node, what string) string {
		if n == nil {
			return ""
		}
		if !isPlainScalar(n) {
			f.problem("%s: want a scalar", what)
			return ""
		}
		v, _, _, err := r.render(n.Value, 0)
		if err != nil {
			f.problem("%s: %v", what, err)
		}
		return v
	}
	num := func(n *yaml.Node, what string) int {
		if n == nil {
			return 0
		}
		// The fc3 schema wants JSON numbers here: a quoted or ${env()} value renders as a string and fails s verify.
		if n.Tag != "!!int" {
			f.problem("%s: want an integer literal, got %q", what, n.Value)
			return 0
		}
		i, _ := strconv.Atoi(n.Value)
		return i
	}
	f.readShared(props, func(k string) string { return k }, str, num)
	f.code = str(get(props, "code"), "code")
	f.role = scalar(get(props, "role"))
	if v := get(props, "vpcConfig"); v != nil {
		f.vpc["vpcId"] = scalar(get(v, "vpcId"))
		f.vpc["securityGroupId"] = scalar(get(v, "securityGroupId"))
		if sw := get(v, "vSwitchIds"); sw != nil && sw.Kind == yaml.SequenceNode && len(sw.Content) > 0 {
			f.vpc["vSwitchIds"] = scalar(sw.Content[0])
		}
	}
	if lc := get(props, "logConfig"); lc != nil {
		if lc.Kind == yaml.ScalarNode {
			f.logConfig = lc.Value
		} else {
			f.logConfig = scalar(get(lc, "project")) + "/" + scalar(get(lc, "logstore"))
		}
	}
	for _, name := range keys(get(props, "environmentVariables")) {
		n := get(props, "environmentVariables", name)
		if !isPlainScalar(n) || (n.Tag != "!!str" && n.Tag != "") {
			f.problem("environmentVariables.%s: want a string, got %s %q (FC takes strings only)", name, n.Tag, n.Value)
		}
		v, sources, required, err := r.render(n.Value, 0)
		if err != nil {
			f.problem("environmentVariables.%s: %v", name, err)
		}
		e := envVar{required: required, rendered: v, value: v, literal: len(sources) == 0}
		if len(sources) > 0 {
			e.source = sources[0]
		}
		if required {
			e.value = placeholders[name]
		}
		f.env[name] = e
	}
	if a := get(props, "asyncInvokeConfig"); a != nil {
		f.async = &asyncConfig{
			retries:   num(get(a, "maxAsyncRetryAttempts"), "maxAsyncRetryAttempts"),
			maxAge:    num(get(a, "maxAsyncEventAgeInSeconds"), "maxAsyncEventAgeInSeconds"),
			onFailure: scalar(get(a, "destinationConfig", "onFailure", "destination")),
		}
	}
	if ts := get(props, "triggers"); ts != nil {
		for _, t := range ts.Content {
			f.triggers = append(f.triggers, readTrigger(f,
				scalar(get(t, "triggerName")), scalar(get(t, "triggerType")), get(t, "triggerConfig")))
		}
	}
	return f
}

func readTrigger(f *function, name, typ string, cfg *yaml.Node) trigger {
	t := trigger{name: name, typ: typ, config: map[string]any{}}
	if cfg == nil {
		f.problem("trigger %q has no triggerConfig", name)
		return t
	}
	if err := cfg.Decode(&t.config); err != nil {
		f.problem("trigger %q: triggerConfig: %v", name, err)
	}
	return t
}

// ---- template.yml

func readROS(doc *yaml.Node) *function {
	f := &function{file: "template.yml", env: map[string]envVar{}, vpc: map[string]string{}}
	root := deref(doc)
	r := rosRenderer{params: get(root, "Parameters"), conditions: get(root, "Conditions")}
	resources := get(root, "Resources")
	byType := map[string][]*yaml.Node{}
	for _, name := range keys(resources) {
		res := get(resources, name)
		typ := scalar(get(res, "Type"))
		byType[typ] = append(byType[typ], res)
	}
	fns := byType["ALIYUN::FC3::Function"]
	if len(fns) != 1 {
		f.problem("want one ALIYUN::FC3::Function, have %d", len(fns))
		if len(fns) == 0 {
			return f
		}
	}
	props := get(fns[0], "Properties")
	for _, k := range keys(props) {
		if !rosFunctionProps[k] {
			f.unknown = append(f.unknown, k)
		}
	}
	str := func(n *yaml.Node, what string) string {
		if n == nil {
			return ""
		}
		v, _, err := r.render(n)
		if err != nil {
			f.problem("%s: %v", what, err)
		}
		return v
	}
	num := func(n *yaml.Node, what string) int {
		if n == nil {
			return 0
		}
		v, _, err := r.render(n)
		i, err2 := strconv.Atoi(v)
		if err != nil || err2 != nil {
			f.problem("%s: want an integer, got %q", what, v)
		}
		return i
	}
	// ROS spells fc3's property names with a capital first letter.
	f.readShared(props, func(k string) string { return strings.ToUpper(k[:1]) + k[1:] }, str, num)
	if get(props, "Code", "OssBucketName") != nil && get(props, "Code", "OssObjectName") != nil {
		f.code = "oss"
	}
	if role := get(props, "Role"); role != nil {
		if _, arg, ok := intrinsic(role); ok {
			f.role = fmt.Sprint(nodeStrings(arg))
		} else {
			f.role = scalar(role)
		}
	}
	if v := get(props, "VpcConfig"); v != nil {
		for k, key := range map[string]string{"vpcId": "VpcId", "securityGroupId": "SecurityGroupId"} {
			if get(v, key) != nil {
				f.vpc[k] = key
			}
		}
		if sw := get(v, "VSwitchIds"); sw != nil && sw.Kind == yaml.SequenceNode && len(sw.Content) > 0 {
			f.vpc["vSwitchIds"] = "VSwitchIds"
		}
	}
	if lc := get(props, "LogConfig"); lc != nil {
		f.logConfig = str(get(lc, "Project"), "LogConfig.Project") + "/" + str(get(lc, "Logstore"), "LogConfig.Logstore")
	}
	for _, name := range keys(get(props, "EnvironmentVariables")) {
		n := get(props, "EnvironmentVariables", name)
		v, required, err := r.render(n)
		if err != nil {
			f.problem("EnvironmentVariables.%s: %v", name, err)
		}
		_, _, isFn := intrinsic(n)
		e := envVar{required: required, rendered: v, value: v, literal: !isFn}
		if fn, arg, ok := intrinsic(n); ok && fn == "Ref" {
			e.source = scalar(arg)
			e.secret = scalar(get(r.params, e.source, "NoEcho")) == "true"
		}
		if required {
			e.value = placeholders[name]
		}
		f.env[name] = e
	}
	switch as := byType["ALIYUN::FC3::AsyncInvokeConfig"]; len(as) {
	case 0:
	case 1:
		p := get(as[0], "Properties")
		f.async = &asyncConfig{
			retries:   num(get(p, "MaxAsyncRetryAttempts"), "MaxAsyncRetryAttempts"),
			maxAge:    num(get(p, "MaxAsyncEventAgeInSeconds"), "MaxAsyncEventAgeInSeconds"),
			onFailure: str(get(p, "DestinationConfig", "OnFailure", "Destination"), "OnFailure.Destination"),
		}
	default:
		f.problem("more than one ALIYUN::FC3::AsyncInvokeConfig")
	}
	rosPolicy(f, r, resources)
	for _, t := range byType["ALIYUN::FC3::Trigger"] {
		p := get(t, "Properties")
		f.triggers = append(f.triggers, readTrigger(f,
			str(get(p, "TriggerName"), "TriggerName"), str(get(p, "TriggerType"), "TriggerType"), get(p, "TriggerConfig")))
	}
	return f
}

// nodeStrings flattens the scalars under n (for describing references).
func nodeStrings(n *yaml.Node) []string {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range n.Content {
		out = append(out, nodeStrings(c)...)
	}
	return out
}

// statement is one statement of a RAM policy, actions and resources rendered.
type statement struct {
	effect    string
	actions   []string
	resources []string
}

// rosPolicy collects the statements of every inline policy of every
// ALIYUN::RAM::Role in template.yml.
func rosPolicy(f *function, r rosRenderer, resources *yaml.Node) {
	for _, name := range keys(resources) {
		res := get(resources, name)
		if scalar(get(res, "Type")) != "ALIYUN::RAM::Role" {
			continue
		}
		for _, pol := range nodeList(get(res, "Properties", "Policies")) {
			for _, st := range nodeList(get(pol, "PolicyDocument", "Statement")) {
				s := statement{effect: scalar(get(st, "Effect"))}
				for _, a := range nodeList(get(st, "Action")) {
					s.actions = append(s.actions, scalar(a))
				}
				for _, res := range nodeList(get(st, "Resource")) {
					v, _, err := r.render(res)
					if err != nil {
						f.problem("role policy resource: %v", err)
					}
					s.resources = append(s.resources, v)
				}
				f.policy = append(f.policy, s)
			}
		}
	}
}

// nodeList: a sequence's items, or the node itself (RAM accepts a string or a list).
func nodeList(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		return n.Content
	}
	return []*yaml.Node{n}
}

// ---- property names the platforms know (s verify does not reject unknown
// names, so a typo such as "memroySize" would deploy silently with the default)

var fc3Props = setOf("annotations", "asyncInvokeConfig", "code", "concurrencyConfig", "cpu",
	"customContainerConfig", "customDNS", "customRuntimeConfig", "description", "diskSize",
	"enableLongLiving", "endpoint", "environmentVariables", "functionName", "gpuConfig", "handler",
	"instanceConcurrency", "instanceIsolationMode", "instanceLifecycleConfig", "internetAccess", "layers",
	"logConfig", "memorySize", "nasConfig", "ossMountConfig", "provisionConfig", "region", "resourceGroupId",
	"role", "runtime", "scalingConfig", "sessionAffinity", "sessionAffinityConfig", "supplement", "tags",
	"timeout", "tracingConfig", "triggers", "vpcBinding", "vpcConfig")

var rosFunctionProps = setOf("FunctionName", "Handler", "Runtime", "Cpu", "CustomContainerConfig", "Code",
	"CustomRuntimeConfig", "CustomDns", "Description", "DiskSize", "EnvironmentVariables", "GpuConfig",
	"InstanceLifecycleConfig", "InternetAccess", "InstanceConcurrency", "Layers", "LogConfig", "MemorySize",
	"NasConfig", "OssMountConfig", "Role", "TracingConfig", "Timeout", "VpcConfig", "DisableOndemand",
	"SessionAffinityConfig", "InstanceIsolationMode", "SessionAffinity", "Tags")

// Trigger configuration keys of the FC API (CreateTrigger), per trigger type.
var triggerKeys = map[string]struct{ known, required map[string]bool }{
	"timer": {setOf("cronExpression", "enable", "payload"), setOf("cronExpression", "enable", "payload")},
	"eventbridge": {
		setOf("triggerEnable", "asyncInvocationType", "eventRuleFilterPattern", "eventSourceConfig",
			"eventSinkConfig", "runOptions"),
		setOf("triggerEnable", "asyncInvocationType", "eventRuleFilterPattern", "eventSourceConfig"),
	},
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// readFile reads a file of the repository.
func readFile(path string) ([]byte, error) { return os.ReadFile(filepath.Join(repoRoot, path)) }

// readJSONFile decodes a file of the repository.
func readJSONFile(path string, v any) error {
	b, err := readFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
