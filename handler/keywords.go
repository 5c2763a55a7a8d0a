package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"

	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
)

// Keywords is the worked example of a task type with two steps
// (docs/library.md, "Add a task type to the template"): a pure "candidates"
// step whose small result is checkpointed on the task's record, then a model
// step that ranks them. If the model call fails, the retry resumes at
// "rank": "candidates" does not run again.
var Keywords = TaskType{
	Name: "keywords",
	Steps: []Step{
		{Name: "candidates", Run: func(ctx context.Context, in *StepInput) (string, error) {
			var input struct {
				Text string `json:"text"`
			}
			if err := decodeInput("keywords", in.Task.Input, &input); err != nil {
				return "", err
			}
			if strings.TrimSpace(input.Text) == "" {
				return "", idempotency.Final("invalid_request", fmt.Errorf("keywords: input.text must be a non-empty string"))
			}
			return strings.Join(candidates(input.Text, 12), ","), nil
		}},
		{Name: "rank", Run: func(ctx context.Context, in *StepInput) (string, error) {
			if key, ok, err := in.PriorOutput(ctx); err != nil || ok {
				return key, err
			}
			resp, err := in.Model.Complete(ctx, llm.Request{Key: in.Key, RequestID: in.RequestID,
				System: "You pick the five most telling keywords. Answer as a Markdown list.",
				Prompt: "Candidates: " + in.Prior["candidates"]})
			if err != nil {
				return "", err
			}
			data, _ := json.Marshal(map[string]any{"candidates": strings.Split(in.Prior["candidates"], ",")})
			return in.SaveOutput(ctx, Output{Model: resp.Model, Offline: resp.Offline, Text: resp.Text, Data: data})
		}},
	},
}

// candidates are the most frequent words of four letters or more.
func candidates(text string, n int) []string {
	count := map[string]int{}
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) }) {
		if len([]rune(w)) >= 4 {
			count[w]++
		}
	}
	words := make([]string, 0, len(count))
	for w := range count {
		words = append(words, w)
	}
	sort.Slice(words, func(i, j int) bool {
		if count[words[i]] != count[words[j]] {
			return count[words[i]] > count[words[j]]
		}
		return words[i] < words[j]
	})
	return words[:min(n, len(words))]
}
