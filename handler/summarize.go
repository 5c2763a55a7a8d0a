package handler

import (
	"context"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/idempotency"
)

// Summarize is the example LLM task: input {"content": "...", "max_words"?: N}
// → a summary in Markdown. One step: the model call and its output object are
// one unit, so a retry after a saved output never calls the model again.
var Summarize = TaskType{
	Name: "summarize",
	Steps: []Step{{Name: "generate", Run: func(ctx context.Context, in *StepInput) (string, error) {
		var input struct {
			Content  string         `json:"content"`
			MaxWords jsontext.Value `json:"max_words"`
		}
		if err := decodeInput("summarize", in.Task.Input, &input); err != nil {
			return "", err
		}
		if input.Content == "" {
			return "", idempotency.Final("invalid_request", fmt.Errorf("summarize: input.content must be a non-empty string"))
		}
		maxWords, err := wholeNumber(input.MaxWords)
		if err != nil {
			return "", idempotency.Final("invalid_request", fmt.Errorf("summarize: input.max_words %w", err))
		}
		if key, ok, err := in.PriorOutput(ctx); err != nil || ok {
			return key, err
		}
		if maxWords <= 0 {
			maxWords = 120
		}
		resp, err := in.Model.Complete(ctx, llm.Request{Key: in.Key, RequestID: in.RequestID,
			System: "You summarise documents faithfully. Answer in Markdown.",
			Prompt: fmt.Sprintf("Summarise in at most %d words:\n\n%s", maxWords, input.Content)})
		if err != nil {
			return "", err
		}
		return in.SaveOutput(ctx, Output{Model: resp.Model, Offline: resp.Offline, Text: resp.Text})
	}}},
}
