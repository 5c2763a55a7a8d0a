package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/idemgate/idemgate/internal/config"
)

// runsTasks are the commands that may call the model: each says on stderr,
// whatever the log level, when it will call a real one (billed by its
// provider), before it does.
var runsTasks = map[string]bool{"invoke": true, "replay": true, "sweep": true}

// offlineUnlessChosen is invoke's environment: LLM_MODEL unset means the
// offline model, whatever key the shell holds (DASHSCOPE_API_KEY exported
// for other tools must not make a local try a billed call); a real model
// is called only when LLM_MODEL names it. The deployed function (serve),
// replay and sweep keep the configuration's default (docs/design.md §5).
func offlineUnlessChosen(getenv func(string) string) func(string) string {
	return func(name string) string {
		if v := getenv(name); name != "LLM_MODEL" || v != "" {
			return v
		}
		return config.OfflineModel
	}
}

// sayModel tells, on stderr, which model a command that runs tasks will
// call when it is a real one, and that invoke stays offline when a key is
// set but no model chosen.
func (r *run) sayModel(cfg config.Config) {
	switch {
	case !runsTasks[r.name]:
	case cfg.LLMModel != config.OfflineModel:
		fmt.Fprintf(r.stderr, "%s: calling the model %s with the key in the environment (billed by its provider); LLM_MODEL=offline runs the built-in offline model\n",
			r.name, modelOf(cfg))
	case r.name == "invoke" && cfg.LLMAPIKey != "" && strings.TrimSpace(os.Getenv("LLM_MODEL")) == "":
		fmt.Fprintf(r.stderr, "invoke: the offline model (LLM_MODEL is unset; LLM_MODEL=%s calls the model with the key in the environment)\n",
			config.DefaultLLMModel)
	}
}
