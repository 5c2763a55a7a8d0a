package llm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/idemgate/idemgate/idempotency"
)

// OfflineLabel is the first line of every offline answer, so that a stored
// result can never be mistaken for a real model's (docs/design.md §5).
const OfflineLabel = "[offline model — deterministic stand-in, not a real LLM]"

// Offline limits: enough to look like a summary, small enough to read.
const (
	offlineSentences   = 3
	offlineWords       = 150
	offlineSentenceLen = 400 // runes
)

// Offline is the built-in model for local runs: the same request always
// gives the same text, an extractive summary of the prompt (its highest
// scoring sentences in their original order) under [OfflineLabel]. It makes
// no network call and needs no key.
type Offline struct{}

// NewOffline returns the offline model.
func NewOffline() *Offline { return &Offline{} }

// Complete answers deterministically. It honours ctx cancellation and
// rejects an empty prompt like the real client.
func (*Offline) Complete(ctx context.Context, r Request) (Response, error) {
	if err := ctx.Err(); err != nil {
		return Response{}, idempotency.Retryable(CodeTimeout, fmt.Errorf("llm: offline: %w", err))
	}
	if err := r.validate(); err != nil {
		return Response{}, err
	}
	words := offlineWords
	if r.MaxTokens > 0 && r.MaxTokens < words {
		words = r.MaxTokens // a token is roughly a word: close enough for a stand-in
	}
	summary := summarize(r.Prompt, offlineSentences, words)
	text := OfflineLabel + "\n\n" + summary
	sum := sha256.Sum256([]byte(r.System + "\x00" + r.Prompt + "\x00" + strconv.Itoa(r.MaxTokens)))
	return Response{
		Text:             text,
		Model:            OfflineModel,
		ID:               "offline-" + hex.EncodeToString(sum[:8]),
		PromptTokens:     len(terms(r.System)) + len(terms(r.Prompt)),
		CompletionTokens: len(terms(summary)),
		FinishReason:     "stop",
		Offline:          true,
	}, nil
}

// summarize picks up to n sentences by term frequency, keeps their original
// order and cuts the result at maxWords words. Ties go to the earlier
// sentence, and no map order leaks into the result, so it is deterministic.
func summarize(prompt string, n, maxWords int) string {
	sents := sentences(prompt)
	if len(sents) == 0 {
		return cutWords(prompt, maxWords)
	}
	freq := map[string]int{}
	sentTerms := make([][]string, len(sents))
	for i, s := range sents {
		sentTerms[i] = terms(s)
		for _, t := range sentTerms[i] {
			freq[t]++
		}
	}
	type scored struct{ idx, score int }
	ranked := make([]scored, len(sents))
	for i, ts := range sentTerms {
		seen := map[string]bool{}
		sum := 0
		for _, t := range ts {
			if !seen[t] {
				seen[t] = true
				sum += freq[t]
			}
		}
		// Divide by √(distinct terms) so long sentences do not always win;
		// integer maths keeps the ranking identical on every platform.
		ranked[i] = scored{i, sum * 1024 / int(math.Sqrt(float64(len(seen)))+1)}
	}
	sort.SliceStable(ranked, func(a, b int) bool { return ranked[a].score > ranked[b].score })
	if len(ranked) > n {
		ranked = ranked[:n]
	}
	sort.Slice(ranked, func(a, b int) bool { return ranked[a].idx < ranked[b].idx })

	var out []string
	for _, r := range ranked {
		out = append(out, sents[r.idx])
	}
	return cutWords(strings.Join(out, " "), maxWords)
}

// cutWords keeps the first max space-separated words of s.
func cutWords(s string, max int) string {
	fields := strings.Fields(s)
	if len(fields) > max {
		fields = append(fields[:max], "…")
	}
	return strings.Join(fields, " ")
}

// sentences splits on . ! ? (and their CJK forms) and line breaks. A first
// line ending in ':' is taken for an instruction ("Summarise in at most N
// words:") and left out of the summary.
func sentences(text string) []string {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if len(lines) > 1 && strings.HasSuffix(strings.TrimSpace(lines[0]), ":") {
		lines = lines[1:]
	}
	var out []string
	for _, line := range lines {
		var cur []rune
		flush := func() {
			s := strings.TrimSpace(string(cur))
			cur = cur[:0]
			if s == "" || len(terms(s)) == 0 {
				return
			}
			if r := []rune(s); len(r) > offlineSentenceLen {
				s = string(r[:offlineSentenceLen]) + "…"
			}
			out = append(out, s)
		}
		for _, r := range line {
			cur = append(cur, r)
			switch r {
			case '.', '!', '?', '。', '！', '？':
				flush()
			}
		}
		flush()
	}
	return out
}

// stopwords carry no topic; words of one or two letters are dropped anyway.
var stopwords = map[string]bool{
	"the": true, "and": true, "for": true, "that": true, "this": true, "with": true, "are": true,
	"was": true, "were": true, "from": true, "have": true, "has": true, "had": true, "but": true,
	"not": true, "you": true, "your": true, "its": true, "they": true, "their": true, "which": true,
	"will": true, "would": true, "can": true, "been": true, "into": true, "than": true, "then": true,
}

// terms are lowercased words of three letters or more, minus stopwords;
// each Han, Hiragana, Katakana or Hangul character counts as a term, since
// those scripts do not separate words with spaces.
func terms(s string) []string {
	var out []string
	var word []rune
	emit := func() {
		if len(word) >= 3 {
			if w := string(word); !stopwords[w] {
				out = append(out, w)
			}
		}
		word = word[:0]
	}
	for _, r := range s {
		switch {
		case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
			emit()
			out = append(out, string(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			word = append(word, unicode.ToLower(r))
		default:
			emit()
		}
	}
	emit()
	return out
}
