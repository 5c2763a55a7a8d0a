package deploy

import (
	"github.com/idemgate/idemgate/deploy/logq"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/ossresult"
)

// Stack is everything one deployment describes: the function, the role it
// runs as, the inputs the deployer supplies and the variables left to the
// platform. s.yaml, template.yml and s.local.yaml are renderings of it.
type Stack struct {
	Name        string // s.yaml project and resource name
	Region      Value  // s.yaml's region (ROS deploys into the stack's region)
	Access      string // s.yaml access alias
	Build       string // what s runs before deploy and local invoke
	Function    Function
	Role        *Role    // created by ROS; s.yaml takes an existing role's ARN
	Logs        *Logs    // created by ROS around the function's logs; fc3 declares none of it
	Results     *Results // created by ROS; s.yaml takes an existing bucket
	Inputs      []*Input // every input, in the order the files list them
	NotDeployed []Unset  // variables config.Load reads that no file sets
	Local       bool     // s.local.yaml: for `s local invoke` only
}

// Function is the FC 3.0 function, in the FC API's terms.
type Function struct {
	Name                Value
	Description         string
	Runtime, Handler    string
	Code                PerFormat
	Command             []string // customRuntimeConfig
	Port                int
	CPU                 float64
	MemoryMB, DiskMB    int
	TimeoutS            int
	Initializer         Hook
	PreStop             Hook
	InstanceConcurrency int
	InternetAccess      bool
	Role                any // PerFormat: the role's ARN
	VPC                 *VPC
	Logs                any // logConfig
	Env                 []EnvVar
	Async               *Async
	Triggers            []Trigger
	DependsOn           []string // ROS: resources in place before the function (its logstore index, its bucket)
}

// Hook is an instance lifecycle hook.
type Hook struct {
	Handler  string
	TimeoutS int
}

// VPC is where the function's network interface lives.
type VPC struct{ VpcID, VSwitchID, SecurityGroupID Value }

// EnvVar is one environment variable of the function.
type EnvVar struct {
	Name  string
	Value Value
}

// Unset is a variable config.Load reads that the deploy files leave alone.
type Unset struct{ Names, Why string }

// Async is the asynchronous invocation configuration.
type Async struct {
	MaxRetries   int // after the first attempt
	MaxEventAgeS int
	OnFailure    PerFormat // the dead-letter destination
}

// Trigger is one trigger; exactly one of EventBridge, Timer and HTTP is set.
type Trigger struct {
	Name, Description, Qualifier string
	EventBridge                  *EventBridge
	Timer                        *Timer
	HTTP                         *HTTP
}

// HTTP serves the task API (docs/api.md) to callers FC authenticates.
type HTTP struct {
	AuthType string   // "function": FC's signature authentication; never "anonymous" (checked)
	Methods  []string // POST /tasks, GET /tasks/{idempotency_key}
}

// EventBridge subscribes the function to events of the given types.
type EventBridge struct {
	Async      bool // FC asynchronous invocation: retries and the dead-letter queue apply
	EventTypes []string
	SourceType string // "Default": the default bus
}

// Timer invokes the function with Payload on a schedule.
type Timer struct{ Cron, Payload string }

// Logs is what the ROS stack declares around the function's logs: the
// logstore it creates in an existing project, the index on the keys of the
// JSON lines, and the alerts on them (deploy/logq). The stack owns the
// logstore, and so its index: an existing logstore usually has an index
// already, which ALIYUN::SLS::Index cannot take over, and the alerts need
// exactly the keys logq.Fields lists. The project stays the deployer's:
// project names are unique per region across all accounts, and a project
// is shared (alert center, action policies, other functions).
type Logs struct {
	Project, Store *Input
	TTLDays        int // how long the logstore keeps lines
	Alerts         []logq.Alert
	ActionPolicy   *Input // the SLS action policy the alerts notify through
}

// Results is the results bucket the ROS stack creates with its lifecycle
// rule. ROS declares a lifecycle rule only on a bucket it creates
// (ALIYUN::OSS::Bucket has no tag filter other than Filter.Not, and no
// resource sets the rules of an existing bucket), so the stack creates the
// bucket: every object under tasks/ is then one the function wrote and
// tagged (ossresult.KindOf), and a rule expiring what is not tagged
// approved expires exactly inputs and attempts.
type Results struct {
	Bucket     *Input
	ExpireDays *Input    // inputs and attempt outputs expire after this many days
	Prefix     string    // where the function writes (the role may write only there)
	KeepTag    [2]string // the object tag (key, value) the rule leaves alone: approved results
}

// Role is the function's RAM role (created by the ROS stack).
type Role struct {
	Name        Sub
	Description string
	TrustedBy   string
	PolicyName  Sub
	Statements  []Statement
}

// Statement is one Allow statement of the role's inline policy.
type Statement struct {
	Why       string
	Actions   []string
	Resources []Sub
}

// inputs are the values a deployer supplies, by the name the code reads.
type inputs struct {
	region, functionName, codeBucket, codeObject, vpcID, vSwitchID, securityGroupID, roleARN, dlqARN *Input
	redisKeyPrefix                                                                                   *Input
	mysqlDSN, redisURL, llmAPIKey, llmBaseURL, llmModel, llmTimeout, dedupTTL, lease, maxAttempts    *Input
	stateDir, ossBucket, ossEndpoint, ossRegion, logProject, logStore, dlqQueue                      *Input
	notifyAllowedHosts, notifySigningSecret, alertActionPolicy, expireDays                           *Input
	retentionDays, statsRetentionDays                                                                *Input
	keyJMESPath, payloadJMESPath, waitInFlight, localCacheSize, localCacheTTL                        *Input
}

const digits = "^[0-9]+$"

// newInputs builds fresh inputs (a test may change its own copy).
func newInputs() inputs {
	return inputs{
		region: &Input{Env: "REGION", Default: Lit("cn-hangzhou"),
			Doc: "region of the function and of everything it uses"},
		functionName: &Input{Env: "FUNCTION_NAME", Param: "FunctionName", Default: Lit("idemgate"),
			Pattern: "^[a-zA-Z][a-zA-Z0-9-]{0,40}$", Doc: "function name",
			ROSDoc: "also names the role (<name>-fc), hence no underscores"},
		codeBucket: &Input{Param: "CodeBucket",
			Doc: "OSS bucket (same region) holding the code package built by scripts/build.sh"},
		codeObject: &Input{Param: "CodeObject", Default: Lit("idemgate/function.zip"),
			Doc: "object key of dist/function.zip in CodeBucket"},
		vpcID: &Input{Env: "VPC_ID", Param: "VpcId", Doc: "VPC of Redis/Tair and RDS"},
		vSwitchID: &Input{Env: "VSWITCH_ID", Param: "VSwitchId",
			Doc: "vSwitch in that VPC, in a zone FC supports"},
		securityGroupID: &Input{Env: "SECURITY_GROUP_ID", Param: "SecurityGroupId",
			Doc: "security group that reaches Redis (6379) and MySQL (3306)"},
		roleARN: &Input{Env: "ROLE_ARN",
			Doc: "function role, acs:ram::<uid>:role/<name> (its policy: docs/deploy.md; template.yml creates it)"},
		dlqARN: &Input{Env: "DLQ_ARN",
			Doc: "MNS queue for failed async invocations, acs:mns:<region>:<uid>:/queues/<queue>/messages"},
		mysqlDSN: &Input{Env: "MYSQL_DSN", Param: "MysqlDsn", Secret: true,
			Doc: "go-sql-driver DSN of the arbiter, e.g. user:pass@tcp(rm-xxx.mysql.rds.aliyuncs.com:3306)/idemgate; " +
				"run `main migrate` against it first"},
		redisURL: &Input{Env: "REDIS_URL", Param: "RedisUrl", Secret: true, Default: Lit(""),
			Doc: "redis://[:password@]host:6379/0; empty = no fast layer, MySQL alone"},
		redisKeyPrefix: &Input{Env: "REDIS_KEY_PREFIX", Param: "RedisKeyPrefix", Default: Lit(""), Pattern: "^[A-Za-z0-9:._-]{0,64}$",
			Doc: "prefix of every Redis key of the function (<prefix>idem:{K}); set one per deployment sharing a Redis database"},
		llmAPIKey: &Input{Env: "LLM_API_KEY", Param: "LlmApiKey", Secret: true,
			Doc: "model API key (DashScope); DASHSCOPE_API_KEY is not read by the deploy files"},
		llmBaseURL: &Input{Env: "LLM_BASE_URL", Param: "LlmBaseUrl", Default: Lit(config.DefaultLLMBaseURL),
			Doc: "OpenAI-compatible endpoint of the model"},
		llmModel: &Input{Env: "LLM_MODEL", Param: "LlmModel", Default: Lit(config.DefaultLLMModel),
			Doc: "model name"},
		llmTimeout: &Input{Env: "LLM_TIMEOUT_SECONDS", Param: "LlmTimeoutSeconds", Default: Lit("60"), Pattern: digits,
			Doc: "one model call; keep it at most the function timeout minus 30 s"},
		dedupTTL: &Input{Env: "DEDUP_TTL_SECONDS", Param: "DedupTtlSeconds", Default: Lit("300"), Pattern: digits,
			Doc: "how long Redis keeps a claim (at most 300)"},
		lease: &Input{Env: "LEASE_SECONDS", Param: "LeaseSeconds", Default: Lit("60"), Pattern: digits,
			Doc: "lease a claim takes, renewed every third of it; at most the function timeout"},
		maxAttempts: &Input{Env: "MAX_ATTEMPTS", Param: "MaxAttempts", Default: Lit("3"), Pattern: digits,
			Doc: "attempt budget of a task; at most FC's deliveries (retries + 1)"},
		stateDir: &Input{Env: "STATE_DIR", Param: "StateDir", Default: Lit("/tmp/idemgate"),
			Doc: "local state (only /tmp is writable in FC)"},
		ossBucket: &Input{Env: "OSS_BUCKET", Param: "ResultsBucket", Pattern: "^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$",
			Doc:    "results bucket (objects under tasks/; the role may write only there)",
			ROSDoc: "results bucket the stack creates (a globally unique name), with the lifecycle rule of ObjectExpireDays"},
		ossEndpoint: &Input{Env: "OSS_ENDPOINT", Param: "OssEndpoint",
			Default: Regional("https://oss-{region}-internal.aliyuncs.com"),
			Doc:     "OSS endpoint", ROSDoc: "OSS endpoint; empty = https://oss-<region>-internal.aliyuncs.com"},
		ossRegion:  &Input{Env: "OSS_REGION", Default: Regional("{region}"), Doc: "region of the results bucket"},
		logProject: &Input{Param: "LogProject", Doc: "existing SLS project in the region; the stack creates its logstore there"},
		logStore: &Input{Param: "LogStore", Default: Lit("idemgate-logs"), Pattern: "^[a-z0-9][a-z0-9_-]{1,38}[a-z0-9]$",
			Doc: "logstore the stack creates in LogProject, with the index and alerts of docs/operations.md; it names the alerts"},
		alertActionPolicy: &Input{Param: "AlertActionPolicyId",
			Doc: "SLS action policy the alerts notify through (Log Service → Alerts → Notification policies → Action policies)"},
		expireDays: &Input{Env: "OBJECT_EXPIRE_DAYS", Param: "ObjectExpireDays", Default: Lit("30"), Number: true, MinValue: config.MinObjectExpireDays,
			Doc: "days after which input.json and attempt outputs expire (approved results stay); replay --key needs input.json; purged keys keep a tombstone 2 days longer"},
		notifyAllowedHosts: &Input{Env: "NOTIFY_ALLOWED_HOSTS", Param: "NotifyAllowedHosts", Default: Lit(""),
			Doc: "hosts notify.url may name (docs/operations.md); empty = every notify refused"},
		notifySigningSecret: &Input{Env: "NOTIFY_SIGNING_SECRET", Param: "NotifySigningSecret", Secret: true, Default: Lit(""),
			Doc: "at least 32 characters (openssl rand -hex 32); empty = notifications unsigned"},
		dlqQueue: &Input{Param: "DlqQueueName", Default: Lit("idemgate-dlq"),
			Doc: "existing MNS queue that receives failed async invocations"},
		retentionDays: &Input{Env: "RETENTION_DAYS", Param: "RetentionDays", Default: Lit("30"), Pattern: digits,
			Doc: "days a finished record stays whole after its last change, at least 8; the daily purge then leaves its tombstone, which answers duplicates until OBJECT_EXPIRE_DAYS + 2 days"},
		statsRetentionDays: &Input{Env: "STATS_RETENTION_DAYS", Param: "StatsRetentionDays", Default: Lit("30"), Pattern: digits,
			Doc: "days the per-minute counters of main stats stay"},
		keyJMESPath: &Input{Env: "KEY_JMESPATH", Param: "KeyJmespath", Default: Lit(""),
			Doc: "JMESPath over the event data selecting the business key, e.g. [tenant_id, input.order_id]; empty = the default key (docs/design.md §4)"},
		payloadJMESPath: &Input{Env: "PAYLOAD_JMESPATH", Param: "PayloadJmespath", Default: Lit(""),
			Doc: "JMESPath selecting what a repeat must match to be a duplicate; empty = task_type, operation and input"},
		waitInFlight: &Input{Env: "WAIT_IN_FLIGHT_SECONDS", Param: "WaitInFlightSeconds", Default: Lit("0"), Pattern: digits,
			Doc: "a duplicate meeting a live lease waits up to this for the result (billed while it waits); 0 = FC retries it later"},
		localCacheSize: &Input{Env: "LOCAL_CACHE_SIZE", Param: "LocalCacheSize", Default: Lit("0"), Pattern: digits,
			Doc: "final answers each instance keeps in memory; 0 = off (a replay is seen by other instances only after the TTL)"},
		localCacheTTL: &Input{Env: "LOCAL_CACHE_TTL_SECONDS", Param: "LocalCacheTtlSeconds", Default: Lit("60"), Pattern: digits,
			Doc: "how long a cached final answer stays, 1 to 300"},
	}
}

// Idemgate is the deployed function: the one description s.yaml and
// template.yml are generated from (`go generate ./deploy/`). It is one long
// literal on purpose: the whole function reads in one place, as a deploy
// file would.
func Idemgate() Stack {
	in := newInputs()
	dlq := func(suffix string) Sub {
		return Sub{"acs:mns:", Region, ":", AccountID, ":/queues/", in.dlqQueue, suffix}
	}
	return Stack{
		Name:   "idemgate",
		Region: in.region,
		Access: "default",
		Build:  "bash scripts/build.sh",
		Function: Function{
			Name:        in.functionName,
			Description: "idemgate: async tasks that take effect at most once (Redis fast layer, MySQL arbiter, OSS results)",
			Runtime:     "custom.debian10",
			Handler:     "main",
			Code: PerFormat{S: "./target",
				ROS: tree{{key: "OssBucketName", val: in.codeBucket}, {key: "OssObjectName", val: in.codeObject}}},
			Command:             []string{"/code/main", "serve"}, // explicit: a bare main serves only where it sees FC's runtime variables
			Port:                9000,
			CPU:                 0.5,
			MemoryMB:            512,
			DiskMB:              512,
			TimeoutS:            120,
			Initializer:         Hook{Handler: "true", TimeoutS: 10},
			PreStop:             Hook{Handler: "true", TimeoutS: 10},
			InstanceConcurrency: 10,
			InternetAccess:      true,
			Role:                PerFormat{S: in.roleARN, ROS: GetAtt{"FunctionRole", "Arn"}},
			DependsOn:           []string{indexRes, resultsRes},
			VPC:                 &VPC{VpcID: in.vpcID, VSwitchID: in.vSwitchID, SecurityGroupID: in.securityGroupID},
			Logs: PerFormat{S: "auto", ROS: tree{
				{key: "Project", val: in.logProject}, {key: "Logstore", val: in.logStore},
				{key: "EnableRequestMetrics", val: true}, {key: "EnableInstanceMetrics", val: true},
				{key: "LogBeginRule", val: "DefaultRegex"}}},
			Env: []EnvVar{
				{"REDIS_URL", in.redisURL}, {"REDIS_KEY_PREFIX", in.redisKeyPrefix}, {"MYSQL_DSN", in.mysqlDSN}, {"STATE_DIR", in.stateDir},
				{"OSS_ENDPOINT", in.ossEndpoint}, {"OSS_BUCKET", in.ossBucket}, {"OSS_REGION", in.ossRegion},
				{"LLM_BASE_URL", in.llmBaseURL}, {"LLM_API_KEY", in.llmAPIKey}, {"LLM_MODEL", in.llmModel},
				{"LLM_TIMEOUT_SECONDS", in.llmTimeout}, {"DEDUP_TTL_SECONDS", in.dedupTTL},
				{"LEASE_SECONDS", in.lease}, {"MAX_ATTEMPTS", in.maxAttempts},
				{"NOTIFY_ALLOWED_HOSTS", in.notifyAllowedHosts}, {"NOTIFY_SIGNING_SECRET", in.notifySigningSecret},
				{"RETENTION_DAYS", in.retentionDays}, {"STATS_RETENTION_DAYS", in.statsRetentionDays},
				{"OBJECT_EXPIRE_DAYS", in.expireDays},
				{"KEY_JMESPATH", in.keyJMESPath}, {"PAYLOAD_JMESPATH", in.payloadJMESPath},
				{"WAIT_IN_FLIGHT_SECONDS", in.waitInFlight}, {"LOCAL_CACHE_SIZE", in.localCacheSize},
				{"LOCAL_CACHE_TTL_SECONDS", in.localCacheTTL},
				// The production marker: IDEMPOTENCY_DISABLED is refused here.
				{"IDEMGATE_ENV", Lit("production")},
			},
			Async: &Async{MaxRetries: 3, MaxEventAgeS: 86400,
				OnFailure: PerFormat{S: in.dlqARN, ROS: dlq("/messages")}},
			Triggers: []Trigger{
				{Name: "tasks", Qualifier: "LATEST", Description: "idemgate:Task:Submitted events from the default bus",
					EventBridge: &EventBridge{Async: true, EventTypes: []string{"idemgate:Task:Submitted"}, SourceType: "Default"}},
				{Name: "sweep", Qualifier: "LATEST", Description: "re-drives expired leases and FAILED_RETRYABLE tasks",
					Timer: &Timer{Cron: "@every 1m", Payload: "sweep"}},
				// Daily at 19:00 UTC, 03:00 in China Standard Time: the quiet
				// hours of most deployments in the mainland regions.
				{Name: "purge", Qualifier: "LATEST", Description: "retires finished records older than RETENTION_DAYS to tombstones, deletes expired tombstones, daily",
					Timer: &Timer{Cron: "0 0 19 * * *", Payload: "purge"}},
				{Name: "api", Qualifier: "LATEST", Description: "POST /tasks and GET /tasks/{idempotency_key} with Idempotency-Key (docs/api.md)",
					HTTP: &HTTP{AuthType: "function", Methods: []string{"GET", "POST"}}},
			},
		},
		Role: &Role{
			Name:        Sub{in.functionName, "-fc"},
			Description: "idemgate function role (results under tasks/, its logs, its dead-letter queue)",
			TrustedBy:   "fc.aliyuncs.com",
			PolicyName:  Sub{in.functionName, "-fc-least-privilege"},
			Statements: []Statement{
				{Why: "HeadObject is authorised by oss:GetObject; PutObjectTagging: objects are tagged on PUT " +
					"(x-oss-tagging) for the lifecycle rules; no Delete*, no List*, nothing outside tasks/.",
					Actions:   []string{"oss:PutObject", "oss:PutObjectTagging", "oss:GetObject"},
					Resources: []Sub{{"acs:oss:*:", AccountID, ":", in.ossBucket, "/tasks/*"}}},
				{Actions: []string{"log:PostLogStoreLogs"},
					Resources: []Sub{{"acs:log:", Region, ":", AccountID, ":project/", in.logProject, "/logstore/", in.logStore}}},
				{Why: "The async failure destination is written with the function's role.",
					Actions: []string{"mns:SendMessage"}, Resources: []Sub{dlq(""), dlq("/messages")}},
			},
		},
		Logs: &Logs{Project: in.logProject, Store: in.logStore, TTLDays: 30, Alerts: logq.Alerts(),
			ActionPolicy: in.alertActionPolicy},
		Results: &Results{Bucket: in.ossBucket, ExpireDays: in.expireDays, Prefix: "tasks/",
			KeepTag: [2]string{ossresult.TagKind, ossresult.KindApproved}},
		Inputs: []*Input{in.region, in.functionName, in.codeBucket, in.codeObject, in.vpcID, in.vSwitchID, in.securityGroupID,
			in.mysqlDSN, in.redisURL, in.redisKeyPrefix, in.llmAPIKey, in.llmBaseURL, in.llmModel, in.llmTimeout, in.dedupTTL, in.lease,
			in.maxAttempts, in.stateDir, in.ossBucket, in.ossEndpoint, in.logProject, in.logStore, in.dlqQueue,
			in.ossRegion, in.roleARN, in.dlqARN, in.notifyAllowedHosts, in.notifySigningSecret, in.alertActionPolicy,
			in.expireDays, in.retentionDays, in.statsRetentionDays, in.keyJMESPath, in.payloadJMESPath, in.waitInFlight,
			in.localCacheSize, in.localCacheTTL},
		NotDeployed: []Unset{
			{"FC_SERVER_PORT FC_CUSTOM_LISTEN_PORT", "the platform sets them from customRuntimeConfig.port"},
			{"ALIBABA_CLOUD_ACCESS_KEY_ID ALIBABA_CLOUD_ACCESS_KEY_SECRET ALIBABA_CLOUD_SECURITY_TOKEN",
				"STS credentials of the function role, which FC sends with every invocation; never put an AccessKey in a deploy file"},
			{"DASHSCOPE_API_KEY", "fallback name of LLM_API_KEY, which the deploy files set (and which wins)"},
			{"KEY_FALLBACK", "strict by default: a deployment that keys events by their data's fingerprint sets it on purpose"},
			{"IDEMPOTENCY_DISABLED", "tests only; IDEMGATE_ENV=production, which the deploy files set, refuses it"},
		},
	}
}

// LocalAccess is the Serverless Devs access alias s.local.yaml names, with
// placeholder keys: `s local invoke` passes them to the function (as the
// ALIBABA_CLOUD_* variables and x-fc-* headers) and sends nothing to the
// cloud, so no account is needed.
var LocalAccess = struct{ Alias, AccessKeyID, AccessKeySecret, AccountID string }{
	Alias: "local", AccessKeyID: "local-only", AccessKeySecret: "local-only", AccountID: "1234567890123456"}

// LocalStateDir is STATE_DIR under `s local invoke`: /code is the code
// directory (./target) mounted into the container, the one place that
// outlives the container, so a second invoke sees the first one's record.
const LocalStateDir = "/code/.idemgate"

// Local is Idemgate for `s local invoke` with Docker alone: the offline
// model, the embedded store and results under STATE_DIR; no VPC, role, logs,
// triggers or dead-letter queue, and nothing to export.
func Local() Stack {
	st := Idemgate()
	st.Name, st.Local, st.Access = "idemgate-local", true, LocalAccess.Alias
	st.Region = Lit("cn-hangzhou")
	f := &st.Function
	f.Name = Lit("idemgate")
	f.Role, f.VPC, f.Logs, f.Async, f.Triggers, f.DependsOn = nil, nil, nil, nil, nil, nil
	f.Env = []EnvVar{{"LLM_MODEL", Lit(config.OfflineModel)}, {"STATE_DIR", Lit(LocalStateDir)}}
	st.Role, st.Inputs, st.Logs, st.Results = nil, nil, nil, nil
	return st
}
